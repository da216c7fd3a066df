package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Locks are short mutual-exclusion locks every replica sees: one key
// "<prefix>lock:<name>" set only when absent, holding the holder's
// random token, expiring by itself when a holder dies.
type Locks struct {
	c      redis.UniversalClient
	prefix string
	// Poll is how often a waiter tries again. Zero: 20 ms.
	Poll time.Duration
}

// NewLocks returns the locks of client under prefix.
func NewLocks(client redis.UniversalClient, prefix string) *Locks {
	return &Locks{c: client, prefix: prefix + "lock:"}
}

// unlockScript deletes the lock only while it is still the holder's.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Lock takes the lock name, waiting (bounded by ctx) while another holds
// it; it is released by the returned func, or after ttl.
func (l *Locks) Lock(ctx context.Context, name string, ttl time.Duration) (func(), error) {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token, key := hex.EncodeToString(b), l.prefix+name
	poll := l.Poll
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	for {
		err := l.c.SetArgs(ctx, key, token, redis.SetArgs{Mode: "NX", TTL: ttl}).Err()
		if err == nil {
			return func() { _ = unlockScript.Run(context.WithoutCancel(ctx), l.c, []string{key}, token).Err() }, nil
		}
		if !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("lock %s: redis: %w", name, err)
		}
		t := time.NewTimer(poll)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}
}
