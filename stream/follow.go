package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"time"

	sse "github.com/r3labs/sse/v2"
)

// The client side of a run's stream: Follow reads what Serve writes,
// resuming as the AI SDK's resumable streams do. It bridges r3labs/sse's
// client (its event framing, Last-Event-ID on every reconnect) to an
// iterator of parsed chunks.

// ErrNotRunning is Follow's error when the stream endpoint answers 204
// No Content: no run is active there (it ended, perhaps while the
// connection was down, or never started).
var ErrNotRunning = errors.New("stream: no run is active")

// StatusError is Follow's error when the stream endpoint refuses the
// request: any status but 200 and 204, with (the start of) its body.
type StatusError struct {
	StatusCode int
	Body       []byte
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("stream: HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
}

// FollowOptions configure Follow. The zero value is usable.
type FollowOptions struct {
	// Client sends the requests. Nil: http.DefaultClient.
	Client *http.Client
	// Header is sent with every request (Authorization, say); a key's
	// first value is used.
	Header http.Header
	// MaxResumes bounds the reconnects of one Follow after the connection
	// drops or the response ends before [Done]. Zero: 20.
	MaxResumes int
	// MaxEventBytes bounds one event. Zero: 16 MiB.
	MaxEventBytes int
}

// Follow reads the run streamed at url (an endpoint Serve answers, such
// as a chat's …/stream) and yields each chunk in order, once, until the
// stream's [Done] event ends the sequence. When the connection drops or
// the response ends early, it reconnects (at once, then backing off up
// to a second) with Last-Event-ID, so the run goes on from the next
// chunk; after MaxResumes reconnects it yields an error. A chunk this
// package cannot parse (a newer server's) is skipped. The errors it
// yields, each ending the sequence: ErrNotRunning (204), a *StatusError,
// ctx's error, or the broken stream's. Breaking out of the loop closes
// the connection.
func Follow(ctx context.Context, url string, opt FollowOptions) iter.Seq2[Chunk, error] {
	if opt.Client == nil {
		opt.Client = http.DefaultClient
	}
	if opt.MaxResumes <= 0 {
		opt.MaxResumes = 20
	}
	if opt.MaxEventBytes <= 0 {
		opt.MaxEventBytes = 16 << 20
	}
	return func(yield func(Chunk, error) bool) {
		sctx, cancel := context.WithCancel(ctx)
		defer cancel()
		cl := sse.NewClient(url, sse.ClientMaxBufferSize(opt.MaxEventBytes))
		cl.Connection = opt.Client
		for k, vs := range opt.Header {
			if len(vs) > 0 {
				cl.Headers[k] = vs[0]
			}
		}
		var refused error // an answer no reconnect can change
		cl.ResponseValidator = func(_ *sse.Client, resp *http.Response) error {
			switch resp.StatusCode {
			case http.StatusOK:
				return nil
			case http.StatusNoContent:
				refused = ErrNotRunning
			default:
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				refused = &StatusError{StatusCode: resp.StatusCode, Body: body}
			}
			resp.Body.Close()
			return refused
		}
		retry := &resumeBackoff{ctx: sctx, max: opt.MaxResumes, stop: func() bool { return refused != nil }}
		cl.ReconnectStrategy = retry
		done, stopped := false, false
		handle := func(ev *sse.Event) {
			if done || stopped {
				return
			}
			if string(ev.Data) == Done {
				done = true
				cancel()
				return
			}
			ch, err := ParseChunk(ev.Data)
			if err != nil {
				return
			}
			if !yield(ch, nil) {
				stopped = true
				cancel()
			}
		}
		for ended := 0; ; ended++ {
			err := cl.SubscribeWithContext(sctx, "", handle)
			switch {
			case done, stopped:
				return
			case ctx.Err() != nil:
				yield(nil, ctx.Err())
				return
			case refused != nil:
				yield(nil, refused)
				return
			case err != nil && retry.spent():
				yield(nil, fmt.Errorf("stream: the connection broke and could not be resumed: %w", err))
				return
			case ended >= opt.MaxResumes:
				yield(nil, fmt.Errorf("stream: the response ended early %d times; giving up", ended+1))
				return
			}
			// The server ended the response before [Done]: resume after
			// the last event received (the client keeps its id).
		}
	}
}

// resumeBackoff is Follow's reconnect strategy (r3labs/sse takes a
// cenkalti/backoff one): soon, a bounded number of times, never after a
// refusal or once ctx is done.
type resumeBackoff struct {
	ctx   context.Context
	max   int
	stop  func() bool
	tries int
}

func (b *resumeBackoff) NextBackOff() time.Duration {
	if b.stop() || b.ctx.Err() != nil || b.tries >= b.max {
		return -1 // backoff.Stop
	}
	b.tries++
	return time.Duration(min(b.tries-1, 10)) * 100 * time.Millisecond
}

func (b *resumeBackoff) Reset() {}

func (b *resumeBackoff) spent() bool { return b.tries >= b.max || b.stop() }
