package deploy

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web/runlease"
)

// runDeadline bounds one run, whoever is or is not listening.
const runDeadline = 10 * time.Minute

// RunHost is the one host of detached runs — chat turns and workflow
// runs share launch, resume and stop. Each run is claimed in the
// deployment's run registry under a key (a chat's thread key,
// "workflow-run:<id>"), so one run per key is active across every
// replica; it runs detached from the request that started it; a stop from
// any replica reaches it through its lease; and on a registry whose
// claims can lapse (Redis), the host ends the runs whose replica died: an
// error chunk, then the log closes, so every reader's stream ends.
type RunHost struct {
	ctx      context.Context // runs derive from it; cancelled by StopAll
	cancel   context.CancelFunc
	reg      runlease.Registry
	events   stream.EventLog
	log      *slog.Logger
	onLapsed func(ctx context.Context, c runlease.Claim) // after a dead run's log was ended (may be nil)
	// t are the host's clock and waits, defaults filled in. WatchEvery is
	// 0 on a registry whose claims do not lapse: streams are not watched.
	t RunTimings
	// fencer, on a registry whose claims can lapse, names the store key
	// holding a key's claim, for writes fenced on it (nil: none).
	fencer runlease.Fencer
	// lapsedText is the error a dead replica's run of key ends with.
	lapsedText func(key string) string
	sweeps     sync.WaitGroup

	mu    sync.Mutex
	local map[string]*Run // the runs of this process, by key
	idle  chan struct{}   // closed (and replaced) when a run ends, to wake WaitIdle
}

// Run is a run of this process.
type Run struct {
	key, id string
	ctx     context.Context
	cancel  context.CancelFunc
	lease   runlease.Lease
	done    chan struct{} // closed once the run has ended and released its claim
}

// ID is the run's id.
func (r *Run) ID() string { return r.id }

// sweepEvery is how often a host looks for runs whose replica died: a
// fifteenth of the lease, at most a second, so such a run ends within
// the lease of the holder's last renewal plus about a second. A sweep is
// one short script, whatever the number of claims.
func sweepEvery(lease time.Duration) time.Duration {
	if lease <= 0 {
		lease = runlease.DefaultLease
	}
	return max(min(lease/15, time.Second), 100*time.Millisecond)
}

// RunTimings are a run host's clock and waits. The zero value means the
// defaults.
type RunTimings struct {
	// Clock is the host's time: the release wait's deadline, the
	// backoff while a store fails, how long a run has been orphaned.
	// Zero: the system clock.
	Clock tools.Clock
	// StoreWait bounds how long the end of a run — what it leaves, its
	// log's end, its claim's release — and a sweep's end of dead runs
	// wait out a failing store. Zero: 10 s.
	StoreWait time.Duration
	// CheckTimeout bounds one look-up of a key's holder: before a save a
	// store cannot fence, and each check of a follower's watch. Zero: 5 s.
	CheckTimeout time.Duration
	// StopWait bounds how long a stop waits for its run to end. Zero: 10 s.
	StopWait time.Duration
	// ReleaseWait bounds how long a claim waits for a run that ended its
	// log to release the key. Zero: 2 s.
	ReleaseWait time.Duration
	// WatchEvery is how often a follower's stream checks that its run
	// still holds its claim, or has ended its log. Zero: the lease. A
	// registry whose claims do not lapse (one process) is never watched.
	WatchEvery time.Duration
	// OrphanAfter is how long a run may be neither claimed nor ended
	// before its followers are told it is gone. Zero: the lease plus the
	// store wait plus 5 s (past the sweep that ends a dead replica's run,
	// and the store wait of a finishing run or of that sweep).
	OrphanAfter time.Duration
}

