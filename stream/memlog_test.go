package stream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is a clock that moves only when told to.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// textRun opens runID in l and appends n text deltas "0", "1", …
func textRun(t testing.TB, l EventLog, runID string, n int) {
	t.Helper()
	ctx := context.Background()
	if err := l.Open(ctx, runID); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		seq, err := l.Append(ctx, runID, TextDelta{ID: "t", Delta: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if seq != int64(i+1) {
			t.Fatalf("Append #%d: seq %d", i+1, seq)
		}
	}
}

// readAll reads runID after Seq after until the end or an error.
func readAll(ctx context.Context, l EventLog, runID string, after int64) ([]int64, []string, error) {
	var seqs []int64
	var data []string
	for ev, err := range l.Read(ctx, runID, after) {
		if err != nil {
			return seqs, data, err
		}
		seqs = append(seqs, ev.Seq)
		data = append(data, string(ev.Data))
	}
	return seqs, data, nil
}

func seqRange(from, to int64) []int64 {
	var s []int64
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func TestMemoryLogResumeEveryPoint(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	const n = 25
	textRun(t, l, "run", n)
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	for after := int64(0); after <= n; after++ {
		seqs, data, err := readAll(ctx, l, "run", after)
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		if diff := cmp.Diff(seqRange(after+1, n), seqs); diff != "" {
			t.Errorf("after %d: seqs (-want +got):\n%s", after, diff)
		}
		for i, d := range data {
			if want := fmt.Sprintf(`{"type":"text-delta","id":"t","delta":"%d"}`, int(after)+i); d != want {
				t.Errorf("after %d: event %d = %s, want %s", after, i, d, want)
			}
		}
	}
}

func TestMemoryLogErrors(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	textRun(t, l, "run", 3)

	check := func(what string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	check("Open again", l.Open(ctx, "run"), ErrRunExists)
	_, err := l.Append(ctx, "nope", StartStep{})
	check("Append unknown", err, ErrRunNotFound)
	_, err = l.Append(ctx, "run", Data{})
	if err == nil {
		t.Error("Append of an unencodable chunk succeeded")
	}
	_, _, err = readAll(ctx, l, "nope", 0)
	check("Read unknown", err, ErrRunNotFound)
	_, _, err = readAll(ctx, l, "run", 4)
	check("Read past the end", err, ErrUnknownEventID)
	_, _, err = readAll(ctx, l, "run", -1)
	check("Read negative", err, ErrUnknownEventID)
	_, err = l.Stat(ctx, "nope")
	check("Stat unknown", err, ErrRunNotFound)
	check("Close unknown", l.Close(ctx, "nope"), ErrRunNotFound)

	if st, err := l.Stat(ctx, "run"); err != nil || st != (RunState{LastSeq: 3}) {
		t.Errorf("Stat open = %+v, %v", st, err)
	}
	check("Close", l.Close(ctx, "run"), nil)
	check("Close again", l.Close(ctx, "run"), nil)
	if st, err := l.Stat(ctx, "run"); err != nil || st != (RunState{LastSeq: 3, Closed: true}) {
		t.Errorf("Stat closed = %+v, %v", st, err)
	}
	_, err = l.Append(ctx, "run", StartStep{})
	check("Append closed", err, ErrRunClosed)
	check("Open closed", l.Open(ctx, "run"), ErrRunExists)
}

func TestMemoryLogLive(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	textRun(t, l, "run", 2)

	got := make(chan int64)
	done := make(chan error)
	go func() {
		for ev, err := range l.Read(ctx, "run", 1) {
			if err != nil {
				done <- err
				return
			}
			got <- ev.Seq
		}
		close(done)
	}()
	if seq := <-got; seq != 2 {
		t.Fatalf("first live event %d, want 2", seq)
	}
	for want := int64(3); want <= 5; want++ {
		if _, err := l.Append(ctx, "run", StartStep{}); err != nil {
			t.Fatal(err)
		}
		if seq := <-got; seq != want {
			t.Fatalf("live event %d, want %d", seq, want)
		}
	}
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("reader ended with %v", err)
	}
}

func TestMemoryLogStalledReader(t *testing.T) {
	// A reader that takes one event and never asks for the next must not
	// hold back the producer or another reader.
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	textRun(t, l, "run", 1)
	stalled := make(chan struct{})
	release := make(chan struct{})
	go func() {
		for range l.Read(ctx, "run", 0) {
			close(stalled)
			<-release
			return
		}
	}()
	<-stalled
	defer close(release)

	const n = 10_000
	for range n {
		if _, err := l.Append(ctx, "run", StartStep{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	seqs, _, err := readAll(ctx, l, "run", 0)
	if err != nil || len(seqs) != n+1 {
		t.Fatalf("other reader got %d events, %v; want %d", len(seqs), err, n+1)
	}
}

func TestMemoryLogCancel(t *testing.T) {
	l := NewMemoryLog(MemoryLogOptions{})
	textRun(t, l, "run", 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []int64
	for ev, err := range l.Read(ctx, "run", 0) {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			break
		}
		got = append(got, ev.Seq)
		cancel() // the next wait ends with the context's error
	}
	if diff := cmp.Diff([]int64{1}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestMemoryLogConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	if err := l.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 200
	var readers sync.WaitGroup
	for range 3 {
		readers.Go(func() {
			seqs, _, err := readAll(ctx, l, "run", 0)
			if err != nil {
				t.Error(err)
			}
			if diff := cmp.Diff(seqRange(1, writers*each), seqs); diff != "" {
				t.Errorf("reader (-want +got):\n%s", diff)
			}
		})
	}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if _, err := l.Append(ctx, "run", Data{Name: "w", ID: fmt.Sprint(w), Data: i}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	readers.Wait()
}

func TestMemoryLogRunBound(t *testing.T) {
	ctx := context.Background()
	chunk := TextDelta{ID: "t", Delta: strings.Repeat("x", 100)}
	size := int64(len(mustEncode(chunk))) + EventOverhead
	l := NewMemoryLog(MemoryLogOptions{MaxRunBytes: 3 * size})
	textRun(t, l, "run", 0)
	for i := range 3 {
		if _, err := l.Append(ctx, "run", chunk); err != nil {
			t.Fatalf("Append %d: %v", i+1, err)
		}
	}
	if _, err := l.Append(ctx, "run", chunk); !errors.Is(err, ErrLogFull) {
		t.Fatalf("Append past the bound: %v, want ErrLogFull", err)
	}
	if _, err := l.Append(ctx, "run", chunk); !errors.Is(err, ErrRunClosed) {
		t.Fatalf("Append after overflow: %v, want ErrRunClosed", err)
	}
	seqs, data, err := readAll(ctx, l, "run", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(seqRange(1, 4), seqs); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
	if c, err := ParseChunk([]byte(data[3])); err != nil || c.Type() != "error" {
		t.Errorf("last event %s (%v), want an error chunk", data[3], err)
	}
}

func TestMemoryLogTotalBound(t *testing.T) {
	ctx := context.Background()
	chunk := TextDelta{ID: "t", Delta: "x"}
	size := int64(len(mustEncode(chunk))) + EventOverhead
	l := NewMemoryLog(MemoryLogOptions{MaxBytes: 4 * size})

	textRun(t, l, "old", 2)
	if err := l.Close(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	textRun(t, l, "a", 2)
	// "a" needs room that only dropping the closed run "old" gives.
	if _, err := l.Append(ctx, "a", chunk); err != nil {
		t.Fatalf("Append with a closed run to drop: %v", err)
	}
	if _, err := l.Stat(ctx, "old"); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("closed run kept: %v", err)
	}
	textRun(t, l, "b", 1)
	// Open runs alone fill the log now.
	if _, err := l.Append(ctx, "b", chunk); !errors.Is(err, ErrLogFull) {
		t.Fatalf("Append past the total bound: %v, want ErrLogFull", err)
	}
	if st, err := l.Stat(ctx, "b"); err != nil || !st.Closed {
		t.Errorf("overflowed run: %+v, %v; want closed", st, err)
	}
	if st, err := l.Stat(ctx, "a"); err != nil || st.Closed {
		t.Errorf("other run: %+v, %v; want open", st, err)
	}
}

func TestMemoryLogRetention(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	l := NewMemoryLog(MemoryLogOptions{Retention: time.Minute, Now: clock.Now})
	textRun(t, l, "closed", 2)
	textRun(t, l, "open", 2)
	if err := l.Close(ctx, "closed"); err != nil {
		t.Fatal(err)
	}

	// A reader that starts before expiry finishes after it.
	readCtx, stopReading := context.WithCancel(ctx)
	defer stopReading()
	next := iterPull(readCtx, l, "closed")
	if _, err := next(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Minute - time.Nanosecond)
	if _, err := l.Stat(ctx, "closed"); err != nil {
		t.Fatalf("closed run gone before its retention: %v", err)
	}
	clock.Advance(time.Nanosecond)
	if _, err := l.Stat(ctx, "closed"); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("closed run after retention: %v, want ErrRunNotFound", err)
	}
	if _, _, err := readAll(ctx, l, "closed", 0); !errors.Is(err, ErrRunNotFound) {
		t.Errorf("Read after retention: %v, want ErrRunNotFound", err)
	}
	if ev, err := next(); err != nil || ev.Seq != 2 {
		t.Errorf("reader that started in time: %v, %v; want event 2", ev, err)
	}
	clock.Advance(24 * time.Hour)
	if _, err := l.Stat(ctx, "open"); err != nil {
		t.Errorf("open run expired: %v", err)
	}
	if err := l.Open(ctx, "closed"); err != nil {
		t.Errorf("reopening an expired run id: %v", err)
	}
}

// iterPull reads runID from the start one event at a time, until ctx is
// done.
func iterPull(ctx context.Context, l EventLog, runID string) (next func() (Event, error)) {
	ch := make(chan readResult)
	go func() {
		defer close(ch)
		for ev, err := range l.Read(ctx, runID, 0) {
			select {
			case ch <- readResult{ev, err}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() (Event, error) {
		r, ok := <-ch
		if !ok {
			return Event{}, errors.New("end of run")
		}
		return r.ev, r.err
	}
}

type readResult struct {
	ev  Event
	err error
}
