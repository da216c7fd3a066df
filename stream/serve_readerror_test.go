package stream

import (
	"context"
	"errors"
	"io"
	"iter"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// failingLog reads its first events and then fails, as a log does whose
// store went away mid-stream.
type failingLog struct {
	*MemoryLog
	after int64 // the last event read before the failure
	err   error
}

func (l failingLog) Read(ctx context.Context, runID string, after int64) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for ev, err := range l.MemoryLog.Read(ctx, runID, after) {
			if err != nil || ev.Seq > l.after {
				yield(Event{}, l.err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// A log that fails mid-stream ends the stream with an error chunk (no id,
// so a resume continues after the last event delivered) and [DONE] when
// ReadError names the failure; without ReadError the stream just ends.
func TestServeReadErrorEndsTheStream(t *testing.T) {
	ctx := context.Background()
	mem := NewMemoryLog(MemoryLogOptions{})
	if err := mem.Open(ctx, "r1"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []Chunk{Start{MessageID: "m1"}, TextStart{ID: "t"}, TextDelta{ID: "t", Delta: "hi"}} {
		if _, err := mem.Append(ctx, "r1", c); err != nil {
			t.Fatal(err)
		}
	}
	gone := errors.New("the store is gone")
	log := failingLog{MemoryLog: mem, after: 2, err: gone}
	for _, tc := range []struct {
		name string
		opts ServeOptions
		want string
	}{
		{"named", ServeOptions{ReadError: func(err error) string {
			if errors.Is(err, gone) {
				return "lost the store"
			}
			return "other"
		}}, "id: 2\ndata: {\"type\":\"text-start\",\"id\":\"t\"}\n\ndata: {\"type\":\"error\",\"errorText\":\"lost the store\"}\n\ndata: [DONE]\n\n"},
		{"unnamed", ServeOptions{}, "id: 2\ndata: {\"type\":\"text-start\",\"id\":\"t\"}\n\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := make(chan error, 1)
			srv := streamServer(t, log, tc.opts, errs)
			resp := get(t, srv.URL+"/runs/r1", "1")
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if err := <-errs; !errors.Is(err, gone) {
				t.Errorf("Serve: %v, want the read's error", err)
			}
			if diff := cmp.Diff(tc.want, string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}
