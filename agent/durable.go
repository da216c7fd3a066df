package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// A turn is a sequence of checkpointed steps. After the model answered a
// step, after each of the step's calls, before each write's request and
// after the step, the runner hands its Journal a Checkpoint: what another
// process needs to continue the turn (Turn.Resume) if this one dies.
// Model calls and reads are run again when they were interrupted; a write
// whose request may have been sent never is — the outcome ledger
// (Checkpoint.Calls) says so — unless its operation declares an
// idempotency key (tools.IdempotencyParam), which trawl derives from the
// call, so sending it again with the same key is safe.

// Phases of a checkpoint: where in its step the turn stood.
const (
	// PhaseModel: the step's model call has not answered; a takeover
	// asks it (again).
	PhaseModel = ""
	// PhaseCalls: the model answered the step with Calls; a takeover
	// runs those of them not answered.
	PhaseCalls = "calls"
	// PhaseApprovals: the calls a human approved (or denied) are being
	// resolved, before the model goes on.
	PhaseApprovals = "approvals"
)

// Checkpoint is a turn's progress as its Journal keeps it.
type Checkpoint struct {
	// MessageID is the assistant message the turn builds.
	MessageID string `json:"messageId"`
	// Step is the index of the step running: the thread saved with this
	// checkpoint holds the steps before it complete.
	Step  int    `json:"step"`
	Phase string `json:"phase,omitempty"`
	// StepParts are the parts the step added to the message besides its
	// calls' own (step-start, reasoning, text, approval evidence).
	StepParts []Part `json:"stepParts,omitempty"`
	// Calls are the step's calls (PhaseCalls) or the approved calls being
	// run (PhaseApprovals), each with its outcome: the outcome ledger.
	Calls []LedgerEntry `json:"calls,omitempty"`
	// What the turn tracks between steps: cut results not yet queried,
	// the verdicts of its reads, the calls a human approved, whether a
	// call waits for approval, the context budget's calibration.
	Pending        []string `json:"pending,omitempty"`
	Reads          []string `json:"reads,omitempty"`
	Approved       []string `json:"approved,omitempty"`
	Waiting        bool     `json:"waiting,omitempty"`
	CharsPerToken  float64  `json:"charsPerToken,omitempty"`
	ReportedTokens int      `json:"reportedTokens,omitempty"`
	// The thread's loaded tools, stored results and issued approvals as
	// they stand (calls change them mid-step).
	Loaded    []string         `json:"loaded,omitempty"`
	Results   []KeptResult     `json:"results,omitempty"`
	Approvals []IssuedApproval `json:"approvals,omitempty"`
}

// Outcomes of a ledger entry.
const (
	// OutcomeNotSent: the call has not run (a write: no request left).
	OutcomeNotSent = ""
	// OutcomeSent: a write's request may have been sent; no answer is
	// recorded.
	OutcomeSent = "sent"
	// OutcomeAnswered: the call ended; Part holds what it returned.
	OutcomeAnswered = "answered"
	// OutcomeUnknown: a write was sent and its sender died before the
	// answer; it was not sent again, and the model was told
	// outcome_unknown.
	OutcomeUnknown = "unknown"
)

// LedgerEntry is one call of a step in the outcome ledger: a write is
// recorded as sent, durably, before its request leaves.
type LedgerEntry struct {
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	Arguments  string `json:"arguments"`
	// ArgsHash fingerprints the arguments (argsHash).
	ArgsHash string `json:"argsHash,omitempty"`
	Outcome  string `json:"outcome,omitempty"`
	// Part is the call's part once it ended.
	Part *Part `json:"part,omitempty"`
	// InputError: the call never ran, its arguments were refused (its
	// stream chunk is tool-input-error).
	InputError bool `json:"inputError,omitempty"`
}

