package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
)

// Walks is a loop.SharedWalks that says how many of its callers are
// waiting for a walk another runs, so the suite queues them without
// sleeping.
type Walks interface {
	loop.SharedWalks
	Waiting() int64
}

// WalksSetup is one test's implementation: fresh, sharing nothing with
// another test's.
type WalksSetup struct {
	// Store is the dataset store the walks record complete datasets in
	// (as the DatasetCache's walk does) and waiters read.
	Store loop.DatasetStore
	// Replicas are the implementation as each process sharing Store
	// holds it (one for an in-process implementation); the suite spreads
	// its callers over them.
	Replicas []Walks
	// SharesUnrecorded says that waiters get what the walk returned even
	// when it recorded nothing (a partial walk, an error), as within one
	// process; false: one of them walks in turn, as across processes.
	SharesUnrecorded bool
}

// RunWalks runs the SharedWalks suite.
func RunWalks(t *testing.T, newWalks func(t *testing.T) WalksSetup) {
	t.Run("Collapse", func(t *testing.T) { walksCollapse(t, newWalks(t)) })
	t.Run("Unrecorded", func(t *testing.T) { walksUnrecorded(t, newWalks, false) })
	t.Run("Failed", func(t *testing.T) { walksUnrecorded(t, newWalks, true) })
	t.Run("KeysApart", func(t *testing.T) { walksKeysApart(t, newWalks(t)) })
	t.Run("WaiterLeaves", func(t *testing.T) { walksWaiterLeaves(t, newWalks(t)) })
	t.Run("AfterTheWalk", func(t *testing.T) { walksAgain(t, newWalks(t)) })
}

// heldWalk is a walk that signals its start and waits for release; each
// run is counted.
type heldWalk struct {
	started chan struct{}
	release chan struct{}
	runs    atomic.Int64
	once    sync.Once
}

func newHeldWalk() *heldWalk {
	return &heldWalk{started: make(chan struct{}), release: make(chan struct{})}
}

