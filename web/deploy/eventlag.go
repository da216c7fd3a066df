package deploy

import (
	"context"
	"iter"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/stream"
	"go.opentelemetry.io/otel/metric"
)

// laggedLog is an event log that measures its lag: from an event's
// append to its delivery to each reader (trawl.events.lag). It keeps one
// time per event of a run until the run's log is closed; readers after
// that are not measured.
type laggedLog struct {
	stream.EventLog
	lag metric.Float64Histogram
	mu  sync.Mutex
	at  map[string][]time.Time // run → append time of event Seq i+1
}

func newLaggedLog(l stream.EventLog, m metric.Meter) *laggedLog {
	lag, _ := m.Float64Histogram("trawl.events.lag", metric.WithUnit("s"),
		metric.WithDescription("From an event's append to its delivery to a stream reader."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5))
	return &laggedLog{EventLog: l, lag: lag, at: map[string][]time.Time{}}
}

func (l *laggedLog) Append(ctx context.Context, runID string, c stream.Chunk) (int64, error) {
	now := time.Now()
	seq, err := l.EventLog.Append(ctx, runID, c)
	if err == nil {
		l.mu.Lock()
		ts := l.at[runID]
		for int64(len(ts)) < seq-1 {
			ts = append(ts, time.Time{}) // appended before this log was wrapped
		}
		if int64(len(ts)) == seq-1 {
			ts = append(ts, now)
		}
		l.at[runID] = ts
		l.mu.Unlock()
	}
	return seq, err
}

func (l *laggedLog) Read(ctx context.Context, runID string, after int64) iter.Seq2[stream.Event, error] {
	return func(yield func(stream.Event, error) bool) {
		for ev, err := range l.EventLog.Read(ctx, runID, after) {
			if err == nil {
				l.mu.Lock()
				var at time.Time
				if ts := l.at[runID]; ev.Seq >= 1 && ev.Seq <= int64(len(ts)) {
					at = ts[ev.Seq-1]
				}
				l.mu.Unlock()
				if !at.IsZero() {
					l.lag.Record(ctx, time.Since(at).Seconds())
				}
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (l *laggedLog) Close(ctx context.Context, runID string) error {
	err := l.EventLog.Close(ctx, runID)
	l.mu.Lock()
	delete(l.at, runID)
	l.mu.Unlock()
	return err
}

// Sync passes the wrapped log's Sync through (see eventSyncer).
func (l *laggedLog) Sync(ctx context.Context) error { return syncEvents(ctx, l.EventLog) }

// Recovered passes the wrapped log's Recovered through (see
// recoveredRuns).
func (l *laggedLog) Recovered() []string { return recoveredOf(l.EventLog) }
