// Package boltlog is the durable stream.EventLog of one process: each
// run's events live in a bbolt file as well as in memory, so a process
// that restarts (or crashed) still serves the runs it was streaming, and
// the turns it continues stream on into the same logs — a client resumes
// with its Last-Event-ID across the restart.
//
// Group commit: an Append does not wait for the disk. Appended events are
// written together, one bbolt transaction (one fsync) at most every
// Options.Interval, and readers see an event once it is written: an event
// is durable, and readable, within Interval plus the time of one commit
// after its Append. What a crash loses is only what no reader has seen.
// Sync waits until everything appended before it is durable (the run
// host calls it before it saves a checkpoint, so a checkpoint never names
// an event that a crash could lose).
package boltlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/stream"
	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Options configures a [Log]. The zero value means every default.
type Options struct {
	// Bucket is the bbolt bucket holding the log. Empty means "event_log".
	Bucket string

	// MaxRunBytes bounds one run as stream.MemoryLog counts it (the
	// chunk's JSON plus stream.EventOverhead per event). Zero means 8 MiB.
	MaxRunBytes int64

	// MaxBytes bounds all the runs the log holds together (open ones and
	// closed ones within their retention): an Append past it is treated
	// as past its run's bound. Zero means 256 MiB.
	MaxBytes int64

	// Retention is how long a closed run stays readable. Zero means 10
	// minutes, counted from its Close, across restarts.
	Retention time.Duration

	// Interval is the group commit's period: at most one transaction
	// every Interval. Zero means 5 ms.
	Interval time.Duration

	// Logger receives the commits that fail (they are retried). Nil means
	// slog.Default().
	Logger *slog.Logger
}

// Log is the bbolt-backed event log. Open it with [New]; Shutdown it
// before the bbolt file closes.
type Log struct {
	db       *bolt.DB
	bucket   []byte
	mem      *stream.MemoryLog // the written events, for readers
	maxRun   int64
	maxBytes int64
	keep     time.Duration
	interval time.Duration
	log      *slog.Logger

	mu        sync.Mutex
	runs      map[string]*run
	closed    []string // the closed runs, in order of closing (so of expiry)
	bytes     int64    // all runs held
	pending   []op
	appended  uint64        // ops queued so far
	written   uint64        // ops written so far
	flushed   chan struct{} // closed (and replaced) after each commit, or failed commit
	lastErr   error         // the last commit's error; nil once one succeeds
	stopping  bool
	recovered []string

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

type run struct {
	last     int64 // seq of the last event appended (written or not)
	bytes    int64
	closed   bool
	closedAt time.Time
}

type opKind int

const (
	opOpen opKind = iota
	opEvent
	opClose
	opDrop
)

type op struct {
	kind opKind
	run  string
	seq  int64
	data []byte
	at   time.Time
}

var _ stream.EventLog = (*Log)(nil)

// closedKey is the key of a run's bucket that holds when it was closed;
// events are under their seq, 8 bytes big-endian.
var closedKey = []byte("closed")

// New opens the log in db: the runs it holds from before (those that
// were open when the process stopped, and those closed within their
// retention) are readable at once; Recovered lists the open ones.
func New(db *bolt.DB, opts Options) (*Log, error) {
	l := &Log{db: db, bucket: []byte(opts.Bucket), maxRun: opts.MaxRunBytes, maxBytes: opts.MaxBytes,
		keep: opts.Retention, interval: opts.Interval, log: opts.Logger,
		runs: map[string]*run{}, flushed: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if len(l.bucket) == 0 {
		l.bucket = []byte("event_log")
	}
	if l.maxRun <= 0 {
		l.maxRun = 8 << 20
	}
	if l.maxBytes <= 0 {
		l.maxBytes = 256 << 20
	}
	if l.keep <= 0 {
		l.keep = 10 * time.Minute
	}
	if l.interval <= 0 {
		l.interval = 5 * time.Millisecond
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	// The memory log holds what this log bounds already: its own bounds
	// never bite.
	l.mem = stream.NewMemoryLog(stream.MemoryLogOptions{MaxRunBytes: 1 << 62, MaxBytes: 1 << 62, Retention: l.keep})
	if err := l.load(); err != nil {
		return nil, err
	}
	go l.flusher()
	return l, nil
}

// load reads the runs the file holds into memory, dropping the closed
// ones whose retention has passed.
func (l *Log) load() error {
	now := time.Now()
	var expired [][]byte
	err := l.db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(l.bucket)
		if err != nil {
			return err
		}
		ctx := context.Background()
		err = b.ForEachBucket(func(name []byte) error {
			rb := b.Bucket(name)
			id := string(name)
			r := &run{}
			if v := rb.Get(closedKey); v != nil {
				r.closed = true
				r.closedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v)))
				if !now.Before(r.closedAt.Add(l.keep)) {
					expired = append(expired, name)
					return nil
				}
			}
			if err := l.mem.Open(ctx, id); err != nil {
				return err
			}
			c := rb.Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if len(k) != 8 {
					continue
				}
				seq := int64(binary.BigEndian.Uint64(k))
				if seq != r.last+1 {
					return fmt.Errorf("event log: run %q: event %d follows %d", id, seq, r.last)
				}
				data := append([]byte(nil), v...) // bbolt's memory is only valid in the transaction
				if _, err := l.mem.AppendEncoded(id, data); err != nil {
					return err
				}
				r.last = seq
				r.bytes += int64(len(data)) + stream.EventOverhead
			}
			if r.closed {
				if err := l.mem.Close(ctx, id); err != nil {
					return err
				}
				l.closed = append(l.closed, id)
			} else {
				l.recovered = append(l.recovered, id)
			}
			l.runs[id] = r
			l.bytes += r.bytes
			return nil
		})
		if err != nil {
			return err
		}
		for _, name := range expired {
			if err := b.DeleteBucket(name); err != nil {
				return err
			}
		}
		slices.SortStableFunc(l.closed, func(a, b string) int { return l.runs[a].closedAt.Compare(l.runs[b].closedAt) })
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the event log: %w", err)
	}
	return nil
}

