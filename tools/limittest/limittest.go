// Package limittest is the conformance suite of tools.RateLimiter: the
// embedded limiter and the Redis one run it, so both pace, pause and learn
// the same way.
package limittest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Clock is the suite's fake clock, tools.FakeClock: Sleep moves it
// forward at once, so waits cost no time and can be read back (Slept).
type Clock = tools.FakeClock

// NewClock returns a clock reading start.
func NewClock(start time.Time) *Clock { return tools.NewFakeClock(start) }

// New returns two limiters sharing one state (for the embedded limiter,
// the same one twice; for Redis, two replicas on one server and prefix),
// fresh for t, reading clock, with permits leased for lease.
type New func(t *testing.T, clock tools.Clock, lease time.Duration) (a, b tools.RateLimiter)

// Crasher is a limiter that can stop as the death of its replica would
// (no release sent, no lease renewed); the suite crashes the one whose
// permit it leaves unreleased, when it can.
type Crasher interface{ Crash() }

// Run runs the suite.
func Run(t *testing.T, newLimiters New) {
	start := time.Now().Truncate(time.Second)
	setup := func(t *testing.T) (*Clock, tools.RateLimiter, tools.RateLimiter) {
		c := NewClock(start)
		a, b := newLimiters(t, c, time.Minute)
		return c, a, b
	}
	acquire := func(t *testing.T, l tools.RateLimiter, s tools.LimitScope) tools.Permit {
		t.Helper()
		p, err := l.Acquire(context.Background(), s)
		if err != nil {
			t.Fatalf("Acquire(%+v): %v", s, err)
		}
		return p
	}
	ok := tools.Outcome{Status: 200, Header: http.Header{}}
	acme := func(rl tools.RateLimit) tools.LimitScope { return tools.LimitScope{Provider: "acme", Limit: rl} }

	t.Run("RateAndBurstAcrossReplicas", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{RequestsPerSecond: 5, Burst: 2})
		var at []time.Duration
		for i := range 7 {
			l := a
			if i%2 == 1 {
				l = b
			}
			p := acquire(t, l, s)
			at = append(at, c.Now().Sub(start))
			p.Release(ok)
		}
		want := []time.Duration{0, 0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, 800 * time.Millisecond, time.Second}
		if fmt.Sprint(at) != fmt.Sprint(want) {
			t.Errorf("requests started at %v, want %v", at, want)
		}
	})

	t.Run("RateWaitOverTheDeadlineFailsAtOnce", func(t *testing.T) {
		c, a, _ := setup(t)
		s := acme(tools.RateLimit{RequestsPerSecond: 1})
		acquire(t, a, s).Release(ok)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := a.Acquire(ctx, s)
		var rle *tools.RateLimitError
		if !errors.As(err, &rle) || !errors.Is(err, tools.ErrRateLimitWait) || rle.Cause != "rate" || rle.Provider != "acme" ||
			rle.Wait < 900*time.Millisecond || rle.Wait > time.Second {
			t.Fatalf("err = %v (%+v)", err, rle)
		}
		if c.Slept() != 0 {
			t.Errorf("slept %v before failing", c.Slept())
		}
		// It reserved nothing: with the time back, a request goes at 1 s.
		p := acquire(t, a, s)
		if got := c.Now().Sub(start); got != time.Second {
			t.Errorf("next request at %v, want 1s", got)
		}
		p.Release(ok)
	})

	t.Run("WaitsAreObserved", func(t *testing.T) {
		// What a progress line shows: the provider, the cause and how long,
		// and the wait's end; a request that does not wait says nothing.
		_, a, b := setup(t)
		var mu sync.Mutex
		var seen []string
		ctx := tools.WithLimitWait(context.Background(), func(w tools.LimitWait) func() {
			mu.Lock()
			seen = append(seen, fmt.Sprintf("%s %s %v", w.Provider, w.Cause, w.Wait))
			mu.Unlock()
			return func() {
				mu.Lock()
				seen = append(seen, "end")
				mu.Unlock()
			}
		})
		s := acme(tools.RateLimit{RequestsPerSecond: 2})
		for _, l := range []tools.RateLimiter{a, b} {
			p, err := l.Acquire(ctx, s)
			if err != nil {
				t.Fatal(err)
			}
			p.Release(ok)
		}
		mu.Lock()
		defer mu.Unlock()
		if want := []string{"acme rate 500ms", "end"}; fmt.Sprint(seen) != fmt.Sprint(want) {
			t.Errorf("observed %q, want %q", seen, want)
		}
	})

	t.Run("ConcurrencyAcrossReplicas", func(t *testing.T) {
		_, a, b := setup(t)
		s := acme(tools.RateLimit{Concurrency: 2})
		p1, p2 := acquire(t, a, s), acquire(t, b, s)
		got := make(chan tools.Permit, 1)
		go func() {
			p, err := a.Acquire(context.Background(), s)
			if err != nil {
				t.Error(err)
			}
			got <- p
		}()
		select {
		case <-got:
			t.Fatal("a third request started while two were in flight")
		case <-time.After(100 * time.Millisecond):
		}
		p2.Release(ok) // on the other replica
		p3 := <-got
		p1.Release(ok)
		p3.Release(ok)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		q1, q2 := acquire(t, a, s), acquire(t, a, s)
		_, err := b.Acquire(ctx, s)
		var rle *tools.RateLimitError
		if !errors.As(err, &rle) || rle.Cause != "concurrency" {
			t.Errorf("waiting past the deadline for a slot: %v", err)
		}
		q1.Release(ok)
		q2.Release(ok)
	})

	t.Run("NeverMoreThanTheConcurrencyInFlight", func(t *testing.T) {
		_, a, b := setup(t)
		s := acme(tools.RateLimit{Concurrency: 3})
		var inflight, peak atomic.Int32
		var wg sync.WaitGroup
		for i := range 12 {
			l := a
			if i%2 == 1 {
				l = b
			}
			wg.Go(func() {
				for range 5 {
					p, err := l.Acquire(context.Background(), s)
					if err != nil {
						t.Error(err)
						return
					}
					n := inflight.Add(1)
					for {
						m := peak.Load()
						if n <= m || peak.CompareAndSwap(m, n) {
							break
						}
					}
					inflight.Add(-1)
					p.Release(ok)
				}
			})
		}
		wg.Wait()
		if peak.Load() > 3 {
			t.Errorf("%d requests in flight at once, the bound is 3", peak.Load())
		}
	})

	t.Run("TooManyHalvesTheConcurrencyOncePerBound", func(t *testing.T) {
		_, a, b := setup(t)
		s := acme(tools.RateLimit{})
		ps := []tools.Permit{acquire(t, a, s), acquire(t, b, s), acquire(t, a, s), acquire(t, b, s)}
		tooMany := tools.Outcome{Status: 429, Header: http.Header{}}
		ps[0].Release(tooMany) // 4 in flight: the bound becomes 2
		ps[1].Release(tooMany) // sent before the cut: no second cut
		ps[2].Release(ok)
		ps[3].Release(ok)
		q := []tools.Permit{acquire(t, a, s), acquire(t, b, s)}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		if _, err := a.Acquire(ctx, s); err == nil {
			t.Fatal("a third request started under a learned bound of 2")
		}
		q[0].Release(tooMany) // sent under the bound of 2: the bound becomes 1
		q[1].Release(ok)
		p := acquire(t, b, s)
		ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel2()
		if _, err := a.Acquire(ctx2, s); err == nil {
			t.Fatal("a second request started under a learned bound of 1")
		}
		p.Release(ok)
		learned := func(l tools.RateLimiter) int {
			for _, st := range l.(tools.LimitReporter).LimitStatus() {
				if st.Provider == "acme" {
					return st.Concurrency
				}
			}
			return 0
		}
		// Growing back by 1/(8c) a good answer: from about 1 to 2 takes
		// about 12 (c² grows by a quarter each).
		n := 0
		for ; n < 40; n++ {
			p := acquire(t, a, s)
			if learned(a) >= 2 {
				p.Release(ok)
				break
			}
			p.Release(ok)
		}
		if n < 8 || n > 16 {
			t.Errorf("the bound grew from 1 to 2 after %d good answers, want 8 to 16", n)
		}
		r1, r2 := acquire(t, a, s), acquire(t, b, s)
		r1.Release(ok)
		r2.Release(ok)
	})

	t.Run("LearnedBoundLapses", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		p1, p2 := acquire(t, a, s), acquire(t, b, s)
		p1.Release(tools.Outcome{Status: 429})
		p2.Release(ok)
		q := acquire(t, a, s)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(ctx, s); err == nil {
			t.Fatal("the learned bound of 1 did not hold")
		}
		c.Advance(tools.LearnedLimitTTL + time.Second)
		r := acquire(t, b, s) // a second one in flight: the bound lapsed
		q.Release(ok)
		r.Release(ok)
	})

	t.Run("RemainingZeroPausesUntilResetForEveryone", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		p := acquire(t, a, s)
		reset := c.Now().Add(2 * time.Second)
		p.Release(tools.Outcome{Status: 200, Header: http.Header{
			"X-Ratelimit-Limit": {"60"}, "X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {strconv.FormatInt(reset.Unix(), 10)}}})
		q := acquire(t, b, s) // the other replica waits for the reset
		if c.Now().Before(reset) {
			t.Errorf("a request started at %v, before the reset at %v", c.Now().Sub(start), reset.Sub(start))
		}
		q.Release(ok)
		// Past the reset the quota is unknown again: no more waiting.
		before := c.Slept()
		acquire(t, a, s).Release(ok)
		if c.Slept() != before {
			t.Errorf("waited %v after the reset", c.Slept()-before)
		}
	})

	t.Run("QuotaCountsDown", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		p := acquire(t, a, s)
		p.Release(tools.Outcome{Status: 200, Header: http.Header{"Ratelimit": {`"default";r=2;t=10`}}})
		acquire(t, b, s).Release(tools.Outcome{Status: 200})
		acquire(t, a, s).Release(tools.Outcome{Status: 200})
		if c.Slept() != 0 {
			t.Fatalf("waited %v with quota left", c.Slept())
		}
		acquire(t, b, s).Release(ok) // the quota is spent: waits for its reset
		if got := c.Now().Sub(start); got != 10*time.Second {
			t.Errorf("the third request went at %v, want at the reset (10s)", got)
		}
	})

	t.Run("RetryAfterPausesTheProvider", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		acquire(t, a, s).Release(tools.Outcome{Status: 429, Header: http.Header{"Retry-After": {"3"}}})
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := b.Acquire(ctx, s)
		var rle *tools.RateLimitError
		if !errors.As(err, &rle) || rle.Cause != "paused" || rle.Wait != 3*time.Second {
			t.Fatalf("a 3 s pause with 1 s left: %v", err)
		}
		acquire(t, b, s).Release(ok)
		if got := c.Now().Sub(start); got != 3*time.Second {
			t.Errorf("the request after Retry-After: 3 went at %v", got)
		}
		other := tools.LimitScope{Provider: "other"}
		before := c.Now()
		acquire(t, a, other).Release(ok)
		if c.Now() != before {
			t.Errorf("another provider waited for acme's pause")
		}
	})

	t.Run("ACredentialsLimitThrottlesThatCredential", func(t *testing.T) {
		c, a, b := setup(t)
		u1 := tools.LimitScope{Provider: "acme", Credential: "fp-user-1"}
		u2 := tools.LimitScope{Provider: "acme", Credential: "fp-user-2"}
		org := tools.LimitScope{Provider: "acme"}
		acquire(t, a, u1).Release(tools.Outcome{Status: 429, Header: http.Header{"Retry-After": {"5"}}})
		acquire(t, b, u2).Release(ok)
		acquire(t, b, org).Release(ok)
		if c.Slept() != 0 {
			t.Fatalf("other users waited %v for user 1's limit", c.Slept())
		}
		acquire(t, b, u1).Release(ok)
		if got := c.Now().Sub(start); got != 5*time.Second {
			t.Errorf("user 1's next request went at %v, want 5s", got)
		}
		// The provider's configured limits bind every credential together.
		s1 := tools.LimitScope{Provider: "acme", Credential: "fp-user-1", Limit: tools.RateLimit{Concurrency: 1}}
		s2 := tools.LimitScope{Provider: "acme", Credential: "fp-user-2", Limit: tools.RateLimit{Concurrency: 1}}
		p := acquire(t, a, s1)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(ctx, s2); err == nil {
			t.Error("the provider's concurrency of 1 let two users in at once")
		}
		p.Release(ok)
	})

	t.Run("PolicySetsTheRate", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		acquire(t, a, s).Release(tools.Outcome{Status: 200, Header: http.Header{"Ratelimit-Policy": {`"default";q=4;w=2`}}})
		// 2 per second with a burst of 4: four at once, then every 500 ms.
		for i := range 4 {
			l := a // the policy is a's to tell first (a shared limiter's next request carries it)
			if i%2 == 1 {
				l = b
			}
			acquire(t, l, s).Release(ok)
		}
		if got := c.Now().Sub(start); got != 0 {
			t.Fatalf("the burst of 4 waited %v", got)
		}
		acquire(t, b, s).Release(ok)
		if got := c.Now().Sub(start); got != 500*time.Millisecond {
			t.Errorf("the fifth request went at %v, want 500ms", got)
		}
	})

	t.Run("APolicyNeverLoosensTheConfiguredRate", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{RequestsPerSecond: 2}) // a burst of 1: every 500 ms at most
		// An hourly quota of 3600 is a lower rate (1 per second) with a
		// far larger burst: the lower rate and the lower burst apply.
		acquire(t, a, s).Release(tools.Outcome{Status: 200, Header: http.Header{"Ratelimit-Policy": {`"hour";q=3600;w=3600`}}})
		var at []time.Duration
		for i := range 4 {
			l := a
			if i%2 == 1 {
				l = b
			}
			acquire(t, l, s).Release(ok)
			at = append(at, c.Now().Sub(start))
		}
		for i := 1; i < len(at); i++ {
			if gap := at[i] - at[i-1]; gap < time.Second {
				t.Fatalf("requests after the policy started at %v: %v apart, closer than its rate of 1 per second", at, gap)
			}
		}
	})

	t.Run("EveryPolicyHolds", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		acquire(t, a, s).Release(tools.Outcome{Status: 200, Header: http.Header{"Ratelimit-Policy": {`"burst";q=10;w=1, "day";q=10000;w=86400`}}})
		at0 := 0
		for i := range 12 {
			l := a
			if i%2 == 1 {
				l = b
			}
			acquire(t, l, s).Release(ok)
			if c.Now().Equal(start) {
				at0++
			}
		}
		if at0 > 10 {
			t.Errorf("%d requests started at once under a policy of 10 per second", at0)
		}
	})

	t.Run("AnOlderAnswerDoesNotUndoTheCount", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{})
		reset := strconv.FormatInt(start.Add(10*time.Second).Unix(), 10)
		quota := func(left int) tools.Outcome {
			return tools.Outcome{Status: 200, Header: http.Header{"X-Ratelimit-Limit": {"5"}, "X-Ratelimit-Remaining": {strconv.Itoa(left)}, "X-Ratelimit-Reset": {reset}}}
		}
		acquire(t, a, s).Release(quota(4)) // the server counted 1 of 5
		p2, p3 := acquire(t, a, s), acquire(t, b, s)
		// Their answers are read in the other order: the newer one (2
		// left) first, then the older one (3 left), which must not bring
		// the count back up.
		p3.Release(quota(2))
		p2.Release(quota(3))
		before := 0
		for range 3 {
			acquire(t, b, s).Release(ok)
			if c.Now().Before(start.Add(10 * time.Second)) {
				before++
			}
		}
		if before > 2 {
			t.Errorf("%d requests went before the reset with 2 left of the quota", before)
		}
	})

	t.Run("ADeadHoldersPermitsComeBack", func(t *testing.T) {
		c, a, b := setup(t)
		s := acme(tools.RateLimit{Concurrency: 1})
		_ = acquire(t, a, s) // never released: its holder died
		if cr, ok := a.(Crasher); ok {
			cr.Crash() // and no longer renews its lease
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err := b.Acquire(ctx, s); err == nil {
			t.Fatal("a second request started while the first held the only slot")
		}
		c.Advance(time.Minute + time.Second) // past the lease
		acquire(t, b, s).Release(ok)
	})

	t.Run("CancelWhileWaiting", func(t *testing.T) {
		_, a, _ := setup(t)
		s := acme(tools.RateLimit{Concurrency: 1})
		p := acquire(t, a, s)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := a.Acquire(ctx, s)
			done <- err
		}()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled while waiting: %v", err)
		}
		p.Release(ok)
	})
}