// Journal keeps a turn's checkpoints. Save returns once cp would survive
// a crash of this process; a run that no longer holds its claim is
// refused (runlease.ErrFenced). At a checkpoint where the turn is idle
// (Checkpoint.Idle), Save may answer ErrHandOff once cp is saved: the
// turn stops there, without a word on the stream, and another process
// continues it.
type Journal interface {
	Save(ctx context.Context, cp Checkpoint) error
}

// ErrHandOff stops a turn that another process continues from its last
// checkpoint: a Journal's answer at an idle checkpoint (a draining
// replica), or the cause of the turn's cancelled context (the shutdown
// grace ended, the run's claim was lost). Run returns it without ending
// the stream.
var ErrHandOff = errors.New("the turn was handed off to be continued from its checkpoint")

// Idle reports whether nothing of the step is running at cp: between
// steps, or once the model answered and before any call began. A turn
// moved to another process there redoes nothing.
func (cp Checkpoint) Idle() bool {
	if cp.Phase == PhaseModel {
		return true
	}
	for _, e := range cp.Calls {
		if e.Outcome != OutcomeNotSent || e.Part != nil {
			return false
		}
	}
	return cp.Phase == PhaseCalls
}

// Resume is a turn continued from another process's checkpoint: its
// replica died, handed the turn off while draining, or this process
// restarted.
type Resume struct {
	Checkpoint Checkpoint
	// Tail are the chunks the run's log holds after the checkpoint was
	// saved: what the interrupted step showed.
	Tail []stream.Chunk
	// By names who continues the turn (a replica); Reason why:
	// "takeover", "handoff" or "restart"; Count how many times the turn
	// has been continued, this time included.
	By, Reason string
	Count      int
}

// TurnResumed is the data of a data-turn-resumed chunk (and part), which
// precedes a continued turn's continuation.
type TurnResumed struct {
	By       string `json:"by"`
	Reason   string `json:"reason"`
	FromStep int    `json:"fromStep"`
	Count    int    `json:"count"`
	// Interrupted: the step the turn was in had started and is asked
	// again; its partial parts stay (before this part) but the model is
	// not shown them.
	Interrupted bool `json:"interrupted,omitempty"`
}

const resumedPart = "data-turn-resumed"

// interruptedText is the error of a call the interrupted step had begun
// and that is asked again with the step.
const interruptedText = "interrupted: the server running this turn stopped; the step was asked again"

// reconcile corrects a checkpoint saved before the thread it goes with:
// a step whose calls the thread already holds complete ended.
func reconcile(cp Checkpoint, msg *UIMessage) Checkpoint {
	if msg == nil || len(cp.Calls) == 0 {
		return cp
	}
	ended := true
	for _, e := range cp.Calls {
		found := false
		for _, p := range msg.Parts {
			if p.IsTool() && p.ToolCallID == e.ToolCallID && p.State != StateApprovalResponded {
				found = true
			}
		}
		ended = ended && found
	}
	if !ended {
		return cp
	}
	next := Checkpoint{MessageID: cp.MessageID, Step: cp.Step, Pending: cp.Pending, Reads: cp.Reads, Approved: cp.Approved,
		Waiting: cp.Waiting, CharsPerToken: cp.CharsPerToken, ReportedTokens: cp.ReportedTokens,
		Loaded: cp.Loaded, Results: cp.Results, Approvals: cp.Approvals}
	if cp.Phase == PhaseCalls {
		next.Step++
	}
	return next
}

// tailState is what the chunks of an interrupted step showed.
type tailState struct {
	inputs   map[string]bool // tool-input-available sent
	outputs  map[string]bool // a call's end sent: output, error, denial, approval request
	evidence map[string]bool // data-approval-evidence ids
	ids      map[string]bool // every tool call id seen
	// The step the tail ends in.
	stepStarted, stepFinished bool
	parts                     []Part         // its reasoning, text and tool parts, in order
	open                      map[string]int // open text and reasoning parts by chunk id → index in parts
	tools                     map[string]int // its tool parts by call id → index in parts
	toolInput                 map[string]*strings.Builder
}

