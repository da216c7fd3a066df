package stream

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
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
// The run is read through its own goroutine, so a client that reads slowly
// holds back nothing but itself.
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

	heartbeat := orDefault(opts.Heartbeat, 15*time.Second)
	sw := NewWriter(w, orDefault(opts.WriteTimeout, 30*time.Second))
	defer sw.clearDeadline()
	SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	if err := sw.rc.Flush(); err != nil {
		return fmt.Errorf("flushing SSE headers: %w", err)
	}

	ctx, cancel := context.WithCancel(ctx)
	events := make(chan readResult)
	pumped := make(chan struct{})
	defer func() { cancel(); <-pumped }()
	go func() {
		defer close(pumped)
		defer close(events)
		for ev, err := range log.Read(ctx, runID, after) {
			select {
			case events <- readResult{ev, err}:
			case <-ctx.Done():
				return
			}
		}
	}()

	var tick *time.Timer
	var ticks <-chan time.Time
	if heartbeat > 0 {
		tick = time.NewTimer(heartbeat)
		defer tick.Stop()
		ticks = tick.C
	}
	for {
		select {
		case res, ok := <-events:
			switch {
			case !ok:
				return sw.WriteDone()
			case res.err != nil:
				return res.err
			}
			if err := sw.WriteEvent(res.ev); err != nil {
				return err
			}
		case <-ticks:
			if err := sw.WriteComment("ping"); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
		if tick != nil {
			tick.Reset(heartbeat)
		}
	}
}

type readResult struct {
	ev  Event
	err error
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
