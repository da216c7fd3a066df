// Package redisactivity is the Redis tools.ActivityStore: every replica's
// upstream calls in one log. Records are entries of the Redis stream
// "<prefix>activity" and of "<prefix>activity:t:<thread>" (both capped
// near Max entries with MAXLEN ~; a thread's stream expires MaxAge after
// its last record).
package redisactivity

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/tools"
)

// Options configure a Store.
type Options struct {
	Prefix string
	// Max is about how many records the store keeps (and each thread's
	// list). Zero: 100,000.
	Max int
	// MaxAge: a thread's records are dropped this long after its last
	// one. Zero: 30 days.
	MaxAge time.Duration
}

// Store is the Redis tools.ActivityStore.
type Store struct {
	c   redis.UniversalClient
	opt Options
}

var _ tools.ActivityStore = (*Store)(nil)

// New returns the store of client.
func New(client redis.UniversalClient, opts Options) *Store {
	if opts.Max <= 0 {
		opts.Max = 100_000
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = 30 * 24 * time.Hour
	}
	return &Store{c: client, opt: opts}
}

// AppendActivity implements tools.ActivityStore.
func (s *Store) AppendActivity(ctx context.Context, a tools.Activity) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: s.opt.Prefix + "activity", MaxLen: int64(s.opt.Max), Approx: true, Values: []any{"a", v}})
		if a.ThreadID != "" {
			k := s.opt.Prefix + "activity:t:" + a.ThreadID
			p.XAdd(ctx, &redis.XAddArgs{Stream: k, MaxLen: int64(s.opt.Max), Approx: true, Values: []any{"a", v}})
			p.PExpire(ctx, k, s.opt.MaxAge)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("activity store: redis: %w", err)
	}
	return nil
}

// ListActivity implements tools.ActivityStore.
func (s *Store) ListActivity(ctx context.Context, threadID string, limit int) ([]tools.Activity, error) {
	k := s.opt.Prefix + "activity"
	if threadID != "" {
		k += ":t:" + threadID
	}
	msgs, err := s.c.XRevRangeN(ctx, k, "+", "-", int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("activity store: redis: %w", err)
	}
	out := make([]tools.Activity, 0, len(msgs))
	for _, m := range msgs {
		v, _ := m.Values["a"].(string)
		var a tools.Activity
		if err := json.Unmarshal([]byte(v), &a); err != nil {
			return nil, fmt.Errorf("activity record %s: %w", m.ID, err)
		}
		out = append(out, a)
	}
	return out, nil
}
