package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxSteps bounds the steps of a turn when the agent sets none.
const DefaultMaxSteps = 12

// RunnerOptions configures a Runner. Model, Engine and Catalog are
// required.
type RunnerOptions struct {
	Model     Model
	Engine    *loop.Engine
	Retrieval *loop.Retrieval // nil: no retrieval tools
	Catalog   *tools.Catalog
	// ModelName is passed to the model; "" means its default.
	ModelName string
	// ToolConcurrency bounds the tool calls of one step run at once.
	// Zero: 4.
	ToolConcurrency int
	// Now is the clock for throttling progress and result expiry. Nil:
	// time.Now.
	Now func() time.Time
	// ResultTTL is how long a stored result stays readable (to know when
	// a thread still holds one). Zero: 15 minutes.
	ResultTTL time.Duration
	// DirectBudget is how many connected-app tools go to the model
	// directly. Zero: discovery's default (15).
	DirectBudget int
	// Search configures the search_tools index: semantic ranking. Zero:
	// BM25 alone.
	Search discovery.IndexOptions
	Logger *slog.Logger
	// TracerProvider and MeterProvider receive the turn, step, model and
	// tool call spans and the turn metrics (see observe.go); RecordContent
	// puts prompts, answers and tool content in spans. Nil: none, at no
	// cost.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	RecordContent  bool
	// Scrub returns the deployment's scrubber, with the given runtime
	// credentials of a turn's caller. Every model event (text, reasoning,
	// tool calls and their arguments, with a bounded hold-back so that a
	// secret split across deltas is masked too) and every model error of
	// the turn passes through it before anything else sees it: the
	// stream, the thread, the tool calls, traces and logs. Nil: nothing is
	// scrubbed.
	Scrub func(runtime ...string) *tools.Scrubber
}

// Runner runs turns: the step loop of DESIGN.md §1. It is safe for
// concurrent use by turns of different threads; the caller serialises
// turns of one thread.
type Runner struct {
	opt RunnerOptions
	log *slog.Logger

	verdicts *verdictCache // compacted older tool results
	older    *olderKept    // threads' converted older turns, for their next turn
	obs      *instrumentation
	calib    sync.Map // model name → calibrated characters per token (float64)
	tokens   sync.Map // tokenizer.Encoding → *TokenMemo (tokenCounter)

	indexMu    sync.Mutex
	indexes    sync.Map // pool fingerprint → *discovery.Index
	indexCount int      // entries in indexes; guarded by indexMu

	callTools callToolsCache // a conversation call's bindings and tool list
}