func foldTail(tail []stream.Chunk) *tailState {
	ts := &tailState{inputs: map[string]bool{}, outputs: map[string]bool{}, evidence: map[string]bool{}, ids: map[string]bool{}}
	ts.resetStep()
	for _, c := range tail {
		switch c := c.(type) {
		case stream.StartStep:
			ts.resetStep()
			ts.stepStarted = true
		case stream.FinishStep:
			ts.stepFinished = true
		case stream.TextStart:
			ts.open["t"+c.ID] = len(ts.parts)
			ts.parts = append(ts.parts, Part{Type: "text", State: "done"})
		case stream.TextDelta:
			if i, ok := ts.open["t"+c.ID]; ok {
				ts.parts[i].Text += c.Delta
			}
		case stream.TextEnd:
			delete(ts.open, "t"+c.ID)
		case stream.ReasoningStart:
			ts.open["r"+c.ID] = len(ts.parts)
			ts.parts = append(ts.parts, Part{Type: "reasoning", State: "done"})
		case stream.ReasoningDelta:
			if i, ok := ts.open["r"+c.ID]; ok {
				ts.parts[i].Text += c.Delta
			}
		case stream.ReasoningEnd:
			delete(ts.open, "r"+c.ID)
		case stream.ToolInputStart:
			ts.ids[c.ToolCallID] = true
			ts.tools[c.ToolCallID] = len(ts.parts)
			ts.toolInput[c.ToolCallID] = &strings.Builder{}
			ts.parts = append(ts.parts, Part{Type: "dynamic-tool", ToolCallID: c.ToolCallID, ToolName: c.ToolName})
		case stream.ToolInputDelta:
			if b := ts.toolInput[c.ToolCallID]; b != nil {
				b.WriteString(c.InputTextDelta)
			}
		case stream.ToolInputAvailable:
			ts.ids[c.ToolCallID] = true
			ts.inputs[c.ToolCallID] = true
		case stream.ToolInputError:
			ts.ids[c.ToolCallID] = true
			ts.outputs[c.ToolCallID] = true
		case stream.ToolOutputAvailable:
			ts.outputs[c.ToolCallID] = true
		case stream.ToolOutputError:
			ts.outputs[c.ToolCallID] = true
		case stream.ToolOutputDenied:
			ts.outputs[c.ToolCallID] = true
		case stream.ToolApprovalRequest:
			ts.outputs[c.ToolCallID] = true
		case stream.Data:
			if c.Name == "approval-evidence" {
				ts.evidence[c.ID] = true
			}
		}
	}
	return ts
}

func (ts *tailState) resetStep() {
	ts.stepStarted, ts.stepFinished = false, false
	ts.parts, ts.open, ts.tools, ts.toolInput = nil, map[string]int{}, map[string]int{}, map[string]*strings.Builder{}
}

