package agent

import (
	"context"
	"errors"
	"net/url"
	"slices"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// Conversation is a thread whose tools a client calls one at a time,
// outside a model turn — an MCP client, whose own model chooses the
// calls. It is served by the same code as a chat step: ConversationTools
// is the tool list a step would offer (discovery's direct budget, the
// tools the thread loaded, search_tools and load_tool, the retrieval
// tools), and ConversationCall runs one call exactly as a step runs it
// (argument checks, the engine with its reserved arguments, the size
// guard, stored results kept with the thread, the binding's approval
// policy). A door built on it words no verdict and parses no reserved
// argument of its own (DESIGN.md §12).
type Conversation struct {
	// Agent is the agent's current definition.
	Agent Definition
	// Thread holds what the conversation remembers between calls: the
	// tools it loaded and the stored results it holds. ConversationCall
	// updates it in place; the caller saves it.
	Thread *Thread
	// Org, User, CacheScope and Credentials come from the caller, as a
	// chat turn's (runtime credentials per provider id).
	Org         string
	User        string
	CacheScope  string
	Credentials map[string]string
	// Connections says which connected apps the user can call. Nil:
	// every toolkit counts as connected through the organization.
	Connections Connections
	// Emit receives the call's stream chunks while it runs (its
	// data-tool-loop-progress, throttled as in chat, among them). It must
	// be safe for concurrent use. Nil: they are dropped.
	Emit func(stream.Chunk) error
	// Gate applies the agent's approval policy with the approvals inbox:
	// a call that needs a human's yes waits there (the conversation
	// remembers its request, so the same call made again runs once the
	// request is approved). Nil: such a call is refused, asking no one.
	Gate *Gate
	// Answer is a human's answer to the conversation's approval request,
	// given through the client (an MCP elicitation) and carried by this
	// call; nil when it carries none.
	Answer *ApprovalAnswer
}

// ApprovalAnswer is a human's answer to an approval request.
type ApprovalAnswer struct {
	ApprovalID string
	Approved   bool
	Reason     string
}

// ToolKind says how an offered tool is served.
type ToolKind string

const (
	// ToolBound is one of the agent's bound tools.
	ToolBound ToolKind = "bound"
	// ToolMeta is a discovery meta-tool (search_tools, load_tool,
	// list_connections, connect_toolkit).
	ToolMeta ToolKind = "meta"
	// ToolRetrieval reads a stored result (queryToolResult,
	// fetchToolResult).
	ToolRetrieval ToolKind = "retrieval"
)

// OfferedTool is one tool of a conversation's list, as the model sees it
// (ToolSpec: name, description with its effect marker, input schema with
// the reserved arguments of its binding) and what a door needs to
// describe it further.
type OfferedTool struct {
	ToolSpec
	Kind ToolKind
	// Tool is the bound tool (ToolBound only).
	Tool *tools.Tool
	// Effect is the bound tool's effect under its binding; read for the
	// others.
	Effect tools.Effect
	// Looping: the binding has loop_responses on, so every result
	// carries a verdict.
	Looping bool
}

// ConversationKey is the storage key of a conversation's thread: owner,
// agent and handle, like ThreadKey, in a namespace no chat id reaches
// (";m=" where a chat's key has ";c="), so a conversation never shows in
// the user's chats and a chat never meets a conversation.
func ConversationKey(userID, agentID, handle string) string {
	return userKeyPrefix(userID) + "a=" + url.PathEscape(agentID) + ";m=" + url.PathEscape(handle)
}

// conversationTurn is the turn state one conversation call runs in.
func (r *Runner) conversationTurn(c *Conversation) *turnState {
	emit := c.Emit
	if emit == nil {
		emit = func(stream.Chunk) error { return nil }
	}
	def := c.Agent
	t := &Turn{Agent: func() (Definition, bool) { return def, true }, Thread: c.Thread, Org: c.Org, User: c.User,
		CacheScope: c.CacheScope, Credentials: c.Credentials, Connections: c.Connections, Emit: emit}
	return &turnState{Turn: t, pending: map[string]bool{}, approved: map[string]bool{},
		throttle: stream.NewThrottle(stream.ThrottleOptions{Now: r.opt.Now})}
}

// ConversationTools is the tool list a chat step of the conversation's
// agent would offer, in the same order.
func (r *Runner) ConversationTools(c *Conversation) ([]OfferedTool, error) {
	bound, err := resolveBindings(c.Agent, r.opt.Catalog)
	if err != nil {
		return nil, err
	}
	tl, err := r.assemble(r.conversationTurn(c), c.Agent, bound)
	if err != nil {
		return nil, err
	}
	return r.offered(tl), nil
}

// ConversationViewBudget is what one result of the conversation's agent
// may hold, in characters: the size guard's budget its calls run under
// (no step's context bounds it here).
func (r *Runner) ConversationViewBudget(def Definition) int {
	return r.viewChars(def, &stepTools{})
}

// offered describes a step's tool list.
func (r *Runner) offered(tl *stepTools) []OfferedTool {
	out := make([]OfferedTool, 0, len(tl.specs))
	for _, spec := range tl.specs {
		o := OfferedTool{ToolSpec: spec, Kind: ToolRetrieval, Effect: tools.EffectRead}
		switch bt, ok := tl.byName[spec.Name]; {
		case ok:
			lb := bt.loopBinding()
			o.Kind, o.Tool, o.Effect, o.Looping = ToolBound, bt.tool, r.opt.Engine.Effect(bt.tool, lb), lb.LoopResponses
		case tl.meta[spec.Name]:
			o.Kind = ToolMeta
		}
		out = append(out, o)
	}
	return out
}

// CallResult is what one conversation call produced.
type CallResult struct {
	// Part is the call as a chat thread would keep it: state
	// output-available with the view (the envelope) as Output,
	// output-error with ErrorText in the words and codes a chat's model
	// reads, or approval-requested.
	Part Part
	// Outcome is the engine's outcome of a bound tool's call, with its
	// typed verdict (nil for a looping-off call); nil for the other
	// tools and for a call that failed.
	Outcome *loop.Outcome
	// Changed reports that the thread's memory changed (a tool loaded, a
	// stored result kept, an interrupted call noted or reported): the
	// caller saves the thread.
	Changed bool
	// Loaded reports that the call made tools callable (load_tool): the
	// conversation's tool list changed.
	Loaded bool
	// Earlier are the calls of the conversation cancelled mid-walk since
	// the last call, for the client to learn what they fetched; the
	// thread no longer holds them.
	Earlier []InterruptedCall
	// Approval is the inbox request of a call that needs approval: the
	// one it waits on (Part in state approval-requested), the one that
	// denied it, or the one it ran under.
	Approval *PendingApproval
}

// Bounds of what a conversation keeps: the read verdicts it shows as
// evidence, the approval requests it asked.
const (
	maxReads     = 10
	maxApprovals = 50
)

// maxInterrupted bounds the interrupted calls a conversation keeps
// between two calls.
const maxInterrupted = 5

// ConversationCall runs one tool call in the conversation, as a chat step
// runs it. A tool failure is a result (Part in state output-error); the
// error is the context's when ctx ends, or a failure to emit.
func (r *Runner) ConversationCall(ctx context.Context, c *Conversation, call ToolCall) (CallResult, error) {
	st := r.conversationTurn(c)
	st.callOnly = true
	bound, tl, err := r.callStepTools(st, c.Agent)
	if err != nil {
		return CallResult{}, err
	}
	loaded, kept := slices.Clone(c.Thread.Loaded), len(c.Thread.Results)
	var res CallResult
	res.Earlier, c.Thread.Interrupted = c.Thread.Interrupted, nil
	st.outcome = func(out *loop.Outcome) { res.Outcome = out }
	approvals := len(c.Thread.Approvals)
	st.gate = func(ctx context.Context, part Part, bt boundTool, args map[string]any) (Part, bool, error) {
		a, run, np := r.conversationGate(ctx, c, part, bt, args)
		res.Approval = a
		return np, run, nil
	}
	res.Part, err = r.runCall(ctx, st, c.Agent, tl, call)
	if len(st.reads) > 0 {
		c.Thread.Reads = append(c.Thread.Reads, st.reads...)
		if n := len(c.Thread.Reads); n > maxReads {
			c.Thread.Reads = c.Thread.Reads[n-maxReads:]
		}
	}
	if res.Part.State == "output-error" {
		res.Outcome = nil
	}
	if out := res.Outcome; ctx.Err() != nil && out != nil && out.Verdict != nil {
		// Cancelled mid-walk: the client gets no answer, so the next call
		// says what this one fetched and where its rows are kept.
		c.Thread.Interrupted = append(c.Thread.Interrupted, InterruptedCall{ToolCallID: call.ID, Tool: call.Name,
			Note: out.Verdict.Note, ResultID: out.ResultID})
		if n := len(c.Thread.Interrupted); n > maxInterrupted {
			c.Thread.Interrupted = c.Thread.Interrupted[n-maxInterrupted:]
		}
	}
	res.Loaded = !slices.Equal(loaded, c.Thread.Loaded)
	// What the conversation must remember: the tools it loaded, the
	// approvals it asked for, the calls cancelled under it; the results
	// it keeps only where they decide whether the retrieval tools are
	// offered (no binding loops), and its reads only where a call may
	// need approval (they are its evidence). The rest is not worth a
	// store write per call.
	res.Changed = res.Loaded || len(res.Earlier) > 0 || len(c.Thread.Interrupted) > 0 ||
		approvals != len(c.Thread.Approvals) || (kept != len(c.Thread.Results) && !anyLooping(bound)) ||
		(len(st.reads) > 0 && r.anyGated(&c.Agent, bound))
	return res, err
}

func anyLooping(bound []boundTool) bool {
	for _, bt := range bound {
		if bt.binding.LoopResponses {
			return true
		}
	}
	return false
}

// anyGated reports whether a call of one of the bound tools may wait for
// approval. A tool's effect is derived only where it can decide: for a
// binding with an approval setting of its own, or under an agent policy
// that requires approval for some effect.
func (r *Runner) anyGated(d *Definition, bound []boundTool) bool {
	p := d.Approval
	byEffect := p != nil && (p.Read == ApprovalRequired || p.Write == ApprovalRequired || p.Destructive == ApprovalRequired)
	for _, bt := range bound {
		if bt.binding.Approval == "" && !byEffect {
			continue // nothing asks approval of it, whatever its effect
		}
		if d.Requires(bt.binding, r.opt.Engine.Effect(bt.tool, bt.loopBinding())) {
			return true
		}
	}
	return false
}

// conversationGate decides a conversation's call that needs approval,
// through the approvals inbox (the Gate, as every door but chat does):
// it runs under the approval the conversation asked for the same call
// (same tool, same arguments), once a human gave it — in the Studio, over
// the API, or through the client (c.Answer) — and otherwise waits there
// (the part in state approval-requested names the request) or is denied.
// Nobody is asked to approve a call that can never run.
func (r *Runner) conversationGate(ctx context.Context, c *Conversation, part Part, bt boundTool, args map[string]any) (*PendingApproval, bool, Part) {
	fail := func(text string) Part {
		part.State, part.ErrorText = "output-error", text
		return part
	}
	if c.Gate == nil {
		return nil, false, fail(CodeApprovalRequired + ": " + bt.name + " needs a human's approval before it runs, and this door has no approvals inbox")
	}
	h, err := argsHash(part.Input)
	if err != nil {
		return nil, false, fail(toolErrorText(err))
	}
	id := ""
	for _, a := range c.Thread.Approvals {
		if a.ToolName == part.ToolName && a.ArgsHash == h {
			id = a.ID // the latest request for this very call
		}
	}
	if ans := c.Answer; ans != nil && ans.ApprovalID != "" && ans.ApprovalID == id {
		if _, err := c.Gate.Inbox.Answer(ctx, id, ans.Approved, ans.Reason); err != nil && !errors.Is(err, ErrApprovalAnswered) {
			return nil, false, fail(toolErrorText(err))
		}
	}
	g := *c.Gate
	g.Reads = c.Thread.Reads
	call := loop.Call{Tool: bt.tool, Args: args, Binding: bt.loopBinding()}
	a, err := g.Admit(ctx, c.Agent, call, id)
	if id != "" && err != nil && errors.Is(err, ErrApproval) {
		// Used (the call ran under it already), expired or gone: this
		// call asks anew.
		a, err = g.Admit(ctx, c.Agent, call, "")
	}
	var wait *ApprovalWait
	var denial *ApprovalDenial
	switch {
	case err == nil:
		part.Approval = &PartApproval{ID: a.ID}
		return a, true, part
	case errors.As(err, &wait):
		if !wait.Again {
			c.Thread.Approvals = append(c.Thread.Approvals, IssuedApproval{ID: wait.Approval.ID, ToolCallID: part.ToolCallID,
				ToolName: part.ToolName, ArgsHash: h})
			if n := len(c.Thread.Approvals); n > maxApprovals {
				c.Thread.Approvals = c.Thread.Approvals[n-maxApprovals:]
			}
		}
		part.State, part.Approval = StateApprovalRequested, &PartApproval{ID: wait.Approval.ID}
		part.ErrorText = CodeApprovalRequired + ": " + err.Error()
		return &wait.Approval, false, part
	case errors.As(err, &denial):
		return &denial.Approval, false, fail(CodeApprovalDenied + ": " + err.Error())
	case errors.Is(err, ErrApproval):
		return a, false, fail(CodeApprovalRefused + ": " + err.Error())
	case errors.Is(err, ErrInboxFull):
		return nil, false, fail(CodeApprovalRequired + ": " + err.Error())
	}
	return a, false, fail(toolErrorText(err))
}

// MergeConversation folds what a conversation call remembered (from)
// into the thread as last saved (into): the tools loaded and the live
// stored results of both, so calls of one conversation running at once
// (on one replica or several) do not drop each other's; reported are the
// interrupted calls the call reported (CallResult.Earlier). It returns
// into.
func MergeConversation(into, from *Thread, reported []InterruptedCall) *Thread {
	for _, id := range from.Loaded {
		if !slices.Contains(into.Loaded, id) {
			into.Loaded = append(into.Loaded, id)
		}
	}
	for _, kr := range from.Results {
		if !slices.ContainsFunc(into.Results, func(x KeptResult) bool { return x.ID == kr.ID }) {
			into.Results = append(into.Results, kr)
		}
	}
	for _, a := range from.Approvals {
		if !slices.ContainsFunc(into.Approvals, func(x IssuedApproval) bool { return x.ID == a.ID }) {
			into.Approvals = append(into.Approvals, a)
		}
	}
	if len(from.Reads) > 0 {
		into.Reads = from.Reads // the newer call's view of the latest reads
	}
	// An interrupted call is reported once: what from reported is gone
	// from into, and what from noted joins it.
	into.Interrupted = slices.DeleteFunc(into.Interrupted, func(x InterruptedCall) bool {
		return slices.ContainsFunc(reported, func(y InterruptedCall) bool { return y.ToolCallID == x.ToolCallID })
	})
	for _, ic := range from.Interrupted {
		if !slices.ContainsFunc(into.Interrupted, func(x InterruptedCall) bool { return x.ToolCallID == ic.ToolCallID }) {
			into.Interrupted = append(into.Interrupted, ic)
		}
	}
	return into
}
