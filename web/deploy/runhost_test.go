package deploy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/runlease"
)

// failingSweeper is a registry whose sweep fails until healed; each sweep
// is signalled on swept.
type failingSweeper struct {
	*runlease.Memory
	healed atomic.Bool
	swept  chan struct{}
}

func (f *failingSweeper) Lapsed(context.Context) ([]runlease.Claim, error) {
	f.swept <- struct{}{}
	if !f.healed.Load() {
		return nil, ErrStoreUnavailable
	}
	return nil, nil
}

// A sweep that keeps failing (Redis down) is logged once, and once when
// it works again — not at every sweep.
func TestSweepFailureLoggedOnce(t *testing.T) {
	// The test reads the log once the host has stopped sweeping.
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	reg := &failingSweeper{Memory: runlease.NewMemory(), swept: make(chan struct{})}
	h := newRunHost(context.Background(), runHostOptions{Registry: reg, Events: stream.NewMemoryLog(stream.MemoryLogOptions{}), Logger: log, Lease: time.Second})
	h.Continue(nil)
	sweeps := func(n int) {
		for range n {
			<-reg.swept
		}
	}
	sweeps(5)
	reg.healed.Store(true)
	sweeps(3) // the sweep that read healed, and two more
	go func() {
		for range reg.swept { // the sweeps until the host stops
		}
	}()
	h.StopAll()
	close(reg.swept)
	out := buf.String()
	if n := strings.Count(out, "looking for runs whose replica died (not logged again"); n != 1 {
		t.Errorf("the failure was logged %d times:\n%s", n, out)
	}
	if n := strings.Count(out, "works again"); n != 1 {
		t.Errorf("the recovery was logged %d times:\n%s", n, out)
	}
}

// flakyLog fails its first appends and closes as a store that is briefly
// away does.
type flakyLog struct {
	*stream.MemoryLog
	fails atomic.Int32
}

func (l *flakyLog) Append(ctx context.Context, runID string, c stream.Chunk) (int64, error) {
	if l.fails.Add(-1) >= 0 {
		return 0, ErrStoreUnavailable
	}
	return l.MemoryLog.Append(ctx, runID, c)
}

func (l *flakyLog) Close(ctx context.Context, runID string) error {
	if l.fails.Add(-1) >= 0 {
		return ErrStoreUnavailable
	}
	return l.MemoryLog.Close(ctx, runID)
}

// The replica handed a dead replica's claim ends its log even when the
// store fails for a moment: nobody else will be handed the claim, and
// the run's followers would wait on a log nobody closes.
func TestEndLapsedWaitsOutAShortOutage(t *testing.T) {
	ctx := context.Background()
	log := &flakyLog{MemoryLog: stream.NewMemoryLog(stream.MemoryLogOptions{})}
	if err := log.Open(ctx, "run_1"); err != nil {
		t.Fatal(err)
	}
	log.fails.Store(4)
	clock := paginate.NewFakeClock(time.Now())
	h := newRunHost(ctx, runHostOptions{Registry: runlease.NewMemory(), Events: log, Logger: slog.New(slog.DiscardHandler), Lease: time.Second,
		Timings: RunTimings{Clock: clock}})
	defer h.StopAll()
	h.endLapsed(ctx, runlease.Claim{Key: "u=;a=demo;c=c1", RunID: "run_1"})
	st, err := log.Stat(ctx, "run_1")
	if err != nil || !st.Closed || st.LastSeq != 1 {
		t.Fatalf("the dead run's log: %+v %v; want it closed after one error chunk", st, err)
	}
	if waits := clock.Sleeps(); !slices.Equal(waits, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond}) {
		t.Errorf("waited %v for the store; want a backoff from 100 ms, doubling", waits)
	}
	for ev, err := range log.Read(ctx, "run_1", 0) {
		if err != nil || !strings.Contains(string(ev.Data), "stopped before it finished") {
			t.Errorf("event %s, %v", ev.Data, err)
		}
	}
}

// fencingRegistry is a registry whose claims fence writes, as Redis's
// do: the fence key of k is "fence:"+k.
type fencingRegistry struct{ *runlease.Memory }

func (fencingRegistry) FenceKey(key string) string { return "fence:" + key }

