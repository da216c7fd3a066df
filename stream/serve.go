package stream

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ServeOptions configures [Serve]. The zero value means every default.
type ServeOptions struct {
	// Heartbeat is how long the stream may stay silent before a ": ping"
	// comment is sent, so that idle connections and proxies stay open.
	// Zero means 15 s; negative means never.
	Heartbeat time.Duration

	// WriteTimeout bounds each write to the client: a client that stops
	// reading is cut off after it, freeing what it held. Zero means 30 s;
	// negative means no bound.
	WriteTimeout time.Duration

	// ReadError, when set, names a failure to read the log after the
	// stream began (the store went away, the run's log vanished, the
	// request's context ended): its text goes to the client as an error
	// chunk, then "data: [DONE]", so the client is told rather than cut
	// off. The chunk carries no id, so a later resume continues after
	// the last event delivered. Nil, or "" (say, for a client that went
	// away): the stream just ends.
	ReadError func(error) string
}

// Serve streams the events of runID from log to the client as a UI
// message stream: from the start, or after the request's Last-Event-ID.
// It returns when the run has ended and every event and the final
// "data: [DONE]" were sent (nil), when the request's context is done
// (its error), or when a write fails.
//
// Serve writes nothing when it returns ErrRunNotFound (the caller answers
// 204, say) or ErrUnknownEventID (a Last-Event-ID that is not a number or
// not an event of the run: 400), so the caller still controls the
// response; any other error comes after the stream began.
//
// The run is read from the log at the client's pace, so a client that
// reads slowly holds back nothing but itself.
func Serve(w http.ResponseWriter, r *http.Request, log EventLog, runID string, opts ServeOptions) error {
	ctx := r.Context()
	after, err := LastEventID(r)
	if err != nil {
		return err
	}
	st, err := log.Stat(ctx, runID)
	if err != nil {
		return err
	}
	if after > st.LastSeq {
		return fmt.Errorf("Last-Event-ID %d is past the last event (%d) of run %q: %w",
			after, st.LastSeq, runID, ErrUnknownEventID)
	}

	sw := NewWriter(w, orDefault(opts.WriteTimeout, 30*time.Second))
	defer sw.clearDeadline()
	SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	if err := sw.rc.Flush(); err != nil {
		return fmt.Errorf("flushing SSE headers: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hb := startHeartbeat(sw, orDefault(opts.Heartbeat, 15*time.Second), cancel)
	defer hb.stop()
	for ev, err := range log.Read(ctx, runID, after) {
		if err != nil {
			if f := hb.failure(); f != nil {
				return f
			}
			if opts.ReadError != nil {
				if text := opts.ReadError(err); text != "" {
					data, _ := Encode(Error{ErrorText: text})
					_ = hb.write(func() error { return sw.writeUnnumbered(data) })
					_ = hb.write(sw.WriteDone)
				}
			}
			return err
		}
		if err := hb.write(func() error { return sw.WriteEvent(ev) }); err != nil {
			return err
		}
	}
	return hb.write(sw.WriteDone)
}

// heartbeat writes a ping when the stream has been silent for a while.
// It runs on a timer rather than a goroutine of its own, so that a stream
// costs only the goroutine that serves it and the one that reads its
// connection; mu keeps its writes and Serve's apart.
type heartbeat struct {
	sw       *Writer
	interval time.Duration
	cancel   context.CancelFunc // ends Serve's read when a ping fails

	mu      sync.Mutex
	timer   *time.Timer // nil when interval is 0 (no heartbeat)
	stopped bool
	err     error // the failed ping's
}

func startHeartbeat(sw *Writer, interval time.Duration, cancel context.CancelFunc) *heartbeat {
	hb := &heartbeat{sw: sw, interval: interval, cancel: cancel}
	if interval > 0 {
		hb.mu.Lock()
		hb.timer = time.AfterFunc(interval, hb.ping)
		hb.mu.Unlock()
	}
	return hb
}

func (hb *heartbeat) ping() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.stopped {
		return
	}
	if err := hb.sw.WriteComment("ping"); err != nil {
		hb.err = err
		hb.cancel()
		return
	}
	hb.timer.Reset(hb.interval)
}

// write runs one write of Serve's and restarts the silence count.
func (hb *heartbeat) write(f func() error) error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.err != nil {
		return hb.err
	}
	if hb.timer != nil {
		hb.timer.Reset(hb.interval)
	}
	return f()
}

// failure is the error of a failed ping, if any.
func (hb *heartbeat) failure() error {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	return hb.err
}

// stop ends the heartbeat; once it returns, no ping is being written or
// will be.
func (hb *heartbeat) stop() {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	hb.stopped = true
	if hb.timer != nil {
		hb.timer.Stop()
	}
}

// LastEventID returns the request's Last-Event-ID header as a Seq: 0 when
// it is absent (read from the start), ErrUnknownEventID when it is not a
// non-negative integer.
func LastEventID(r *http.Request) (int64, error) {
	h := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
	if h == "" {
		return 0, nil
	}
	seq, err := strconv.ParseInt(h, 10, 64)
	if err != nil || seq < 0 {
		return 0, fmt.Errorf("Last-Event-ID %q is not an event id: %w", h, ErrUnknownEventID)
	}
	return seq, nil
}

// orDefault maps zero to def and a negative duration to 0 (off).
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}