// withDefaults fills the zero fields; lapses says whether the registry's
// claims can lapse (only then are streams watched).
func (t RunTimings) withDefaults(lease time.Duration, lapses bool) RunTimings {
	if t.Clock == nil {
		t.Clock = tools.SystemClock()
	}
	t.StoreWait = cmp.Or(t.StoreWait, 10*time.Second)
	t.CheckTimeout = cmp.Or(t.CheckTimeout, 5*time.Second)
	t.StopWait = cmp.Or(t.StopWait, 10*time.Second)
	t.ReleaseWait = cmp.Or(t.ReleaseWait, 2*time.Second)
	if !lapses {
		t.WatchEvery, t.OrphanAfter = 0, 0
		return t
	}
	if lease <= 0 {
		lease = runlease.DefaultLease
	}
	t.WatchEvery = cmp.Or(t.WatchEvery, lease)
	t.OrphanAfter = cmp.Or(t.OrphanAfter, lease+t.StoreWait+5*time.Second)
	return t
}

// runHostOptions are what a run host is built from.
type runHostOptions struct {
	Registry runlease.Registry
	Events   stream.EventLog
	Logger   *slog.Logger
	// Lease is the registry's lease. Zero: runlease.DefaultLease.
	Lease time.Duration
	// OnLapsed runs after a dead replica's run had its log ended. Zero:
	// nothing more.
	OnLapsed func(ctx context.Context, c runlease.Claim)
	// LapsedText is the error a dead replica's run of key ends with.
	// Zero: lapsedRunText.
	LapsedText func(key string) string
	Timings    RunTimings
}

func newRunHost(base context.Context, opt runHostOptions) *RunHost {
	h := &RunHost{reg: opt.Registry, events: opt.Events, log: opt.Logger, onLapsed: opt.OnLapsed, lapsedText: opt.LapsedText,
		local: map[string]*Run{}}
	if h.log == nil {
		h.log = slog.Default()
	}
	h.ctx, h.cancel = context.WithCancel(base)
	h.fencer, _ = h.reg.(runlease.Fencer)
	sw, lapses := h.reg.(runlease.Sweeper)
	h.t = opt.Timings.withDefaults(opt.Lease, lapses)
	if lapses {
		h.sweeps.Add(1)
		go h.sweep(sw, sweepEvery(opt.Lease))
	}
	return h
}

// Claim claims key for a new run with id runID. It fails with a
// *runlease.HeldError when another run holds key on any replica. The
// run's context carries the request's ids but not its cancellation.
func (h *RunHost) Claim(req context.Context, key, runID string) (*Run, error) {
	lease, err := h.acquire(req, key, runID)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(carryRequest(h.ctx, req), runDeadline)
	r := &Run{key: key, id: runID, ctx: ctx, cancel: cancel, lease: lease, done: make(chan struct{})}
	h.mu.Lock()
	h.local[key] = r
	h.mu.Unlock()
	return r, nil
}

// acquire claims key. A holder whose log has already ended is releasing
// its claim (a run closes its log first, then releases): a client that
// read a stream to its end and at once starts the next turn waits for
// that release (up to ReleaseWait) rather than getting a 409. A holder
// that was gone by the time the registry looked it up (it released the
// key between the two) is no holder: the claim is tried again.
func (h *RunHost) acquire(ctx context.Context, key, runID string) (runlease.Lease, error) {
	deadline := h.t.Clock.Now().Add(h.t.ReleaseWait)
	for {
		lease, err := h.reg.Acquire(ctx, key, runID)
		var held *runlease.HeldError
		if !errors.As(err, &held) || h.t.Clock.Now().After(deadline) {
			return lease, err
		}
		if held.RunID != "" {
			st, serr := h.events.Stat(ctx, held.RunID)
			if serr != nil || !st.Closed {
				return nil, err // running (or unknown): a real conflict
			}
		}
		if h.t.Clock.Sleep(ctx, 20*time.Millisecond) != nil {
			return nil, err
		}
	}
}

