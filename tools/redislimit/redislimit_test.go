package redislimit_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/limittest"
	"github.com/trawl-dev/trawl/tools/redislimit"
)

func TestRedisLimiter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		n := 0
		limittest.Run(t, func(t *testing.T, clock tools.Clock, lease time.Duration) (tools.RateLimiter, tools.RateLimiter) {
			n++
			opt := redislimit.Options{Prefix: "t" + string(rune('a'+n%26)) + time.Now().Format("150405.000000") + ":",
				LimiterOptions: tools.LimiterOptions{Clock: clock, PermitLease: lease}}
			a := redislimit.New(srv.Universal(t), opt)
			b := redislimit.New(srv.Universal(t), opt) // another replica
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		})
	})
}

// A Redis that does not answer fails the Acquire with ErrRedis (which the
// deployment falls back on), its text keeping go-redis's reason without
// naming Redis twice ("rate limiter: redis: redis: client is closed").
func TestRedisDownIsErrRedis(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	refused := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { refused.Close() })
	closed := redis.NewClient(&redis.Options{Addr: addr})
	closed.Close()
	for _, tc := range []struct {
		name   string
		c      *redis.Client
		reason string
	}{{"refused", refused, "connection refused"}, {"closed", closed, "client is closed"}} {
		l := redislimit.New(tc.c, redislimit.Options{Prefix: "down:"})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err = l.Acquire(ctx, tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{RequestsPerSecond: 5}})
		cancel()
		l.Close()
		if !errors.Is(err, redislimit.ErrRedis) {
			t.Fatalf("%s: Acquire: %v, want ErrRedis", tc.name, err)
		}
		if msg := err.Error(); strings.Contains(strings.ToLower(msg), "redis: redis") || !strings.Contains(msg, tc.reason) {
			t.Errorf("%s: error text %q: Redis named twice, or go-redis's reason lost", tc.name, msg)
		}
	}
}
