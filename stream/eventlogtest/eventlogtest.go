// Package eventlogtest is the conformance suite of stream.EventLog: every
// implementation (the in-process MemoryLog, the Redis Streams one) runs
// it, so they behave the same.
package eventlogtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream"
)

// Options are what a test asks of a new log.
type Options struct {
	MaxRunBytes int64         // zero: the implementation's default
	Retention   time.Duration // zero: the implementation's default
}

// New returns an empty log with opts, for t alone.
type New func(t *testing.T, opts Options) stream.EventLog

// Run runs the suite against logs made by newLog.
func Run(t *testing.T, newLog New) {
	t.Run("ResumeFromEveryID", func(t *testing.T) { resumeEveryID(t, newLog) })
	t.Run("Errors", func(t *testing.T) { errorsContract(t, newLog) })
	t.Run("Live", func(t *testing.T) { live(t, newLog) })
	t.Run("ConcurrentAppends", func(t *testing.T) { concurrentAppends(t, newLog) })
	t.Run("RunBound", func(t *testing.T) { runBound(t, newLog) })
	t.Run("Retention", func(t *testing.T) { retention(t, newLog) })
	t.Run("Cancel", func(t *testing.T) { cancel(t, newLog) })
	t.Run("RunsAreSeparate", func(t *testing.T) { separate(t, newLog) })
	t.Run("DataRoundTrip", func(t *testing.T) { dataRoundTrip(t, newLog) })
}

// dataRoundTrip: every event reads back byte for byte as stream.Encode
// made it, whatever the text (control characters, invalid UTF-8, large).
func dataRoundTrip(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	ctx := ctxT(t)
	texts := []string{"", "\x00\n\r\t\"\\", "é🙂\u2028\u2029", "\xff\xfe bad utf-8", strings.Repeat("長", 40000), "</script>"}
	if err := l.Open(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, text := range texts {
		c := stream.TextDelta{ID: fmt.Sprint("t", i), Delta: text}
		enc, err := stream.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(enc))
		if _, err := l.Append(ctx, "run", c); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	_, got, err := ReadAll(ctx, l, "run", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("events changed on the way through the log")
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// textRun opens runID and appends n text deltas "0", "1", …
func textRun(t *testing.T, l stream.EventLog, runID string, n int) {
	t.Helper()
	ctx := ctxT(t)
	if err := l.Open(ctx, runID); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		seq, err := l.Append(ctx, runID, stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		if seq != int64(i+1) {
			t.Fatalf("Append #%d: seq %d", i+1, seq)
		}
	}
}

// ReadAll reads runID after Seq after until the end or an error.
func ReadAll(ctx context.Context, l stream.EventLog, runID string, after int64) ([]int64, []string, error) {
	return ReadAllSeen(ctx, l, runID, after, nil)
}

// ReadAllSeen is ReadAll sending the Seq of each event read to seen (when
// not nil): a test waits on it for a reader to have caught up before it
// appends more, rather than sleeping and hoping it has.
func ReadAllSeen(ctx context.Context, l stream.EventLog, runID string, after int64, seen chan<- int64) ([]int64, []string, error) {
	var seqs []int64
	var data []string
	for ev, err := range l.Read(ctx, runID, after) {
		if err != nil {
			return seqs, data, err
		}
		seqs = append(seqs, ev.Seq)
		data = append(data, string(ev.Data))
		if seen != nil {
			seen <- ev.Seq
		}
	}
	return seqs, data, nil
}

// WaitSeen waits until seen has carried seq (or ctx ends).
func WaitSeen(t *testing.T, ctx context.Context, seen <-chan int64, seq int64) {
	t.Helper()
	for {
		select {
		case s := <-seen:
			if s >= seq {
				return
			}
		case <-ctx.Done():
			t.Fatalf("the reader never read event %d: %v", seq, ctx.Err())
		}
	}
}

func seqRange(from, to int64) []int64 {
	s := []int64{}
	for i := from; i <= to; i++ {
		s = append(s, i)
	}
	return s
}

func delta(t *testing.T, data string) string {
	t.Helper()
	c, err := stream.ParseChunk([]byte(data))
	if err != nil {
		t.Fatalf("event %s: %v", data, err)
	}
	d, ok := c.(stream.TextDelta)
	if !ok {
		t.Fatalf("event %s is a %s, want a text delta", data, c.Type())
	}
	return d.Delta
}

func resumeEveryID(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	ctx := ctxT(t)
	const n = 25
	textRun(t, l, "run", n)
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	for after := int64(0); after <= n; after++ {
		seqs, data, err := ReadAll(ctx, l, "run", after)
		if err != nil {
			t.Fatalf("after %d: %v", after, err)
		}
		if want := seqRange(after+1, n); !slices.Equal(seqs, want) && !(len(seqs) == 0 && len(want) == 0) {
			t.Fatalf("after %d: seqs %v, want %v", after, seqs, want)
		}
		for i, d := range data {
			if got, want := delta(t, d), fmt.Sprint(int(after)+i); got != want {
				t.Fatalf("after %d: event %d is %q, want %q", after, seqs[i], got, want)
			}
		}
	}
	st, err := l.Stat(ctx, "run")
	if err != nil || st != (stream.RunState{LastSeq: n, Closed: true}) {
		t.Fatalf("Stat: %+v, %v", st, err)
	}
}

func errorsContract(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	ctx := ctxT(t)
	textRun(t, l, "run", 3)
	if err := l.Open(ctx, "run"); !errors.Is(err, stream.ErrRunExists) {
		t.Errorf("Open twice: %v, want ErrRunExists", err)
	}
	if _, err := l.Append(ctx, "nope", stream.TextDelta{ID: "t", Delta: "x"}); !errors.Is(err, stream.ErrRunNotFound) {
		t.Errorf("Append to unknown: %v, want ErrRunNotFound", err)
	}
	if _, _, err := ReadAll(ctx, l, "nope", 0); !errors.Is(err, stream.ErrRunNotFound) {
		t.Errorf("Read unknown: %v, want ErrRunNotFound", err)
	}
	if _, err := l.Stat(ctx, "nope"); !errors.Is(err, stream.ErrRunNotFound) {
		t.Errorf("Stat unknown: %v, want ErrRunNotFound", err)
	}
	if err := l.Close(ctx, "nope"); !errors.Is(err, stream.ErrRunNotFound) {
		t.Errorf("Close unknown: %v, want ErrRunNotFound", err)
	}
	for _, after := range []int64{-1, 4, 1 << 40} {
		if _, _, err := ReadAll(ctx, l, "run", after); !errors.Is(err, stream.ErrUnknownEventID) {
			t.Errorf("Read after %d: %v, want ErrUnknownEventID", after, err)
		}
	}
	if st, err := l.Stat(ctx, "run"); err != nil || st != (stream.RunState{LastSeq: 3}) {
		t.Errorf("Stat open run: %+v, %v", st, err)
	}
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx, "run"); err != nil {
		t.Errorf("Close twice: %v", err)
	}
	if _, err := l.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: "x"}); !errors.Is(err, stream.ErrRunClosed) {
		t.Errorf("Append after Close: %v, want ErrRunClosed", err)
	}
	if err := l.Open(ctx, "run"); !errors.Is(err, stream.ErrRunExists) {
		t.Errorf("Open a closed run: %v, want ErrRunExists", err)
	}
	if st, err := l.Stat(ctx, "run"); err != nil || st != (stream.RunState{LastSeq: 3, Closed: true}) {
		t.Errorf("Stat closed run: %+v, %v", st, err)
	}
}

