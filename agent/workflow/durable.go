package workflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
)

// Durable runs. A run given RunInput.Checkpoint saves its state after
// each completed step (the step outputs are the checkpoint), and a write
// step's also right before its request leaves. A run given
// RunInput.Resume continues from such a checkpoint on another process:
// the steps it completed are not run again (their outputs feed the refs
// as before), the interrupted step runs again — unless it is a write
// whose request may have been sent: that is never sent again unless its
// operation declares an idempotency key (sent with the same key, derived
// from the run and the step), and otherwise the step fails with
// outcome_unknown.

// Checkpoint is a run's state between steps.
type Checkpoint struct {
	// Next is the index in the definition's steps of the step to run
	// next; Result what ran before it; Verdicts the tool steps' verdicts.
	Next     int                      `json:"next"`
	Result   Result                   `json:"result"`
	Verdicts map[string]*loop.Verdict `json:"verdicts,omitempty"`
	// Sent names the write step (Next) whose request may have been sent
	// and whose answer was not recorded.
	Sent string `json:"sent,omitempty"`
}

// Resume is how a run continues: from Checkpoint, after Tail (the chunks
// its stream holds after the checkpoint was saved), continued by By for
// Reason ("takeover", "handoff", "restart"), the Count-th time.
type Resume struct {
	Checkpoint Checkpoint
	Tail       []stream.Chunk
	By, Reason string
	Count      int
}

// ResumedChunk is the name of the data chunk ("data-run-resumed") that
// precedes a run's continuation.
const ResumedChunk = "run-resumed"

// ResumedData is the data of a data-run-resumed chunk.
type ResumedData struct {
	By       string `json:"by,omitempty"`
	Reason   string `json:"reason"`
	FromStep string `json:"fromStep,omitempty"`
	Count    int    `json:"count"`
}

// interruptedText ends a step's call that its server's death cut off.
const interruptedText = "the server running this step stopped before it finished; the step runs again"

// unknownText fails a write step whose request may have been sent.
func unknownText(s Step) string {
	return fmt.Sprintf("outcome_unknown: the server running this run stopped after step %s's write (%s) was sent and before its answer came; it was not sent again (the operation declares no idempotency key): check its effect before running the workflow again", s.ID, s.Tool)
}

// checkpoint saves the run's state with next to run (sent: its write
// may be on its way).
func (ru *run) checkpoint(ctx context.Context, next int, sent string) error {
	if ru.in.Checkpoint == nil {
		return nil
	}
	res := Result{Steps: make(map[string]json.RawMessage, len(ru.res.Steps)), Order: append([]string(nil), ru.res.Order...),
		Failed: ru.res.Failed, Error: ru.res.Error}
	for k, v := range ru.res.Steps {
		res.Steps[k] = v
	}
	return ru.in.Checkpoint(ctx, Checkpoint{Next: next, Result: res, Verdicts: ru.verdicts, Sent: sent})
}

// resume restores the run from in.Resume and ends, in the stream, what
// the interrupted step left open; it returns the step to run next.
func (ru *run) resume() (int, error) {
	res := ru.in.Resume
	cp := res.Checkpoint
	ru.res.Order = append(ru.res.Order[:0], cp.Result.Order...)
	for k, v := range cp.Result.Steps {
		ru.res.Steps[k] = v
		ru.outs.set(k, v)
	}
	ru.verdicts = cp.Verdicts
	// The interrupted step: its call, if shown without an answer, ends
	// as interrupted, and its step is finished.
	started, finished := false, false
	shown := map[string]bool{}
	for _, c := range res.Tail {
		switch c := c.(type) {
		case stream.StartStep:
			started, finished = true, false
		case stream.FinishStep:
			finished = true
		case stream.ToolInputAvailable:
			shown[c.ToolCallID] = true
		case stream.ToolOutputAvailable:
			delete(shown, c.ToolCallID)
		case stream.ToolOutputError:
			delete(shown, c.ToolCallID)
		case stream.ToolInputError:
			delete(shown, c.ToolCallID)
		}
	}
	for id := range shown {
		if err := ru.emit(stream.ToolOutputError{ToolCallID: id, ErrorText: interruptedText, Dynamic: true}); err != nil {
			return 0, err
		}
	}
	if started && !finished {
		if err := ru.emit(stream.FinishStep{}); err != nil {
			return 0, err
		}
	}
	from := ""
	if cp.Next < len(ru.def.Steps) {
		from = ru.def.Steps[cp.Next].ID
	}
	id := fmt.Sprintf("run-resumed-%d", res.Count)
	return cp.Next, ru.emit(stream.Data{Name: ResumedChunk, ID: id, Data: ResumedData{By: res.By, Reason: res.Reason, FromStep: from, Count: res.Count}})
}

// resumedWrite reports whether step s, about to run, is the write whose
// request the run being resumed may have sent.
func (ru *run) resumedWrite(i int, s Step) bool {
	return ru.in.Resume != nil && ru.in.Resume.Checkpoint.Sent == s.ID && ru.in.Resume.Checkpoint.Next == i
}
