package paginate

import (
	"fmt"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Default bounds of one tool call (DESIGN.md §6). A zero Budget field
// means the matching default.
const (
	DefaultPages         = 20               // pages per collection (per walk)
	DefaultRequests      = 60               // upstream requests per tool call, retries included
	DefaultItems         = 5000             // items per tool call
	DefaultBytes         = 24 << 20         // raw upstream bytes per tool call
	DefaultTime          = 60 * time.Second // wall-clock per tool call
	DefaultForEachValues = 50               // values per _for_each
	// MaxConcurrency bounds Budget.Concurrency: the requests one walk
	// may have in flight at once.
	MaxConcurrency = 16
	// adaptiveStart and adaptiveMax are the adaptive window (Concurrency
	// 0): a walk that may fetch ahead starts with 2 requests in flight
	// and grows to 6.
	adaptiveStart = 2
	adaptiveMax   = 6
)

// Budget bounds what one tool call may spend upstream. The zero value of
// every field means its default (the Default* constants); a negative
// value is an error. Pages bounds each walk (one collection); Requests,
// Items, Bytes and Time are shared by every walk of the call through a
// Meter, so `_for_each` × `_all_pages` runs under one budget.
// ForEachValues is not used by the walker: the engine caps fan-out with it.
//
// Concurrency bounds the requests one walk has in flight when it may
// fetch pages ahead (a page-number or offset walk that knows its end; see
// Walk): zero is adaptive (2 at first, growing by one per page received
// to 6, halved by a 429), 1 walks strictly one request at a time, and n
// (at most MaxConcurrency) is a fixed window. Unlike the other fields it
// has no "spent" side: Merge and Resolved keep it as set.
type Budget struct {
	Pages         int
	Requests      int
	Items         int
	Bytes         int64
	Time          time.Duration
	ForEachValues int
	Concurrency   int
}

// Merge returns b with every non-zero field of override replacing b's.
// Apply the deployment's overrides first, then the binding's:
//
//	Budget{}.Merge(deployment).Merge(binding).Resolved()
func (b Budget) Merge(override Budget) Budget {
	if override.Pages != 0 {
		b.Pages = override.Pages
	}
	if override.Requests != 0 {
		b.Requests = override.Requests
	}
	if override.Items != 0 {
		b.Items = override.Items
	}
	if override.Bytes != 0 {
		b.Bytes = override.Bytes
	}
	if override.Time != 0 {
		b.Time = override.Time
	}
	if override.ForEachValues != 0 {
		b.ForEachValues = override.ForEachValues
	}
	if override.Concurrency != 0 {
		b.Concurrency = override.Concurrency
	}
	return b
}

// Resolved returns b with every zero field set to its default.
func (b Budget) Resolved() Budget {
	return Budget{
		Pages:         orDefault(b.Pages, DefaultPages),
		Requests:      orDefault(b.Requests, DefaultRequests),
		Items:         orDefault(b.Items, DefaultItems),
		Bytes:         orDefault(b.Bytes, DefaultBytes),
		Time:          orDefault(b.Time, DefaultTime),
		ForEachValues: orDefault(b.ForEachValues, DefaultForEachValues),
		Concurrency:   b.Concurrency, // zero stays: adaptive
	}
}

// Validate reports a negative field: budgets cannot be switched off.
func (b Budget) Validate() error {
	switch {
	case b.Pages < 0:
		return fmt.Errorf("budget: pages %d is negative", b.Pages)
	case b.Requests < 0:
		return fmt.Errorf("budget: requests %d is negative", b.Requests)
	case b.Items < 0:
		return fmt.Errorf("budget: items %d is negative", b.Items)
	case b.Bytes < 0:
		return fmt.Errorf("budget: bytes %d is negative", b.Bytes)
	case b.Time < 0:
		return fmt.Errorf("budget: time %s is negative", b.Time)
	case b.ForEachValues < 0:
		return fmt.Errorf("budget: for-each values %d is negative", b.ForEachValues)
	case b.Concurrency < 0 || b.Concurrency > MaxConcurrency:
		return fmt.Errorf("budget: concurrency %d is not between 0 (adaptive) and %d", b.Concurrency, MaxConcurrency)
	}
	return nil
}

func orDefault[T int | int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Meter is what one tool call has spent so far, shared by all its walks
// (every page of every `_for_each` value). It is safe for concurrent use.
// Create one per tool call with NewMeter; the time budget runs from its
// start.
//
// Requests may be set aside for one walk with Reserve: a reservation is
// counted as spent for every other walk, so a fan-out value started with
// the requests it needs cannot be starved by the values running beside it.
type Meter struct {
	start time.Time

	mu       sync.Mutex
	requests int
	items    int
	bytes    int64
	held     int // requests reserved by leases and not yet spent
	inFlight int // requests sent (or waiting for their slot) and not yet answered
	waits    map[*limitWait]struct{}
}

// limitWait is a request of the call waiting for its provider's rate
// limit.
type limitWait struct {
	tools.LimitWait
	until time.Time // zero: unknown
}

// RateLimitWait says that a request of the call is waiting for its
// provider's rate limit: whose, why, and for how much longer.
type RateLimitWait struct {
	Provider string
	Cause    string // "rate", "paused" or "concurrency" (tools.LimitWait)
	// Wait is how much longer the limiter expects the wait to last at the
	// time of the report; zero when it cannot tell (a concurrency slot).
	Wait time.Duration
}

// NewMeter returns an empty Meter whose wall clock starts at start.
func NewMeter(start time.Time) *Meter { return &Meter{start: start} }

// Usage is a snapshot of a Meter.
type Usage struct {
	Start    time.Time
	Requests int
	Items    int
	Bytes    int64
	// Held counts requests reserved by leases and not yet spent.
	Held int
	// InFlight counts the requests sent, or waiting for their slot, and
	// not yet answered.
	InFlight int
}

// Usage returns what has been spent so far.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Usage{Start: m.start, Requests: m.requests, Items: m.items, Bytes: m.bytes, Held: m.held, InFlight: m.inFlight}
}

// addInFlight counts a request going out (+1) or answered (-1).
func (m *Meter) addInFlight(n int) {
	m.mu.Lock()
	m.inFlight += n
	m.mu.Unlock()
}

// waitStarted records a request of the call starting to wait for its rate
// limit at now, and returns the function that ends the record.
func (m *Meter) waitStarted(w tools.LimitWait, now time.Time) (end func()) {
	lw := &limitWait{LimitWait: w}
	if w.Wait > 0 {
		lw.until = now.Add(w.Wait)
	}
	m.mu.Lock()
	if m.waits == nil {
		m.waits = map[*limitWait]struct{}{}
	}
	m.waits[lw] = struct{}{}
	m.mu.Unlock()
	return func() {
		m.mu.Lock()
		delete(m.waits, lw)
		m.mu.Unlock()
	}
}

// Waiting is the longest wait for a rate limit under way at now (an
// unknown one counts as the longest), or nil when no request waits.
func (m *Meter) Waiting(now time.Time) *RateLimitWait {
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *limitWait
	for lw := range m.waits {
		switch {
		case best == nil:
			best = lw
		case best.until.IsZero():
		case lw.until.IsZero() || lw.until.After(best.until):
			best = lw
		}
	}
	if best == nil {
		return nil
	}
	out := &RateLimitWait{Provider: best.Provider, Cause: best.Cause}
	if !best.until.IsZero() {
		out.Wait = max(best.until.Sub(now), 0)
	}
	return out
}

// Lease is requests of a Meter set aside for one walk (WalkOptions.Lease):
// the walk spends them first, then the Meter's free requests; no other
// walk can spend them. Release gives back what was not spent. A Lease is
// used by one walk at a time.
type Lease struct {
	m *Meter
	n int // requests still held
}

// Reserve sets aside n requests of a budget of limit for one walk, or as
// many as are free when fewer are (at least one): ok is false when none
// is free.
func (m *Meter) Reserve(n, limit int) (l *Lease, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	free := limit - m.requests - m.held
	if free < 1 {
		return nil, false
	}
	n = min(max(n, 1), free)
	m.held += n
	return &Lease{m: m, n: n}, true
}

// Free is how many requests of a budget of limit no walk holds or has
// spent.
func (m *Meter) Free(limit int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return limit - m.requests - m.held
}

// Release gives the requests the walk did not spend back to the Meter.
// Releasing a nil Lease, or one already released, does nothing.
func (l *Lease) Release() {
	if l == nil {
		return
	}
	l.m.mu.Lock()
	l.m.held -= l.n
	l.n = 0
	l.m.mu.Unlock()
}

// takeRequest counts one upstream request if the budget (limit) allows
// another: from the lease (nil: none) while it holds more than keep —
// requests the walk keeps for its probes — then from the requests no
// lease holds.
func (m *Meter) takeRequest(limit int, l *Lease, keep int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l != nil && l.n > keep {
		l.n--
		m.held--
		m.requests++
		return true
	}
	if m.requests+m.held >= limit {
		return false
	}
	m.requests++
	return true
}

// room is how many requests a walk holding l may still send under a
// budget of limit (its lease and the free requests).
func (m *Meter) room(limit int, l *Lease) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := limit - m.requests - m.held
	if l != nil {
		n += l.n
	}
	return n
}

// grow moves one free request into l (a probe the walk keeps for later),
// when one is free.
func (m *Meter) grow(limit int, l *Lease) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests+m.held >= limit {
		return false
	}
	m.held++
	l.n++
	return true
}

// held is what l still holds.
func (l *Lease) held() int {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	return l.n
}

// returnRequest gives back a request counted by takeRequest that was
// never sent (the caller refused it before any I/O).
func (m *Meter) returnRequest() {
	m.mu.Lock()
	m.requests--
	m.mu.Unlock()
}

func (m *Meter) addBytes(n int64) {
	m.mu.Lock()
	m.bytes += n
	m.mu.Unlock()
}

func (m *Meter) addItems(n int) {
	m.mu.Lock()
	m.items += n
	m.mu.Unlock()
}
