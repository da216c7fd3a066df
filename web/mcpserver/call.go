package mcpserver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Conversation handles: what _thread may hold.
const (
	maxThreadLen  = 100
	threadPattern = `^[A-Za-z0-9._:-]+$`
)

var threadRE = regexp.MustCompile(threadPattern)

func checkThread(h string) error {
	if len(h) > maxThreadLen || !threadRE.MatchString(h) {
		return fmt.Errorf("%s must be 1 to %d letters, digits or . _ : -, not %s", ArgThread, maxThreadLen, quote(h))
	}
	return nil
}

func quote(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}

// threadOf is the _thread of a call's arguments (DefaultThread when
// absent or not a string: the call reports the latter).
func threadOf(args json.RawMessage) string {
	var a struct {
		Thread *string `json:"_thread"`
	}
	if json.Unmarshal(args, &a) == nil && a.Thread != nil {
		return *a.Thread
	}
	return DefaultThread
}

// splitThread takes the door's _thread out of a call's arguments: the
// handle, and the arguments the agent's tool gets (the rest, unchanged).
func splitThread(args json.RawMessage) (rest string, handle string, err error) {
	t := bytes.TrimSpace(args)
	if len(t) == 0 || string(t) == "null" {
		return "{}", DefaultThread, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(t, &m); err != nil || m == nil {
		return string(t), DefaultThread, nil // the runner words a malformed call
	}
	raw, ok := m[ArgThread]
	if !ok {
		return string(t), DefaultThread, nil
	}
	delete(m, ArgThread)
	if string(raw) != "null" {
		if err := json.Unmarshal(raw, &handle); err != nil {
			return "", "", fmt.Errorf("%s must be a string", ArgThread)
		}
		if err := checkThread(handle); err != nil {
			return "", "", err
		}
	}
	if handle == "" {
		handle = DefaultThread
	}
	b, err := json.Marshal(m)
	return string(b), handle, err
}

// conversation loads the caller's conversation handle with the agent:
// its current definition and thread (a new one on first use).
func (s *Server) conversation(ctx context.Context, agentID string, c Caller, handle string) (*agent.Conversation, error) {
	if err := s.agents.Sync(ctx); err != nil {
		s.log.WarnContext(ctx, "mcp: reading agent definitions: using the last known", "err", err)
	}
	def, ok := s.agents.Get(agentID)
	if !ok {
		return nil, &UnknownAgentError{ID: agentID, Known: s.agentIDs()}
	}
	key := agent.ConversationKey(c.UserID, agentID, handle)
	th, err := s.threads.GetThread(ctx, key)
	switch {
	case errors.Is(err, agent.ErrNotFound):
		th = &agent.Thread{Key: key, ChatID: handle, AgentID: agentID, UserID: c.UserID, Created: s.dep.Now().UTC()}
	case err != nil:
		return nil, fmt.Errorf("reading the conversation: %w", err)
	}
	conv := &agent.Conversation{Agent: def, Thread: th, Org: s.dep.Config().Org, User: c.UserID,
		CacheScope: c.CacheScope, Credentials: c.Credentials}
	if s.opt.Connections != nil {
		conv.Connections = s.opt.Connections(c)
	}
	return conv, nil
}

// saveConversation stores what a call remembered, merged into the thread
// as another call may have saved it meanwhile.
func (s *Server) saveConversation(ctx context.Context, th *agent.Thread, reported []agent.InterruptedCall) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	cur, err := s.threads.GetThread(sctx, th.Key)
	switch {
	case errors.Is(err, agent.ErrNotFound):
		cur = th
	case err != nil:
		return err
	default:
		cur = agent.MergeConversation(cur, th, reported)
	}
	cur.Updated = s.dep.Now().UTC()
	return s.threads.PutThread(sctx, cur)
}

