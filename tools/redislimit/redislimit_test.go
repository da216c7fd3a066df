package redislimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
			// Not given: refused for the slot, or (on a loaded machine)
			// out of time in its first round trip, before it waited.
			var rle *tools.RateLimitError
			if !errors.Is(err, context.DeadlineExceeded) && (!errors.As(err, &rle) || rle.Cause != "concurrency") {
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

// stallHook makes every command naming a key of a provider whose name
// begins with "slow" hang until its context ends, as a master that does
// not answer would, while on is set.
type stallHook struct{ on *atomic.Bool }

func (stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.on.Load() {
			for _, a := range cmd.Args() {
				if s, ok := a.(string); ok && strings.Contains(s, "{slow") {
					<-ctx.Done()
					cmd.SetErr(ctx.Err())
					return ctx.Err()
				}
			}
		}
		return next(ctx, cmd)
	}
}

// On a cluster, providers whose master does not answer do not hold up
// the renewal of the others' leases: each provider's call goes at once
// (one after another, four stalled calls of a third of the lease each
// let a healthy provider's permit lapse).
func TestClusterStalledMasterDelaysNoOtherRenewal(t *testing.T) {
	cl := redistest.StartCluster(t)
	const lease = 3 * time.Second
	opt := redislimit.Options{Prefix: "stall" + time.Now().Format("150405.000000") + ":",
		LimiterOptions: tools.LimiterOptions{PermitLease: lease}}
	ca := cl.Client(t)
	var on atomic.Bool
	ca.AddHook(stallHook{&on})
	a := redislimit.New(ca, opt)
	b := redislimit.New(cl.Client(t), opt)
	t.Cleanup(func() { a.Close(); b.Close() })
	one := tools.RateLimit{Concurrency: 1}
	for i := range 4 {
		if _, err := a.Acquire(context.Background(), tools.LimitScope{Provider: fmt.Sprintf("slow%d", i), Limit: one}); err != nil {
			t.Fatal(err)
		}
	}
	fast := tools.LimitScope{Provider: "fast", Limit: one}
	p, err := a.Acquire(context.Background(), fast)
	if err != nil {
		t.Fatal(err)
	}
	on.Store(true)
	for end := time.Now().Add(2 * lease); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		q, err := b.Acquire(ctx, fast)
		cancel()
		if err == nil {
			q.Release(tools.Outcome{})
			t.Fatal("a healthy provider's permit lapsed, its renewal held up by providers whose master did not answer")
		}
	}
	on.Store(false)
	p.Release(tools.Outcome{Status: 200})
}

