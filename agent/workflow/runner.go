package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// Names of the data chunks a run streams besides the chat's own: their
// types on the wire are "data-workflow-branch" and "data-workflow-result".
const (
	BranchChunk = "workflow-branch"
	ResultChunk = "workflow-result"
)

// CallIDPrefix starts the tool call id of a tool step's chunks: the call
// of step "fetch" is "step_fetch".
const CallIDPrefix = "step_"

// Branch outcomes.
const (
	TakenThen = "then"
	TakenElse = "else"
)

// RunnerOptions configures a Runner. Engine and Catalog are required.
type RunnerOptions struct {
	// Engine runs every tool step.
	Engine *loop.Engine
	// Catalog finds the steps' tools by id.
	Catalog *tools.Catalog
	// Now is the clock for throttling progress and timing it. Nil:
	// time.Now.
	Now func() time.Time
	// Logger receives the causes of step failures that are not the
	// tool's (the stream says only "the tool call failed"). Nil:
	// slog.Default().
	Logger *slog.Logger
}

// Runner runs workflows. It holds no state between runs and is safe for
// concurrent use.
type Runner struct {
	opt RunnerOptions
	log *slog.Logger
}

// NewRunner returns a Runner.
func NewRunner(opt RunnerOptions) *Runner {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	r := &Runner{opt: opt, log: opt.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// RunInput is one run of a workflow.
type RunInput struct {
	// Org is the deployment's organization.
	Org string
	// RunID names the run: its stream's message id, and the thread of
	// its tool calls ("workflow:" + RunID) in the activity log.
	RunID string
	// Credentials are runtime credentials by provider id; a provider
	// without one uses the organization's.
	Credentials map[string]string
	// User and CacheScope say whose runtime credentials these are, so
	// that a step opting into the cache shares walks only with their
	// owner (see loop.Scope). Zero: walks made with runtime credentials
	// are not cached.
	User       string
	CacheScope string
	// Emit appends a chunk to the run's stream. It is called from one
	// goroutine at a time. An error from it ends the run. Nil: the run is
	// not streamed.
	Emit func(stream.Chunk) error
	// Checkpoint, when set, saves the run's state after each completed
	// step, and a write step's right before its request leaves (see
	// Checkpoint). An error from it ends the run.
	Checkpoint func(ctx context.Context, cp Checkpoint) error
	// Resume, when set, continues a run from its last checkpoint instead
	// of starting it: the stream goes on after Resume.Tail.
	Resume *Resume
}

// Result is what a run did.
type Result struct {
	// Steps holds each step's output by step id: a tool step's payload
	// with its _loop verdict, a branch's {"taken": "then"|"else",
	// "next": <step id or "end">}. A failed or skipped step has none.
	Steps map[string]json.RawMessage `json:"steps"`
	// Order lists the steps that ran (the failed one included), in order.
	Order []string `json:"order"`
	// Failed is the id of the step that failed ("" when none did); Error
	// says why, in words safe to show.
	Failed string `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// BranchData is the data of a data-workflow-branch chunk, and a branch
// step's output without Step.
type BranchData struct {
	Step  string `json:"step,omitempty"`
	Taken string `json:"taken"`
	Next  string `json:"next"`
}

// ResultData is the data of the data-workflow-result chunk that ends a
// run that was not aborted.
type ResultData struct {
	Order  []string `json:"order"`
	Failed string   `json:"failed,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// Run validates def against the catalog and runs it, streaming as a chat
// turn does: start; per tool step start-step, tool-input-available (tool
// call id "step_<id>", tool name the tool's id, the arguments as the
// engine receives them, reserved ones included), throttled
// data-tool-loop-progress, tool-output-available (or tool-output-error,
// or tool-input-error when a ref could not be resolved), finish-step;
// per branch a data-workflow-branch chunk (id: the step's id); at the end
// a data-workflow-result chunk and finish.
//
// A step that fails ends the run: Result.Failed names it, later steps
// are skipped, and the stream still ends with data-workflow-result and
// finish; Run returns a nil error then. Run returns an error when def is
// invalid (an *InvalidError, before anything is emitted), when Emit fails,
// or when ctx ends (the stream ends with abort, the result holds what
// ran, the error is ctx's) — unless ctx ends with agent.ErrHandOff as its
// cause, or Checkpoint returns it: then the run stops where it is, for
// another process to continue it (no abort), and Run returns it.
func (r *Runner) Run(ctx context.Context, def *Definition, in RunInput) (*Result, error) {
	if r.opt.Engine == nil || r.opt.Catalog == nil {
		return nil, errors.New("workflow: RunnerOptions.Engine and Catalog are required")
	}
	if def == nil {
		return nil, invalid(Problem{Step: -1, Field: "workflow", Message: "is missing"})
	}
	if err := def.Validate(r.opt.Catalog.Get); err != nil {
		return nil, err
	}
	ru := &run{Runner: r, def: def, in: in, outs: newOutputs(),
		res:      &Result{Steps: map[string]json.RawMessage{}, Order: []string{}},
		throttle: stream.NewThrottle(stream.ThrottleOptions{Now: r.opt.Now}),
		index:    make(map[string]int, len(def.Steps))}
	for i, s := range def.Steps {
		ru.index[s.ID] = i
	}
	if ru.in.Emit == nil {
		ru.in.Emit = func(stream.Chunk) error { return nil }
	}
	first := 0
	if in.Resume != nil {
		var err error
		if first, err = ru.resume(); err != nil {
			return ru.res, err
		}
	} else if err := ru.emit(stream.Start{MessageID: in.RunID}); err != nil {
		return ru.res, err
	}
	err := ru.steps(ctx, first)
	switch {
	case errors.Is(err, agent.ErrHandOff) || (err != nil && errors.Is(context.Cause(ctx), agent.ErrHandOff)):
		// Another process continues the run from its checkpoint: the
		// stream is not over.
		return ru.res, agent.ErrHandOff
	case err != nil && ctx.Err() != nil:
		_ = ru.emit(stream.Abort{})
		return ru.res, ctx.Err()
	case err != nil:
		return ru.res, err
	}
	done := ResultData{Order: ru.res.Order, Failed: ru.res.Failed, Error: ru.res.Error}
	if err := ru.emit(stream.Data{Name: ResultChunk, Data: done}); err != nil {
		return ru.res, err
	}
	return ru.res, ru.emit(stream.Finish{})
}

// run is one run in progress.
type run struct {
	*Runner
	def      *Definition
	in       RunInput
	index    map[string]int
	outs     *outputs
	res      *Result
	throttle *stream.Throttle
	verdicts map[string]*loop.Verdict // tool step id → its verdict
}

func (ru *run) emit(c stream.Chunk) error { return ru.in.Emit(c) }

// steps runs the steps from the first-th; a nil error covers a failed
// step (recorded in the result). With a Checkpoint, the run's state is
// saved after each step.
func (ru *run) steps(ctx context.Context, first int) error {
	for i := first; i < len(ru.def.Steps); {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := ru.def.Steps[i]
		ru.res.Order = append(ru.res.Order, s.ID)
		if s.Type == TypeBranch {
			next, err := ru.branch(s)
			if err != nil || next == End {
				return err
			}
			i = ru.index[next]
			if err := ru.checkpoint(ctx, i, ""); err != nil {
				return err
			}
			continue
		}
		failed, err := ru.tool(ctx, i, s)
		if err != nil || failed {
			return err
		}
		i++
		if err := ru.checkpoint(ctx, i, ""); err != nil {
			return err
		}
	}
	return nil
}

// branch evaluates a branch step and returns the step to run next.
func (ru *run) branch(s Step) (string, error) {
	r, err := parseRef(s.If.Ref)
	if err != nil {
		return "", err // Validate parsed it
	}
	v, err := ru.outs.resolveRaw(r)
	if err != nil {
		return "", err
	}
	out := BranchData{Taken: TakenThen, Next: s.Then}
	if !s.If.holds(v) {
		out = BranchData{Taken: TakenElse, Next: s.Else}
	}
	b, _ := json.Marshal(out)
	ru.res.Steps[s.ID] = b
	ru.outs.set(s.ID, b)
	out.Step = s.ID
	return out.Next, ru.emit(stream.Data{Name: BranchChunk, ID: s.ID, Data: out})
}

// incompleteInput says why a step that changes data may not run: it
// consumes a ref (in its input or its for_each values) to a step whose
// verdict is partial or unstable, and does not set allow_partial. A
// single_response is acceptable input: it makes no paging claim.
func (ru *run) incompleteInput(s Step, t *tools.Tool) string {
	if s.AllowPartial || !ru.opt.Engine.Effect(t, loop.Binding{LoopResponses: true}).Writes() {
		return ""
	}
	var refs []string
	eachRef(any(s.Input), "input", func(r, _ string) { refs = append(refs, r) })
	if s.Loop != nil && s.Loop.ForEach != nil && s.Loop.ForEach.Values.Ref != "" {
		refs = append(refs, s.Loop.ForEach.Values.Ref)
	}
	for _, text := range refs {
		r, err := parseRef(text)
		if err != nil {
			continue // Validate reported it
		}
		v := ru.verdicts[r.step]
		if v == nil || (v.Completion != loop.Partial && v.Completion != loop.Unstable) {
			continue
		}
		return fmt.Sprintf("step %s changes data (%s) from %s, but step %s is %s (%s): acting on an incomplete list would miss or repeat objects; walk it completely (loop.all_pages, larger limits) or set allow_partial: true on step %s",
			s.ID, s.Tool, text, r.step, v.Completion, v.Summary(), s.ID)
	}
	return ""
}

// tool runs a tool step; failed reports a step failure (recorded).
func (ru *run) tool(ctx context.Context, i int, s Step) (failed bool, err error) {
	callID := CallIDPrefix + s.ID
	if err := ru.emit(stream.StartStep{}); err != nil {
		return false, err
	}
	t, ok := ru.opt.Catalog.Get(s.Tool)
	args, request, argErr := ru.args(s)
	if !ok {
		argErr = fmt.Errorf("tool %q no longer exists", s.Tool)
	}
	if argErr != nil {
		input := any(s.Input)
		if s.Input == nil {
			input = map[string]any{}
		}
		ru.fail(s, argErr.Error())
		if err := ru.emit(stream.ToolInputError{ToolCallID: callID, ToolName: s.Tool, Input: input, Dynamic: true, ErrorText: argErr.Error()}); err != nil {
			return true, err
		}
		return true, ru.emit(stream.FinishStep{})
	}
	if err := ru.emit(stream.ToolInputAvailable{ToolCallID: callID, ToolName: s.Tool, Input: shownInput(args, s.Loop, request), Dynamic: true}); err != nil {
		return false, err
	}
	writes := ru.opt.Engine.Effect(t, loop.Binding{LoopResponses: true}).Writes()
	if _, keyed := t.IdempotencyParam(); writes && ru.resumedWrite(i, s) && !keyed {
		text := unknownText(s)
		ru.fail(s, text)
		if err := ru.emit(stream.ToolOutputError{ToolCallID: callID, ErrorText: text, Dynamic: true}); err != nil {
			return true, err
		}
		return true, ru.emit(stream.FinishStep{})
	}
	if text := ru.incompleteInput(s, t); text != "" {
		ru.fail(s, text)
		if err := ru.emit(stream.ToolOutputError{ToolCallID: callID, ErrorText: text, Dynamic: true}); err != nil {
			return true, err
		}
		return true, ru.emit(stream.FinishStep{})
	}
	start := ru.opt.Now()
	call := loop.Call{
		Tool: t, Args: args, Request: request, Binding: loop.Binding{LoopResponses: true},
		Scope:      loop.Scope{Org: ru.in.Org, Thread: "workflow:" + ru.in.RunID, User: ru.in.User, CacheScope: ru.in.CacheScope},
		Credential: ru.in.Credentials[t.Provider],
		Workflow:   true,
		Progress: func(p loop.Progress) {
			if !ru.throttle.Allow(callID) {
				return
			}
			_ = ru.emit(agent.ProgressChunk(callID, s.Tool, p, ru.opt.Now().Sub(start))) // progress is never needed for correctness
		},
	}
	if s.Loop != nil && s.Loop.Cache != nil {
		call.CacheTTL = time.Duration(s.Loop.Cache.TTLMinutes * float64(time.Minute))
	}
	cctx := tools.WithCallID(ctx, callID)
	if writes && ru.in.Checkpoint != nil {
		// Recorded as sent before the request leaves: a run continued
		// elsewhere never sends it again (or sends it with the same
		// idempotency key).
		cctx = tools.WithIdempotencyKey(cctx, "workflow:"+ru.in.RunID+":"+s.ID)
		var mu sync.Mutex
		var sent bool
		cctx = tools.WithWriteGate(cctx, func(ctx context.Context) error {
			mu.Lock() // a fan-out's requests pass it concurrently
			defer mu.Unlock()
			if sent {
				return nil
			}
			if err := ru.checkpoint(ctx, i, s.ID); err != nil {
				return err
			}
			sent = true
			return nil
		})
	}
	out, err := ru.opt.Engine.Call(cctx, call)
	ru.throttle.Forget(callID)
	if ctx.Err() != nil {
		// Stopped mid-walk: the run ends here; the step keeps what it
		// fetched (its verdict says stopped by cancelled).
		if err == nil && out != nil {
			ru.res.Steps[s.ID] = out.View
		}
		return false, ctx.Err()
	}
	if err != nil {
		text := ru.errorText(s, err)
		ru.fail(s, text)
		if err := ru.emit(stream.ToolOutputError{ToolCallID: callID, ErrorText: text, Dynamic: true}); err != nil {
			return true, err
		}
		return true, ru.emit(stream.FinishStep{})
	}
	ru.res.Steps[s.ID] = out.View
	ru.outs.set(s.ID, out.View)
	if ru.verdicts == nil {
		ru.verdicts = map[string]*loop.Verdict{}
	}
	ru.verdicts[s.ID] = out.Verdict
	if err := ru.emit(stream.ToolOutputAvailable{ToolCallID: callID, Output: json.RawMessage(out.View), Dynamic: true}); err != nil {
		return false, err
	}
	return false, ru.emit(stream.FinishStep{})
}

func (ru *run) fail(s Step, text string) {
	ru.res.Failed, ru.res.Error = s.ID, text
}

// errorText words a failed call for the stream and the result.
func (ru *run) errorText(s Step, err error) string {
	var te *loop.ToolError
	if errors.As(err, &te) {
		return te.Error() // with its code
	}
	ru.log.Warn("workflow step failed", "workflow", ru.def.ID, "run", ru.in.RunID, "step", s.ID, "tool", s.Tool, "err", err)
	return "the tool call failed"
}

// args builds the engine's arguments of a tool step: its input with refs
// resolved, and its loop block as the typed loop request (parsed by the
// engine's own parsers; nil without a loop block).
func (ru *run) args(s Step) (map[string]any, *loop.Request, error) {
	in, err := ru.outs.resolveInput(jsonValue(s.Input))
	if err != nil {
		return nil, nil, fmt.Errorf("input: %w", err)
	}
	args, _ := in.(map[string]any)
	if args == nil {
		args = map[string]any{}
	}
	l := s.Loop
	if l == nil {
		return args, &loop.Request{}, nil
	}
	req := &loop.Request{AllPages: l.AllPages}
	if len(l.Fields) > 0 {
		if req.Fields, err = loop.FieldsArg("loop.fields", l.Fields); err != nil {
			return nil, nil, err
		}
	}
	if len(l.Filter) > 0 {
		if req.Filter, err = loop.FilterArg("loop.filter", l.Filter); err != nil {
			return nil, nil, err
		}
	}
	if l.Aggregate != nil {
		if req.Aggregate, err = loop.AggregateArg("loop.aggregate", *l.Aggregate); err != nil {
			return nil, nil, err
		}
	}
	if fe := l.ForEach; fe != nil {
		values, err := ru.values(fe.Values)
		if err != nil {
			return nil, nil, err
		}
		req.ForEach = &loop.ForEach{Key: fe.Key, Values: values}
	}
	return args, req, nil
}

// shownInput is the step's input as the stream shows it: the tool's
// arguments with the loop block written as the reserved arguments a model
// would send (the engine itself gets the typed request).
func shownInput(args map[string]any, l *Loop, r *loop.Request) map[string]any {
	if l == nil {
		return args
	}
	out := maps.Clone(args)
	if l.AllPages {
		out[loop.ArgAllPages] = true
	}
	if len(l.Fields) > 0 {
		out[loop.ArgFields] = l.Fields
	}
	if len(l.Filter) > 0 {
		out[loop.ArgFilter] = l.Filter
	}
	if l.Aggregate != nil {
		out[loop.ArgAggregate] = l.Aggregate
	}
	if r != nil && r.ForEach != nil {
		out[loop.ArgForEach] = map[string]any{"key": r.ForEach.Key, "values": r.ForEach.Values}
	}
	return out
}

// values resolves a fan-out's values to a non-empty list.
func (ru *run) values(v Values) ([]any, error) {
	if v.Ref == "" {
		list, _ := jsonValue(v.List).([]any)
		return list, nil
	}
	r, err := parseRef(v.Ref)
	if err != nil {
		return nil, fmt.Errorf("loop.for_each.values: %w", err)
	}
	got, err := ru.outs.resolve(r)
	if err != nil {
		return nil, fmt.Errorf("loop.for_each.values: %w", err)
	}
	list, ok := got.([]any)
	if !ok {
		what := kindOf(got)
		if _, ran := ru.outs.raw[r.step]; !ran {
			what = fmt.Sprintf("null (step %s did not run)", r.step)
		}
		return nil, fmt.Errorf("loop.for_each.values: %q resolved to %s, not a list", v.Ref, what)
	}
	out := make([]any, 0, len(list))
	for _, e := range list {
		if e != nil {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("loop.for_each.values: %q resolved to an empty list; there is nothing to fan out over (a branch with op \"truthy\" on it can skip this step)", v.Ref)
	}
	return out, nil
}

// jsonValue returns v as decoded JSON (numbers as json.Number), so that
// values written in Go (an int, a []string) reach the engine in the form
// it reads. Conditions' values and steps' inputs both go through it.
func jsonValue(v any) any {
	switch v.(type) {
	case nil, bool, string, json.Number:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out, err := decodeNumbers(b)
	if err != nil {
		return v
	}
	return out
}