// NewRunner returns a Runner.
func NewRunner(opt RunnerOptions) *Runner {
	if opt.ToolConcurrency <= 0 {
		opt.ToolConcurrency = 4
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.ResultTTL <= 0 {
		opt.ResultTTL = loop.DefaultResultTTL
	}
	r := &Runner{opt: opt, log: opt.Logger, verdicts: newVerdictCache(verdictCacheSize), older: newOlderKept(),
		obs: newInstrumentation(opt.TracerProvider, opt.MeterProvider, opt.RecordContent)}
	if r.log == nil {
		r.log = slog.Default()
	}
	return r
}

// Turn is one user turn to run.
type Turn struct {
	// Agent returns the agent's current definition; it is read at every
	// step so that a binding changed mid-turn applies from the next step.
	Agent func() (Definition, bool)
	// Thread holds the conversation, the new user message already
	// appended; Run appends the assistant message.
	Thread *Thread
	Org    string
	// User, CacheScope and Credentials come from the caller's session:
	// runtime credentials per provider id.
	User        string
	CacheScope  string
	Credentials map[string]string
	// Experiment marks an evaluation run (never reads the cache).
	Experiment bool
	// Connections says which connected apps the user can call and mints
	// connect links. Nil: every toolkit counts as connected through the
	// organization.
	Connections Connections
	// Emit appends a chunk to the run's stream. It must be safe for
	// concurrent use (parallel tool calls report progress at once).
	Emit func(stream.Chunk) error
	// Checkpoint, when set, is called after every step that made tool
	// calls with a copy of the thread holding the assistant message so
	// far, for the caller to save: a crash then loses at most the step in
	// flight. Its error is logged and the turn goes on. Nil: the thread
	// is only what Run leaves in Thread.
	Checkpoint func(ctx context.Context, t *Thread) error
	// Journal, when set, keeps the turn's checkpoints and its outcome
	// ledger (see durable.go), so that another process can continue the
	// turn from its last one: after the model answered a step, after
	// each of its calls, and after each step (once Checkpoint saved the
	// thread); a write is recorded as sent before its request leaves. A
	// save that fails is logged and the turn goes on — except the one
	// before a write: that write is not sent. Nil: none.
	Journal Journal
	// Resume continues a turn that another process (or this one, before
	// a restart) began, from its Journal's last checkpoint; Thread is the
	// thread as saved with it. The stream goes on without a new start
	// chunk. Nil: a new turn.
	Resume *Resume
}

// ErrNoAgent is returned when the turn's agent no longer exists.
var ErrNoAgent = errors.New("agent not found")

// turnState is what one turn tracks across its steps.
type turnState struct {
	*Turn
	msg      UIMessage // the assistant message being built
	throttle *stream.Throttle
	// pending are stored results that were cut and not yet queried: the
	// next step offers only the retrieval tools.
	pending map[string]bool
	// cpt is the characters-per-token estimate calibrated on this turn's
	// previous step (0: none yet); reported is that step's prompt tokens.
	cpt      float64
	reported int
	older    olderMemo // the older turns' model messages, built once per turn
	// reads are the verdicts of the turn's reads so far, the evidence an
	// approval request shows; approved are the calls a human approved;
	// waiting says a call waits for approval, so the turn ends.
	reads    []string
	approved map[string]bool
	waiting  bool
	// step0 is the step the turn's loop starts at (a resumed turn's
	// checkpoint); tail what an interrupted run had shown of the step it
	// was in (nil for a new turn); idSuffix sets the ids of a resumed
	// turn's parts apart from the interrupted run's.
	step0    int
	tail     *tailState
	idSuffix string
	// answer is the text of the last step; revision, when set, is the
	// claim check's reason, given to the next step (then cleared);
	// revised says the turn's one revision was asked for.
	answer   string
	revision string
	revised  bool
	// saveMu orders the Journal's saves.
	saveMu sync.Mutex
	mu     sync.Mutex // guards msg.Parts, pending, reads, waiting, the ledger and Thread.Results/Approvals during tool calls
	model  Model      // the runner's model, its output scrubbed for this turn's caller
	// outcome, when set, receives the engine's outcome of each bound
	// tool's call (a conversation's door reads its typed verdict).
	outcome func(*loop.Outcome)
	// callOnly: the step's tool list serves one call, no model reads it
	// (a conversation's call), so the bound tools' schemas are not
	// rendered.
	callOnly bool
	// gate, when set, decides a call that needs approval instead of the
	// chat's approval parts (a conversation: the approvals inbox): the
	// part to return, or run to go on with the call.
	gate func(ctx context.Context, part Part, bt boundTool, args map[string]any) (np Part, run bool, err error)
	// What the checkpoint says: the step running, where in it the turn
	// stands, the index of its first part, and its calls' outcomes.
	step      int
	phase     string
	stepStart int
	ledger    map[string]*LedgerEntry
	order     []string // the ledger's call ids, in call order
}

// Run runs one turn to its end, emitting the UI message stream: start,
// then per step start-step … finish-step, then finish — or abort when ctx
// is cancelled, or error when the model fails. The assistant message is
// appended to the thread whatever happens, so a stopped turn keeps what
// it did.
func (r *Runner) Run(ctx context.Context, t *Turn) (err error) {
	ctx, observed := r.obs.turn(ctx, t)
	defer func() { observed(err) }()
	st := &turnState{Turn: t, pending: map[string]bool{}, approved: map[string]bool{},
		msg:      UIMessage{ID: "msg_" + randomHex(12), Role: RoleAssistant},
		throttle: stream.NewThrottle(stream.ThrottleOptions{Now: r.opt.Now}),
		model:    scrubbedModel{model: r.opt.Model, scrub: r.turnScrubber(t)}}
	resumed, done := false, false
	if t.Resume != nil {
		cp := t.Resume.Checkpoint
		if n := len(t.Thread.Msgs); n > 0 && t.Thread.Msgs[n-1].ID == cp.MessageID {
			cp = reconcile(cp, &t.Thread.Msgs[n-1])
		}
		st.restore(cp)
		t.Resume.Checkpoint = cp
		// The approved calls run (again) when the interrupted run was
		// resolving them, or had not begun to: its first checkpoint.
		resumed = cp.Phase == PhaseApprovals || awaitsRun(st.msg)
	} else if n := len(t.Thread.Msgs); n > 0 && awaitsRun(t.Thread.Msgs[n-1]) {
		// The human answered approvals: the same assistant message goes on.
		st.msg, t.Thread.Msgs, resumed = t.Thread.Msgs[n-1], t.Thread.Msgs[:n-1], true
	}
	defer func() {
		if len(st.msg.Parts) > 0 {
			t.Thread.Msgs = append(t.Thread.Msgs, st.msg)
		}
		// What the turn converted of the older turns, for the next.
		r.older.put(t.Thread.Key, st.older.conv)
	}()
	if t.Resume != nil {
		done, err = r.takeOver(ctx, st)
	} else {
		// Saved before anything is shown, so a continuation goes on
		// with this message.
		if err := r.saveOrHandOff(ctx, st, "saving the turn's first checkpoint"); err != nil {
			return err
		}
		if err := t.Emit(stream.Start{MessageID: st.msg.ID}); err != nil {
			return err
		}
	}
	if resumed && err == nil {
		err = r.resolveApprovals(ctx, st)
	}
	if err == nil && !done {
		err = r.steps(ctx, st)
	}
	switch {
	case err == nil:
		if err := r.turnChanges(st); err != nil {
			return err
		}
		return t.Emit(stream.Finish{})
	case errors.Is(err, ErrHandOff), ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrHandOff):
		return ErrHandOff // another process continues the turn: the stream is its
	case ctx.Err() != nil:
		_ = t.Emit(stream.Abort{})
		return ctx.Err()
	default:
		r.log.Warn("turn failed", "thread", t.Thread.Key, "err", err)
		_ = t.Emit(stream.Error{ErrorText: publicError(err)})
		return err
	}
}