// callTool serves tools/call: the conversation's call through the same
// engine call as a chat step, its progress as notifications/progress,
// its envelope as structuredContent and text, a tool failure as isError
// with chat's words and codes.
func (s *Server) callTool(ctx context.Context, e *entry, req *mcp.CallToolRequest) (_ *mcp.CallToolResult, err error) {
	s.active.Add(1)
	defer s.active.Add(-1)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(s.stopping, func() { cancel(errShutdown) })() // Close cancels the call
	name := req.Params.Name
	ctx, observed := s.observe(ctx, e, req)
	outcome := "failed"
	defer func() { observed(outcome, err) }()
	c := callerOf(req.Extra, e)
	args, handle, err := splitThread(req.Params.Arguments)
	if err != nil {
		outcome = "tool_error"
		return toolError(loop.CodeInvalidArgument + ": " + err.Error()), nil
	}
	conv, err := s.conversation(ctx, e.agentID, c, handle)
	if err != nil {
		return nil, err
	}
	conv.Emit = progressEmitter(ctx, req)
	gate := s.dep.Gate("mcp")
	conv.Gate = &gate
	retry := len(req.Params.InputResponses) > 0
	conv.Answer = elicitedAnswer(req)
	callID := "mcp_" + randomHex(8)
	res, err := s.runner.ConversationCall(ctx, conv, agent.ToolCall{ID: callID, Name: name, Arguments: args})
	if res.Changed {
		// Kept even when the call was cancelled: the next call sees what
		// this one fetched.
		if serr := s.saveConversation(ctx, conv.Thread, res.Earlier); serr != nil {
			s.log.WarnContext(ctx, "mcp: saving the conversation", "thread", conv.Thread.Key, "err", serr)
		}
	}
	if ctx.Err() != nil {
		outcome = "cancelled"
		if o := res.Outcome; o != nil && o.Verdict != nil {
			// The activity log holds the cancelled call's verdict beside
			// the requests it made.
			_ = s.dep.Activity().Record(context.WithoutCancel(ctx), tools.Activity{Time: s.dep.Now().UTC(), ThreadID: conv.Thread.Key, CallID: callID,
				Tool: name, Verdict: o.Verdict.Summary() + keptAs(o.ResultID)})
		}
		if context.Cause(ctx) == errShutdown {
			// The server stops: the client still waits, and gets what
			// the call fetched, with what a cancelled call leaves.
			return shutdownResult(res, handle, agent.InterruptedCall{ToolCallID: callID, Tool: name, Note: noteOf(res), ResultID: resultOf(res)}), nil
		}
		return nil, ctx.Err() // a cancelled request gets no response
	}
	if err != nil {
		return nil, err
	}
	switch {
	case res.Loaded:
		// A tool loaded: the caller's sessions and subscriptions hear that
		// the list changed.
		err = s.listChanged(ctx, e, c, handle)
	case res.Changed && !e.has(loop.QueryToolResult):
		// A stored result kept may add the retrieval tools (registering a
		// new tool tells the clients).
		err = s.registerFor(ctx, e, c, handle)
	}
	if err != nil {
		s.log.WarnContext(ctx, "mcp: listing the conversation's tools after a change", "err", err)
	}
	if a := res.Approval; res.Part.State == agent.StateApprovalRequested && a != nil && !retry && elicits(req) {
		if multiRoundTrip(req) {
			// Ask the human at the client: an input request (2026-07-28).
			outcome = "input_required"
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{inputApproval: approvalElicitation(a, !s.opt.NoInbox)}, RequestState: a.ID}, nil
		}
		// Before 2026-07-28: elicitation/create, waited for here, within
		// a bound; the call is then made again with the answer, as the
		// client of an input request would.
		if retried := s.elicit(ctx, req, a); retried != nil {
			outcome = "input_required"
			return s.callTool(ctx, e, retried)
		}
		if context.Cause(ctx) != errShutdown && ctx.Err() != nil {
			outcome = "cancelled"
			return nil, ctx.Err()
		}
		// Unanswered: the request waits in the inbox (approval_required).
	}
	out := result(res)
	if a := res.Approval; res.Part.State == agent.StateApprovalRequested && a != nil && s.opt.NoInbox {
		out = toolError(noInboxText(a.ToolID))
	} else if out.IsError {
		out.Content = append(out.Content, threadHint(name, handle, res.Part.ErrorText)...)
	}
	out.Meta = mcp.Meta{MetaThread: handle}
	if a := res.Approval; a != nil {
		out.Meta[MetaApproval] = map[string]any{"id": a.ID, "status": a.Status}
	}
	if len(res.Earlier) > 0 {
		out.Meta[MetaInterrupted] = res.Earlier
		out.Content = append(out.Content, &mcp.TextContent{Text: interruptedText(res.Earlier)})
	}
	outcome = "ok"
	if out.IsError {
		outcome = "tool_error"
	}
	return out, nil
}

