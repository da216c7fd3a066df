package workflow

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// checkpoints records a run's checkpoints with the number of chunks
// emitted when each was saved.
type checkpoints struct {
	mu  sync.Mutex
	rec *recorder
	cps []Checkpoint
	at  []int
}

func (c *checkpoints) save(_ context.Context, cp Checkpoint) error {
	c.rec.mu.Lock()
	n := len(c.rec.chunks)
	c.rec.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cps, c.at = append(c.cps, cp), append(c.at, n)
	return nil
}

// TestRunResumesFromItsLastStep: a run whose process died in its second
// step continues from its last checkpoint: the first step is not run
// again (its output still feeds the second's for_each), the interrupted
// call ends as interrupted, a data-run-resumed chunk precedes the
// continuation, and the run ends as a whole run does.
func TestRunResumesFromItsLastStep(t *testing.T) {
	f := newFixture(t)
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	def := mustParse(t, hotelBookings)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{}
	cps := &checkpoints{rec: rec}
	emit := func(c stream.Chunk) error {
		if ctx.Err() != nil {
			return ctx.Err() // the process is dead: nothing more reaches the log
		}
		if in, ok := c.(stream.ToolInputAvailable); ok && in.ToolCallID == "step_bookings" {
			defer cancel() // dies once this chunk is in the log
		}
		return rec.emit(c)
	}
	if _, err := r.Run(ctx, def, RunInput{Org: "o", RunID: "d", Emit: emit, Checkpoint: cps.save}); !errors.Is(err, context.Canceled) {
		t.Fatalf("first run: %v", err)
	}
	if len(cps.cps) == 0 {
		t.Fatal("no checkpoint was saved")
	}
	last, at := cps.cps[len(cps.cps)-1], cps.at[len(cps.at)-1]
	if last.Next != 1 || len(last.Result.Steps) != 1 {
		t.Fatalf("last checkpoint %+v; want the run before step bookings", last)
	}
	properties := f.srv.Count("/properties")
	tail := append([]stream.Chunk(nil), rec.chunks[at:]...)

	rest := &recorder{}
	res, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: "d", Emit: rest.emit,
		Resume: &Resume{Checkpoint: last, Tail: tail, By: "b", Reason: "takeover", Count: 1}})
	if err != nil || res.Failed != "" {
		t.Fatalf("resumed run: %v %+v", err, res)
	}
	if n := f.srv.Count("/properties"); n != properties {
		t.Errorf("step properties ran again: %d requests, %d before", n, properties)
	}
	if len(res.Order) < 3 || !cmp.Equal(res.Order[:3], []string{"properties", "bookings", "gate"}) {
		t.Errorf("order: %v; want properties, bookings, gate…", res.Order)
	}
	got := rest.shape()
	want := []string{"tool-output-error:step_bookings", "finish-step", "data-run-resumed:run-resumed-1",
		"start-step", "tool-input-available:step_bookings:acme.list_property_bookings"}
	if len(got) < len(want) || !cmp.Equal(got[:len(want)], want) {
		t.Errorf("the continuation begins %v; want %v", got, want)
	}
	if got[len(got)-1] != "finish" || got[len(got)-2] != "data-workflow-result" {
		t.Errorf("the continuation ends %v", got[max(0, len(got)-3):])
	}
	for _, c := range rest.chunks {
		if c.Type() == "start" {
			t.Error("the continuation starts the message again")
		}
	}
}

// TestResumedWriteAtMostOnce: a write step recorded as sent without an
// answer is not sent again on resume — the step fails with
// outcome_unknown — unless its operation declares an idempotency key:
// then it is sent again with the same key.
func TestResumedWriteAtMostOnce(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		f := newFixture(t)
		params := []tools.Param{{Name: "conversation_id", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}},
			{Name: "text", In: tools.InBody, Schema: &tools.Schema{Type: "string"}}}
		if keyed {
			params = append(params, tools.Param{Name: "Idempotency-Key", In: tools.InHeader, Schema: &tools.Schema{Type: "string"}})
		}
		if err := f.cat.Add(&tools.Tool{ID: "acme.post_message", Provider: "acme", Name: "post_message", Method: "POST",
			Path: "/chat/conversations/{conversation_id}/messages", Origin: f.base, Effect: tools.EffectWrite, Params: params}); err != nil {
			t.Fatal(err)
		}
		r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
		def := mustParse(t, `{"id": "w", "steps": [
		  {"id": "post", "type": "tool", "tool": "acme.post_message", "input": {"conversation_id": "conv_01", "text": "hi"}}]}`)
		rec := &recorder{}
		cps := &checkpoints{rec: rec}
		if _, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: "w1", Emit: rec.emit, Checkpoint: cps.save}); err != nil {
			t.Fatal(err)
		}
		var sent *Checkpoint
		var at int
		for i, cp := range cps.cps {
			if cp.Sent == "post" {
				sent, at = &cps.cps[i], cps.at[i]
			}
		}
		if sent == nil {
			t.Fatalf("keyed %v: no checkpoint recorded the write as sent: %+v", keyed, cps.cps)
		}
		const path = "/chat/conversations/conv_01/messages"
		if n := f.srv.Count(path); n != 1 {
			t.Fatalf("keyed %v: %d writes", keyed, n)
		}
		// The process died after the request left, before the answer.
		rest := &recorder{}
		res, err := r.Run(context.Background(), def, RunInput{Org: "o", RunID: "w1", Emit: rest.emit, Checkpoint: cps.save,
			Resume: &Resume{Checkpoint: *sent, Tail: rec.chunks[at:], Reason: "takeover", Count: 1}})
		if err != nil {
			t.Fatal(err)
		}
		n := f.srv.Count(path)
		switch {
		case !keyed && (n != 1 || res.Failed != "post" || !strings.HasPrefix(res.Error, "outcome_unknown")):
			t.Errorf("no key: %d writes, failed %q: %s", n, res.Failed, res.Error)
		case keyed && (n != 2 || res.Failed != ""):
			t.Errorf("keyed: %d writes, failed %q: %s", n, res.Failed, res.Error)
		case keyed:
			var keys []string
			for _, q := range f.srv.Requests() {
				if q.Path == path {
					keys = append(keys, q.Header.Get("Idempotency-Key"))
				}
			}
			if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
				t.Errorf("the write was sent again with keys %q; want the same key twice", keys)
			}
		}
	}
}