// Drop gives up a claimed run that did not start.
func (h *RunHost) Drop(r *Run) {
	r.cancel()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), h.t.StoreWait)
	defer cancel()
	if err := r.lease.Release(ctx); err != nil {
		h.log.Warn("releasing a run claim", "run", r.id, "err", err)
	}
	h.remove(r)
	close(r.done)
}

// Start runs fn detached from the request, until fn returns; its context
// ends with a stop from any replica, a lost claim, the deadline or the
// end of the shutdown grace. Then the run's log is closed and its claim
// released, in that order: a replica that sees the claim gone finds the
// log ended.
func (h *RunHost) Start(r *Run, fn func(ctx context.Context)) {
	go func() {
		select {
		case <-r.lease.Done():
			if err := r.lease.Err(); errors.Is(err, runlease.ErrLost) {
				h.log.Warn("run claim lost: ending the run", "run", r.id, "err", err)
			}
			r.cancel()
		case <-r.ctx.Done():
		}
	}()
	go func() {
		defer h.finish(r)
		fn(r.ctx)
	}()
}

func (h *RunHost) finish(r *Run) {
	r.cancel()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.ctx), h.t.StoreWait)
	defer cancel()
	// Every follower waits for the log's end: a store failing for a
	// moment (an outage, a full Redis) is waited out, within StoreWait.
	if err := h.retryStore(ctx, func() error { return h.events.Close(ctx, r.id) }); err != nil {
		h.log.Error("closing run log", "run", r.id, "err", err)
	}
	if err := h.retryStore(ctx, func() error { return r.lease.Release(ctx) }); err != nil {
		h.log.Warn("releasing a run claim", "run", r.id, "err", err)
	}
	h.remove(r)
	close(r.done)
}

func (h *RunHost) remove(r *Run) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.local[r.key] == r {
		delete(h.local, r.key)
	}
	if h.idle != nil {
		close(h.idle)
		h.idle = nil
	}
}

// Active is the run holding key on any replica ("" when none).
func (h *RunHost) Active(ctx context.Context, key string) (string, error) {
	return h.reg.Active(ctx, key)
}

// SaveHeld writes a run's state only while runID holds key, so a run cut
// off or paused past its lease cannot write over what the key's next run
// wrote: runlease.ErrFenced when it does not hold it. fenced (nil when
// the store cannot fence) writes with the check inside the store's own
// write, given the registry's fence key (runlease.Fencer), and reports
// whether it wrote; otherwise the holder is looked up, then plain writes
// (in one process the look-up is exact).
func (h *RunHost) SaveHeld(ctx context.Context, key, runID string, fenced func(fenceKey string) (bool, error), plain func() error) error {
	if fenced != nil && h.fencer != nil {
		written, err := fenced(h.fencer.FenceKey(key))
		if err == nil && !written {
			return runlease.ErrFenced
		}
		return err
	}
	if err := h.holds(ctx, key, runID); err != nil {
		return err
	}
	return plain()
}

// holds checks that runID still holds key in the registry (on Redis, one
// GET), so that a run cut off past its lease does not write over state
// another replica's run wrote since: runlease.ErrFenced when it does not.
func (h *RunHost) holds(ctx context.Context, key, runID string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.t.CheckTimeout)
	defer cancel()
	holder, err := h.reg.Active(ctx, key)
	switch {
	case err != nil:
		return err
	case holder != runID:
		return runlease.ErrFenced
	}
	return nil
}

// ActiveKeys are the keys with a run on any replica that begin with
// prefix.
func (h *RunHost) ActiveKeys(ctx context.Context, prefix string) ([]string, error) {
	return h.reg.ActiveKeys(ctx, prefix)
}

// ErrOrphaned ends the stream of a run that neither holds its claim nor
// ended its log.
var ErrOrphaned = errors.New("the run's log was left open")