// publicError words a run failure for the client.
func publicError(err error) string {
	var me *ModelError
	if errors.As(err, &me) {
		return me.Error()
	}
	if errors.Is(err, ErrNoAgent) {
		return "the agent no longer exists"
	}
	var be *ContextBudgetError
	if errors.As(err, &be) {
		return be.Error()
	}
	return "the turn failed; see the server log"
}

// ModelError is a failure of the model call, safe to show.
type ModelError struct{ Msg string }

func (e *ModelError) Error() string { return "the model call failed: " + e.Msg }

func (r *Runner) steps(ctx context.Context, st *turnState) error {
	for step := st.step0; ; step++ {
		def, ok := st.Agent()
		if !ok {
			return ErrNoAgent
		}
		max := def.MaxSteps
		if max <= 0 {
			max = DefaultMaxSteps
		}
		if step >= max && st.revision == "" { // the claim check's revision is a step beyond the budget
			return nil
		}
		bound, err := resolveBindings(def, r.opt.Catalog)
		if err != nil {
			return err
		}
		st.mu.Lock()
		st.step, st.phase = step, PhaseModel
		st.mu.Unlock()
		sctx, observed := r.obs.step(ctx, step)
		calls, err := r.step(sctx, st, def, bound, step)
		observed(calls, err)
		if err != nil {
			return err
		}
		if len(calls) == 0 {
			again, err := r.checkAnswer(st, def, step)
			if err != nil || !again {
				return err
			}
			continue
		}
		st.step = step + 1
		if err := r.checkpoint(ctx, st); err != nil {
			return err
		}
		if st.waiting {
			return nil // a call waits for a human's approval: the turn ends here
		}
	}
}

// checkpoint hands Turn.Checkpoint a copy of the thread with the assistant
// message so far, then the Journal the checkpoint of the step that comes
// next (st.step). It runs between steps, when no tool call is running.
func (r *Runner) checkpoint(ctx context.Context, st *turnState) error {
	st.mu.Lock()
	st.phase, st.ledger, st.order = PhaseModel, nil, nil
	st.mu.Unlock()
	if st.Checkpoint != nil {
		r.saveThread(ctx, st)
	}
	return r.saveOrHandOff(ctx, st, "saving the turn's checkpoint after a step")
}

// saveThread hands Turn.Checkpoint a copy of the thread.
func (r *Runner) saveThread(ctx context.Context, st *turnState) {
	st.mu.Lock()
	t := *st.Thread
	msg := st.msg
	msg.Parts = slices.Clone(st.msg.Parts)
	t.Msgs = append(slices.Clone(st.Thread.Msgs), msg)
	t.Loaded, t.Results, t.Approvals = slices.Clone(t.Loaded), slices.Clone(t.Results), slices.Clone(t.Approvals)
	st.mu.Unlock()
	if err := st.Checkpoint(ctx, &t); err != nil {
		r.log.Warn("saving the thread after a step", "thread", t.Key, "err", err)
	}
}

// step runs one model call and the tool calls it made; it returns the
// calls (none: the turn is over).
//
// A retrieval-only step (a cut result waits to be read) requires a tool
// call (ToolChoiceRequired). Its text is held until the model calls a
// tool, so that when a model that could not be made to call (a server
// that rejects tool_choice, or ignores it) answers from the preview
// instead, that answer is never shown: the step is asked once more, with
// the reason, and its second answer stands.
func (r *Runner) step(ctx context.Context, st *turnState, def Definition, bound []boundTool, step int) ([]ToolCall, error) {
	tl, err := r.assemble(st, def, bound)
	if err != nil {
		return nil, err
	}
	model := def.Model
	if model == "" {
		model = r.opt.ModelName
	}
	fitted, bud, err := r.fitStep(st, def, bound, tl.specs, model)
	if err != nil {
		return nil, err
	}
	msgs := fitted.msgs
	if err := st.Emit(stream.StartStep{}); err != nil {
		return nil, err
	}
	st.mu.Lock()
	st.stepStart = len(st.msg.Parts)
	st.msg.Parts = append(st.msg.Parts, Part{Type: "step-start"})
	st.mu.Unlock()
	if err := st.Emit(fitted.report(step, bud, st.reported).Chunk()); err != nil {
		return nil, err
	}
	if st.revision != "" {
		msgs = append(slices.Clip(msgs), Message{Role: RoleSystem, Content: st.revision})
		st.revision = ""
	}
	req := ModelRequest{Model: model, Messages: msgs, Tools: tl.specs}
	if tl.gated {
		req.ToolChoice = ToolChoiceRequired
	}
	ans, err := r.answer(ctx, st, req, step, tl.gated)
	if err == nil && tl.gated && len(ans.calls) == 0 {
		// An answer off a preview, never shown: asked again, once, with
		// the reason.
		req.Messages = append(slices.Clip(msgs), Message{Role: RoleSystem, Content: prompts.Text("preview")})
		ans, err = r.answer(ctx, st, req, step, false)
	}
	if err != nil {
		return nil, err
	}
	st.answer = ans.text
	r.calibrate(st, bud, fitted.chars, ans.usage)
	tl.room = viewRoom(fitted, bud, ans.text, ans.calls)
	if len(ans.calls) > 0 {
		if err := r.beginCalls(ctx, st, PhaseCalls, ans.calls); err != nil {
			return nil, err
		}
	}
	if err := r.runCalls(ctx, st, def, tl, ans.calls); err != nil {
		return nil, err
	}
	if err := st.Emit(stream.FinishStep{}); err != nil {
		return nil, err
	}
	return ans.calls, nil
}

