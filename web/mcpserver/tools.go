package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/tools"
)

// The MCP door's own arguments and _meta keys.
const (
	// ArgThread is the conversation handle every tool takes: stored
	// results and loaded tools belong to the caller's conversation of
	// that name (DefaultThread when absent).
	ArgThread = "_thread"
	// DefaultThread is the conversation of a call without _thread.
	DefaultThread = "default"
	// MetaThread carries the handle in a result's _meta, and may name
	// the conversation whose tools a tools/list shows.
	MetaThread = "trawl/thread"
	// MetaInterrupted lists, on a result, the calls of its conversation
	// the client cancelled mid-walk since its last call, with what each
	// fetched.
	MetaInterrupted = "trawl/interrupted"
	// MetaApproval is, on the result of a call that needs approval, its
	// request in the approvals inbox: {id, status}.
	MetaApproval = "trawl/approval"
	// MetaMaxResultSize is the result budget a tool advertises, so a
	// client that spills large results to a file takes trawl's instead.
	MetaMaxResultSize = "anthropic/maxResultSizeChars"
)

// instructions are what a client keeps of the server: the short looping
// guidance (some keep only the first 2,048 characters), after the
// agent's own system prompt when it is short.
func (s *Server) instructions(def agent.Definition) string {
	text := prompts.Text("mcp_instructions")
	if !s.dep.Cache().Serves() {
		// No tool offers _refresh then (loop.SchemaFor): nor do these.
		text = withoutItem(text, "- `_refresh")
	}
	if def.System != "" && len(def.System)+len(text) < 2000 {
		text = def.System + "\n\n" + text
	}
	return text
}

// withoutItem is text without its lines that begin with prefix (one
// list item each: prompts.Text joins an item's wrapped lines).
func withoutItem(text, prefix string) string {
	lines := strings.Split(text, "\n")
	return strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, prefix) }), "\n")
}

// listMiddleware serves tools/list for the conversation it names (or the
// caller's default): the tools a chat step would offer, paginated, and
// makes sure tools/call finds a tool its conversation offers (a tool
// another replica loaded, or offered before this replica listed it).
func (s *Server) listMiddleware(e *entry) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if res, ok, err := s.upstreamMethod(ctx, e, method, req); ok {
				return res, err
			}
			switch method {
			case "tools/list":
				lr, ok := req.(*mcp.ListToolsRequest)
				if !ok {
					return next(ctx, method, req)
				}
				return s.listTools(ctx, e, lr)
			case "tools/call":
				if s.draining.Load() {
					return nil, errDraining
				}
				// On a goroutine whose stack has grown (see warmPool).
				var res mcp.Result
				var err error
				s.warm.run(func() { res, err = s.toolsCall(ctx, e, next, method, req) })
				return res, err
			}
			return next(ctx, method, req)
		}
	}
}

// toolsCall serves a tools/call through next, the SDK's handler, making
// sure the tool is registered first.
func (s *Server) toolsCall(ctx context.Context, e *entry, next mcp.MethodHandler, method string, req mcp.Request) (mcp.Result, error) {
	if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil && !e.has(cr.Params.Name) {
		if err := s.registerFor(ctx, e, callerOf(cr.Extra, e), threadOf(cr.Params.Arguments)); err != nil {
			return nil, err
		}
		if !e.has(cr.Params.Name) {
			// Not a tool of the conversation: the call's own answer says
			// why (a pooled tool not loaded, a tool loaded under another
			// _thread), not the SDK's "unknown tool".
			return s.callTool(ctx, e, cr)
		}
	}
	res, err := next(ctx, method, req)
	if r, ok := res.(*mcp.CallToolResult); ok && r != nil && err == nil {
		return encodedResult{r}, nil
	}
	return res, err
}

