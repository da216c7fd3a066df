package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/loop"
)

// WalksOptions configure Walks.
type WalksOptions struct {
	// Prefix begins every key.
	Prefix string
	// Lease is how long a walk's lock lives without renewal: a replica
	// that dies mid-walk frees it within Lease. The holder renews it
	// every Lease/3. Zero: 15 s.
	Lease time.Duration
	// Poll is how often a waiter checks whether the walk is done. Zero:
	// 50 ms.
	Poll time.Duration
}

// Walks is the loop.SharedWalks of a Redis deployment: a lock per walk
// key ("walk:<key>", SET NX with a lease the holder renews); waiters poll
// it and, once it is released, read the walk's result from the shared
// DatasetStore.
type Walks struct {
	c     redis.UniversalClient
	store loop.DatasetStore
	opt   WalksOptions

	joined  atomic.Int64
	waiting atomic.Int64
}

var _ loop.SharedWalks = (*Walks)(nil)

// NewWalks returns the walk lock of client; results are read from store
// (the deployment's dataset store, which the cache records walks in).
func NewWalks(client redis.UniversalClient, store loop.DatasetStore, opts WalksOptions) *Walks {
	if opts.Lease <= 0 {
		opts.Lease = 15 * time.Second
	}
	if opts.Poll <= 0 {
		opts.Poll = 50 * time.Millisecond
	}
	return &Walks{c: client, store: store, opt: opts}
}

// Joined counts the calls that were served by another process's walk.
func (w *Walks) Joined() int64 { return w.joined.Load() }

// Waiting is how many calls are waiting now for a walk another holds.
func (w *Walks) Waiting() int64 { return w.waiting.Load() }

var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)

var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)

// Do implements loop.SharedWalks.
func (w *Walks) Do(ctx context.Context, key string, walk func(context.Context) (*loop.Dataset, error)) (*loop.Dataset, error) {
	lock := w.opt.Prefix + "walk:" + key
	token := newToken()
	for {
		ok, err := w.c.SetNX(ctx, lock, token, w.opt.Lease).Result()
		if err != nil {
			return nil, fmt.Errorf("dataset cache: walk lock: redis: %w", err)
		}
		if ok {
			return w.lead(ctx, lock, token, walk)
		}
		if err := w.waitFree(ctx, lock); err != nil {
			return nil, err
		}
		d, _, expires, err := w.store.Get(ctx, key)
		switch {
		case err == nil && time.Now().Before(expires):
			w.joined.Add(1)
			return d, nil
		case err != nil && !errors.Is(err, loop.ErrDatasetMiss):
			return nil, fmt.Errorf("dataset cache: %w", err)
		}
		// Nothing recorded (the walk was partial or failed): walk in turn.
	}
}

// lead runs walk holding the lock, renewing it, and releases it.
func (w *Walks) lead(ctx context.Context, lock, token string, walk func(context.Context) (*loop.Dataset, error)) (*loop.Dataset, error) {
	done := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(w.opt.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = renewScript.Run(context.WithoutCancel(ctx), w.c, []string{lock}, token, w.opt.Lease.Milliseconds()).Err()
			}
		}
	}()
	defer func() {
		close(done)
		<-renewed
		// Released even when the caller has gone; a failure leaves the
		// lease to expire.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = releaseScript.Run(rctx, w.c, []string{lock}, token).Err()
	}()
	return walk(ctx)
}

// waitFree waits until lock is released or expires.
func (w *Walks) waitFree(ctx context.Context, lock string) error {
	w.waiting.Add(1)
	defer w.waiting.Add(-1)
	t := time.NewTicker(w.opt.Poll)
	defer t.Stop()
	for {
		n, err := w.c.Exists(ctx, lock).Result()
		if err != nil {
			return fmt.Errorf("dataset cache: walk lock: redis: %w", err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