// stepAnswer is what one model call of a step answered.
type stepAnswer struct {
	text  string
	calls []ToolCall
	usage Usage
}

// answer streams one model call of a step, putting its text and
// reasoning in the message. With hold, text and reasoning are held until
// the first tool call starts (then sent, in order) or the call ends
// without one: then nothing of it was sent or kept, and the caller
// decides.
func (r *Runner) answer(ctx context.Context, st *turnState, req ModelRequest, step int, hold bool) (stepAnswer, error) {
	var ans stepAnswer
	textID, reasonID := fmt.Sprintf("txt_%d%s", step, st.idSuffix), fmt.Sprintf("rsn_%d%s", step, st.idSuffix)
	var text, reasoning strings.Builder
	textOpen, reasonOpen := false, false
	var held []stream.Chunk // while holding: the chunks not sent yet
	emit := func(c stream.Chunk) error {
		if hold {
			held = append(held, c)
			return nil
		}
		return st.Emit(c)
	}
	release := func() error {
		hold = false
		for _, c := range held {
			if err := st.Emit(c); err != nil {
				return err
			}
		}
		held = nil
		return nil
	}
	calls := map[int]*ToolCall{}
	var order []int
	// keepPartial keeps what the model streamed (and the stream showed)
	// before a failure or a stop, so the thread shows it.
	keepPartial := func() {
		if hold {
			return
		}
		if reasonOpen {
			st.msg.Parts = append(st.msg.Parts, Part{Type: "reasoning", Text: reasoning.String(), State: "done"})
		}
		if textOpen {
			st.msg.Parts = append(st.msg.Parts, Part{Type: "text", Text: text.String(), State: "done"})
		}
	}
	for ev, err := range r.obs.stream(ctx, st.model, req) {
		if err != nil {
			keepPartial()
			if ctx.Err() != nil {
				return ans, ctx.Err()
			}
			return ans, &ModelError{Msg: err.Error()}
		}
		switch ev.Kind {
		case EventTextDelta:
			if !textOpen {
				textOpen = true
				if err := emit(stream.TextStart{ID: textID}); err != nil {
					return ans, err
				}
			}
			text.WriteString(ev.Text)
			if err := emit(stream.TextDelta{ID: textID, Delta: ev.Text}); err != nil {
				return ans, err
			}
		case EventReasoningDelta:
			if !reasonOpen {
				reasonOpen = true
				if err := emit(stream.ReasoningStart{ID: reasonID}); err != nil {
					return ans, err
				}
			}
			reasoning.WriteString(ev.Text)
			if err := emit(stream.ReasoningDelta{ID: reasonID, Delta: ev.Text}); err != nil {
				return ans, err
			}
		case EventToolCallStart:
			if err := release(); err != nil {
				return ans, err
			}
			c := &ToolCall{ID: ev.ToolCallID, Name: ev.ToolName}
			if c.ID == "" {
				c.ID = "call_" + randomHex(8)
			}
			if st.tail != nil && st.tail.ids[c.ID] {
				// A step asked again may name a call as the interrupted
				// run did: the stream keeps each call's id to one call.
				c.ID += st.idSuffix
			}
			calls[ev.Index] = c
			order = append(order, ev.Index)
			if err := st.Emit(stream.ToolInputStart{ToolCallID: c.ID, ToolName: c.Name, Dynamic: true}); err != nil {
				return ans, err
			}
		case EventToolCallDelta:
			c := calls[ev.Index]
			if c == nil {
				continue // a delta for a call never started: nothing to attach it to
			}
			c.Arguments += ev.ArgsDelta
			if err := st.Emit(stream.ToolInputDelta{ToolCallID: c.ID, InputTextDelta: ev.ArgsDelta}); err != nil {
				return ans, err
			}
		case EventFinish:
			ans.usage = ev.Usage
		}
	}
	ans.text = text.String()
	for _, i := range order {
		ans.calls = append(ans.calls, *calls[i])
	}
	if hold {
		return ans, nil // held to the end: nothing was shown
	}
	if reasonOpen {
		st.msg.Parts = append(st.msg.Parts, Part{Type: "reasoning", Text: reasoning.String(), State: "done"})
		if err := st.Emit(stream.ReasoningEnd{ID: reasonID}); err != nil {
			return ans, err
		}
	}
	if textOpen {
		st.msg.Parts = append(st.msg.Parts, Part{Type: "text", Text: text.String(), State: "done"})
		if err := st.Emit(stream.TextEnd{ID: textID}); err != nil {
			return ans, err
		}
	}
	return ans, nil
}