// listTools answers one tools/list page.
func (s *Server) listTools(ctx context.Context, e *entry, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	handle := DefaultThread
	cursor := ""
	if req.Params != nil {
		cursor = req.Params.Cursor
		if h, ok := req.Params.Meta[MetaThread].(string); ok && h != "" {
			handle = h
		}
	}
	if err := checkThread(handle); err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "_meta." + MetaThread + ": " + err.Error()}
	}
	list, err := s.conversationTools(ctx, e, callerOf(req.Extra, e), handle)
	if err != nil {
		return nil, err
	}
	start := 0
	if cursor != "" {
		if start, err = decodeCursor(cursor, len(list)); err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
		}
	}
	end := min(start+s.opt.PageSize, len(list))
	// The list is the caller's and changes with load_tool: never fresh
	// for long, never shared.
	res := &mcp.ListToolsResult{Tools: list[start:end], Cacheable: mcp.Cacheable{TTLMs: 0, CacheScope: "private"}}
	if end < len(list) {
		res.NextCursor = encodeCursor(end)
	}
	return res, nil
}

// encodeCursor and decodeCursor make tools/list's opaque cursor: the
// offset of the next page.
func encodeCursor(offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("tools:" + strconv.Itoa(offset)))
}

func decodeCursor(c string, n int) (int, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > 6 && string(b[:6]) == "tools:" {
		if off, err := strconv.Atoi(string(b[6:])); err == nil && off >= 0 && off <= n {
			return off, nil
		}
	}
	return 0, fmt.Errorf("invalid cursor %q: pass the nextCursor of the previous tools/list page", c)
}

// conversationTools are a conversation's tools as MCP tools, registered
// with e so that tools/call finds each.
func (s *Server) conversationTools(ctx context.Context, e *entry, c Caller, handle string) ([]*mcp.Tool, error) {
	conv, err := s.conversation(ctx, e.agentID, c, handle)
	if err != nil {
		return nil, err
	}
	offered, err := s.runner.ConversationTools(conv)
	if err != nil {
		return nil, err
	}
	budget := s.runner.ConversationViewBudget(conv.Agent)
	list := make([]*mcp.Tool, 0, len(offered))
	for _, o := range offered {
		t, dropped, err := describe(o, budget)
		if err != nil {
			return nil, err
		}
		if len(dropped) > 0 && s.firstWarning("x-mcp-header\x00"+o.Name+"\x00"+strings.Join(dropped, "\x00")) {
			s.log.WarnContext(ctx, "mcp: a tool's parameters marked x-mcp-header that MCP does not allow are offered without the mark (their values go in the arguments only)",
				"tool", o.Name, "params", strings.Join(dropped, "; "))
		}
		list = append(list, t)
	}
	s.register(e, list)
	return list, nil
}

// registerFor registers the tools of a conversation with e.
func (s *Server) registerFor(ctx context.Context, e *entry, c Caller, handle string) error {
	if checkThread(handle) != nil {
		return nil // the call itself reports it
	}
	_, err := s.conversationTools(ctx, e, c, handle)
	return err
}

// listChanged tells the caller's sessions and subscriptions that a
// conversation's tool list changed (load_tool): its tools are registered,
// and when that added none (another conversation of the caller's had
// them already), one is registered again, which is how the SDK sends the
// notification.
func (s *Server) listChanged(ctx context.Context, e *entry, c Caller, handle string) error {
	list, err := s.conversationTools(ctx, e, c, handle)
	if err != nil || len(list) == 0 {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.added {
		t := list[len(list)-1]
		e.srv.AddTool(sdkTool(t), s.handler(e))
	}
	return nil
}

// has reports whether a tool of that name is registered with e.
func (e *entry) has(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.registered[name]
	return ok
}

// register adds to e's server the tools it does not hold as they are
// now (a new tool, or one whose description or schema changed). The SDK
// then tells the caller's sessions and subscriptions that the list
// changed (notifications/tools/list_changed) — which is how load_tool's
// tool reaches the client.
func (s *Server) register(e *entry, list []*mcp.Tool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.added = false
	for _, t := range list {
		fp := fingerprint(t)
		if e.registered[t.Name] == fp {
			continue
		}
		e.registered[t.Name] = fp
		e.srv.AddTool(sdkTool(t), s.handler(e))
		e.added = true
	}
}

// sdkTool is t as registered with the SDK's server. The door answers
// tools/list itself (listTools), so the SDK reads a registered tool's
// input schema for one thing: on every 2026-07-28 tools/call it encodes
// and decodes the schema again to find the parameters marked
// x-mcp-header, which a client also sends as Mcp-Param-* headers and the
// SDK checks against the body. A schema without that key anywhere has
// none — trawl's schemas are written by encoding/json, which writes the
// key as it is — so the SDK gets the smallest schema of the same type
// instead: the same checks (none), without the schema's encoding and
// decoding on every call. A schema with the key goes as it is.
func sdkTool(t *mcp.Tool) *mcp.Tool {
	in, ok := t.InputSchema.(json.RawMessage)
	if !ok || bytes.Contains(in, []byte(`"x-mcp-header"`)) {
		return t
	}
	c := *t
	c.InputSchema = json.RawMessage(`{"type":"object"}`)
	return &c
}

// handler serves tools/call of every tool of e.
func (s *Server) handler(e *entry) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return s.callTool(ctx, e, req)
	}
}