// errShutdown is the cause of a call's cancellation by Close.
var errShutdown = errors.New("the server is shutting down")

// shutdownResult answers a call Close cancelled: its partial result when
// it has one (the verdict says it stopped early), else a tool error; and
// in both, the call as an interrupted one (_meta trawl/interrupted and a
// sentence), as a later call of its conversation would report it.
func shutdownResult(res agent.CallResult, handle string, ic agent.InterruptedCall) *mcp.CallToolResult {
	out := toolError("the server shut down before this call finished")
	if res.Part.State == "output-available" {
		out = result(res)
	}
	out.Meta = mcp.Meta{MetaThread: handle, MetaInterrupted: []agent.InterruptedCall{ic}}
	msg := "The server shut down before this call of " + ic.Tool + " finished; it was cancelled."
	if ic.Note != "" {
		msg += " " + ic.Note
	}
	if ic.ResultID != "" {
		msg += " Its rows are kept under _resultId " + ic.ResultID + "."
	}
	out.Content = append(out.Content, &mcp.TextContent{Text: msg})
	return out
}

func noteOf(res agent.CallResult) string {
	if o := res.Outcome; o != nil && o.Verdict != nil {
		return o.Verdict.Note
	}
	return ""
}

func resultOf(res agent.CallResult) string {
	if o := res.Outcome; o != nil {
		return o.ResultID
	}
	return ""
}

// threadHint adds to a failure that may come from using another
// conversation's tool or result the conversation this call is in: loaded
// tools and stored results are kept per _thread.
func threadHint(tool, handle, errText string) []mcp.Content {
	var what string
	switch {
	case (tool == loop.QueryToolResult || tool == loop.FetchToolResult) && strings.Contains(errText, loop.ErrResultNotFound.Error()):
		what = "Stored results are kept per conversation"
	case strings.Contains(errText, "is not loaded in this conversation"), strings.Contains(errText, "there is no tool"):
		what = "Tools load_tool makes callable are kept per conversation"
	default:
		return nil
	}
	return []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s (%s): this call's %s is %s, and what another %s holds is not found in it; pass the %s of the conversation that made it, or load the tool in this one.",
		what, ArgThread, ArgThread, quote(handle), ArgThread, ArgThread)}}
}

func keptAs(resultID string) string {
	if resultID == "" {
		return ""
	}
	return "; its rows are kept as " + resultID
}

// interruptedText tells the client's model about the calls it cancelled
// mid-walk: what each fetched (the verdict's own note) and its handle.
func interruptedText(calls []agent.InterruptedCall) string {
	var b strings.Builder
	for i, c := range calls {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "An earlier call of %s in this conversation was cancelled before it finished. %s", c.Tool, c.Note)
		if c.ResultID != "" {
			fmt.Fprintf(&b, " Its rows are kept under _resultId %s.", c.ResultID)
		}
	}
	return b.String()
}