// closeInterrupted ends what the interrupted step left open in the
// stream — its text and reasoning, the calls it had begun — and returns
// the step's parts as the thread keeps them (nil when the step had not
// started). The step itself is asked again.
func (r *Runner) closeInterrupted(st *turnState, ts *tailState) ([]Part, error) {
	if !ts.stepStarted {
		return nil, nil
	}
	// Close in the order the parts opened.
	opened := make([]string, 0, len(ts.open))
	for k := range ts.open {
		opened = append(opened, k)
	}
	slices.SortFunc(opened, func(a, b string) int { return ts.open[a] - ts.open[b] })
	for _, k := range opened {
		var c stream.Chunk = stream.TextEnd{ID: k[1:]}
		if k[0] == 'r' {
			c = stream.ReasoningEnd{ID: k[1:]}
		}
		if err := st.Emit(c); err != nil {
			return nil, err
		}
	}
	parts := append([]Part{{Type: "step-start"}}, ts.parts...)
	for id, i := range ts.tools {
		p := &parts[i+1]
		input := ts.toolInput[id].String()
		p.State, p.ErrorText = "output-error", interruptedText
		p.Input = json.RawMessage(jsonString(input))
		if json.Valid([]byte(input)) && strings.HasPrefix(strings.TrimSpace(input), "{") {
			p.Input = json.RawMessage(input)
		}
	}
	// The begun calls end, in their order.
	for _, p := range parts {
		if !p.IsTool() || ts.outputs[p.ToolCallID] {
			continue
		}
		var c stream.Chunk = stream.ToolInputError{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Input: ts.toolInput[p.ToolCallID].String(),
			Dynamic: true, ErrorText: interruptedText}
		if ts.inputs[p.ToolCallID] {
			c = stream.ToolOutputError{ToolCallID: p.ToolCallID, ErrorText: interruptedText, Dynamic: true}
		}
		if err := st.Emit(c); err != nil {
			return nil, err
		}
	}
	if !ts.stepFinished {
		if err := st.Emit(stream.FinishStep{}); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

// answeredInTail reports whether the tail ends in a step that the model
// answered without a call (the turn's last step) and that ended: its
// answer stands.
func (ts *tailState) answeredInTail() bool {
	if !ts.stepStarted || !ts.stepFinished || len(ts.tools) > 0 {
		return false
	}
	return slices.ContainsFunc(ts.parts, func(p Part) bool { return p.Type == "text" })
}

// restore sets st from the resumed checkpoint: the assistant message as
// the thread holds it plus what the step had, and the turn's tracking.
func (st *turnState) restore(cp Checkpoint) {
	st.msg = UIMessage{ID: cp.MessageID, Role: RoleAssistant}
	if n := len(st.Thread.Msgs); n > 0 && st.Thread.Msgs[n-1].Role == RoleAssistant && st.Thread.Msgs[n-1].ID == cp.MessageID {
		st.msg, st.Thread.Msgs = st.Thread.Msgs[n-1], st.Thread.Msgs[:n-1]
	}
	st.msg.Parts = slices.Clone(st.msg.Parts)
	st.step0, st.step = cp.Step, cp.Step
	for _, id := range cp.Pending {
		st.pending[id] = true
	}
	for _, id := range cp.Approved {
		st.approved[id] = true
	}
	st.reads, st.waiting = slices.Clone(cp.Reads), cp.Waiting
	st.cpt, st.reported = cp.CharsPerToken, cp.ReportedTokens
	st.Thread.Loaded, st.Thread.Results, st.Thread.Approvals = slices.Clone(cp.Loaded), slices.Clone(cp.Results), slices.Clone(cp.Approvals)
}

// takeOver continues a turn from Resume: it ends what the interrupted
// step left open in the stream, says the turn was resumed, and — when
// the model had answered the step — runs the step's calls that had not
// answered. done reports that the turn's last answer was already whole.
func (r *Runner) takeOver(ctx context.Context, st *turnState) (done bool, err error) {
	res := st.Resume
	ts := foldTail(res.Tail)
	st.tail = ts
	st.idSuffix = fmt.Sprintf("_r%d", res.Count)
	for _, p := range st.msg.Parts {
		if p.IsTool() {
			ts.ids[p.ToolCallID] = true
		}
	}
	cp := res.Checkpoint
	info := TurnResumed{By: res.By, Reason: res.Reason, FromStep: cp.Step, Count: res.Count}
	switch {
	case cp.Phase == PhaseModel && ts.answeredInTail():
		// The last answer was streamed whole before the death: it stands.
		st.msg.Parts = append(st.msg.Parts, Part{Type: "step-start"})
		st.msg.Parts = append(st.msg.Parts, ts.parts...)
		done = true
	case cp.Phase == PhaseModel:
		parts, err := r.closeInterrupted(st, ts)
		if err != nil {
			return false, err
		}
		st.msg.Parts = append(st.msg.Parts, parts...)
		info.Interrupted = parts != nil
	case cp.Phase == PhaseCalls:
		st.msg.Parts = append(st.msg.Parts, cp.StepParts...)
	}
	data, _ := json.Marshal(info)
	id := fmt.Sprintf("turn-resumed-%d", res.Count)
	st.msg.Parts = append(st.msg.Parts, Part{Type: resumedPart, ID: id, Data: data})
	if err := st.Emit(stream.Data{Name: "turn-resumed", ID: id, Data: json.RawMessage(data)}); err != nil {
		return false, err
	}
	switch cp.Phase {
	case PhaseCalls:
		st.phase, st.ledger = PhaseCalls, ledgerOf(cp.Calls)
		st.stepStart = len(st.msg.Parts) - len(cp.StepParts) - 1
		if err := r.resumeStep(ctx, st, cp); err != nil {
			return false, err
		}
		st.step, st.step0 = cp.Step+1, cp.Step+1
		if err := r.checkpoint(ctx, st); err != nil {
			return false, err
		}
		if st.waiting {
			return true, nil
		}
	case PhaseApprovals:
		st.ledger = ledgerOf(cp.Calls)
	default:
		// Saved at once: the closed step and this part are the thread's
		// now, whatever happens next.
		if !done {
			if err := r.checkpoint(ctx, st); err != nil {
				return false, err
			}
		}
	}
	return done, nil
}

func ledgerOf(entries []LedgerEntry) map[string]*LedgerEntry {
	out := make(map[string]*LedgerEntry, len(entries))
	for i := range entries {
		e := entries[i]
		out[e.ToolCallID] = &e
	}
	return out
}

// resumeStep runs what is left of a step the model had answered: the
// calls not answered, then the step's end.
func (r *Runner) resumeStep(ctx context.Context, st *turnState, cp Checkpoint) error {
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
	calls := make([]ToolCall, len(cp.Calls))
	for i, e := range cp.Calls {
		calls[i] = ToolCall{ID: e.ToolCallID, Name: e.Tool, Arguments: e.Arguments}
	}
	model := def.Model
	if model == "" {
		model = r.opt.ModelName
	}
	if f, b, err := r.fitStep(st, def, bound, tl.specs, model); err == nil {
		tl.room = viewRoom(f, b, "", calls)
	}
	if err := r.runCalls(ctx, st, def, tl, calls); err != nil {
		return err
	}
	if st.tail != nil && st.tail.stepFinished {
		return nil
	}
	return st.Emit(stream.FinishStep{})
}

// ledgered is what the ledger says of a call about to run: its part when
// it already ended (shown again if the stream lacks its end), or, for a
// write sent without an answer, outcome_unknown — unless the tool
// declares an idempotency key, when it is sent again with the same key.
// ok false: run it.
func (r *Runner) ledgered(st *turnState, tl *stepTools, c ToolCall) (Part, bool, error) {
	st.mu.Lock()
	e := st.ledger[c.ID]
	var entry LedgerEntry
	if e != nil {
		entry = *e
	}
	st.mu.Unlock()
	if e == nil {
		return Part{}, false, nil
	}
	switch entry.Outcome {
	case OutcomeAnswered, OutcomeUnknown:
		if entry.Part == nil {
			return Part{}, false, nil
		}
		return *entry.Part, true, r.reshow(st, *entry.Part, entry.InputError)
	case OutcomeSent:
		bt, known := tl.byName[c.Name]
		if known {
			if _, idem := bt.tool.IdempotencyParam(); idem {
				return Part{}, false, nil // sent again, with the same key
			}
		}
		part := Part{Type: "dynamic-tool", ToolCallID: c.ID, ToolName: c.Name, Input: json.RawMessage(c.Arguments),
			State: "output-error", ErrorText: unknownOutcomeText(c), Effect: string(tools.EffectWrite)}
		if known {
			part.Effect = string(r.opt.Engine.Effect(bt.tool, bt.loopBinding()))
		}
		if !json.Valid(part.Input) {
			part.Input = json.RawMessage(jsonString(c.Arguments))
		}
		if err := r.settle(st, part, OutcomeUnknown, false); err != nil {
			return part, true, err
		}
		return part, true, r.reshow(st, part, false)
	}
	return Part{}, false, nil
}

// unknownOutcomeText is what the model reads of a write whose sender died
// between sending it and its answer.
func unknownOutcomeText(c ToolCall) string {
	sent := c.Arguments
	if len(sent) > 500 {
		sent = sent[:500] + "…"
	}
	return fmt.Sprintf("%s: %s: the request was sent (arguments %s), but the server running this turn stopped before its answer came. "+
		"The change may or may not have happened: check its result (read it back) before trying again. It was not sent again.",
		loop.CodeOutcomeUnknown, c.Name, sent)
}

// reshow sends the end of a call whose end the ledger holds, unless the
// interrupted run's stream already showed it.
func (r *Runner) reshow(st *turnState, p Part, inputError bool) error {
	ts := st.tail
	if ts != nil && ts.outputs[p.ToolCallID] {
		return nil
	}
	if inputError {
		input := string(p.Input)
		var s string
		if json.Unmarshal(p.Input, &s) == nil {
			input = s
		}
		return st.Emit(stream.ToolInputError{ToolCallID: p.ToolCallID, ToolName: p.ToolName, Input: input, Dynamic: true, ErrorText: p.ErrorText})
	}
	if ts == nil || !ts.inputs[p.ToolCallID] {
		var args map[string]any
		_ = json.Unmarshal(p.Input, &args)
		if args == nil {
			args = map[string]any{}
		}
		if err := st.Emit(stream.ToolInputAvailable{ToolCallID: p.ToolCallID, ToolName: p.Name(), Input: args, Dynamic: true}); err != nil {
			return err
		}
	}
	switch p.State {
	case "output-available":
		return st.Emit(stream.ToolOutputAvailable{ToolCallID: p.ToolCallID, Output: p.Output, Dynamic: true})
	case "output-error":
		return st.Emit(stream.ToolOutputError{ToolCallID: p.ToolCallID, ErrorText: p.ErrorText, Dynamic: true})
	case StateOutputDenied:
		return st.Emit(stream.ToolOutputDenied{ToolCallID: p.ToolCallID})
	case StateApprovalRequested:
		if p.Approval == nil {
			return nil
		}
		st.mu.Lock()
		var ev *Part
		for i := range st.msg.Parts {
			if st.msg.Parts[i].Type == "data-approval-evidence" && st.msg.Parts[i].ID == p.Approval.ID {
				e := st.msg.Parts[i]
				ev = &e
			}
		}
		st.mu.Unlock()
		if ev != nil && (ts == nil || !ts.evidence[ev.ID]) {
			if err := st.Emit(stream.Data{Name: "approval-evidence", ID: ev.ID, Data: ev.Data}); err != nil {
				return err
			}
		}
		return st.Emit(stream.ToolApprovalRequest{ApprovalID: p.Approval.ID, ToolCallID: p.ToolCallID})
	}
	return nil
}

// snapshot is the turn's checkpoint now; st.mu is held.
func (st *turnState) snapshot() Checkpoint {
	cp := Checkpoint{MessageID: st.msg.ID, Step: st.step, Phase: st.phase, Reads: slices.Clone(st.reads), Waiting: st.waiting,
		CharsPerToken: st.cpt, ReportedTokens: st.reported,
		Loaded: slices.Clone(st.Thread.Loaded), Results: slices.Clone(st.Thread.Results), Approvals: slices.Clone(st.Thread.Approvals)}
	for id := range st.pending {
		cp.Pending = append(cp.Pending, id)
	}
	for id := range st.approved {
		cp.Approved = append(cp.Approved, id)
	}
	slices.Sort(cp.Pending)
	slices.Sort(cp.Approved)
	if st.phase == PhaseCalls && st.stepStart <= len(st.msg.Parts) {
		cp.StepParts = slices.Clone(st.msg.Parts[st.stepStart:])
	}
	for _, id := range st.order {
		if e := st.ledger[id]; e != nil {
			c := *e
			if c.Part != nil {
				p := *c.Part
				c.Part = &p
			}
			cp.Calls = append(cp.Calls, c)
		}
	}
	return cp
}

// save hands the Journal the turn's checkpoint. Saves are made one at a
// time, each of the state when it is made, so a later one never loses to
// an earlier one.
func (r *Runner) save(ctx context.Context, st *turnState) error {
	if st.Journal == nil {
		return nil
	}
	st.saveMu.Lock()
	defer st.saveMu.Unlock()
	st.mu.Lock()
	cp := st.snapshot()
	st.mu.Unlock()
	return st.Journal.Save(context.WithoutCancel(ctx), cp)
}

// beginCalls records the step's calls in the ledger, none sent, and
// saves: the model's answer is not asked again.
func (r *Runner) beginCalls(ctx context.Context, st *turnState, phase string, calls []ToolCall) error {
	if st.Journal == nil {
		return nil
	}
	st.mu.Lock()
	st.phase = phase
	st.ledger, st.order = map[string]*LedgerEntry{}, nil
	for _, c := range calls {
		h, _ := argsHash(json.RawMessage(c.Arguments))
		st.ledger[c.ID] = &LedgerEntry{ToolCallID: c.ID, Tool: c.Name, Arguments: c.Arguments, ArgsHash: h}
		st.order = append(st.order, c.ID)
	}
	st.mu.Unlock()
	return r.saveOrHandOff(ctx, st, "saving the turn's checkpoint after the model answered")
}

// saveOrHandOff saves at an idle checkpoint: a failure is logged and the
// turn goes on, but ErrHandOff stops it.
func (r *Runner) saveOrHandOff(ctx context.Context, st *turnState, what string) error {
	err := r.save(ctx, st)
	if errors.Is(err, ErrHandOff) {
		return err
	}
	if err != nil {
		r.log.Warn(what, "thread", st.Thread.Key, "err", err)
	}
	return nil
}

// markSent records a write as sent, durably, before its request leaves:
// the write gate (tools.WithWriteGate). A write whose record fails is not
// sent.
func (r *Runner) markSent(ctx context.Context, st *turnState, callID string) error {
	st.mu.Lock()
	e := st.ledger[callID]
	if e == nil || e.Outcome != OutcomeNotSent {
		st.mu.Unlock()
		return nil // recorded already (a bulk write's next value), or not ledgered
	}
	e.Outcome = OutcomeSent
	st.mu.Unlock()
	if err := r.save(ctx, st); err != nil {
		st.mu.Lock()
		e.Outcome = OutcomeNotSent
		st.mu.Unlock()
		return err
	}
	return nil
}

// settle records a call's end in the ledger and saves, before the end is
// streamed: a takeover shows it rather than run the call again.
func (r *Runner) settle(st *turnState, p Part, outcome string, inputError bool) error {
	st.mu.Lock()
	e := st.ledger[p.ToolCallID]
	if e == nil {
		st.mu.Unlock()
		return nil
	}
	e.Outcome, e.Part, e.InputError = outcome, &p, inputError
	st.mu.Unlock()
	if err := r.save(context.Background(), st); err != nil {
		r.log.Warn("saving the turn's checkpoint after a call", "thread", st.Thread.Key, "call", p.ToolCallID, "err", err)
	}
	return nil
}

// idempotencyBase is the base of the idempotency keys of a call's
// requests: the thread, the message and the call, so a takeover sends
// the same key and no other call does.
func idempotencyBase(st *turnState, callID string) string {
	sum := sha256.Sum256([]byte(st.Thread.Key + "\n" + st.msg.ID + "\n" + callID))
	return hex.EncodeToString(sum[:16])
}