func fingerprint(t *mcp.Tool) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12])
}

// describe is an offered tool as an MCP tool: the schema the model would
// see in chat plus the door's _thread (and, for a bound tool, the
// client's _max_chars); the effect as annotations; for a looping tool,
// the envelope's output schema and the looping guidance in one line; and
// the result budget in _meta.
func describe(o agent.OfferedTool, budget int) (t *mcp.Tool, dropped []string, err error) {
	var schema map[string]any
	if err := json.Unmarshal(o.Parameters, &schema); err != nil {
		return nil, nil, fmt.Errorf("the schema of %s: %w", o.Name, err)
	}
	if schema == nil {
		schema = map[string]any{}
	}
	schema["type"] = "object"
	props, _ := schema["properties"].(map[string]any)
	props = maps.Clone(props)
	if props == nil {
		props = map[string]any{}
	}
	props[ArgThread] = threadSchema()
	if o.Kind == agent.ToolBound {
		props[loop.ArgMaxChars] = loop.MaxCharsSchema(budget)
	}
	dropped = dropBadParamHeaders(props, "", map[string]bool{}, nil)
	schema["properties"] = props
	// The schemas go to the SDK as JSON: encoding one (every tools/list
	// page; on every 2026-07-28 tools/call, where the SDK looks for
	// parameters sent as headers, when it has any — see sdkTool) costs a
	// copy of these bytes instead of a walk over maps.
	in, err := json.Marshal(schema)
	if err != nil {
		return nil, nil, fmt.Errorf("the schema of %s: %w", o.Name, err)
	}
	t = &mcp.Tool{Name: o.Name, Description: o.Description, InputSchema: json.RawMessage(in),
		Annotations: annotations(o), Meta: mcp.Meta{MetaMaxResultSize: budget}}
	if o.Looping {
		t.Description += "\n\n" + prompts.Text("looping_line")
		t.OutputSchema = envelopeSchemaJSON()
	}
	return t, dropped, nil
}

// dropBadParamHeaders removes from props (a schema's properties, freshly
// decoded: describe's own) the x-mcp-header marks MCP does not allow —
// on a parameter that is not a string, integer or boolean, a header name
// that is not an HTTP token, or one used twice (case-insensitively) —
// and returns the paths of the parameters it removed them from. The SDK
// refuses a tool with any such mark (AddTool panics), and a client
// following the 2026-07-28 protocol drops it from the list, so one bad
// mark would cost the tool. Without it the value still goes in the arguments, as it does
// for every client before 2026-07-28. (trawl's own schemas carry no
// marks — an imported document's extensions do not reach them — so
// this guards what trawl passes on as it was given, against a panic.)
func dropBadParamHeaders(props map[string]any, prefix string, seen map[string]bool, dropped []string) []string {
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if mark, ok := p["x-mcp-header"]; ok {
			h, _ := mark.(string)
			typ, _ := p["type"].(string)
			if (typ == "string" || typ == "integer" || typ == "boolean") && tools.ValidHeaderName(h) && !seen[strings.ToLower(h)] {
				seen[strings.ToLower(h)] = true
			} else {
				delete(p, "x-mcp-header")
				dropped = append(dropped, fmt.Sprintf("%s (%v)", path, mark))
			}
		}
		if sub, ok := p["properties"].(map[string]any); ok {
			dropped = dropBadParamHeaders(sub, path, seen, dropped)
		}
	}
	return dropped
}

