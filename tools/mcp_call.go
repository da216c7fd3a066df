package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Call calls the tool req names on the server with req.Args and renders
// the result as a Response: status 200 and a JSON body for a result, 502
// with {"error": text} when the tool reported an error, 400 (invalid
// arguments) or 502 when the server answered with a protocol error. An
// error means no answer: a closed session (ErrMCPClosed), a timeout, a
// broken connection.
func (s *MCPSource) Call(ctx context.Context, req Request) (*Response, error) {
	if req.Tool == nil {
		return nil, errors.New("mcp call: no tool")
	}
	if req.URL != "" {
		return nil, fmt.Errorf("mcp tool %q takes no continuation URL", req.Tool.ID)
	}
	session, err := s.current()
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	name, known := s.remote[req.Tool.ID]
	s.mu.RUnlock()
	if !known {
		return nil, fmt.Errorf("mcp server %q no longer offers tool %q", s.id, req.Tool.ID)
	}

	var waited time.Duration
	if s.limiter != nil {
		p, err := s.limiter.Acquire(ctx, LimitScope{Provider: s.id, Limit: s.limit})
		if err != nil {
			var rle *RateLimitError
			if errors.As(err, &rle) || ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("mcp server %q: %w", s.id, err)
		}
		waited = p.Waited()
		box := &outcomeBox{} // the HTTP answer to the call's POST, for the permit
		ctx = context.WithValue(ctx, outcomeKey{}, box)
		defer func() { p.Release(box.get()) }()
	}
	if err := LimitGranted(ctx); err != nil {
		return nil, err // given up as it got its slot: not sent
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	start := time.Now()
	act := Activity{WaitMs: waited.Milliseconds(),
		Time: start.UTC(), ThreadID: req.ThreadID, CallID: CallIDFrom(ctx), Tool: req.Tool.ID, Method: mcpCallMethod,
		Path: name, Page: req.Page, Retry: req.Retry, Cursor: Fingerprint(req.Cursor),
		Effect: req.EffectOf(), Writes: req.EffectOf().Writes(),
	}
	params := &mcp.CallToolParams{Name: name, Arguments: wireArgs(req.Tool, withIdempotency(ctx, req))}
	if req.Progress != nil {
		token, done := s.watchProgress(req.Progress)
		defer done()
		params.SetProgressToken(token)
	}
	if err := passWriteGate(ctx, req); err != nil {
		return nil, err
	}
	res, err := session.CallTool(ctx, params)
	var out *Response
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		out = renderMCPResult(res, s.max, mediaSinkOf(ctx))
	case errors.As(err, &wire) && ctx.Err() == nil:
		out = renderMCPProtocolError(wire)
	default:
		act.DurationMs = time.Since(start).Milliseconds()
		var ferr error = s.fail("calling tool "+name, err)
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			ferr = fmt.Errorf("mcp server %q: calling tool %s: the connection ended: %w", s.id, name, ErrMCPClosed)
			s.lose(session, err) // connect again now, not when the SDK notices
		}
		act.Error = safeMCPCause(err)
		s.record(ctx, act)
		return nil, ferr
	}
	out.Duration = time.Since(start)
	act.Status, act.Bytes, act.DurationMs = out.Status, int64(len(out.Body)), out.Duration.Milliseconds()
	s.record(ctx, act)
	return out, nil
}

// watchProgress registers report for the progress of one call: token
// goes in the call's _meta; done takes it out (after done returns,
// report is not called).
func (s *MCPSource) watchProgress(report func(UpstreamProgress)) (token string, done func()) {
	s.progressMu.Lock()
	defer s.progressMu.Unlock()
	if s.progress == nil {
		s.progress = map[string]func(UpstreamProgress){}
	}
	s.progressN++
	token = "trawl-" + strconv.FormatUint(s.progressN, 10)
	s.progress[token] = report
	return token, func() {
		s.progressMu.Lock()
		delete(s.progress, token)
		s.progressMu.Unlock()
	}
}

// relayProgress hands a notifications/progress from the server to the
// call whose token it names; one for no call of ours (late, or made up)
// is dropped.
func (s *MCPSource) relayProgress(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	s.progressMu.RLock()
	defer s.progressMu.RUnlock()
	if report := s.progress[token]; report != nil {
		report(UpstreamProgress{Progress: p.Progress, Total: p.Total, Message: p.Message})
	}
}

func (s *MCPSource) record(ctx context.Context, a Activity) {
	if s.activity != nil {
		_ = s.activity.Record(ctx, a) // the call's outcome does not depend on the log
	}
}

// wireArgs renames arguments whose model-facing name differs from the
// server's property name. Arguments no parameter declares are passed on
// as they are; the server judges them.
func wireArgs(t *Tool, args map[string]any) map[string]any {
	out := make(map[string]any, len(args))
	for k, v := range args {
		if p, ok := t.Param(k); ok {
			k = p.WireName()
		}
		out[k] = v
	}
	return out
}