// result is a conversation call's part as an MCP result.
func result(res agent.CallResult) *mcp.CallToolResult {
	p := res.Part
	switch p.State {
	case "output-available":
		view := []byte(p.Output)
		out := &mcp.CallToolResult{}
		if t := bytes.TrimSpace(view); len(t) > 0 && t[0] == '{' {
			out.StructuredContent = json.RawMessage(view)
			out.Content = []mcp.Content{&mcp.TextContent{Text: envelopeFirst(t)}}
		} else {
			out.Content = []mcp.Content{&mcp.TextContent{Text: string(view)}}
		}
		for _, m := range p.Media {
			// The pictures and sounds an upstream MCP tool returned, as
			// it returned them (the text names each as attached).
			switch m.Type {
			case "image":
				out.Content = append(out.Content, &mcp.ImageContent{MIMEType: m.MIMEType, Data: m.Data})
			case "audio":
				out.Content = append(out.Content, &mcp.AudioContent{MIMEType: m.MIMEType, Data: m.Data})
			}
		}
		return out
	case "output-error":
		return toolError(p.ErrorText)
	case agent.StateApprovalRequested:
		return toolError(p.ErrorText + approvalHint)
	}
	return toolError("the call did not run (" + p.State + ")")
}

// envelopeFirst is the JSON object view with its "_" members (the
// verdict, its note and boundary, the size guard's counts) moved to the
// front, in their order: the text the client's model reads opens with
// the verdict, which a client that truncates long results keeps. view
// unchanged when it is not an object trawl can read. The text is written
// once, into a string of its size (it is the size of the rows).
func envelopeFirst(view []byte) string {
	type member struct{ key, value []byte }
	var env, rest []member
	n := 2 // the braces
	err := query.EachMember(view, func(key []byte, name string, value []byte) {
		if strings.HasPrefix(name, "_") {
			env = append(env, member{key, value})
		} else {
			rest = append(rest, member{key, value})
		}
		n += len(key) + 1 + len(value) + 1 // and a ':' and a ','
	})
	if err != nil || len(env) == 0 {
		return string(view)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('{')
	for i, m := range append(env, rest...) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m.key)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.String()
}

// approvalHint says where a waiting call's request is answered.
const approvalHint = ". A person answers it in the Studio (Approvals) or with POST /v1/approvals/{id} {\"approved\": true}; " +
	"then make the same call again, with the same arguments, and it runs once."

// noInboxText refuses a call needing approval where no one can reach the
// approvals inbox.
func noInboxText(toolID string) string {
	return agent.CodeApprovalRequired + ": " + toolID + " needs a person's approval before it runs, and this stdio server (trawl mcp) " +
		"has no approvals inbox anyone can reach: its store is its own and ends with it. Make the call from an MCP client that " +
		"supports elicitation (it asks you), or through the HTTP endpoint of trawl serve (/v1/agents/{id}/mcp), whose inbox " +
		"the Studio and POST /v1/approvals/{id} answer."
}

// inputApproval names the approval's input request.
const inputApproval = "approval"

// maxElicitWait bounds how long a call waits for the human at a
// 2025-11-25 client to answer its elicitation.
const maxElicitWait = 10 * time.Minute

// multiRoundTrip reports whether the client takes input requests in a
// result (2026-07-28 and later), rather than elicitation/create.
func multiRoundTrip(req *mcp.CallToolRequest) bool {
	if req.Session == nil {
		return true
	}
	ip := req.Session.InitializeParams()
	return ip == nil || modern(ip.ProtocolVersion)
}