// holdsWrites reports whether any bound tool may change data.
func (r *Runner) holdsWrites(bound []boundTool) bool {
	for _, bt := range bound {
		if r.opt.Engine.Effect(bt.tool, bt.loopBinding()).Writes() {
			return true
		}
	}
	return false
}

// systemMessages are the step's system messages: the agent's system
// prompt, then the looping guidance as a separate system message when
// the agent holds a looping tool, then the guidance for agents that
// change data when it holds a write. The thread follows them (see
// fitStep).
func (r *Runner) systemMessages(def Definition, bound []boundTool) []Message {
	var msgs []Message
	if def.System != "" {
		msgs = append(msgs, Message{Role: RoleSystem, Content: def.System})
	}
	for _, bt := range bound {
		if bt.binding.LoopResponses {
			msgs = append(msgs, Message{Role: RoleSystem, Content: prompts.Text("looping")})
			break
		}
	}
	if r.holdsWrites(bound) {
		msgs = append(msgs, Message{Role: RoleSystem, Content: prompts.Text("writing")})
	}
	if def.Rows == RowsCompact {
		msgs = append(msgs, Message{Role: RoleSystem, Content: prompts.Text("compact_rows")})
	}
	return msgs
}

// runCalls runs one step's tool calls concurrently, within the bound,
// streaming each input and output.
func (r *Runner) runCalls(ctx context.Context, st *turnState, def Definition, tl *stepTools, calls []ToolCall) error {
	if len(calls) == 0 {
		return nil
	}
	parts := make([]Part, len(calls))
	// Calls that wait for approval are asked last, so that their evidence
	// holds the verdicts of the step's reads.
	var err error
	for _, asking := range []bool{false, true} {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(r.opt.ToolConcurrency)
		for i, c := range calls {
			if r.needsApproval(st, def, tl, c) != asking {
				continue
			}
			g.Go(func() error {
				p, err := r.runCall(gctx, st, def, tl, c)
				parts[i] = p
				return err
			})
		}
		if err = g.Wait(); err != nil {
			break
		}
	}
	st.mu.Lock()
	for _, p := range parts {
		if p.Type != "" {
			st.msg.Parts = append(st.msg.Parts, p)
		}
	}
	st.mu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// runCall runs one tool call and returns its part. A tool failure is a
// part in state output-error (the model reads it), never an error; an
// error means the stream itself failed.
func (r *Runner) runCall(ctx context.Context, st *turnState, def Definition, tl *stepTools, c ToolCall) (Part, error) {
	ctx, observed := r.obs.tool(ctx, c)
	part := Part{Type: "dynamic-tool", ToolCallID: c.ID, ToolName: c.Name, Input: json.RawMessage(c.Arguments)}
	defer func() { observed(part) }()
	if p, ended, err := r.ledgered(st, tl, c); ended || err != nil {
		part = p
		return part, err
	}
	var args map[string]any
	raw := strings.TrimSpace(c.Arguments)
	if raw == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
		msg := loop.CodeInvalidArgument + ": the arguments must be one JSON object of named arguments ({\"name\": value, …}), not " + jsonKind(raw)
		part.Input, part.State, part.ErrorText = json.RawMessage(jsonString(c.Arguments)), "output-error", msg
		_ = r.settle(st, part, OutcomeAnswered, true)
		return part, st.Emit(stream.ToolInputError{ToolCallID: c.ID, ToolName: c.Name, Input: c.Arguments, Dynamic: true, ErrorText: msg})
	}
	part.Input = json.RawMessage(raw)
	bt, known := tl.byName[c.Name]
	retrieval := r.opt.Retrieval != nil && (c.Name == loop.QueryToolResult || c.Name == loop.FetchToolResult)
	meta := tl.meta[c.Name]
	if !known && !retrieval && !meta {
		msg := fmt.Sprintf("there is no tool %q in this step; use one of the tools offered", c.Name)
		if slices.ContainsFunc(tl.pool, func(t *tools.Tool) bool { return t.Name == c.Name }) {
			msg = fmt.Sprintf("%s: tool %q is not loaded in this conversation: call load_tool {\"toolName\": %q} first (search_tools finds such tools), then call it",
				loop.CodeInvalidArgument, c.Name, c.Name)
		}
		part.State, part.ErrorText = "output-error", msg
		_ = r.settle(st, part, OutcomeAnswered, true)
		return part, st.Emit(stream.ToolInputError{ToolCallID: c.ID, ToolName: c.Name, Input: args, Dynamic: true, ErrorText: msg})
	}
	if st.tail == nil || !st.tail.inputs[c.ID] {
		if err := st.Emit(stream.ToolInputAvailable{ToolCallID: c.ID, ToolName: c.Name, Input: args, Dynamic: true}); err != nil {
			return part, err
		}
	}
	if known && !meta && !retrieval {
		effect := r.opt.Engine.Effect(bt.tool, bt.loopBinding())
		part.Effect = string(effect)
		if r.needsApproval(st, def, tl, c) {
			if st.gate != nil {
				// A conversation's door asks through the approvals inbox.
				np, run, err := st.gate(ctx, part, bt, args)
				if err != nil || !run {
					return np, err
				}
				part = np
			} else {
				// Nobody is asked to approve a call that can never run.
				if err := r.opt.Engine.Check(loop.Call{Tool: bt.tool, Args: args, Binding: bt.loopBinding()}); err != nil {
					part.State, part.ErrorText = "output-error", toolErrorText(err)
					_ = r.settle(st, part, OutcomeAnswered, false)
					return part, st.Emit(stream.ToolOutputError{ToolCallID: c.ID, ErrorText: part.ErrorText, Dynamic: true})
				}
				return r.askApproval(st, part, effect)
			}
		}
	}
	scope := loop.Scope{Org: st.Org, Thread: st.Thread.Key, User: st.User, CacheScope: st.CacheScope}
	var out []byte
	var media []tools.Media
	var err error
	if meta {
		out, err = r.runMeta(ctx, st, tl, c.Name, json.RawMessage(raw))
	} else if retrieval {
		budget := def.ViewChars
		if budget <= 0 {
			budget = r.opt.Retrieval.Budget()
		}
		out, err = r.opt.Retrieval.WithBudget(capView(budget, tl.room)).Call(ctx, scope, c.Name, json.RawMessage(raw))
		if err == nil {
			var q struct {
				ResultID string `json:"resultId"`
			}
			_ = json.Unmarshal([]byte(raw), &q)
			st.mu.Lock()
			delete(st.pending, q.ResultID)
			st.mu.Unlock()
		}
	} else {
		out, media, err = r.callTool(ctx, st, def, tl, bt, c.ID, args, scope)
	}
	st.throttle.Forget(c.ID)
	if err != nil {
		if ctx.Err() != nil {
			return part, ctx.Err()
		}
		part.State, part.ErrorText = "output-error", toolErrorText(err)
		_ = r.settle(st, part, OutcomeAnswered, false)
		return part, st.Emit(stream.ToolOutputError{ToolCallID: c.ID, ErrorText: part.ErrorText, Dynamic: true})
	}
	part.State, part.Output, part.Media = "output-available", json.RawMessage(out), media
	_ = r.settle(st, part, OutcomeAnswered, false)
	if err := st.Emit(stream.ToolOutputAvailable{ToolCallID: c.ID, Output: json.RawMessage(out), Dynamic: true}); err != nil || len(media) == 0 {
		return part, err
	}
	// The pictures the output names as attached, for a chat UI to show
	// (the thread keeps them in the part's media).
	return part, st.Emit(stream.Data{Name: MediaName, ID: c.ID, Data: ToolMedia{ToolCallID: c.ID, Media: media}})
}

