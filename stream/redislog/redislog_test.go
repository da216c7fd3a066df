package redislog_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/eventlogtest"
	"github.com/trawl-dev/trawl/stream/redislog"
	"github.com/trawl-dev/trawl/stream/redistest"
)

func TestLogConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		eventlogtest.Run(t, func(t *testing.T, o eventlogtest.Options) stream.EventLog {
			n++ // each log its own prefix: the suite reuses run ids
			return redislog.New(c, redislog.Options{Prefix: fmt.Sprintf("t%d:", n), MaxRunBytes: o.MaxRunBytes,
				Retention: o.Retention, Block: 100 * time.Millisecond})
		})
	})
}

func TestPrefixesAreSeparate(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	a := redislog.New(c, redislog.Options{Prefix: "a:"})
	b := redislog.New(c, redislog.Options{Prefix: "b:"})
	if err := a.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "run"); !errors.Is(err, stream.ErrRunNotFound) {
		t.Fatalf("a run of prefix a: seen under b (%v)", err)
	}
	if err := b.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
}

// While Redis is down every call fails with a clear error (never a
// silent empty answer), and works again once it is back.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	l := redislog.New(c, redislog.Options{Block: 100 * time.Millisecond})
	if err := l.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := l.Append(short, "run", stream.TextDelta{ID: "t", Delta: "x"}); err == nil || errors.Is(err, stream.ErrRunNotFound) {
		t.Fatalf("Append with Redis down: %v, want a Redis error", err)
	}
	_, _, err := eventlogtest.ReadAll(short, l, "run", 0)
	if err == nil || errors.Is(err, stream.ErrRunNotFound) {
		t.Fatalf("Read with Redis down: %v, want a Redis error", err)
	}
	srv.Restart(t)
	// Persistence is off: the run is gone, and the log says so.
	if _, err := l.Stat(ctx, "run"); !errors.Is(err, stream.ErrRunNotFound) {
		t.Fatalf("Stat after restart: %v, want ErrRunNotFound", err)
	}
	if err := l.Open(ctx, "run"); err != nil {
		t.Fatalf("Open after restart: %v", err)
	}
	if seq, err := l.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: "x"}); err != nil || seq != 1 {
		t.Fatalf("Append after restart: %d, %v", seq, err)
	}
}

// A run appended on one replica is resumed on another (its own client)
// from any id, live, to its end.
func TestResumeOnAnotherReplica(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := redislog.New(srv.Client(t), redislog.Options{Prefix: "p:"})
	b := redislog.New(srv.Client(t), redislog.Options{Prefix: "p:"})
	if err := a.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan []int64, 1)
	seen := make(chan int64, 16)
	go func() {
		seqs, _, err := eventlogtest.ReadAllSeen(ctx, b, "run", 3, seen)
		if err != nil {
			t.Error(err)
		}
		got <- seqs
	}()
	// Each event is appended once B has read the one before: B follows
	// the run live.
	eventlogtest.WaitSeen(t, ctx, seen, 5)
	for i := 5; i < 10; i++ {
		seq, err := a.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		eventlogtest.WaitSeen(t, ctx, seen, seq)
	}
	if err := a.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if seqs := <-got; fmt.Sprint(seqs) != "[4 5 6 7 8 9 10]" {
		t.Errorf("resumed after 3 on B: %v", seqs)
	}
}

// Waiting readers hold no pooled connection: fifty readers on a client
// with a pool of three all follow their runs live.
func TestWaitingReadersHoldNoConnection(t *testing.T) {
	srv := redistest.Start(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 3})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l := redislog.New(c, redislog.Options{Block: 5 * time.Second})
	defer l.Shutdown()
	const runs = 50
	done := make(chan []int64, runs)
	seen := make(chan int64, runs)
	for i := range runs {
		id := fmt.Sprint("run", i)
		if err := l.Open(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Append(ctx, id, stream.TextDelta{ID: "t", Delta: "x"}); err != nil {
			t.Fatal(err)
		}
		go func() {
			seqs, _, err := eventlogtest.ReadAllSeen(ctx, l, id, 0, seen)
			if err != nil {
				t.Error(err)
			}
			done <- seqs
		}()
	}
	for range runs { // every reader read its run's first event: it waits for the next
		<-seen
	}
	start := time.Now()
	for i := range runs {
		id := fmt.Sprint("run", i)
		if _, err := l.Append(ctx, id, stream.TextDelta{ID: "t", Delta: "x"}); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	for range runs {
		if seqs := <-done; fmt.Sprint(seqs) != "[1 2]" {
			t.Fatalf("reader saw %v", seqs)
		}
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("readers took %v: woken by the poll, not the notification", el)
	}
}