// A permit granted with a wait for its rate slot counts from its grant
// until its release, however long the wait: another permit of the
// provider, granted and released meanwhile, does not shorten the life of
// the provider's set of permits, and the waiting one is renewed.
func TestDelayedPermitCountsThroughItsWait(t *testing.T) {
	srv := redistest.Start(t)
	const lease = time.Second
	opt := redislimit.Options{Prefix: "delay" + time.Now().Format("150405.000000") + ":",
		LimiterOptions: tools.LimiterOptions{PermitLease: lease}}
	a := redislimit.New(srv.Universal(t), opt)
	b := redislimit.New(srv.Universal(t), opt)
	t.Cleanup(func() { a.Close(); b.Close() })
	cred := func(c string) tools.LimitScope {
		return tools.LimitScope{Provider: "acme", Credential: c, Limit: tools.RateLimit{Concurrency: 2}}
	}
	get := func(l *redislimit.Limiter, s tools.LimitScope, within time.Duration) (tools.Permit, error) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		return l.Acquire(ctx, s)
	}
	// k1 learns a rate of one request in 5 s: its third request waits.
	p, err := get(a, cred("k1"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(tools.Outcome{Status: 200, Header: http.Header{"Ratelimit-Policy": {`"default";q=1;w=5`}}})
	if p, err = get(a, cred("k1"), time.Second); err != nil {
		t.Fatal(err)
	}
	p.Release(tools.Outcome{Status: 200})
	waiting := make(chan tools.Permit, 1)
	go func() {
		p, err := get(a, cred("k1"), 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		waiting <- p
	}()
	time.Sleep(200 * time.Millisecond)
	q, err := get(b, cred("k2"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	q.Release(tools.Outcome{Status: 200})
	time.Sleep(lease + 1500*time.Millisecond) // past the lease of a permit not renewed
	r1, err1 := get(b, cred("k3"), 2*time.Second)
	r2, err2 := get(b, cred("k3"), 300*time.Millisecond)
	if err1 != nil {
		t.Errorf("one slot of two was free: %v", err1)
	}
	if err2 == nil {
		t.Error("concurrency 2, a permit waiting for its rate slot, and two more granted")
	}
	for _, r := range []tools.Permit{r1, r2} {
		if r != nil {
			r.Release(tools.Outcome{Status: 200})
		}
	}
	if p := <-waiting; p != nil {
		p.Release(tools.Outcome{Status: 200})
	}
}

// Waiters for a concurrency slot take their turns across replicas: two
// replicas each sending one request after another under concurrency 1
// alternate, though each one's next request carries the release of its
// last (before, the first replica's walk kept the slot to its end and
// the other's waited it out) — bounded by the provider's configured
// concurrency, or by the bound a credential learned from a 429, and with
// the second replica's clock 2 s behind (the turns lapse on Redis's
// clock, not the replicas').
func TestConcurrencyTurnsAcrossReplicas(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		for _, tc := range []struct {
			name string
			s    tools.LimitScope
			skew time.Duration
		}{
			{"provider", tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{Concurrency: 1}}, 0},
			{"credential", tools.LimitScope{Provider: "acme", Credential: "k"}, 0},
			{"clock behind", tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{Concurrency: 1}}, -2 * time.Second},
		} {
			t.Run(tc.name, func(t *testing.T) {
				opt := redislimit.Options{Prefix: "turns" + time.Now().Format("150405.000000") + ":"}
				a := redislimit.New(srv.Universal(t), opt)
				opt.Clock = skewedClock{tc.skew}
				b := redislimit.New(srv.Universal(t), opt)
				t.Cleanup(func() { a.Close(); b.Close() })
				if tc.s.Credential != "" { // the credential learns a bound of 1
					p, err := a.Acquire(context.Background(), tc.s)
					if err != nil {
						t.Fatal(err)
					}
					p.Release(tools.Outcome{Status: 429})
				}
				order := alternate(t, a, b, tc.s)
				run, longest := 1, 1
				for i := 1; i < len(order); i++ {
					if order[i] == order[i-1] {
						run++
						longest = max(longest, run)
					} else {
						run = 1
					}
				}
				// a's first two may come before b asks; after that they alternate.
				if firstB := slices.Index(order, "b"); firstB > 2 || longest > 3 {
					t.Errorf("grants in the order %v: b waited out a's walk", order)
				}
			})
		}
	})
}

// skewedClock is the system clock off by d.
type skewedClock struct{ d time.Duration }

func (c skewedClock) Now() time.Time { return time.Now().Add(c.d) }
func (skewedClock) Sleep(ctx context.Context, d time.Duration) error {
	return tools.SystemClock().Sleep(ctx, d)
}