// SaveHeld writes only while the run holds its key: with a registry that
// fences, the store's own fenced write decides (a refused write is
// runlease.ErrFenced); without, the holder is looked up first.
func TestSaveHeld(t *testing.T) {
	ctx := context.Background()
	for _, fences := range []bool{false, true} {
		reg := runlease.NewMemory()
		var r runlease.Registry = reg
		if fences {
			r = fencingRegistry{reg}
		}
		h := newRunHost(ctx, runHostOptions{Registry: r, Events: stream.NewMemoryLog(stream.MemoryLogOptions{}), Logger: slog.New(slog.DiscardHandler)})
		lease, err := reg.Acquire(ctx, "k", "run_1")
		if err != nil {
			t.Fatal(err)
		}
		var wrote []string
		save := func(runID string, holds bool) error {
			fenced := func(fenceKey, _ string) (bool, error) {
				if fenceKey != "fence:k" {
					t.Errorf("fence key %q", fenceKey)
				}
				if holds {
					wrote = append(wrote, "fenced "+runID)
				}
				return holds, nil
			}
			return h.SaveHeld(ctx, "k", runID, fenced, func() error { wrote = append(wrote, "plain "+runID); return nil })
		}
		if err := save("run_1", true); err != nil {
			t.Errorf("fences %v: the holder's save: %v", fences, err)
		}
		if err := save("run_0", false); !errors.Is(err, runlease.ErrFenced) {
			t.Errorf("fences %v: a save of a run that holds nothing: %v, want ErrFenced", fences, err)
		}
		lease.Release(ctx)
		want := []string{"plain run_1"}
		if fences {
			want = []string{"fenced run_1"}
		}
		if !slices.Equal(wrote, want) {
			t.Errorf("fences %v: wrote %q, want %q", fences, wrote, want)
		}
		h.StopAll()
	}
}

// EndRun appends why the run ended and saves its state through a short
// store outage, on a context of its own, and says when the save was
// refused for a lost claim.
func TestEndRun(t *testing.T) {
	ctx := context.Background()
	log := &flakyLog{MemoryLog: stream.NewMemoryLog(stream.MemoryLogOptions{})}
	if err := log.Open(ctx, "run_1"); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	h := newRunHost(ctx, runHostOptions{Registry: runlease.NewMemory(), Events: log, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Timings: RunTimings{Clock: paginate.NewFakeClock(time.Now())}})
	defer h.StopAll()
	log.fails.Store(2)
	saves := 0
	cancelled, stop := context.WithCancel(ctx)
	stop() // a cancelled run is still saved
	h.EndRun(cancelled, "k", "run_1", "thread", stream.Error{ErrorText: "the store failed"}, func(ctx context.Context) error {
		if ctx.Err() != nil {
			t.Errorf("the save's context is done: %v", ctx.Err())
		}
		if saves++; saves == 1 {
			return ErrStoreUnavailable
		}
		return runlease.ErrFenced
	})
	if saves != 2 {
		t.Errorf("%d saves, want the outage waited out and one more", saves)
	}
	if st, err := log.Stat(ctx, "run_1"); err != nil || st.LastSeq != 1 {
		t.Errorf("the run's log: %+v %v; want the error chunk appended through the outage", st, err)
	}
	if !strings.Contains(logs.String(), "not saving the thread: the run lost its claim") {
		t.Errorf("a fenced save is not logged as such:\n%s", logs.String())
	}
}

// releasingRegistry answers the first Acquire as held by nobody: the
// holder released the key between the registry's two looks.
type releasingRegistry struct {
	*runlease.Memory
	raced atomic.Bool
}

func (r *releasingRegistry) Acquire(ctx context.Context, key, runID string) (runlease.Lease, error) {
	if !r.raced.Swap(true) {
		return nil, &runlease.HeldError{Key: key}
	}
	return r.Memory.Acquire(ctx, key, runID)
}

// A claim that meets a holder gone by the time it was looked up tries
// again rather than answering a conflict.
func TestClaimAfterARelease(t *testing.T) {
	ctx := context.Background()
	h := newRunHost(ctx, runHostOptions{Registry: &releasingRegistry{Memory: runlease.NewMemory()}, Events: stream.NewMemoryLog(stream.MemoryLogOptions{}),
		Logger: slog.New(slog.DiscardHandler), Timings: RunTimings{Clock: paginate.NewFakeClock(time.Now())}})
	defer h.StopAll()
	r, err := h.Claim(ctx, "k", "run_2")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	h.Drop(r)
}