func live(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	ctx := ctxT(t)
	textRun(t, l, "run", 2)
	type result struct {
		seqs []int64
		err  error
	}
	const readers = 3
	got := make(chan result, readers)
	seen := make([]chan int64, readers)
	for i := range readers {
		seen[i] = make(chan int64, 16)
		go func() {
			seqs, _, err := ReadAllSeen(ctx, l, "run", 1, seen[i])
			got <- result{seqs, err}
		}()
	}
	// In lockstep: each event is appended once every reader has read
	// the one before, so every reader reads each one live.
	for r := range readers {
		WaitSeen(t, ctx, seen[r], 2)
	}
	for i := range 10 {
		seq, err := l.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprint(i)})
		if err != nil {
			t.Fatal(err)
		}
		for r := range readers {
			WaitSeen(t, ctx, seen[r], seq)
		}
	}
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	for range readers {
		r := <-got
		if r.err != nil || !slices.Equal(r.seqs, seqRange(2, 12)) {
			t.Errorf("live reader: %v, %v; want 2…12", r.seqs, r.err)
		}
	}
}

func concurrentAppends(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	ctx := ctxT(t)
	textRun(t, l, "run", 0)
	const writers, each = 8, 40
	reader := make(chan []string, 1)
	go func() {
		_, data, err := ReadAll(ctx, l, "run", 0)
		if err != nil {
			t.Error(err)
		}
		reader <- data
	}()
	var wg sync.WaitGroup
	seqs := make([][]int64, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				seq, err := l.Append(ctx, "run", stream.TextDelta{ID: "t", Delta: fmt.Sprintf("%d.%d", w, i)})
				if err != nil {
					t.Error(err)
					return
				}
				seqs[w] = append(seqs[w], seq)
			}
		})
	}
	wg.Wait()
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	var all []int64
	for w := range writers {
		if !slices.IsSorted(seqs[w]) {
			t.Errorf("writer %d got seqs out of order: %v", w, seqs[w])
		}
		all = append(all, seqs[w]...)
	}
	slices.Sort(all)
	if !slices.Equal(all, seqRange(1, writers*each)) {
		t.Fatalf("seqs handed out: %v, want 1…%d each once", all, writers*each)
	}
	data := <-reader
	if len(data) != writers*each {
		t.Fatalf("reader saw %d events, want %d", len(data), writers*each)
	}
	// Each writer's events appear in its own order.
	next := make([]int, writers)
	for _, d := range data {
		var w, i int
		if _, err := fmt.Sscanf(delta(t, d), "%d.%d", &w, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[w] {
			t.Fatalf("writer %d: event %d read before %d", w, i, next[w])
		}
		next[w]++
	}
}

