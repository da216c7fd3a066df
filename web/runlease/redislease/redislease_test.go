package redislease_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/runlease"
	"github.com/trawl-dev/trawl/web/runlease/redislease"
	"github.com/trawl-dev/trawl/web/runlease/runleasetest"
)

func TestRegistryConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		n := 0
		runleasetest.Run(t, func(t *testing.T, lease time.Duration) (runlease.Registry, runlease.Registry) {
			n++
			prefix := fmt.Sprintf("t%d:", n)
			// Two replicas: two clients, two registries.
			a := redislease.New(srv.Universal(t), prefix, lease)
			b := redislease.New(srv.Universal(t), prefix, lease)
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		})
	})
}

// A replica that dies holding a run stops renewing: the run is observed
// as ended on another replica within the lease, and the key is free.
func TestDeadHolderEndsWithinLease(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const leaseFor = 400 * time.Millisecond
	dying := redis.NewClient(&redis.Options{Addr: srv.Addr})
	a := redislease.New(dying, "p:", leaseFor)
	b := redislease.New(srv.Client(t), "p:", leaseFor)
	defer b.Close()
	if _, err := a.Acquire(ctx, "chat", "run1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseFor) // renewed at least once
	dying.Close()        // the replica is gone: no renewal, no release
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := b.Wait(wctx, "chat", "run1"); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > leaseFor+200*time.Millisecond {
		t.Errorf("observed ended after %v, lease %v", el, leaseFor)
	}
	if _, err := b.Acquire(ctx, "chat", "run2"); err != nil {
		t.Fatalf("the dead run's key is not free: %v", err)
	}
}

// Redis down: Acquire, Stop and Active fail clearly; a holder that cannot
// renew for a whole lease loses its claim (Done closes with ErrLost);
// after the restart everything works again.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const leaseFor = 300 * time.Millisecond
	r := redislease.New(srv.Client(t), "", leaseFor)
	defer r.Close()
	l, err := r.Acquire(ctx, "chat", "run1")
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), runlease.ErrLost) {
			t.Errorf("Err: %v, want ErrLost", l.Err())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a holder that cannot renew kept its claim")
	}
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := r.Acquire(short, "other", "run2"); err == nil || errors.Is(err, runlease.ErrHeld) {
		t.Errorf("Acquire with Redis down: %v, want a Redis error", err)
	}
	if _, err := r.Stop(short, "chat", "run1"); err == nil {
		t.Error("Stop with Redis down: no error")
	}
	if _, err := r.Active(short, "chat"); err == nil {
		t.Error("Active with Redis down: no error")
	}
	srv.Restart(t)
	l2, err := r.Acquire(ctx, "chat", "run3")
	if err != nil {
		t.Fatalf("Acquire after restart: %v", err)
	}
	// The subscription reconnected: a stop still arrives at once.
	time.Sleep(200 * time.Millisecond)
	if ok, err := r.Stop(ctx, "chat", "run3"); !ok || err != nil {
		t.Fatalf("Stop after restart: %v, %v", ok, err)
	}
	select {
	case <-l2.Done():
	case <-time.After(time.Second):
		t.Fatal("stop after restart not delivered within 1 s")
	}
	l.Release(ctx)
	l2.Release(ctx)
}