// elicit asks the human at a 2025-11-25 client to approve a, and returns
// the call to make again with the answer — or nil when none came: the
// call's context ended (the client cancelled or went away, or the server
// shuts down), the server began draining, maxElicitWait passed, or the
// client failed the elicitation. The request is answered in the inbox
// meanwhile? Then the elicitation is withdrawn and the call made again:
// the gate reads the inbox's answer.
func (s *Server) elicit(ctx context.Context, req *mcp.CallToolRequest, a *agent.PendingApproval) *mcp.CallToolRequest {
	ss := req.Session
	if ss == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, maxElicitWait)
	defer cancel()
	defer context.AfterFunc(s.drainingCtx, cancel)()
	answered := make(chan struct{})
	go func() {
		// The inbox, polled: an answer there releases the elicitation.
		t := time.NewTicker(inboxPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if got, err := s.dep.Inbox().Get(ctx, a.ID); err == nil && got.Status != agent.ApprovalPending {
				close(answered)
				cancel()
				return
			}
		}
	}()
	r, err := ss.Elicit(ctx, approvalElicitation(a, !s.opt.NoInbox))
	cp := *req.Params
	cp.RequestState = a.ID
	select {
	case <-answered:
		cp.InputResponses = nil
		cp.RequestState = ""
		return &mcp.CallToolRequest{Session: req.Session, Params: &cp, Extra: req.Extra}
	default:
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.WarnContext(ctx, "mcp: elicitation failed; the approval waits in the inbox", "approval", a.ID, "err", err)
		}
		return nil
	}
	cp.InputResponses = mcp.InputResponseMap{inputApproval: r}
	return &mcp.CallToolRequest{Session: req.Session, Params: &cp, Extra: req.Extra}
}

// inboxPoll is how often a pending elicitation looks for an answer in
// the inbox.
const inboxPoll = time.Second

// elicits reports whether the client takes elicitation (form mode).
func elicits(req *mcp.CallToolRequest) bool {
	caps := req.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil
}

// approvalElicitation asks the human at the client to approve one call,
// showing its evidence: what it would do, its arguments, the reads made
// before it.
func approvalElicitation(a *agent.PendingApproval, inbox bool) *mcp.ElicitParams {
	ev := a.Evidence
	var b strings.Builder
	fmt.Fprintf(&b, "%s wants to run %s (%s).", a.ToolID, ev.Action, a.Effect)
	if len(ev.Input) > 0 {
		fmt.Fprintf(&b, "\nArguments: %s", ev.Input)
	}
	if len(ev.Reads) > 0 {
		b.WriteString("\nWhat it read before:")
		for _, r := range ev.Reads {
			b.WriteString("\n- " + r)
		}
	} else {
		b.WriteString("\nIt read nothing before this call.")
	}
	if inbox {
		fmt.Fprintf(&b, "\nApprove this call? (It also waits in the approvals inbox as %s.)", a.ID)
	} else {
		b.WriteString("\nApprove this call?")
	}
	return &mcp.ElicitParams{Mode: "form", Message: b.String(), RequestedSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Run this call once, with these arguments."},
			"reason":  map[string]any{"type": "string", "title": "Reason", "description": "Why (optional)."},
		},
		"required": []any{"approve"},
	}}
}

// elicitedAnswer is the human's answer a retried call carries: accept
// with approve true approves, accept with false or decline denies; a
// dismissed form (cancel) answers nothing, so the request stays pending.
func elicitedAnswer(req *mcp.CallToolRequest) *agent.ApprovalAnswer {
	r, ok := req.Params.InputResponses[inputApproval].(*mcp.ElicitResult)
	if !ok || req.Params.RequestState == "" {
		return nil
	}
	who := "the MCP client"
	if ci := req.ClientInfo(); ci != nil && ci.Name != "" {
		who = ci.Name + " (MCP)"
	}
	switch r.Action {
	case "accept":
		approve, _ := r.Content["approve"].(bool)
		reason, _ := r.Content["reason"].(string)
		if reason == "" {
			reason = "answered in " + who
		}
		return &agent.ApprovalAnswer{ApprovalID: req.Params.RequestState, Approved: approve, Reason: reason}
	case "decline":
		return &agent.ApprovalAnswer{ApprovalID: req.Params.RequestState, Reason: "declined in " + who}
	}
	return nil
}

