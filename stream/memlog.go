package stream

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"time"
)

// MemoryLogOptions configures a [MemoryLog]. The zero value means every
// default.
type MemoryLogOptions struct {
	// MaxRunBytes bounds one run: the sum over its events of the chunk's
	// JSON plus EventOverhead. Zero means 8 MiB: some 70,000 text deltas,
	// or 80 tool outputs of 100 KB.
	MaxRunBytes int64

	// MaxBytes bounds all runs together, counted the same way. When an
	// Append would pass it, closed runs are dropped, the first closed
	// first, until it fits; if the open runs alone do not fit, the
	// appending run is treated as past its own bound. Zero means 256 MiB.
	MaxBytes int64

	// Retention is how long a closed run stays readable (for a client
	// resuming just after the end). Zero means 10 minutes.
	Retention time.Duration

	// Now is the clock that retention is measured by. Nil means time.Now.
	Now func() time.Time
}

// EventOverhead is what one event costs beyond its chunk's JSON (the
// Event value and the slice growth that holds it), counted against the
// bounds.
const EventOverhead = 64

// MemoryLog is the in-process [EventLog]: one process serves each run's
// readers from memory.
//
// Bounds: see [MemoryLogOptions]. Past a run's bound the log appends one
// [Error] chunk ("the response is too large to stream …"), closes the run
// and returns ErrLogFull from that Append and ErrRunClosed from any later
// one; readers see the error chunk and the end of the stream, so a client
// never receives a stream that silently lacks its middle. Closed runs are
// forgotten after the retention period; the sweep happens on the log's own
// calls, so no goroutine runs in the background.
//
// A reader that is still reading a run when the run is dropped goes on
// reading it to its end; the memory is reclaimed when the last such reader
// stops (which [Serve]'s write timeout bounds).
type MemoryLog struct {
	maxRunBytes int64
	maxBytes    int64
	retention   time.Duration
	now         func() time.Time

	mu     sync.Mutex
	runs   map[string]*memRun
	closed []*memRun // in order of Close, so also of expiry
	bytes  int64     // all runs
}

type memRun struct {
	id       string
	events   []Event // events[i].Seq == i+1; append-only
	bytes    int64
	isClosed bool
	closedAt time.Time
	wake     chan struct{} // closed on the next Append or Close; nil when nobody waits
}

// NewMemoryLog returns an empty log.
func NewMemoryLog(opts MemoryLogOptions) *MemoryLog {
	l := &MemoryLog{
		maxRunBytes: opts.MaxRunBytes,
		maxBytes:    opts.MaxBytes,
		retention:   opts.Retention,
		now:         opts.Now,
		runs:        map[string]*memRun{},
	}
	if l.maxRunBytes <= 0 {
		l.maxRunBytes = 8 << 20
	}
	if l.maxBytes <= 0 {
		l.maxBytes = 256 << 20
	}
	if l.retention <= 0 {
		l.retention = 10 * time.Minute
	}
	if l.now == nil {
		l.now = time.Now
	}
	return l
}

var _ EventLog = (*MemoryLog)(nil)

// Open starts the log of runID.
func (l *MemoryLog) Open(_ context.Context, runID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	if _, ok := l.runs[runID]; ok {
		return fmt.Errorf("opening run %q: %w", runID, ErrRunExists)
	}
	l.runs[runID] = &memRun{id: runID}
	return nil
}

// Append stores c as the run's next event. It never blocks on readers.
func (l *MemoryLog) Append(_ context.Context, runID string, c Chunk) (int64, error) {
	data, err := Encode(c)
	if err != nil {
		return 0, err
	}
	return l.AppendEncoded(runID, data)
}

// AppendEncoded stores data — a chunk's JSON as [Encode] made it — as the
// run's next event, as Append does: a log that keeps its events elsewhere
// too (a durable one) serves them through a MemoryLog this way. The log
// keeps data; the caller must not modify it.
func (l *MemoryLog) AppendEncoded(runID string, data []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[runID]
	switch {
	case !ok:
		return 0, fmt.Errorf("appending to run %q: %w", runID, ErrRunNotFound)
	case r.isClosed:
		return 0, fmt.Errorf("appending to run %q: %w", runID, ErrRunClosed)
	}
	n := int64(len(data)) + EventOverhead
	if r.bytes+n > l.maxRunBytes || !l.makeRoom(n) {
		l.overflow(r)
		return 0, fmt.Errorf("appending to run %q (%d bytes held): %w", runID, r.bytes, ErrLogFull)
	}
	return l.add(r, data), nil
}

