package redislog_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/eventlogtest"
	"github.com/trawl-dev/trawl/stream/redislog"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// xrangeCounter counts the XRANGE commands a client sends.
type xrangeCounter struct{ n atomic.Int64 }

func (h *xrangeCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *xrangeCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "xrange") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *xrangeCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// follow reads runID on l from after to its end, each event's data
// checked against want(seq), calling each (when not nil) with every Seq
// it read.
func follow(ctx context.Context, l *redislog.Log, runID string, after int64, each func(seq int64)) ([]int64, error) {
	var seqs []int64
	for ev, err := range l.Read(ctx, runID, after) {
		if err != nil {
			return seqs, err
		}
		want, _ := stream.Encode(stream.TextDelta{ID: "t", Delta: fmt.Sprint(ev.Seq)})
		if string(ev.Data) != string(want) {
			return seqs, fmt.Errorf("event %d: %s, want %s", ev.Seq, ev.Data, want)
		}
		seqs = append(seqs, ev.Seq)
		if each != nil {
			each(ev.Seq)
		}
	}
	return seqs, nil
}

// seenOn is a follow callback that sends each Seq on the channel it
// returns, for eventlogtest.WaitSeen.
func seenOn(n int) (func(int64), chan int64) {
	seen := make(chan int64, n)
	return func(seq int64) { seen <- seq }, seen
}

func seqs(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// A live reader on another replica takes each event from its
// notification: following 200 appends costs it a handful of XRANGEs (its
// first read and catching up), not one per event.
func TestLiveReaderReadsFromNotifications(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a := redislog.New(srv.Client(t), redislog.Options{Prefix: "p:"})
	cb := srv.Client(t)
	var xr xrangeCounter
	cb.AddHook(&xr)
	b := redislog.New(cb, redislog.Options{Prefix: "p:", Block: 20 * time.Second})
	defer b.Shutdown()
	if err := a.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	const n = 200
	for i := 1; i <= 3; i++ {
		if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan []int64, 1)
	each, seen := seenOn(n)
	go func() {
		s, err := follow(ctx, b, "run", 1, each)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	eventlogtest.WaitSeen(t, ctx, seen, 3) // the reader is following
	for i := 4; i <= n; i++ {
		if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 { // a run emits in bursts: the reader keeps up with each
			eventlogtest.WaitSeen(t, ctx, seen, int64(i))
		}
	}
	if err := a.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !slices.Equal(s, seqs(2, n)) {
		t.Fatalf("read %v, want 2…%d", s, n)
	}
	if c := xr.n.Load(); c > 20 {
		t.Errorf("the live reader sent %d XRANGEs for %d events: it reads the log per event", c, n)
	}
}

// A reader too slow for its notifications (they overflow its inbox)
// catches up from the log: every event once, in order, to the end — not
// left waiting for the poll.
func TestSlowReaderCatchesUp(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := redislog.New(srv.Client(t), redislog.Options{Prefix: "p:"})
	b := redislog.New(srv.Client(t), redislog.Options{Prefix: "p:", Block: time.Minute})
	defer b.Shutdown()
	if err := a.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	got := make(chan []int64, 1)
	following := make(chan struct{})
	go func() {
		s, err := follow(ctx, b, "run", 0, func(seq int64) {
			if seq == 1 {
				close(following)
			}
			time.Sleep(200 * time.Microsecond) // slower than the appends: the notifications overflow
		})
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	const n = 1000
	if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: "1"}); err != nil {
		t.Fatal(err)
	}
	<-following
	for i := 2; i <= n; i++ {
		if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-got:
		if !slices.Equal(s, seqs(1, n)) {
			t.Fatalf("read %d events (%v…), want 1…%d", len(s), s[:min(len(s), 5)], n)
		}
	case <-ctx.Done():
		t.Fatal("the slow reader never reached the end: it waited for the poll")
	}
}

// A notification that is not an entry (another version's, or noise on
// the channel) makes a reader read the log, never yield it.
func TestForeignNotificationIsNotAnEvent(t *testing.T) {
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := srv.Client(t)
	a := redislog.New(c, redislog.Options{Prefix: "p:"})
	b := redislog.New(srv.Client(t), redislog.Options{Prefix: "p:", Block: 20 * time.Second})
	defer b.Shutdown()
	if err := a.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	got := make(chan []int64, 1)
	each, seen := seenOn(16)
	go func() {
		s, err := follow(ctx, b, "run", 0, each)
		if err != nil {
			t.Error(err)
		}
		got <- s
	}()
	// The reader follows the run (it read event 1) before the noise.
	if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: "1"}); err != nil {
		t.Fatal(err)
	}
	eventlogtest.WaitSeen(t, ctx, seen, 1)
	for i, noise := range []string{"1", "d", "d1", "dx y", "e", "e0", "x1 y", "d-1 z"} {
		if err := c.Publish(ctx, "p:run:{run}:n", noise).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i + 2)}); err != nil {
			t.Fatal(err)
		}
		eventlogtest.WaitSeen(t, ctx, seen, int64(i+2))
	}
	if err := a.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if s := <-got; !slices.Equal(s, seqs(1, 9)) {
		t.Fatalf("read %v, want 1…9", s)
	}
}
