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

// A permit's lease is renewed while its request runs, however long it
// takes, so its slot stays taken; once its replica dies, the slot comes
// back within the lease (not a fixed two minutes, as before renewal).
func TestPermitLeaseRenewedWhileHeldBackSoonAfterACrash(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		const lease = 2 * time.Second
		opt := redislimit.Options{Prefix: "renew" + time.Now().Format("150405.000000") + ":",
			LimiterOptions: tools.LimiterOptions{PermitLease: lease}}
		a := redislimit.New(srv.Universal(t), opt)
		b := redislimit.New(srv.Universal(t), opt) // another replica
		t.Cleanup(func() { a.Close(); b.Close() })
		s := tools.LimitScope{Provider: "acme", Credential: "k1", Limit: tools.RateLimit{Concurrency: 1}}
		acquire := func(l *redislimit.Limiter, within time.Duration) (tools.Permit, error) {
			ctx, cancel := context.WithTimeout(context.Background(), within)
			defer cancel()
			return l.Acquire(ctx, s)
		}
		p, err := acquire(a, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(5 * lease / 2); time.Now().Before(end); {
			q, err := acquire(b, 100*time.Millisecond)
			if err == nil {
				q.Release(tools.Outcome{})
				t.Fatal("the slot of a permit held past its lease was given to another replica: its lease was not renewed")
			}
			var rle *tools.RateLimitError
			if !errors.As(err, &rle) || rle.Cause != "concurrency" {
				t.Fatalf("waiting for the held slot: %v, want a concurrency RateLimitError", err)
			}
		}
		p.Release(tools.Outcome{Status: 200})
		q, err := acquire(b, time.Second)
		if err != nil {
			t.Fatalf("after the release: %v", err)
		}
		_ = q
		b.Crash() // b dies holding q
		start := time.Now()
		r, err := acquire(a, 5*lease)
		if err != nil {
			t.Fatalf("a dead replica's permit did not come back within %s: %v", 5*lease, err)
		}
		if waited := time.Since(start); waited < lease/3 {
			t.Errorf("the dead replica's slot came back after %s, before its last renewal's lease could end", waited)
		}
		r.Release(tools.Outcome{Status: 200})
	})
}