// WatchOrphan checks every WatchEvery, on a timer rather than a
// goroutine of its own, whether runID still holds key or has ended its
// log, and cancels ctx with ErrOrphaned once it has done neither for
// OrphanAfter. A check the store fails counts for nothing. On a registry
// whose claims do not lapse it watches nothing.
func (h *RunHost) WatchOrphan(ctx context.Context, cancel context.CancelCauseFunc, key, runID string) (stop func()) {
	if h.t.WatchEvery <= 0 {
		return func() {}
	}
	var (
		mu      sync.Mutex
		t       *time.Timer
		stopped bool
		since   time.Time // when the run was first seen neither claimed nor ended
	)
	check := func() {
		cctx, ccancel := context.WithTimeout(ctx, h.t.CheckTimeout)
		defer ccancel()
		holder, err := h.reg.Active(cctx, key)
		switch {
		case err != nil || holder == runID:
			since = time.Time{}
		default:
			st, err := h.events.Stat(cctx, runID)
			switch {
			case err != nil && !errors.Is(err, stream.ErrRunNotFound), err == nil && st.Closed:
				since = time.Time{}
			case since.IsZero():
				since = h.t.Clock.Now()
			case h.t.Clock.Now().Sub(since) >= h.t.OrphanAfter:
				cancel(ErrOrphaned)
				return
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			t.Reset(h.t.WatchEvery)
		}
	}
	mu.Lock()
	t = time.AfterFunc(h.t.WatchEvery, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		t.Stop()
	}
}

// Stop asks the run holding key to stop, wherever it runs, and waits (up
// to StopWait) until it no longer holds key: stopped reports whether a
// run held key, ended whether it let go within the wait — it ended, or
// its claim lapsed (a holder paused or cut off from the store), after
// which its saves are refused and the sweep ends its stream.
func (h *RunHost) Stop(ctx context.Context, key string) (stopped, ended bool, err error) {
	runID, err := h.reg.Active(ctx, key)
	if err != nil || runID == "" {
		return false, false, err
	}
	held, err := h.reg.Stop(ctx, key, runID)
	if err != nil || !held {
		return false, false, err
	}
	wctx, cancel := context.WithTimeout(ctx, h.t.StopWait)
	defer cancel()
	switch err := h.reg.Wait(wctx, key, runID); {
	case err == nil:
		return true, true, nil
	case errors.Is(err, context.DeadlineExceeded):
		return true, false, nil
	default:
		return true, false, err
	}
}

// Count is how many runs this process runs (0 on a nil host: a
// deployment that runs none).
func (h *RunHost) Count() int {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.local)
}

// WaitIdle waits until this process runs nothing or d has passed (d < 0:
// no limit); it reports whether it runs nothing.
func (h *RunHost) WaitIdle(d time.Duration) bool {
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	for {
		h.mu.Lock()
		if len(h.local) == 0 {
			h.mu.Unlock()
			return true
		}
		if h.idle == nil {
			h.idle = make(chan struct{})
		}
		wake := h.idle
		h.mu.Unlock()
		select {
		case <-wake:
		case <-timeout:
			return false
		}
	}
}

// StopAll cancels every run of this process and waits until each has
// saved its state, closed its log and released its claim; then it stops
// sweeping.
func (h *RunHost) StopAll() {
	h.cancel()
	h.mu.Lock()
	for _, r := range h.local {
		r.cancel()
	}
	h.mu.Unlock()
	h.WaitIdle(-1)
	h.sweeps.Wait()
}

// sweep ends, every interval, the runs whose replica died. A registry
// that fails is logged once, and once more when it works again, not at
// every sweep (an outage shows in /readyz and as 503s).
func (h *RunHost) sweep(sw runlease.Sweeper, every time.Duration) {
	defer h.sweeps.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		claims, err := sw.Lapsed(h.ctx)
		if err != nil {
			if h.ctx.Err() == nil && !failing {
				h.log.Warn("looking for runs whose replica died (not logged again until it works)", "err", err)
			}
			failing = true
			continue
		}
		if failing {
			h.log.Info("looking for runs whose replica died works again")
			failing = false
		}
		// The claims handed to this replica are ended within one bound,
		// however many there are and however the store fares meanwhile.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(h.ctx), h.t.StoreWait)
		for _, c := range claims {
			h.endLapsed(ctx, c)
		}
		cancel()
	}
}