// MediaName is the data chunk that carries the pictures and sounds a
// tool call returned beside its output: data-tool-media, right after
// the call's tool-output-available.
const MediaName = "tool-media"

// ToolMedia is a data-tool-media chunk's data (Data base64 in JSON).
type ToolMedia struct {
	ToolCallID string        `json:"toolCallId"`
	Media      []tools.Media `json:"media"`
}

// callTool runs a bound tool through the looping engine: its view, and
// the pictures and sounds its requests returned beside it (an MCP tool's).
func (r *Runner) callTool(ctx context.Context, st *turnState, def Definition, tl *stepTools, bt boundTool, callID string, args map[string]any, scope loop.Scope) ([]byte, []tools.Media, error) {
	start := r.opt.Now()
	ctx = tools.WithCallID(ctx, callID) // the activity log groups the call's requests
	ctx, sink := tools.WithMediaSink(ctx)
	if r.opt.Engine.Effect(bt.tool, bt.loopBinding()).Writes() {
		// The ledger records the write as sent before its request
		// leaves; an operation that takes an idempotency key gets one
		// derived from the call, the same after a takeover.
		ctx = tools.WithIdempotencyKey(ctx, idempotencyBase(st, callID))
		if st.Journal != nil {
			ctx = tools.WithWriteGate(ctx, func(ctx context.Context) error { return r.markSent(ctx, st, callID) })
		}
	}
	cred, err := appCredential(ctx, st, bt.tool)
	if err != nil {
		return nil, nil, err
	}
	if rc, ok := st.Connections.(refreshingConnections); ok && cred != "" {
		ctx = tools.WithTokenRefresh(ctx, rc.RefreshCredential)
	}
	if sc, ok := st.Connections.(secretConnections); ok && cred != "" {
		ctx = tools.WithCallSecrets(ctx, sc.CredentialSecrets(ctx, bt.tool.Provider)...)
	}
	out, err := r.opt.Engine.Call(ctx, loop.Call{
		Tool: bt.tool, Args: args, Binding: bt.loopBinding(), Scope: scope,
		Credential: cred, ViewChars: r.viewChars(def, tl), Experiment: st.Experiment,
		Progress: func(p loop.Progress) {
			if !st.throttle.Allow(callID) {
				return
			}
			_ = st.Emit(ProgressChunk(callID, bt.name, p, r.opt.Now().Sub(start))) // progress is never needed for correctness
		},
	})
	if err != nil {
		return nil, nil, err
	}
	if st.outcome != nil {
		st.outcome(out)
	}
	if !r.opt.Engine.Effect(bt.tool, bt.loopBinding()).Writes() {
		read := bt.name + ": a single call (looping off), no completeness claim"
		if out.Verdict != nil {
			read = bt.name + ": " + out.Verdict.Summary()
		}
		st.mu.Lock()
		st.reads = append(st.reads, read)
		st.mu.Unlock()
	}
	if out.ResultID != "" {
		st.mu.Lock()
		now := r.opt.Now()
		st.Thread.keepResult(out.ResultID, now.Add(r.opt.ResultTTL), now)
		if out.Truncated {
			st.pending[out.ResultID] = true
		}
		st.mu.Unlock()
	}
	return out.View, sink.Media(), nil
}