// run is the first run's walk: it holds until release and then returns
// out (and err); later runs return a complete dataset at once.
func (h *heldWalk) run(s WalksSetup, key string, out *loop.Dataset, err error) func(context.Context) (*loop.Dataset, error) {
	return func(ctx context.Context) (*loop.Dataset, error) {
		if h.runs.Add(1) > 1 {
			return keep(ctx, s, key, dataset(2))
		}
		h.once.Do(func() { close(h.started) })
		select {
		case <-h.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if err != nil {
			return nil, err
		}
		return keep(ctx, s, key, out)
	}
}

// keep stores d when it is complete, as the cache does.
func keep(ctx context.Context, s WalksSetup, key string, d *loop.Dataset) (*loop.Dataset, error) {
	if d.Complete {
		now := time.Now()
		if err := s.Store.Put(ctx, key, d, now, now.Add(time.Hour)); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func waitStarted(t *testing.T, h *heldWalk) {
	t.Helper()
	select {
	case <-h.started:
	case <-time.After(20 * time.Second):
		t.Fatal("the walk never started")
	}
}

// waitQueued waits until n callers wait for another's walk.
func waitQueued(t *testing.T, s WalksSetup, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var got int64
		for _, r := range s.Replicas {
			got += r.Waiting()
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait for the walk; want %d", got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type walkResult struct {
	d   *loop.Dataset
	err error
}

// call runs Do on the replica i picks, in the background.
func call(ctx context.Context, s WalksSetup, i int, key string, walk func(context.Context) (*loop.Dataset, error)) <-chan walkResult {
	out := make(chan walkResult, 1)
	go func() {
		d, err := s.Replicas[i%len(s.Replicas)].Do(ctx, key, walk)
		out <- walkResult{d, err}
	}()
	return out
}

func result(t *testing.T, c <-chan walkResult) walkResult {
	t.Helper()
	select {
	case r := <-c:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("Do never returned")
		return walkResult{}
	}
}

// walksCollapse: concurrent calls with one key, spread over the
// replicas, make one walk, and every caller gets its dataset.
func walksCollapse(t *testing.T, s WalksSetup) {
	ctx := ctxT(t)
	h := newHeldWalk()
	walk := h.run(s, "org:a/k", dataset(3), nil)
	results := []<-chan walkResult{call(ctx, s, 0, "org:a/k", walk)}
	waitStarted(t, h)
	for i := 1; i <= 3; i++ {
		results = append(results, call(ctx, s, i, "org:a/k", walk))
	}
	waitQueued(t, s, 3)
	close(h.release)
	for i, c := range results {
		if r := result(t, c); r.err != nil || r.d == nil || !sameDataset(r.d, dataset(3)) {
			t.Errorf("caller %d: %+v, %v; want the walk's dataset", i, r.d, r.err)
		}
	}
	if n := h.runs.Load(); n != 1 {
		t.Errorf("%d walks for four concurrent calls, want 1", n)
	}
}

// walksUnrecorded: a walk that records nothing — partial, or failed —
// is shared as it is within one process; across processes a waiter
// walks in turn.
func walksUnrecorded(t *testing.T, newWalks func(t *testing.T) WalksSetup, failed bool) {
	s := newWalks(t)
	ctx := ctxT(t)
	h := newHeldWalk()
	partial := dataset(1)
	partial.Complete = false
	var walkErr error
	if failed {
		walkErr = errors.New("upstream said no")
	}
	walk := h.run(s, "org:a/k", partial, walkErr)
	lead := call(ctx, s, 0, "org:a/k", walk)
	waitStarted(t, h)
	waiter := call(ctx, s, 1, "org:a/k", walk)
	waitQueued(t, s, 1)
	close(h.release)
	if r := result(t, lead); failed != (r.err != nil) || (!failed && !sameDataset(r.d, partial)) {
		t.Errorf("the walking caller: %+v, %v", r.d, r.err)
	}
	r := result(t, waiter)
	switch {
	case s.SharesUnrecorded && failed:
		if !errors.Is(r.err, walkErr) {
			t.Errorf("the waiter: %v, want the walk's error", r.err)
		}
	case s.SharesUnrecorded:
		if r.err != nil || !sameDataset(r.d, partial) {
			t.Errorf("the waiter: %+v, %v; want the partial dataset", r.d, r.err)
		}
	default:
		if r.err != nil || !sameDataset(r.d, dataset(2)) {
			t.Errorf("the waiter: %+v, %v; want the dataset of its own walk", r.d, r.err)
		}
	}
	want := int64(2)
	if s.SharesUnrecorded {
		want = 1
	}
	if n := h.runs.Load(); n != want {
		t.Errorf("%d walks, want %d", n, want)
	}
}

// walksKeysApart: calls with other keys never wait for each other.
func walksKeysApart(t *testing.T, s WalksSetup) {
	ctx := ctxT(t)
	first, second := newHeldWalk(), newHeldWalk()
	a := call(ctx, s, 0, "org:a/k1", first.run(s, "org:a/k1", dataset(1), nil))
	waitStarted(t, first)
	b := call(ctx, s, 1, "org:a/k2", second.run(s, "org:a/k2", dataset(2), nil))
	waitStarted(t, second) // while the first still walks
	close(second.release)
	if r := result(t, b); r.err != nil || !sameDataset(r.d, dataset(2)) {
		t.Errorf("the second key: %+v, %v", r.d, r.err)
	}
	close(first.release)
	if r := result(t, a); r.err != nil || !sameDataset(r.d, dataset(1)) {
		t.Errorf("the first key: %+v, %v", r.d, r.err)
	}
}

// walksWaiterLeaves: a waiter whose context ends returns at once with its
// error; the walk goes on for its caller.
func walksWaiterLeaves(t *testing.T, s WalksSetup) {
	ctx := ctxT(t)
	h := newHeldWalk()
	walk := h.run(s, "org:a/k", dataset(3), nil)
	lead := call(ctx, s, 0, "org:a/k", walk)
	waitStarted(t, h)
	wctx, cancel := context.WithCancel(ctx)
	waiter := call(wctx, s, 1, "org:a/k", walk)
	waitQueued(t, s, 1)
	cancel()
	if r := result(t, waiter); !errors.Is(r.err, context.Canceled) {
		t.Errorf("the waiter that left: %+v, %v; want context.Canceled", r.d, r.err)
	}
	close(h.release)
	if r := result(t, lead); r.err != nil || !sameDataset(r.d, dataset(3)) {
		t.Errorf("the walking caller: %+v, %v", r.d, r.err)
	}
}

// walksAgain: a call after a walk ended walks again (serving what a walk
// recorded is the cache's).
func walksAgain(t *testing.T, s WalksSetup) {
	ctx := ctxT(t)
	var runs atomic.Int64
	walk := func(ctx context.Context) (*loop.Dataset, error) {
		runs.Add(1)
		return keep(ctx, s, "org:a/k", dataset(1))
	}
	for i := range 2 {
		if r := result(t, call(ctx, s, i, "org:a/k", walk)); r.err != nil || !sameDataset(r.d, dataset(1)) {
			t.Fatalf("call %d: %+v, %v", i, r.d, r.err)
		}
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("%d walks for two calls one after the other, want 2", n)
	}
}