// Errors a dead replica's run ends with: a chat turn's, any other run's.
const (
	lapsedTurnText = "the server running this turn stopped before it finished; what it had done so far is saved — send the message again to continue"
	lapsedRunText  = "the server running this run stopped before it finished; start the run again"
)

// endLapsed ends the log of a run whose replica died (this replica was
// handed the claim alone): an error chunk, then the end. No other replica
// will be handed the claim again, so a store that fails meanwhile is
// retried until ctx ends rather than leaving the run's followers waiting
// on a log nobody closes.
func (h *RunHost) endLapsed(ctx context.Context, c runlease.Claim) {
	var st stream.RunState
	err := h.retryStore(ctx, func() (err error) {
		st, err = h.events.Stat(ctx, c.RunID)
		return err
	})
	switch {
	case errors.Is(err, stream.ErrRunNotFound):
		return
	case err != nil:
		h.log.Warn("ending a dead replica's run", "run", c.RunID, "err", err)
		return
	}
	if !st.Closed {
		text := lapsedRunText
		if h.lapsedText != nil {
			text = h.lapsedText(c.Key)
		}
		err := h.retryStore(ctx, func() error {
			_, err := h.events.Append(ctx, c.RunID, stream.Error{ErrorText: text})
			return err
		})
		if err != nil && !errors.Is(err, stream.ErrRunClosed) {
			h.log.Warn("ending a dead replica's run", "run", c.RunID, "err", err)
		}
		if err := h.retryStore(ctx, func() error { return h.events.Close(ctx, c.RunID) }); err != nil {
			h.log.Warn("ending a dead replica's run", "run", c.RunID, "err", err)
		}
		h.log.Info("ended a run whose replica stopped renewing its claim", "run", c.RunID, "key", c.Key)
	}
	if h.onLapsed != nil {
		h.onLapsed(ctx, c)
	}
}

// retryStore runs f until it does not fail with ErrStoreUnavailable, or
// ctx ends: a short outage of the store is waited out.
func (h *RunHost) retryStore(ctx context.Context, f func() error) error {
	wait := 100 * time.Millisecond
	for {
		err := f()
		if !errors.Is(err, ErrStoreUnavailable) {
			return err
		}
		if h.t.Clock.Sleep(ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, time.Second)
	}
}

// EndRun writes what a run leaves once its work has returned, for turns
// and workflow runs alike. On a context of its own (a cancelled run is
// still saved), within StoreWait, waiting out a short store outage, it
// appends last to the run's log (why the run ended, for its followers;
// nil: nothing), then calls save, which writes the run's state only while
// the run holds its claim (SaveHeld). A save refused because the run lost
// its claim is logged as such, any other failure as an error; what names
// the state in the log.
func (h *RunHost) EndRun(ctx context.Context, key, runID, what string, last stream.Chunk, save func(ctx context.Context) error) {
	ectx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.t.StoreWait)
	defer cancel()
	if last != nil {
		_ = h.retryStore(ectx, func() error {
			_, err := h.events.Append(ectx, runID, last)
			return err
		})
	}
	switch err := h.retryStore(ectx, func() error { return save(ectx) }); {
	case errors.Is(err, runlease.ErrFenced):
		h.log.WarnContext(ctx, "not saving the "+what+": the run lost its claim, and another replica may have taken the key or ended the run", "key", key, "run", runID)
	case err != nil:
		h.log.ErrorContext(ctx, "saving the "+what, "key", key, "run", runID, "err", err)
	}
}
