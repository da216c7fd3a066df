package paginate

import (
	"fmt"
	"sync"
	"time"
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
)

// Budget bounds what one tool call may spend upstream. The zero value of
// every field means its default (the Default* constants); a negative
// value is an error. Pages bounds each walk (one collection); Requests,
// Items, Bytes and Time are shared by every walk of the call through a
// Meter, so `_for_each` × `_all_pages` runs under one budget.
// ForEachValues is not used by the walker: the engine caps fan-out with it.
type Budget struct {
	Pages         int
	Requests      int
	Items         int
	Bytes         int64
	Time          time.Duration
	ForEachValues int
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
type Meter struct {
	start time.Time

	mu       sync.Mutex
	requests int
	items    int
	bytes    int64
}

// NewMeter returns an empty Meter whose wall clock starts at start.
func NewMeter(start time.Time) *Meter { return &Meter{start: start} }

// Usage is a snapshot of a Meter.
type Usage struct {
	Start    time.Time
	Requests int
	Items    int
	Bytes    int64
}

// Usage returns what has been spent so far.
func (m *Meter) Usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return Usage{Start: m.start, Requests: m.requests, Items: m.items, Bytes: m.bytes}
}

// takeRequest counts one upstream request if the budget allows another.
func (m *Meter) takeRequest(max int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requests >= max {
		return false
	}
	m.requests++
	return true
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