func toolError(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// progressEmitter turns a call's data-tool-loop-progress chunks (the
// runner throttles them as in chat) into notifications/progress for the
// call's progress token: progress is the items so far, total the
// server's count when it gave one. Nil without a token.
func progressEmitter(ctx context.Context, req *mcp.CallToolRequest) func(stream.Chunk) error {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	var mu sync.Mutex
	last := -1.0
	return func(ch stream.Chunk) error {
		d, ok := ch.(stream.Data)
		if !ok || d.Name != stream.ProgressName {
			return nil
		}
		p, ok := d.Data.(stream.Progress)
		if !ok {
			return nil
		}
		n := &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(p.Items), Message: ProgressMessage(p)}
		if p.Total > 0 && p.ForEach == nil {
			// A fan-out's items run over every value while the server's
			// count is the current value's: the whole's total is not
			// known, so none is given (the message has the value's).
			n.Total = float64(p.Total)
		}
		if u := p.Upstream; u != nil {
			// The upstream's own report of the request under way (an MCP
			// tool's progress), relayed as it came.
			n.Progress, n.Total, n.Message = u.Progress, u.Total, u.Message
		}
		mu.Lock()
		defer mu.Unlock()
		if n.Progress <= last {
			return nil // progress must increase with each notification
		}
		last = n.Progress
		_ = req.Session.NotifyProgress(ctx, n) // progress is never needed for correctness
		return nil
	}
}

// ProgressMessage words one progress report: "page 3 · 750 of 2,000
// items · 3 requests"; during a fan-out, the value first with its own
// page and the server's count for it, then the items of every value so
// far: "property_id 3 of 8 · page 1 of 61 items · 135 items in all · 5
// requests".
func ProgressMessage(p stream.Progress) string {
	var parts []string
	switch fe := p.ForEach; {
	case fe != nil:
		value := fmt.Sprintf("%s %d of %d · page %s", fe.Key, fe.Index+1, fe.Total, commas(p.Page))
		if p.Total > 0 {
			value += " of " + plural(p.Total, "item")
		}
		parts = append(parts, value, plural(p.Items, "item")+" in all")
	case p.Total > 0:
		parts = append(parts, "page "+commas(p.Page), commas(p.Items)+" of "+commas(p.Total)+" items")
	default:
		parts = append(parts, "page "+commas(p.Page), plural(p.Items, "item"))
	}
	parts = append(parts, plural(p.Requests, "request"))
	return strings.Join(parts, " · ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return commas(n) + " " + noun + "s"
}

// commas writes n with thousands separators: 2,000.
func commas(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// observe starts a call's mcp server span (execute_tool and the engine's
// spans nest under it) and counts it when it ends.
func (s *Server) observe(ctx context.Context, e *entry, req *mcp.CallToolRequest) (context.Context, func(outcome string, err error)) {
	var span trace.Span
	if s.tracer != nil {
		attrs := []attribute.KeyValue{attribute.String("mcp.method.name", "tools/call"), attribute.String("gen_ai.tool.name", req.Params.Name),
			attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("trawl.agent.id", e.agentID)}
		if req.Session != nil && req.Session.ID() != "" {
			attrs = append(attrs, attribute.String("mcp.session.id", req.Session.ID()))
		}
		ctx, span = s.tracer.Start(ctx, "tools/call "+req.Params.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	}
	return ctx, func(outcome string, err error) {
		if span != nil {
			span.SetAttributes(attribute.String("trawl.mcp.outcome", outcome))
			if outcome == "failed" {
				span.SetStatus(codes.Error, "the call failed")
				if err != nil {
					span.RecordError(err)
				}
			}
			span.End()
		}
		if s.calls != nil {
			s.calls.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(attribute.String("agent", e.agentID), attribute.String("outcome", outcome)))
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b)
}