// add stores data as r's next event and wakes r's readers; l.mu is held.
func (l *MemoryLog) add(r *memRun, data []byte) int64 {
	seq := int64(len(r.events)) + 1
	r.events = append(r.events, Event{Seq: seq, Data: data})
	n := int64(len(data)) + EventOverhead
	r.bytes += n
	l.bytes += n
	r.wakeReaders()
	return seq
}

// OverflowChunk is the chunk with which every EventLog ends a run that
// passed its bound.
var OverflowChunk = Error{ErrorText: "The response is too large to stream; reload the conversation to see all of it."}

var overflowChunk = mustEncode(OverflowChunk)

// overflow ends r's stream with overflowChunk, beyond the bounds (one small
// chunk per run), and closes r; l.mu is held.
func (l *MemoryLog) overflow(r *memRun) {
	l.add(r, overflowChunk)
	l.close(r)
}

// makeRoom drops closed runs, the first closed first, until n more
// bytes fit under MaxBytes; it reports whether they do. l.mu is held.
func (l *MemoryLog) makeRoom(n int64) bool {
	for l.bytes+n > l.maxBytes && len(l.closed) > 0 {
		l.dropOldest()
	}
	return l.bytes+n <= l.maxBytes
}

// Read yields the run's events after Seq after; see [EventLog.Read].
func (l *MemoryLog) Read(ctx context.Context, runID string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		l.mu.Lock()
		l.sweep()
		r, ok := l.runs[runID]
		var last int64
		if ok {
			last = int64(len(r.events))
		}
		l.mu.Unlock()
		switch {
		case !ok:
			yield(Event{}, fmt.Errorf("reading run %q: %w", runID, ErrRunNotFound))
			return
		case after < 0 || after > last:
			yield(Event{}, fmt.Errorf("reading run %q after %d (last is %d): %w", runID, after, last, ErrUnknownEventID))
			return
		}
		for {
			if err := ctx.Err(); err != nil {
				yield(Event{}, err)
				return
			}
			l.mu.Lock()
			batch := r.events[after:len(r.events):len(r.events)]
			closed := r.isClosed
			var wake chan struct{}
			if len(batch) == 0 && !closed {
				if r.wake == nil {
					r.wake = make(chan struct{})
				}
				wake = r.wake
			}
			l.mu.Unlock()

			for _, ev := range batch {
				if !yield(ev, nil) {
					return
				}
				after = ev.Seq
			}
			switch {
			case len(batch) > 0:
				continue // more may have come meanwhile
			case closed:
				return
			}
			select {
			case <-wake:
			case <-ctx.Done():
				yield(Event{}, ctx.Err())
				return
			}
		}
	}
}

// Close ends the run; its readers drain and stop.
func (l *MemoryLog) Close(_ context.Context, runID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	r, ok := l.runs[runID]
	if !ok {
		return fmt.Errorf("closing run %q: %w", runID, ErrRunNotFound)
	}
	l.close(r)
	return nil
}

// close marks r closed and wakes its readers; l.mu is held.
func (l *MemoryLog) close(r *memRun) {
	if r.isClosed {
		return
	}
	r.isClosed = true
	r.closedAt = l.now()
	l.closed = append(l.closed, r)
	r.wakeReaders()
}

// Stat reports the run's state.
func (l *MemoryLog) Stat(_ context.Context, runID string) (RunState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	r, ok := l.runs[runID]
	if !ok {
		return RunState{}, fmt.Errorf("run %q: %w", runID, ErrRunNotFound)
	}
	return RunState{LastSeq: int64(len(r.events)), Closed: r.isClosed}, nil
}

// sweep drops the closed runs whose retention has passed; l.mu is held.
func (l *MemoryLog) sweep() {
	now := l.now()
	for len(l.closed) > 0 && !now.Before(l.closed[0].closedAt.Add(l.retention)) {
		l.dropOldest()
	}
}

// dropOldest forgets the run that closed first; l.mu is held.
func (l *MemoryLog) dropOldest() {
	r := l.closed[0]
	l.closed[0] = nil
	l.closed = l.closed[1:]
	delete(l.runs, r.id)
	l.bytes -= r.bytes
}

func (r *memRun) wakeReaders() {
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
}

func mustEncode(c Chunk) []byte {
	data, err := Encode(c)
	if err != nil {
		panic(err)
	}
	return data
}
