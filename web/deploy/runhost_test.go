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

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/runlease"
)

// failingSweeper is a registry whose sweep fails until healed.
type failingSweeper struct {
	*runlease.Memory
	healed, calls atomic.Int32
}

func (f *failingSweeper) Lapsed(context.Context) ([]runlease.Claim, error) {
	f.calls.Add(1)
	if f.healed.Load() == 0 {
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
	reg := &failingSweeper{Memory: runlease.NewMemory()}
	h := newRunHost(context.Background(), runHostOptions{Registry: reg, Events: stream.NewMemoryLog(stream.MemoryLogOptions{}), Logger: log, Lease: time.Second})
	waitCalls := func(n int32) {
		for deadline := time.Now().Add(10 * time.Second); reg.calls.Load() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("%d sweeps, want %d", reg.calls.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitCalls(5)
	reg.healed.Store(1)
	waitCalls(reg.calls.Load() + 2)
	h.StopAll()
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
	h := newRunHost(ctx, runHostOptions{Registry: runlease.NewMemory(), Events: log, Logger: slog.New(slog.DiscardHandler), Lease: time.Second})
	defer h.StopAll()
	h.endLapsed(ctx, runlease.Claim{Key: "u=;a=demo;c=c1", RunID: "run_1"})
	st, err := log.Stat(ctx, "run_1")
	if err != nil || !st.Closed || st.LastSeq != 1 {
		t.Fatalf("the dead run's log: %+v %v; want it closed after one error chunk", st, err)
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
			fenced := func(fenceKey string) (bool, error) {
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