// alternate runs two walks of six requests one after another on s, one
// on a, then, once a holds its first slot, one on b, each request
// holding its slot 40 ms, and returns whose each grant was in order.
func alternate(t *testing.T, a, b *redislimit.Limiter, s tools.LimitScope) []string {
	t.Helper()
	var mu sync.Mutex
	var order []string
	walk := func(name string, l *redislimit.Limiter, started chan<- struct{}) error {
		for i := range 6 {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			p, err := l.Acquire(ctx, s)
			cancel()
			if err != nil {
				return fmt.Errorf("%s, request %d: %w", name, i, err)
			}
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			if i == 0 && started != nil {
				close(started)
			}
			time.Sleep(40 * time.Millisecond) // the upstream answers
			p.Release(tools.Outcome{Status: 200})
		}
		return nil
	}
	started := make(chan struct{})
	errs := make(chan error, 2)
	go func() { errs <- walk("a", a, started) }()
	<-started
	go func() { errs <- walk("b", b, nil) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return order
}

// A request paused by its own credential's pause (a 429 with
// Retry-After on that credential) gives up its turn in the provider's
// queue: the provider's free slot goes to another credential's request
// at once, not after the pause.
func TestACredentialsPauseHoldsUpNoOtherTurn(t *testing.T) {
	srv := redistest.Start(t)
	opt := redislimit.Options{Prefix: "cpause" + time.Now().Format("150405.000000") + ":"}
	a := redislimit.New(srv.Universal(t), opt)
	b := redislimit.New(srv.Universal(t), opt)
	t.Cleanup(func() { a.Close(); b.Close() })
	scope := func(c string) tools.LimitScope {
		return tools.LimitScope{Provider: "acme", Credential: c, Limit: tools.RateLimit{Concurrency: 1}}
	}
	p, err := a.Acquire(context.Background(), scope("x"))
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { // x's next request waits its turn, then x's pause
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		q, err := b.Acquire(ctx, scope("x"))
		if q != nil {
			q.Release(tools.Outcome{Status: 200})
		}
		waited <- err
	}()
	time.Sleep(150 * time.Millisecond)
	p.Release(tools.Outcome{Status: 429, Header: http.Header{"Retry-After": {"4"}}})
	time.Sleep(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	q, err := a.Acquire(ctx, scope("y"))
	if err != nil {
		t.Fatalf("credential y, the provider's only slot free while x is paused: %v", err)
	}
	q.Release(tools.Outcome{Status: 200})
	if err := <-waited; err != nil {
		t.Errorf("x after its pause: %v", err)
	}
}

// A waiter that gives up leaves its turn at once; one that stops asking
// without a word (its replica died) loses it after the grace of a
// second, so the requests after it wait no longer than that.
func TestAWaiterThatGoesAwayLosesItsTurn(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "gone" + time.Now().Format("150405.000000") + ":"
	a := redislimit.New(srv.Universal(t), redislimit.Options{Prefix: prefix})
	b := redislimit.New(srv.Universal(t), redislimit.Options{Prefix: prefix})
	// c's releases (and so its leaving) are never sent: a dead replica.
	c := redislimit.New(srv.Universal(t), redislimit.Options{Prefix: prefix, FlushDelay: time.Hour})
	t.Cleanup(func() { a.Close(); b.Close() })
	s := tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{Concurrency: 1}}
	get := func(l *redislimit.Limiter, within time.Duration) (tools.Permit, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		start := time.Now()
		p, err := l.Acquire(ctx, s)
		return p, time.Since(start), err
	}
	for _, tc := range []struct {
		name     string
		waiter   *redislimit.Limiter
		min, max time.Duration
	}{{"gave up", b, 0, 700 * time.Millisecond}, {"died", c, 600 * time.Millisecond, 3 * time.Second}} {
		p, _, err := get(a, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := get(tc.waiter, 150*time.Millisecond); err == nil {
			t.Fatalf("%s: a second request got the only slot", tc.name)
		}
		p.Release(tools.Outcome{Status: 200})
		q, took, err := get(a, tc.max)
		if err != nil {
			t.Fatalf("%s: the next request did not get the free slot within %s: %v", tc.name, tc.max, err)
		}
		if took < tc.min {
			t.Errorf("%s: the next request took the slot after %s, before the waiter's turn lapsed", tc.name, took)
		}
		q.Release(tools.Outcome{Status: 200})
	}
}

// A provider's pause (a 503 with Retry-After on a request of no
// credential) holds every credential's requests as long: a credential's
// waiter keeps its turn through it, and gets the credential's slot after
// it, before a newcomer.
func TestAProvidersPauseKeepsTheCredentialsTurns(t *testing.T) {
	srv := redistest.Start(t)
	prefix := "ppause" + time.Now().Format("150405.000000") + ":"
	opt := redislimit.Options{Prefix: prefix}
	a := redislimit.New(srv.Universal(t), opt)
	b := redislimit.New(srv.Universal(t), opt)
	t.Cleanup(func() { a.Close(); b.Close() })
	rc, ctx := srv.Client(t), context.Background()
	cred, prov := tools.LimitScope{Provider: "acme", Credential: "k"}, tools.LimitScope{Provider: "acme"}
	p, err := a.Acquire(ctx, cred)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(tools.Outcome{Status: 429}) // the credential learns a bound of 1
	x, err := a.Acquire(ctx, cred)        // holds it
	if err != nil {
		t.Fatal(err)
	}
	y, err := a.Acquire(ctx, prov) // a request of no credential
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		q, err := b.Acquire(c, cred)
		if q != nil {
			q.Release(tools.Outcome{Status: 200})
		}
		done <- err
	}()
	time.Sleep(150 * time.Millisecond)
	turns := prefix + "rl:acme:c:k:w"
	if n := rc.ZCard(ctx, turns).Val(); n != 1 {
		t.Fatalf("the credential's waiter: %d turns in %s, want 1", n, turns)
	}
	y.Release(tools.Outcome{Status: 503, Header: http.Header{"Retry-After": {"2"}}}) // the provider pauses 2 s
	time.Sleep(300 * time.Millisecond)
	if n := rc.ZCard(ctx, turns).Val(); n != 1 {
		t.Errorf("during the provider's pause the credential's queue holds %d turns, want its waiter's", n)
	}
	x.Release(tools.Outcome{Status: 200})
	if err := <-done; err != nil {
		t.Errorf("the credential's waiter after the pause: %v", err)
	}
}