func runBound(t *testing.T, newLog New) {
	ctx := ctxT(t)
	chunk := stream.TextDelta{ID: "t", Delta: strings.Repeat("x", 100)}
	enc, err := stream.Encode(chunk)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(len(enc)) + stream.EventOverhead
	l := newLog(t, Options{MaxRunBytes: 3 * size})
	textRun(t, l, "run", 0)
	done := make(chan []string, 1)
	go func() {
		_, data, err := ReadAll(ctx, l, "run", 0)
		if err != nil {
			t.Error(err)
		}
		done <- data
	}()
	for i := range 3 {
		if _, err := l.Append(ctx, "run", chunk); err != nil {
			t.Fatalf("Append %d: %v", i+1, err)
		}
	}
	if _, err := l.Append(ctx, "run", chunk); !errors.Is(err, stream.ErrLogFull) {
		t.Fatalf("Append past the bound: %v, want ErrLogFull", err)
	}
	if _, err := l.Append(ctx, "run", chunk); !errors.Is(err, stream.ErrRunClosed) {
		t.Fatalf("Append after overflow: %v, want ErrRunClosed", err)
	}
	data := <-done // the reader ends without a Close: the overflow closed the run
	if len(data) != 4 {
		t.Fatalf("reader saw %d events, want 3 and the error", len(data))
	}
	want, _ := stream.Encode(stream.OverflowChunk)
	if data[3] != string(want) {
		t.Errorf("last event %s, want %s", data[3], want)
	}
	if st, err := l.Stat(ctx, "run"); err != nil || st != (stream.RunState{LastSeq: 4, Closed: true}) {
		t.Errorf("Stat: %+v, %v", st, err)
	}
}

func retention(t *testing.T, newLog New) {
	const keep = 300 * time.Millisecond
	l := newLog(t, Options{Retention: keep})
	ctx := ctxT(t)
	textRun(t, l, "run", 2)
	textRun(t, l, "open", 1)
	if err := l.Close(ctx, "run"); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	if seqs, _, err := ReadAll(ctx, l, "run", 0); err != nil || len(seqs) != 2 {
		t.Fatalf("closed run within retention: %v, %v", seqs, err)
	}
	time.Sleep(time.Until(closed.Add(keep + 200*time.Millisecond)))
	if _, _, err := ReadAll(ctx, l, "run", 0); !errors.Is(err, stream.ErrRunNotFound) {
		t.Errorf("closed run past retention: %v, want ErrRunNotFound", err)
	}
	if _, err := l.Stat(ctx, "open"); err != nil {
		t.Errorf("an open run is kept past the retention of closed ones: %v", err)
	}
}

func cancel(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	textRun(t, l, "run", 1)
	ctx, stop := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	first := make(chan struct{})
	go func() {
		n := 0
		for ev, err := range l.Read(ctx, "run", 0) {
			if err != nil {
				if n != 1 {
					t.Errorf("read %d events before the cancel, want 1", n)
				}
				errc <- err
				return
			}
			if n++; ev.Seq == 1 {
				close(first)
			}
		}
		errc <- errors.New("the read ended without an error")
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not get the first event")
	}
	// Most likely waiting for the next event by now (no log says when it
	// waits); a reader cancelled just before it waits ends the same way.
	time.Sleep(20 * time.Millisecond)
	stop()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled reader ended with %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled reader did not stop")
	}
}

func separate(t *testing.T, newLog New) {
	l := newLog(t, Options{})
	ctx := ctxT(t)
	textRun(t, l, "a", 3)
	textRun(t, l, "b", 1)
	for _, id := range []string{"a", "b"} {
		if err := l.Close(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if seqs, _, err := ReadAll(ctx, l, "b", 0); err != nil || !slices.Equal(seqs, []int64{1}) {
		t.Errorf("run b: %v, %v", seqs, err)
	}
	if _, _, err := ReadAll(ctx, l, "b", 2); !errors.Is(err, stream.ErrUnknownEventID) {
		t.Errorf("run b after 2 (a has 3): %v, want ErrUnknownEventID", err)
	}
}