// Recovered lists the runs that were open when the process that wrote
// the file stopped: whoever continues them appends to them, and whoever
// does not should end them.
func (l *Log) Recovered() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.recovered...)
}

// queue adds o to what the next commit writes; l.mu is held.
func (l *Log) queue(o op) {
	l.pending = append(l.pending, o)
	l.appended++
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Open starts the log of runID.
func (l *Log) Open(_ context.Context, runID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		return errors.New("event log: shut down")
	}
	l.sweep()
	if _, ok := l.runs[runID]; ok {
		return fmt.Errorf("opening run %q: %w", runID, stream.ErrRunExists)
	}
	l.runs[runID] = &run{}
	l.queue(op{kind: opOpen, run: runID})
	return nil
}

// Append stores c as the run's next event: durable and readable with the
// next commit. It never waits for the disk or for readers.
func (l *Log) Append(_ context.Context, runID string, c stream.Chunk) (int64, error) {
	data, err := stream.Encode(c)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[runID]
	switch {
	case !ok:
		return 0, fmt.Errorf("appending to run %q: %w", runID, stream.ErrRunNotFound)
	case r.closed:
		return 0, fmt.Errorf("appending to run %q: %w", runID, stream.ErrRunClosed)
	case l.stopping:
		return 0, errors.New("event log: shut down")
	}
	n := int64(len(data)) + stream.EventOverhead
	if r.bytes+n > l.maxRun || l.bytes+n > l.maxBytes {
		held := r.bytes
		l.add(runID, r, overflowChunk)
		l.close(runID, r)
		return 0, fmt.Errorf("appending to run %q (%d bytes held): %w", runID, held, stream.ErrLogFull)
	}
	return l.add(runID, r, data), nil
}

var overflowChunk = func() []byte {
	b, err := stream.Encode(stream.OverflowChunk)
	if err != nil {
		panic(err)
	}
	return b
}()

// add queues data as r's next event; l.mu is held.
func (l *Log) add(id string, r *run, data []byte) int64 {
	r.last++
	n := int64(len(data)) + stream.EventOverhead
	r.bytes += n
	l.bytes += n
	l.queue(op{kind: opEvent, run: id, seq: r.last, data: data})
	return r.last
}

// close marks r closed; l.mu is held.
func (l *Log) close(id string, r *run) {
	if r.closed {
		return
	}
	r.closed, r.closedAt = true, time.Now()
	l.closed = append(l.closed, id)
	l.queue(op{kind: opClose, run: id, at: r.closedAt})
}

// Read yields the run's events after Seq after (see stream.EventLog):
// those written, then each one as it is written.
func (l *Log) Read(ctx context.Context, runID string, after int64) iter.Seq2[stream.Event, error] {
	return func(yield func(stream.Event, error) bool) {
		l.mu.Lock()
		l.sweep()
		r, ok := l.runs[runID]
		var last int64
		if ok {
			last = r.last
		}
		target := l.appended
		l.mu.Unlock()
		switch {
		case !ok:
			yield(stream.Event{}, fmt.Errorf("reading run %q: %w", runID, stream.ErrRunNotFound))
			return
		case after < 0 || after > last:
			yield(stream.Event{}, fmt.Errorf("reading run %q after %d (last is %d): %w", runID, after, last, stream.ErrUnknownEventID))
			return
		}
		// The memory log knows the run, and event after, once written.
		if st, err := l.mem.Stat(ctx, runID); err != nil || st.LastSeq < after {
			if err := l.waitWritten(ctx, target); err != nil {
				yield(stream.Event{}, err)
				return
			}
		}
		for ev, err := range l.mem.Read(ctx, runID, after) {
			if errors.Is(err, stream.ErrRunNotFound) {
				err = fmt.Errorf("reading run %q: %w", runID, stream.ErrRunNotFound)
			}
			if !yield(ev, err) || err != nil {
				return
			}
		}
	}
}