// A dead holder's claim is swept exactly once, by one replica, after its
// lease; a live claim and a released one never are.
func TestLapsedSweepsDeadClaimsOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const leaseFor = 300 * time.Millisecond
	dying := redis.NewClient(&redis.Options{Addr: srv.Addr})
	a := redislease.New(dying, "p:", leaseFor)
	b := redislease.New(srv.Client(t), "p:", leaseFor)
	c := redislease.New(srv.Client(t), "p:", leaseFor)
	defer b.Close()
	defer c.Close()
	if _, err := a.Acquire(ctx, "u=x;a=demo;c=dead", "run-dead"); err != nil {
		t.Fatal(err)
	}
	live, err := b.Acquire(ctx, "u=x;a=demo;c=live", "run-live")
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release(ctx)
	gone, err := b.Acquire(ctx, "u=x;a=demo;c=gone", "run-gone")
	if err != nil {
		t.Fatal(err)
	}
	gone.Release(ctx)
	dying.Close()
	if got, err := b.Lapsed(ctx); err != nil || len(got) != 0 {
		t.Fatalf("before the lease ran out: %v, %v", got, err)
	}
	var swept []runlease.Claim
	deadline := time.Now().Add(5 * time.Second)
	for len(swept) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		for _, r := range []*redislease.Registry{b, c} { // two replicas sweep at once
			got, err := r.Lapsed(ctx)
			if err != nil {
				t.Fatal(err)
			}
			swept = append(swept, got...)
		}
	}
	time.Sleep(2 * leaseFor) // the live claim's deadline passes too; it is renewed
	for _, r := range []*redislease.Registry{b, c} {
		got, _ := r.Lapsed(ctx)
		swept = append(swept, got...)
	}
	if len(swept) != 1 || swept[0] != (runlease.Claim{Key: "u=x;a=demo;c=dead", RunID: "run-dead"}) {
		t.Fatalf("swept %v, want the dead claim once", swept)
	}
	keys, err := c.ActiveKeys(ctx, "u=x;a=demo;")
	if err != nil || len(keys) != 1 || keys[0] != "u=x;a=demo;c=live" {
		t.Fatalf("ActiveKeys = %v, %v", keys, err)
	}
}

// A holder cut off from Redis gives its claim up before the claim can
// lapse there, so its run has ended before another replica may take the
// key: Done closes within two thirds of the lease of the last renewal.
func TestHolderGivesUpBeforeTheClaimLapses(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const leaseFor = 900 * time.Millisecond
	r := redislease.New(srv.Client(t), "", leaseFor)
	defer r.Close()
	l, err := r.Acquire(ctx, "chat", "run1")
	if err != nil {
		t.Fatal(err)
	}
	acquired := time.Now()
	srv.Stop() // no renewal succeeds from here: the claim lapses at acquired + lease at the latest
	select {
	case <-l.Done():
		if !errors.Is(l.Err(), runlease.ErrLost) {
			t.Fatalf("Err: %v, want ErrLost", l.Err())
		}
		if el := time.Since(acquired); el >= leaseFor {
			t.Errorf("gave up %v after the last renewal, not before the lease (%v) ran out", el, leaseFor)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a holder that cannot renew kept its claim")
	}
}

// A run handed off (a draining replica) is free at once and returned by
// the very next Lapsed on one replica, without waiting for its lease;
// the same run id claims it again there.
func TestHandOffIsSweptAtOnce(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const leaseFor = time.Minute // a lapse would take this long
	a := redislease.New(srv.Client(t), "p:", leaseFor)
	b := redislease.New(srv.Client(t), "p:", leaseFor)
	c := redislease.New(srv.Client(t), "p:", leaseFor)
	defer a.Close()
	defer b.Close()
	defer c.Close()
	l, err := a.Acquire(ctx, "u=x;a=demo;c=1", "run1")
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Lapsed(ctx); len(got) != 0 {
		t.Fatalf("a held claim was swept: %v", got)
	}
	ok, err := l.(runlease.HandOff).HandOff(ctx)
	if err != nil || !ok {
		t.Fatalf("HandOff: %v, %v", ok, err)
	}
	if id, _ := b.Active(ctx, "u=x;a=demo;c=1"); id != "" {
		t.Errorf("after the hand-off the claim is still held by %q", id)
	}
	var swept []runlease.Claim
	for _, r := range []*redislease.Registry{b, c} {
		got, err := r.Lapsed(ctx)
		if err != nil {
			t.Fatal(err)
		}
		swept = append(swept, got...)
	}
	if len(swept) != 1 || swept[0] != (runlease.Claim{Key: "u=x;a=demo;c=1", RunID: "run1"}) {
		t.Fatalf("swept %v; want the handed-off claim once", swept)
	}
	again, err := b.Acquire(ctx, "u=x;a=demo;c=1", "run1")
	if err != nil {
		t.Fatalf("the taker claims the run: %v", err)
	}
	defer again.Release(ctx)
	// A hand-off of a claim no longer held does nothing.
	if ok, err := l.(runlease.HandOff).HandOff(ctx); ok || err != nil {
		t.Errorf("a stale hand-off: %v, %v", ok, err)
	}
	if id, _ := c.Active(ctx, "u=x;a=demo;c=1"); id != "run1" {
		t.Errorf("a stale hand-off freed the taker's claim: %q", id)
	}
}
