package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/redisstore"
)

// One holder at a time across clients; a waiter gets the lock when it is
// released; a holder that never releases loses it after its ttl; a wait
// ends with its context; an unlock after the lock passed to another does
// not release the other's.
func TestLocks(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		ctx := context.Background()
		a := redisstore.NewLocks(srv.Universal(t), "p:")
		b := redisstore.NewLocks(srv.Universal(t), "p:")
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := a
				if i%2 == 1 {
					l = b
				}
				unlock, err := l.Lock(ctx, "k", 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				n := inside.Add(1)
				if n > most.Load() {
					most.Store(n)
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				unlock()
			}()
		}
		wg.Wait()
		if most.Load() != 1 {
			t.Errorf("%d holders at once", most.Load())
		}

		stale, err := a.Lock(ctx, "dead", 100*time.Millisecond) // never released in time
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		unlock, err := b.Lock(ctx, "dead", time.Second)
		if err != nil || time.Since(start) < 50*time.Millisecond {
			t.Fatalf("after the ttl: %v in %v", err, time.Since(start))
		}
		stale() // the first holder's late unlock leaves b's lock alone
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, err := a.Lock(short, "dead", time.Second); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("waiting on a held lock: %v", err)
		}
		unlock()
		if u, err := a.Lock(ctx, "dead", time.Second); err != nil {
			t.Errorf("after unlock: %v", err)
		} else {
			u()
		}
	})
}
