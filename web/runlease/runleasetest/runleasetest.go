// Package runleasetest is the conformance suite of runlease.Registry.
package runleasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/web/runlease"
)

// New returns two registries that share their state, as two replicas do
// (an in-process registry returns itself twice), with the given lease.
type New func(t *testing.T, lease time.Duration) (a, b runlease.Registry)

// Run runs the suite.
func Run(t *testing.T, newPair New) {
	ctx := context.Background()
	t.Run("OneRunPerKey", func(t *testing.T) {
		a, b := newPair(t, time.Second)
		l, err := a.Acquire(ctx, "chat", "run1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Acquire(ctx, "chat", "run2")
		var held *runlease.HeldError
		if !errors.As(err, &held) || !errors.Is(err, runlease.ErrHeld) || held.RunID != "run1" {
			t.Fatalf("second Acquire: %v, want a HeldError naming run1", err)
		}
		if id, err := b.Active(ctx, "chat"); err != nil || id != "run1" {
			t.Errorf("Active: %q, %v", id, err)
		}
		other, err := b.Acquire(ctx, "other", "run3")
		if err != nil {
			t.Fatalf("another key: %v", err)
		}
		defer other.Release(ctx)
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if id, err := a.Active(ctx, "chat"); err != nil || id != "" {
			t.Errorf("Active after release: %q, %v", id, err)
		}
		l2, err := b.Acquire(ctx, "chat", "run2")
		if err != nil {
			t.Fatalf("Acquire after release: %v", err)
		}
		// A stale release does not free another run's claim.
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if id, _ := a.Active(ctx, "chat"); id != "run2" {
			t.Errorf("a stale Release freed run2's claim: Active %q", id)
		}
		l2.Release(ctx)
	})
	t.Run("ActiveKeysByPrefix", func(t *testing.T) {
		a, b := newPair(t, time.Second)
		var held []runlease.Lease
		for _, k := range []string{"u=ann;a=x;c=1", "u=ann;a=x;c=2", "u=ann;a=y;c=1", "u=a*n;a=x;c=1", "u=bob;a=x;c=1"} {
			l, err := a.Acquire(ctx, k, "run-"+k)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		defer func() {
			for _, l := range held[1:] {
				l.Release(ctx)
			}
		}()
		got, err := b.ActiveKeys(ctx, "u=ann;a=x;")
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != "[u=ann;a=x;c=1 u=ann;a=x;c=2]" {
			t.Fatalf("ActiveKeys = %v", got)
		}
		// A prefix with pattern characters is a prefix, not a pattern.
		if got, _ := b.ActiveKeys(ctx, "u=a*"); fmt.Sprint(got) != "[u=a*n;a=x;c=1]" {
			t.Fatalf("ActiveKeys(u=a*) = %v", got)
		}
		held[0].Release(ctx)
		if got, _ := b.ActiveKeys(ctx, "u=ann;a=x;"); fmt.Sprint(got) != "[u=ann;a=x;c=2]" {
			t.Fatalf("after a release: %v", got)
		}
	})
	t.Run("ConcurrentAcquire", func(t *testing.T) {
		a, b := newPair(t, time.Second)
		var won atomic.Int64
		var wg sync.WaitGroup
		for i := range 16 {
			r := a
			if i%2 == 1 {
				r = b
			}
			wg.Go(func() {
				l, err := r.Acquire(ctx, "chat", fmt.Sprint("run", i))
				switch {
				case err == nil:
					won.Add(1)
					t.Cleanup(func() { l.Release(ctx) })
				case !errors.Is(err, runlease.ErrHeld):
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if won.Load() != 1 {
			t.Fatalf("%d concurrent Acquires won, want 1", won.Load())
		}
	})
	t.Run("StopFromAnyReplica", func(t *testing.T) {
		a, b := newPair(t, time.Second)
		l, err := a.Acquire(ctx, "chat", "run1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		if ok, err := b.Stop(ctx, "nothing", "run1"); ok || err != nil {
			t.Errorf("Stop of an idle key: %v, %v", ok, err)
		}
		// A stop meant for another run of the key (one that has just
		// ended) does not stop the run holding it now.
		if ok, err := b.Stop(ctx, "chat", "run0"); ok || err != nil {
			t.Errorf("Stop of another run of the key: %v, %v", ok, err)
		}
		select {
		case <-l.Done():
			t.Fatalf("a stop meant for another run stopped the holder: %v", l.Err())
		case <-time.After(100 * time.Millisecond):
		}
		start := time.Now()
		if ok, err := b.Stop(ctx, "chat", "run1"); !ok || err != nil {
			t.Fatalf("Stop: %v, %v", ok, err)
		}
		select {
		case <-l.Done():
		case <-time.After(time.Second):
			t.Fatal("the holder was not told to stop within 1 s")
		}
		if !errors.Is(l.Err(), runlease.ErrStopped) {
			t.Errorf("Err: %v, want ErrStopped", l.Err())
		}
		t.Logf("stop reached the holder in %v", time.Since(start))
	})
	t.Run("RenewedWhileHeld", func(t *testing.T) {
		a, b := newPair(t, 300*time.Millisecond)
		l, err := a.Acquire(ctx, "chat", "run1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		time.Sleep(time.Second)
		if id, err := b.Active(ctx, "chat"); err != nil || id != "run1" {
			t.Errorf("after three leases: Active %q, %v; the holder should renew", id, err)
		}
		select {
		case <-l.Done():
			t.Errorf("lease ended: %v", l.Err())
		default:
		}
	})
	t.Run("WaitSeesRelease", func(t *testing.T) {
		a, b := newPair(t, time.Second)
		l, err := a.Acquire(ctx, "chat", "run1")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- b.Wait(ctx, "chat", "run1") }()
		time.Sleep(50 * time.Millisecond)
		l.Release(ctx)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("Wait did not see the release")
		}
		if err := b.Wait(ctx, "chat", "never"); err != nil {
			t.Errorf("Wait for a run not holding the key: %v", err)
		}
	})
}