// Close ends the run: readers drain what remains (once written) and stop.
func (l *Log) Close(_ context.Context, runID string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	r, ok := l.runs[runID]
	if !ok {
		return fmt.Errorf("closing run %q: %w", runID, stream.ErrRunNotFound)
	}
	l.close(runID, r)
	return nil
}

// Stat reports the run's state, what was appended included.
func (l *Log) Stat(_ context.Context, runID string) (stream.RunState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep()
	r, ok := l.runs[runID]
	if !ok {
		return stream.RunState{}, fmt.Errorf("run %q: %w", runID, stream.ErrRunNotFound)
	}
	return stream.RunState{LastSeq: r.last, Closed: r.closed}, nil
}

// Sync waits until everything appended before it is durable; it returns
// the commit's error if the commit failed (it is retried).
func (l *Log) Sync(ctx context.Context) error {
	l.mu.Lock()
	target := l.appended
	l.mu.Unlock()
	return l.waitWritten(ctx, target)
}

// waitWritten waits until the first target ops are written.
func (l *Log) waitWritten(ctx context.Context, target uint64) error {
	for {
		l.mu.Lock()
		written, err, flushed, stopped := l.written, l.lastErr, l.flushed, l.stopping && l.pending == nil
		l.mu.Unlock()
		switch {
		case written >= target:
			return nil
		case err != nil:
			return fmt.Errorf("event log: writing: %w", err)
		case stopped:
			return errors.New("event log: shut down")
		}
		select {
		case <-flushed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// sweep drops the closed runs whose retention has passed; l.mu is held.
func (l *Log) sweep() {
	now := time.Now()
	for len(l.closed) > 0 {
		id := l.closed[0]
		r := l.runs[id]
		if r != nil && now.Before(r.closedAt.Add(l.keep)) {
			return
		}
		l.closed = l.closed[1:]
		if r != nil {
			delete(l.runs, id)
			l.bytes -= r.bytes
			l.queue(op{kind: opDrop, run: id})
		}
	}
}

// flusher writes what was queued, one transaction at most every
// interval, until Shutdown; then it writes what remains.
func (l *Log) flusher() {
	defer close(l.done)
	var last time.Time
	tick := time.NewTicker(max(l.keep/4, time.Second))
	defer tick.Stop()
	for {
		select {
		case <-l.kick:
		case <-tick.C:
			l.mu.Lock()
			l.sweep()
			l.mu.Unlock()
			continue
		case <-l.stop:
			for l.commit() {
			}
			return
		}
		if wait := l.interval - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.stop:
				t.Stop()
			}
		}
		last = time.Now()
		if l.commit() {
			// Failed: try again after an interval.
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	}
}

// commit writes the pending ops in one transaction and shows them to
// readers; it reports whether some are left to write (it failed).
func (l *Log) commit() (again bool) {
	l.mu.Lock()
	ops := l.pending
	l.pending = nil
	l.mu.Unlock()
	if len(ops) == 0 {
		return false
	}
	err := l.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(l.bucket)
		if b == nil {
			return errors.New("the event log's bucket is gone")
		}
		var key [8]byte
		for _, o := range ops {
			switch o.kind {
			case opOpen:
				if _, err := b.CreateBucketIfNotExists([]byte(o.run)); err != nil {
					return err
				}
			case opEvent:
				binary.BigEndian.PutUint64(key[:], uint64(o.seq))
				if err := b.Bucket([]byte(o.run)).Put(key[:], o.data); err != nil {
					return err
				}
			case opClose:
				binary.BigEndian.PutUint64(key[:], uint64(o.at.UnixNano()))
				if err := b.Bucket([]byte(o.run)).Put(closedKey, key[:]); err != nil {
					return err
				}
			case opDrop:
				if err := b.DeleteBucket([]byte(o.run)); err != nil && !errors.Is(err, bolterrors.ErrBucketNotFound) {
					return err
				}
			}
		}
		return nil
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.log.Error("writing the event log (retried)", "events", len(ops), "err", err)
		l.pending = append(ops, l.pending...)
		l.lastErr = err
		close(l.flushed)
		l.flushed = make(chan struct{})
		return !l.stopping // shutting down, a failing commit loses what is left
	}
	ctx := context.Background()
	for _, o := range ops {
		var err error
		switch o.kind {
		case opOpen:
			err = l.mem.Open(ctx, o.run)
		case opEvent:
			_, err = l.mem.AppendEncoded(o.run, o.data)
		case opClose:
			err = l.mem.Close(ctx, o.run)
		}
		if err != nil && !errors.Is(err, stream.ErrRunNotFound) {
			l.log.Error("serving the event log", "run", o.run, "err", err)
		}
	}
	l.written += uint64(len(ops))
	l.lastErr = nil
	close(l.flushed)
	l.flushed = make(chan struct{})
	return len(l.pending) > 0 && l.stopping
}

// Shutdown writes what was appended and stops the log: call it before
// the bbolt file closes. Later calls do nothing.
func (l *Log) Shutdown() error {
	l.mu.Lock()
	if l.stopping {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.stopping = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) > 0 {
		return fmt.Errorf("event log: %d changes were not written: %w", len(l.pending), l.lastErr)
	}
	return nil
}