// renderMCPResult turns a tools/call result into a Response body a loop
// engine can read as JSON:
//   - isError: status 422 (never retried) and {"error": the result's text};
//   - structuredContent: that value (the text copy the server usually
//     sends beside it is preferred when it says the same, as it keeps
//     number precision and key order);
//   - exactly one text item holding JSON: that JSON;
//   - otherwise {"content": [...]}: text items as strings, other items
//     summarised ({"type", "mimeType", "uri", "bytes"…}) without binary
//     data; an embedded text resource with its text. Pictures and sounds
//     go to sink when the caller gave one (and they fit): their summary
//     then says "attached": true.
func renderMCPResult(res *mcp.CallToolResult, limit int64, sink *MediaSink) *Response {
	out := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
	var body []byte
	switch {
	case res == nil:
		out.Status = http.StatusBadGateway
		body = errorJSON("the MCP server returned no result")
	case res.IsError:
		// The tool's own answer (access denied, not found): what it says
		// is for the model, and calling again would say it again — a
		// status no walk retries, unlike a 502.
		out.Status = http.StatusUnprocessableEntity
		msg := strings.TrimSpace(strings.Join(texts(res.Content), "\n"))
		if msg == "" {
			msg = "the MCP tool reported an error without a message"
		}
		body = errorJSON(msg)
	case res.NeedsInput():
		out.Status = http.StatusBadGateway
		body = errorJSON("the MCP tool asked for user input, which trawl cannot give")
	case res.StructuredContent != nil:
		for _, c := range res.Content {
			if x, ok := c.(*mcp.ImageContent); ok && sink != nil {
				sink.take(Media{Type: "image", MIMEType: x.MIMEType, Data: x.Data}) // beside the structured value
			}
		}
		if text, ok := singleJSONText(res.Content); ok && sameJSON(text, res.StructuredContent) {
			body = text
		} else if b, err := json.Marshal(res.StructuredContent); err == nil {
			body = b
		} else {
			out.Status = http.StatusBadGateway
			body = errorJSON("the MCP tool's structured content is not JSON")
		}
	default:
		if text, ok := singleJSONText(res.Content); ok {
			body = text
		} else {
			body = contentJSON(res.Content, sink)
		}
	}
	if int64(len(body)) > limit {
		body, out.Truncated = body[:limit], true
	}
	out.Body = body
	return out
}

// renderMCPProtocolError is the Response for a JSON-RPC error the server
// answered a call with: its message is for the model to read.
func renderMCPProtocolError(e *jsonrpc.Error) *Response {
	status := http.StatusBadGateway
	if e.Code == jsonrpc.CodeInvalidParams {
		status = http.StatusBadRequest
	}
	msg := strings.TrimSpace(e.Message)
	if msg == "" {
		msg = fmt.Sprintf("the MCP server answered with error code %d", e.Code)
	}
	return &Response{Status: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: errorJSON(msg)}
}

func errorJSON(msg string) []byte {
	b, _ := json.Marshal(map[string]string{"error": msg})
	return b
}

func texts(content []mcp.Content) []string {
	var out []string
	for _, c := range content {
		if t, ok := c.(*mcp.TextContent); ok {
			out = append(out, t.Text)
		}
	}
	return out
}

// singleJSONText returns the content's only item, compacted, when it is a
// text holding valid JSON.
func singleJSONText(content []mcp.Content) ([]byte, bool) {
	if len(content) != 1 {
		return nil, false
	}
	t, ok := content[0].(*mcp.TextContent)
	if !ok {
		return nil, false
	}
	var buf bytes.Buffer
	if json.Compact(&buf, []byte(t.Text)) != nil || buf.Len() == 0 {
		return nil, false
	}
	return buf.Bytes(), true
}

