package stream

import (
	"context"
	"errors"
	"iter"
)

// Event is one chunk of a run as stored in its log and sent as one SSE
// event.
type Event struct {
	Seq  int64  // 1 for a run's first chunk, then 2, 3, … with no gaps
	Data []byte // the chunk's JSON (see [Encode]); shared, never modify it
}

// RunState is what a log knows of a run at one moment.
type RunState struct {
	LastSeq int64 // the Seq of the last event appended; 0 before the first
	Closed  bool  // the run ended: no event will follow LastSeq
}

// EventLog holds the chunks of each run so that any number of clients can
// follow a run live and a client that lost its connection can resume it.
//
// Concurrency contract: every method is safe for concurrent use, Append
// included — parallel tool calls of one run append their progress
// concurrently, and the log's order is the order in which their Appends
// take effect. Any number of readers read a run, each at its own pace.
// Readers pull from the log: a slow or stalled reader never delays Append,
// and never delays other readers.
//
// Lifecycle: Open, then Append any number of times, then Close — always
// (defer it). A closed run stays readable for a retention period that the
// implementation documents, then reads answer [ErrRunNotFound].
type EventLog interface {
	// Open starts the log of runID. It fails with ErrRunExists when the
	// log already holds runID, closed or not.
	Open(ctx context.Context, runID string) error

	// Append encodes c, stores it as the run's next event and wakes the
	// run's readers; it returns the event's Seq. It fails with
	// ErrRunNotFound, ErrRunClosed, an encoding error, or ErrLogFull when
	// the run's bound is reached; in that last case the log has ended the
	// run's stream with an [Error] chunk saying so, and closed it.
	Append(ctx context.Context, runID string, c Chunk) (seq int64, err error)

	// Read yields the run's events that follow Seq after, in order, with
	// no gap: at once those already stored, then each new one as it is
	// appended. It ends after the last event of a closed run. It yields a
	// single error and stops when the run is unknown (ErrRunNotFound),
	// when after is negative or beyond the last event (ErrUnknownEventID),
	// or when ctx is done (ctx.Err()). Read(ctx, id, 0) reads from the
	// start.
	Read(ctx context.Context, runID string, after int64) iter.Seq2[Event, error]

	// Close ends the run: readers drain what remains and stop. Closing a
	// closed run does nothing; closing an unknown one is ErrRunNotFound.
	Close(ctx context.Context, runID string) error

	// Stat reports the run's state, or ErrRunNotFound.
	Stat(ctx context.Context, runID string) (RunState, error)
}

var (
	// ErrRunNotFound: the log holds no such run (never opened, or expired).
	ErrRunNotFound = errors.New("run not found")
	// ErrRunExists: Open of a run the log already holds.
	ErrRunExists = errors.New("run already exists")
	// ErrRunClosed: Append to a run that was closed.
	ErrRunClosed = errors.New("run closed")
	// ErrLogFull: the run reached its size bound; its stream was ended.
	ErrLogFull = errors.New("event log full")
	// ErrUnknownEventID: a resume point that is not an event of the run.
	ErrUnknownEventID = errors.New("unknown event id")
)
