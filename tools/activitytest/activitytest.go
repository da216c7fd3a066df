// Package activitytest is the conformance suite of tools.ActivityStore:
// the embedded bbolt store and the Redis one run it.
package activitytest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// New returns a fresh, empty store keeping about max records, for t alone.
type New func(t *testing.T, max int) tools.ActivityStore

// Run runs the suite.
func Run(t *testing.T, newStore New) {
	t.Run("NewestFirstByThread", func(t *testing.T) {
		s := newStore(t, 2048)
		ctx := context.Background()
		for i := range 3000 {
			th := "a"
			if i%2 == 1 {
				th = "b"
			}
			if err := s.AppendActivity(ctx, tools.Activity{Time: time.Unix(int64(i), 0), ThreadID: th, Tool: fmt.Sprint(i), Status: 200}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.ListActivity(ctx, "b", 3)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3 || got[0].Tool != "2999" || got[1].Tool != "2997" || got[2].Tool != "2995" || got[0].Status != 200 || !got[0].Time.Equal(time.Unix(2999, 0)) {
			t.Errorf("newest of thread b = %+v", got)
		}
		if got, _ := s.ListActivity(ctx, "c", 3); len(got) != 0 {
			t.Errorf("thread c (no records) lists %+v", got)
		}
		all, err := s.ListActivity(ctx, "", 5000)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) > 2048+1024 || len(all) < 2048 {
			t.Errorf("kept %d records; want about the 2048 newest", len(all))
		}
		if all[0].Tool != "2999" {
			t.Errorf("newest overall is %s", all[0].Tool)
		}
	})
	t.Run("ConcurrentAppends", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := context.Background()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 25 {
					if err := s.AppendActivity(ctx, tools.Activity{ThreadID: fmt.Sprint("t", w), Tool: fmt.Sprint(i)}); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		all, err := s.ListActivity(ctx, "", 1000)
		if err != nil || len(all) != 200 {
			t.Fatalf("listed %d, %v; want all 200", len(all), err)
		}
		for w := range 8 {
			mine, err := s.ListActivity(ctx, fmt.Sprint("t", w), 1000)
			if err != nil || len(mine) != 25 {
				t.Fatalf("thread t%d: %d, %v", w, len(mine), err)
			}
			for i, a := range mine {
				if a.Tool != fmt.Sprint(24-i) {
					t.Fatalf("thread t%d out of order: %+v", w, mine)
				}
			}
		}
	})
}