// sameJSON reports whether text decodes to v.
func sameJSON(text []byte, v any) bool {
	var decoded any
	if json.Unmarshal(text, &decoded) != nil {
		return false
	}
	if reflect.DeepEqual(decoded, v) {
		return true // v came off the wire: the same Go types
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	var other any
	if json.Unmarshal(b, &other) != nil {
		return false
	}
	return reflect.DeepEqual(decoded, other)
}

// contentJSON renders content items as {"content": [...]}.
func contentJSON(content []mcp.Content, sink *MediaSink) []byte {
	items := make([]any, 0, len(content))
	for _, c := range content {
		items = append(items, contentItem(c, sink))
	}
	b, _ := json.Marshal(map[string]any{"content": items})
	return b
}

// mcpItem is the summary of a content item that is not text.
type mcpItem struct {
	Type        string `json:"type"`
	MIMEType    string `json:"mimeType,omitempty"`
	URI         string `json:"uri,omitempty"`
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	Text        string `json:"text,omitempty"`  // an embedded text resource's text
	Bytes       int    `json:"bytes,omitempty"` // size of binary data left out
	// Attached says the binary data (a picture, a sound) travels beside
	// the result, for a model that can take it.
	Attached bool `json:"attached,omitempty"`
}

func contentItem(c mcp.Content, sink *MediaSink) any {
	attach := func(kind, mime string, data []byte) bool {
		return sink != nil && sink.take(Media{Type: kind, MIMEType: mime, Data: data})
	}
	switch x := c.(type) {
	case *mcp.TextContent:
		return x.Text
	case *mcp.ImageContent:
		return mcpItem{Type: "image", MIMEType: x.MIMEType, Bytes: len(x.Data), Attached: attach("image", x.MIMEType, x.Data)}
	case *mcp.AudioContent:
		return mcpItem{Type: "audio", MIMEType: x.MIMEType, Bytes: len(x.Data), Attached: attach("audio", x.MIMEType, x.Data)}
	case *mcp.ResourceLink:
		return mcpItem{Type: "resource_link", MIMEType: x.MIMEType, URI: x.URI, Name: x.Name, Description: x.Description}
	case *mcp.EmbeddedResource:
		item := mcpItem{Type: "resource"}
		if r := x.Resource; r != nil {
			item.MIMEType, item.URI, item.Text, item.Bytes = r.MIMEType, r.URI, r.Text, len(r.Blob)
			if strings.HasPrefix(r.MIMEType, "image/") && len(r.Blob) > 0 {
				item.Attached = attach("image", r.MIMEType, r.Blob)
			}
		}
		return item
	}
	// Content the SDK knows but a tool result should not hold (tool_use…):
	// its type alone.
	var probe struct {
		Type string `json:"type"`
	}
	if b, err := json.Marshal(c); err == nil {
		_ = json.Unmarshal(b, &probe)
	}
	if probe.Type == "" {
		probe.Type = "unknown"
	}
	return mcpItem{Type: probe.Type}
}

// Router is the Caller for tools of every kind: an MCP tool goes to the
// source of its provider, any other tool to the HTTP invoker. MCP results
// and errors pass through the invoker's scrubber too, so one boundary
// masks every secret whatever the tool's kind. The MCP map must not be
// modified once calls start; Router is then safe for concurrent use.
type Router struct {
	HTTP *Invoker
	MCP  map[string]*MCPSource // by server id
	// UserMCP are the MCP servers each user connects, by server id.
	UserMCP map[string]*MCPUserSource
}

// Scrubber is the HTTP invoker's scrubber (nil without one): the one
// every result of the router passes through.
func (r Router) Scrubber(runtime ...string) *Scrubber {
	if r.HTTP == nil {
		return nil
	}
	return r.HTTP.Scrubber(runtime...)
}

// Call sends req to where its tool lives.
func (r Router) Call(ctx context.Context, req Request) (*Response, error) {
	if req.Tool == nil {
		return nil, errors.New("call: no tool")
	}
	if req.Tool.Kind == KindMCP {
		var call func(context.Context, Request) (*Response, error)
		if src := r.MCP[req.Tool.Provider]; src != nil {
			call = src.Call
		} else if us := r.UserMCP[req.Tool.Provider]; us != nil {
			call = us.Call
		} else {
			return nil, fmt.Errorf("tool %q: no MCP server %q is connected", req.Tool.ID, req.Tool.Provider)
		}
		resp, err := call(ctx, req)
		if r.HTTP == nil {
			return resp, err
		}
		scrub := r.HTTP.callScrubber(ctx, req.Credential)
		if err != nil {
			return nil, scrubError(scrub, err)
		}
		resp.Body = scrub.Bytes(resp.Body)
		resp.Header = scrub.Header(resp.Header)
		return resp, nil
	}
	if r.HTTP == nil {
		return nil, fmt.Errorf("tool %q: no HTTP invoker is configured", req.Tool.ID)
	}
	return r.HTTP.Call(ctx, req)
}

// outcomeKey carries where an MCP call's HTTP answer is kept for its
// limiter permit: the SDK sends the call's POST under the call's context.
type outcomeKey struct{}

// outcomeBox holds the answer; the SDK's sending goroutine may still be
// writing it when a cancelled call returns.
type outcomeBox struct {
	mu sync.Mutex
	o  Outcome
}

func (b *outcomeBox) get() Outcome {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.o
}

type outcomeRecorder struct{ next http.RoundTripper }

func (o outcomeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := o.next.RoundTrip(req)
	if box, ok := req.Context().Value(outcomeKey{}).(*outcomeBox); ok && err == nil && req.Method == http.MethodPost {
		box.mu.Lock()
		box.o = Outcome{Status: resp.StatusCode, Header: resp.Header.Clone()}
		box.mu.Unlock()
	}
	return resp, err
}

// withOutcomeRecorder is c recording each answer for the limiter.
func withOutcomeRecorder(c *http.Client) *http.Client {
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	cp := *c
	cp.Transport = outcomeRecorder{next: next}
	return &cp
}