// viewChars is a tool result's view budget in this step: the agent's
// view_chars (else the engine's), within the call's share of what is
// left of the agent's context (see viewbudget.go).
func (r *Runner) viewChars(def Definition, tl *stepTools) int {
	budget := def.ViewChars
	if budget <= 0 {
		budget = r.opt.Engine.ViewBudget()
	}
	return capView(budget, tl.room)
}

// needsApproval reports whether call c waits for a human's yes: a bound
// tool whose binding or effect requires approval, not yet approved.
func (r *Runner) needsApproval(st *turnState, def Definition, tl *stepTools, c ToolCall) bool {
	bt, ok := tl.byName[c.Name]
	if !ok {
		return false
	}
	st.mu.Lock()
	approved := st.approved[c.ID]
	st.mu.Unlock()
	return !approved && def.Requires(bt.binding, r.opt.Engine.Effect(bt.tool, bt.loopBinding()))
}

// TurnChange is one call of the turn that may change data, and what came
// of it: "done", "failed", "unknown" (sent, no answer: check before
// trying again), "denied" or "waiting" (for approval).
type TurnChange struct {
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	Effect     string `json:"effect"`
	Outcome    string `json:"outcome"`
}

// TurnChanges lists the calls of m that may change data, in order.
func TurnChanges(m UIMessage) []TurnChange {
	var out []TurnChange
	for _, p := range m.Parts {
		if !p.IsTool() || (p.Effect != string(tools.EffectWrite) && p.Effect != string(tools.EffectDestructive)) {
			continue
		}
		c := TurnChange{ToolCallID: p.ToolCallID, Tool: p.Name(), Effect: p.Effect}
		switch p.State {
		case "output-available":
			c.Outcome = "done"
		case "output-error":
			c.Outcome = "failed"
			if strings.HasPrefix(p.ErrorText, loop.CodeOutcomeUnknown) {
				c.Outcome = "unknown"
			}
		case StateOutputDenied:
			c.Outcome = "denied"
		default:
			c.Outcome = "waiting"
		}
		out = append(out, c)
	}
	return out
}

// turnChanges puts the turn's writes in the message as one
// data-turn-changes part (id "turn-changes", replaced as it grows), so a
// UI can say "this turn changed: 3 messages trashed". Nothing for a turn
// that changed nothing.
func (r *Runner) turnChanges(st *turnState) error {
	st.mu.Lock()
	changes := TurnChanges(st.msg)
	st.mu.Unlock()
	if len(changes) == 0 {
		return nil
	}
	data, _ := json.Marshal(map[string]any{"changes": changes})
	part := Part{Type: "data-turn-changes", ID: "turn-changes", Data: data}
	st.mu.Lock()
	replaced := false
	for i, p := range st.msg.Parts {
		if p.Type == part.Type && p.ID == part.ID {
			st.msg.Parts[i], replaced = part, true
		}
	}
	if !replaced {
		st.msg.Parts = append(st.msg.Parts, part)
	}
	st.mu.Unlock()
	return st.Emit(stream.Data{Name: "turn-changes", ID: part.ID, Data: json.RawMessage(data)})
}

// awaitsRun reports whether m is an assistant message with a tool call
// the human answered (approval-responded), to run or deny.
func awaitsRun(m UIMessage) bool {
	if m.Role != RoleAssistant {
		return false
	}
	for _, p := range m.Parts {
		if p.IsTool() && p.State == StateApprovalResponded {
			return true
		}
	}
	return false
}