// envelopeSchemaJSON is envelopeSchema encoded once.
var envelopeSchemaJSON = sync.OnceValue(func() json.RawMessage {
	b, err := json.Marshal(envelopeSchema())
	if err != nil {
		panic("mcpserver: the envelope schema: " + err.Error())
	}
	return b
})

func threadSchema() map[string]any {
	return map[string]any{
		"type": "string", "maxLength": maxThreadLen, "pattern": threadPattern,
		"description": "The conversation this call belongs to: its stored results (_resultId) and loaded tools are kept per conversation. Omit it for your default conversation.",
	}
}

// annotations are an offered tool's effect as MCP's hints: a read is
// read-only and idempotent; a write is neither; a destructive call is
// destructive. A bound tool reaches an API outside trawl (open world);
// the meta and retrieval tools work on trawl's own state.
func annotations(o agent.OfferedTool) *mcp.ToolAnnotations {
	open := o.Kind == agent.ToolBound
	destructive := o.Effect == tools.EffectDestructive
	a := &mcp.ToolAnnotations{OpenWorldHint: &open, DestructiveHint: &destructive}
	if !o.Effect.Writes() {
		a.ReadOnlyHint, a.IdempotentHint = true, true
	}
	return a
}

// envelopeSchema describes a looping result's structuredContent: the
// tool's payload shape (its own keys are allowed through) plus the
// envelope keys of the verdict (DESIGN.md §5), those every verdict has
// required.
func envelopeSchema() map[string]any {
	str := map[string]any{"type": "string"}
	integer := map[string]any{"type": "integer"}
	nullableInt := map[string]any{"type": []any{"integer", "null"}}
	return map[string]any{
		"type":                 "object",
		"additionalProperties": true,
		"required":             []any{"_likelyMoreRows", "_stoppedBy", "_note", "_boundary"},
		"properties": map[string]any{
			"_pagingComplete": map[string]any{"type": "boolean", "description": "True only when _boundary.completion is complete: every row is here. Absent for a single response, which is not paged."},
			"_likelyMoreRows": map[string]any{"type": "boolean"},
			"_stoppedBy":      str,
			"_note":           map[string]any{"type": "string", "description": "The verdict in words."},
			"_boundary": map[string]any{
				"type":                 "object",
				"additionalProperties": true,
				"required":             []any{"scope", "pageSize", "pages", "requests", "records", "completion", "stopReason", "lastCursor", "uninspected", "action"},
				"properties": map[string]any{
					"scope": str, "pageSize": nullableInt, "pages": integer, "requests": integer, "records": nullableInt,
					"completion": map[string]any{"type": "string", "enum": []any{"complete", "partial", "unstable", "single_response"}},
					"stopReason": str, "lastCursor": map[string]any{"type": []any{"object", "null"}},
					"uninspected": str, "action": str,
				},
			},
			"_resultId":       map[string]any{"type": "string", "description": "The full result, for queryToolResult and fetchToolResult."},
			"_truncated":      map[string]any{"type": "boolean"},
			"_shownItems":     integer,
			"_totalItems":     integer,
			"_forEachErrors":  map[string]any{"type": "array"},
			"_forEachSkipped": map[string]any{"type": "array"},
			"_cache":          map[string]any{"type": "object"},
		},
	}
}

// callerOf is the caller an HTTP request authenticated as (carried in its
// token info), else the entry's (stdio).
func callerOf(x *mcp.RequestExtra, e *entry) Caller {
	if x != nil && x.TokenInfo != nil {
		if c, ok := x.TokenInfo.Extra[callerExtra].(Caller); ok {
			return c
		}
	}
	return e.caller
}
