// Package runlease is the active-run registry of the run host (chat turns
// and workflow runs): one active run per key (a chat, a workflow run)
// across every replica, a stop from any replica reaching the run wherever
// it runs, and leases, so a run whose replica died is observed as ended
// within the lease. Memory is the in-process registry of the embedded
// default; redislease the one replicas share.
package runlease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultLease is how long a run's claim outlives its holder's last
// renewal (the holder renews every third of it): short, because a dead
// replica's runs are continued by another once it lapses, and a client
// waits that long for the continuation.
const DefaultLease = 3 * time.Second

// Registry holds the active run of each key. Implementations are safe for
// concurrent use.
type Registry interface {
	// Acquire claims key for runID. It fails with a *HeldError (which
	// matches ErrHeld) when another run holds key.
	Acquire(ctx context.Context, key, runID string) (Lease, error)
	// Active is the run holding key, "" when none does.
	Active(ctx context.Context, key string) (string, error)
	// Stop asks run runID, if it holds key, to stop, wherever it runs
	// (its Lease's Done closes, Err is ErrStopped); it reports whether
	// runID held key. Naming the run keeps a stop meant for a run that
	// has just ended from stopping the next run of the key.
	Stop(ctx context.Context, key, runID string) (bool, error)
	// Wait returns when runID no longer holds key: released, or its
	// holder died and the lease ran out.
	Wait(ctx context.Context, key, runID string) error
	// ActiveKeys are the held keys that begin with prefix.
	ActiveKeys(ctx context.Context, prefix string) ([]string, error)
}

// Claim is a key and the run that held it.
type Claim struct{ Key, RunID string }

// Sweeper is a Registry whose claims can lapse: a replica died holding
// them. Lapsed returns the claims that lapsed since they were last
// swept, each to exactly one caller across every replica, so exactly one
// replica ends each dead run.
type Sweeper interface {
	Lapsed(ctx context.Context) ([]Claim, error)
}

// Fencer is a Registry whose claims can fence a store's writes: FenceKey
// is the store key holding key's claim, whose value names the lease
// holding it (Fenced). A store on the same server makes a write conditional on it,
// checked inside the write itself (agent/redisstore's PutThreadFenced
// and Runs.PutRunFenced), so a run that lost its claim — its
// replica paused or cut off past the lease — cannot write over what the
// key's next run wrote, however late its write arrives. A registry whose
// claims never lapse (Memory) needs no fence: the holder is looked up.
type Fencer interface {
	FenceKey(key string) string
}

// Fenced is a Lease of a Fencer: FenceValue is what the registry's fence
// key holds while this lease holds the claim — another lease of the same
// run id (a run continued elsewhere) holds another value.
type Fenced interface {
	FenceValue() string
}

// HandOff is a Lease whose run can be handed to another replica at once,
// without waiting for the lease to lapse: HandOff gives the claim up and
// marks it for the next Lapsed on any replica (a draining replica's runs
// are continued elsewhere from their last checkpoint). It reports whether
// the run still held the claim.
type HandOff interface {
	HandOff(ctx context.Context) (bool, error)
}

// Lease is a held claim. The holder ends its run when Done closes and
// calls Release when the run has ended (always; defer it).
type Lease interface {
	RunID() string
	// Done closes when the run must end: stopped from any replica, or
	// the claim was lost (the store was unreachable for longer than the
	// lease, so another replica may take the key).
	Done() <-chan struct{}
	// Err is why Done closed: ErrStopped or an error matching ErrLost;
	// nil while it is open.
	Err() error
	// Release gives up the claim.
	Release(ctx context.Context) error
}

var (
	// ErrHeld: Acquire of a key another run holds.
	ErrHeld = errors.New("a run is already active")
	// ErrStopped: the run was asked to stop.
	ErrStopped = errors.New("run stopped")
	// ErrLost: the claim lapsed; the run must end, as another replica may
	// have claimed the key.
	ErrLost = errors.New("run lease lost")
	// ErrFenced: a write of a run's state was refused because the run no
	// longer holds its claim (it lapsed, and may be another run's now):
	// fenced inside the store's write, or found by a look-up.
	ErrFenced = errors.New("the run no longer holds its claim")
)

// HeldError is Acquire's error for a held key.
type HeldError struct{ Key, RunID string }

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s: %q is held by run %s", ErrHeld, e.Key, e.RunID)
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// Signal is the Done/Err half of a Lease, for implementations: it closes
// once, keeping the first reason.
type Signal struct {
	once sync.Once
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// NewSignal returns an open Signal.
func NewSignal() *Signal { return &Signal{done: make(chan struct{})} }

// Fire closes the signal with err, unless it is closed already.
func (s *Signal) Fire(err error) {
	s.once.Do(func() {
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	})
}

// Done implements Lease.Done.
func (s *Signal) Done() <-chan struct{} { return s.done }

// Err implements Lease.Err.
func (s *Signal) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Memory is the in-process Registry: one process holds every run, so
// leases never lapse.
type Memory struct {
	mu   sync.Mutex
	runs map[string]*memLease
}

var _ Registry = (*Memory)(nil)

// NewMemory returns an empty registry.
func NewMemory() *Memory { return &Memory{runs: map[string]*memLease{}} }

type memLease struct {
	*Signal
	m        *Memory
	key, id  string
	released chan struct{}
}

func (l *memLease) RunID() string { return l.id }

func (l *memLease) Release(context.Context) error {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if l.m.runs[l.key] == l {
		delete(l.m.runs, l.key)
		close(l.released)
	}
	return nil
}

// Acquire implements Registry.
func (m *Memory) Acquire(_ context.Context, key, runID string) (Lease, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.runs[key]; h != nil {
		return nil, &HeldError{Key: key, RunID: h.id}
	}
	l := &memLease{Signal: NewSignal(), m: m, key: key, id: runID, released: make(chan struct{})}
	m.runs[key] = l
	return l, nil
}

// Active implements Registry.
func (m *Memory) Active(_ context.Context, key string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if h := m.runs[key]; h != nil {
		return h.id, nil
	}
	return "", nil
}

// ActiveKeys implements Registry.
func (m *Memory) ActiveKeys(_ context.Context, prefix string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.runs {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Stop implements Registry.
func (m *Memory) Stop(_ context.Context, key, runID string) (bool, error) {
	m.mu.Lock()
	h := m.runs[key]
	m.mu.Unlock()
	if h == nil || h.id != runID {
		return false, nil
	}
	h.Fire(ErrStopped)
	return true, nil
}

// Wait implements Registry.
func (m *Memory) Wait(ctx context.Context, key, runID string) error {
	m.mu.Lock()
	h := m.runs[key]
	m.mu.Unlock()
	if h == nil || h.id != runID {
		return nil
	}
	select {
	case <-h.released:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