// askApproval stops a call before it runs: the server issues an approval
// id bound to the call and its arguments, keeps it with the thread,
// shows the evidence (the arguments and the turn's reads) and emits
// tool-approval-request. The turn ends after this step.
func (r *Runner) askApproval(st *turnState, part Part, effect tools.Effect) (Part, error) {
	issued, err := issueApproval(part.ToolCallID, part.ToolName, part.Input)
	if err != nil {
		return part, err
	}
	id := issued.ID
	ev := ApprovalEvidence{ApprovalID: id, ToolCallID: part.ToolCallID, ToolName: part.ToolName,
		Effect: string(effect), Input: part.Input}
	st.mu.Lock()
	st.Thread.Approvals = append(st.Thread.Approvals, issued)
	st.waiting = true
	ev.Reads = append([]string{}, st.reads...)
	data, _ := json.Marshal(ev)
	st.msg.Parts = append(st.msg.Parts, Part{Type: "data-approval-evidence", ID: id, Data: data})
	st.mu.Unlock()
	part.State, part.Approval = StateApprovalRequested, &PartApproval{ID: id}
	_ = r.settle(st, part, OutcomeAnswered, false)
	if err := st.Emit(stream.Data{Name: "approval-evidence", ID: id, Data: json.RawMessage(data)}); err != nil {
		return part, err
	}
	return part, st.Emit(stream.ToolApprovalRequest{ApprovalID: id, ToolCallID: part.ToolCallID})
}

// resolveApprovals runs the calls a human approved and denies the others
// (tool-output-denied), in the resumed assistant message, before the
// model goes on.
func (r *Runner) resolveApprovals(ctx context.Context, st *turnState) error {
	def, ok := st.Agent()
	if !ok {
		return ErrNoAgent
	}
	bound, err := resolveBindings(def, r.opt.Catalog)
	if err != nil {
		return err
	}
	tl, err := r.assemble(st, def, bound)
	if err != nil {
		return err
	}
	// The approved calls share what is left of the context, as a step's
	// calls do.
	var approved []ToolCall
	for _, p := range st.msg.Parts {
		if p.IsTool() && p.State == StateApprovalResponded && p.Approval != nil && p.Approval.Approved != nil && *p.Approval.Approved {
			approved = append(approved, ToolCall{ID: p.ToolCallID, Name: p.Name(), Arguments: string(p.Input)})
		}
	}
	model := def.Model
	if model == "" {
		model = r.opt.ModelName
	}
	if f, b, err := r.fitStep(st, def, bound, tl.specs, model); err == nil {
		tl.room = viewRoom(f, b, "", approved)
	}
	if st.ledger == nil {
		if err := r.beginCalls(ctx, st, PhaseApprovals, approved); err != nil {
			return err
		}
	}
	for i := range st.msg.Parts {
		p := st.msg.Parts[i]
		if !p.IsTool() || p.State != StateApprovalResponded || p.Approval == nil {
			continue
		}
		if p.Approval.Approved == nil || !*p.Approval.Approved {
			p.State = StateOutputDenied
			st.mu.Lock()
			st.msg.Parts[i] = p
			st.mu.Unlock()
			if st.tail != nil && st.tail.outputs[p.ToolCallID] {
				continue // the interrupted run said so already
			}
			if err := st.Emit(stream.ToolOutputDenied{ToolCallID: p.ToolCallID}); err != nil {
				return err
			}
			continue
		}
		st.mu.Lock()
		st.approved[p.ToolCallID] = true
		st.mu.Unlock()
		np, err := r.runCall(ctx, st, def, tl, ToolCall{ID: p.ToolCallID, Name: p.Name(), Arguments: string(p.Input)})
		if err != nil {
			return err
		}
		np.Approval = p.Approval
		st.mu.Lock()
		st.msg.Parts[i] = np
		st.mu.Unlock()
	}
	return r.checkpoint(ctx, st)
}

// jsonKind names what raw arguments are when they are not an object.
func jsonKind(raw string) string {
	var v any
	if json.Unmarshal([]byte(raw), &v) != nil {
		return "text that is not JSON"
	}
	switch v.(type) {
	case []any:
		return "an array"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "true or false"
	}
	return "null"
}

// toolErrorText is what the model and the UI read of a failed call.
func toolErrorText(err error) string {
	var te *loop.ToolError
	var ae *loop.RetrievalArgError
	switch {
	case errors.As(err, &te):
		return te.Error() // with its code
	case errors.As(err, &ae):
		return ae.Error()
	case errors.Is(err, loop.ErrResultNotFound):
		return err.Error() + " in this conversation: stored results are kept per conversation, and one kept in another is not found here"
	case errors.Is(err, loop.ErrResultExpired):
		return err.Error()
	case errors.Is(err, discovery.ErrInvalidArguments), errors.Is(err, discovery.ErrUnknownTool):
		// search_tools' and load_tool's words, written for the model,
		// under the code of a bad argument.
		msg := strings.TrimPrefix(err.Error(), discovery.ErrInvalidArguments.Error()+": ")
		return loop.CodeInvalidArgument + ": " + msg
	}
	return "the tool call failed"
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
