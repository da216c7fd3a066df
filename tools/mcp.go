package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPConfig is one entry of the config's mcp_servers: a server trawl
// starts as a command and speaks to over stdio, or one it reaches over
// the streamable HTTP transport. Exactly one of Command and URL is set.
type MCPConfig struct {
	// ID names the server: it is the Provider of its tools and the prefix
	// of their ids. 1-64 letters, digits, '_' or '-'.
	ID string `json:"id" yaml:"id"`
	// Command is the program and its arguments, run without a shell. The
	// process inherits trawl's environment; its stderr goes to the logger
	// at debug level.
	Command []string `json:"command,omitempty" yaml:"command,omitempty"`
	// URL is the server's streamable HTTP endpoint (http or https).
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
}

// Validate checks the entry: a valid id and exactly one transport.
func (c MCPConfig) Validate() error {
	if !ValidName(c.ID) {
		return fmt.Errorf("mcp server %q: id must be 1-64 letters, digits, '_' or '-'", c.ID)
	}
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return fmt.Errorf("mcp server %q: set command or url, not both", c.ID)
	case len(c.Command) > 0:
		if strings.TrimSpace(c.Command[0]) == "" {
			return fmt.Errorf("mcp server %q: command has an empty program name", c.ID)
		}
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp server %q: url must be an absolute http(s) URL", c.ID)
		}
	default:
		return fmt.Errorf("mcp server %q: command or url is required", c.ID)
	}
	return nil
}

// MCPOptions configures an MCPSource. The zero value is usable.
type MCPOptions struct {
	// OnChange is called with the server's new tool list after the server
	// announced a change (notifications/tools/list_changed) and the list
	// was read again, when it differs from the previous one. Calls come
	// from one goroutine, one at a time, in order. OnChange must not call
	// Close. Nil: changes only update Tools.
	OnChange func(tools []*Tool)
	// Logger receives connection events, failed refreshes and a command
	// server's stderr (debug level). Nil: nothing is logged.
	Logger *slog.Logger
	// ConnectTimeout bounds connecting plus reading the first tool list,
	// and each later re-read of the list. Zero: 30s.
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call. Zero: 30s.
	CallTimeout time.Duration
	// MaxResponseBytes caps the rendered body of one call; more is cut
	// and the Response says Truncated. Zero: 24 MiB.
	MaxResponseBytes int64
	// HTTPClient sends the requests of a URL server. Nil: http.DefaultClient.
	HTTPClient *http.Client
	// Log records every tool call (method "MCP", path the server's tool
	// name). Nil: nothing is recorded.
	Log *ActivityLog
}

// Bounds of reading a server's tool list: a server that keeps handing out
// cursors is cut off rather than followed forever.
const (
	maxMCPListPages = 1000
	mcpCallMethod   = "MCP" // Activity.Method of an MCP tool call
)

// ErrMCPClosed is returned (wrapped) by calls on a source that was closed
// or whose server went away. Sources do not reconnect.
var ErrMCPClosed = errors.New("mcp session closed")

// MCPError is a failure talking to an MCP server: connecting, listing its
// tools or calling one without getting an answer. Its text names the
// server by id and never carries the server's URL query or credentials.
type MCPError struct {
	Server string // server id
	Op     string // what was being done: "connecting", "listing tools", "calling tool x"
	Err    error  // the cause
	msg    string // the cause in safe words
}

func (e *MCPError) Error() string {
	return fmt.Sprintf("mcp server %q: %s: %s", e.Server, e.Op, e.msg)
}

// Unwrap returns ErrUpstream (no answer was had) and the cause.
func (e *MCPError) Unwrap() []error { return []error{ErrUpstream, e.Err} }

// MCPSource is one connected MCP server and the tools it lists, as trawl
// tools of Kind mcp. It is safe for concurrent use; Call may run from many
// goroutines at once while the list is being refreshed.
type MCPSource struct {
	id          string
	session     *mcp.ClientSession
	listTimeout time.Duration
	callTimeout time.Duration
	max         int64
	logger      *slog.Logger
	activity    *ActivityLog
	onChange    func([]*Tool)
	changed     chan struct{} // list_changed signals, coalesced (capacity 1)
	done        chan struct{} // closed by Close
	refreshing  sync.WaitGroup
	watching    chan struct{} // closed when watch returns
	closeOnce   sync.Once
	closeErr    error

	mu     sync.RWMutex
	tools  []*Tool
	remote map[string]string // tool id → the server's own tool name
	gone   error             // set once the session ended
}

// ConnectMCP starts or reaches the server cfg describes, reads every page
// of its tool list and returns the source. ctx bounds only the connection
// (with opt.ConnectTimeout); the session lives until Close.
func ConnectMCP(ctx context.Context, cfg MCPConfig, opt MCPOptions) (*MCPSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &MCPSource{
		id:          cfg.ID,
		listTimeout: opt.ConnectTimeout,
		callTimeout: opt.CallTimeout,
		max:         opt.MaxResponseBytes,
		logger:      opt.Logger,
		activity:    opt.Log,
		onChange:    opt.OnChange,
		changed:     make(chan struct{}, 1),
		done:        make(chan struct{}),
		watching:    make(chan struct{}),
	}
	if s.listTimeout <= 0 {
		s.listTimeout = 30 * time.Second
	}
	if s.callTimeout <= 0 {
		s.callTimeout = 30 * time.Second
	}
	if s.max <= 0 {
		s.max = 24 << 20
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.logger = s.logger.With("mcp_server", cfg.ID)

	client := mcp.NewClient(&mcp.Implementation{Name: "trawl", Version: "1"}, &mcp.ClientOptions{
		Logger: opt.Logger,
		// trawl serves no roots, sampling or elicitation.
		Capabilities: &mcp.ClientCapabilities{},
		// The SDK runs notification handlers in line with reading; the list
		// is read again on the refresher goroutine.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default: // a refresh is already pending
			}
		},
	})
	var transport mcp.Transport
	if len(cfg.Command) > 0 {
		cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
		cmd.Stderr = &stderrLogger{logger: s.logger}
		transport = &mcp.CommandTransport{Command: cmd}
	} else {
		transport = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: opt.HTTPClient}
	}

	cctx, cancel := context.WithTimeout(ctx, s.listTimeout)
	defer cancel()
	session, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, s.fail("connecting", err)
	}
	s.session = session
	ts, remote, err := s.list(cctx)
	if err != nil {
		_ = session.Close()
		return nil, err
	}
	s.tools, s.remote = ts, remote
	s.logger.Info("mcp server connected", "tools", len(ts))

	s.refreshing.Add(1)
	go s.watch()
	go s.refresher(context.WithoutCancel(ctx))
	return s, nil
}

// ID is the server id (the Provider of its tools).
func (s *MCPSource) ID() string { return s.id }

// Tools returns the server's current tools. The slice is the caller's;
// the tools are shared and must not be modified.
func (s *MCPSource) Tools() []*Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.tools)
}

// mcpCloseTimeout bounds how long Close waits for the session to end: a
// server that never answers the closing request (or never lets go of an
// abandoned call) must not hold up a shutdown.
const mcpCloseTimeout = 5 * time.Second

// Close ends the session (and stops a command server) and waits, at most
// a few seconds, for it to end. It is idempotent; calls made afterwards
// fail with ErrMCPClosed.
func (s *MCPSource) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		if s.gone == nil {
			s.gone = fmt.Errorf("mcp server %q: %w", s.id, ErrMCPClosed)
		}
		s.mu.Unlock()
		close(s.done)
		s.refreshing.Wait()
		closed := make(chan error, 1)
		go func() { closed <- s.session.Close() }()
		select {
		case s.closeErr = <-closed:
			<-s.watching
		case <-time.After(mcpCloseTimeout):
			s.closeErr = fmt.Errorf("mcp server %q: closing: no answer within %s", s.id, mcpCloseTimeout)
		}
	})
	return s.closeErr
}

// watch notes when the session ends on its own (the process exited, the
// HTTP session was lost), so that later calls fail plainly.
func (s *MCPSource) watch() {
	defer close(s.watching)
	err := s.session.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone != nil {
		return // closed by us
	}
	s.gone = fmt.Errorf("mcp server %q: the server ended the session: %w", s.id, ErrMCPClosed)
	s.logger.Warn("mcp session ended", "error", err)
}

// refresher reads the list again after each list_changed notification.
// Notifications that arrive during a read are coalesced into one more.
func (s *MCPSource) refresher(ctx context.Context) {
	defer s.refreshing.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	for {
		select {
		case <-s.done:
			return
		case <-s.changed:
		}
		lctx, lcancel := context.WithTimeout(ctx, s.listTimeout)
		ts, remote, err := s.list(lctx)
		lcancel()
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("mcp tool list refresh failed; keeping the previous list", "error", err)
			}
			continue
		}
		s.mu.Lock()
		same := reflect.DeepEqual(ts, s.tools)
		s.tools, s.remote = ts, remote
		s.mu.Unlock()
		if same {
			continue
		}
		s.logger.Info("mcp tool list changed", "tools", len(ts))
		if s.onChange != nil {
			s.onChange(slices.Clone(ts))
		}
	}
}

// list reads every page of tools/list and maps the tools.
func (s *MCPSource) list(ctx context.Context) ([]*Tool, map[string]string, error) {
	var all []*mcp.Tool
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := s.session.ListTools(ctx, params)
		if err != nil {
			return nil, nil, s.fail("listing tools", err)
		}
		all = append(all, res.Tools...)
		next := res.NextCursor
		switch {
		case next == "":
			ts, remote := mapMCPTools(s.id, all, s.logger)
			return ts, remote, nil
		case seen[next]:
			return nil, nil, s.fail("listing tools", fmt.Errorf("page %d repeats an earlier cursor", page))
		case page >= maxMCPListPages:
			return nil, nil, s.fail("listing tools", fmt.Errorf("more than %d pages", maxMCPListPages))
		}
		seen[next] = true
		params = &mcp.ListToolsParams{Cursor: next}
	}
}

func (s *MCPSource) fail(op string, err error) *MCPError {
	return &MCPError{Server: s.id, Op: op, Err: err, msg: safeMCPCause(err)}
}

var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]+`)

// safeMCPCause words err for people and models: timeouts plainly, and any
// URL reduced to its scheme, host and path (no credentials, no query).
func safeMCPCause(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, ErrMCPClosed):
		return "connection closed"
	}
	return urlInText.ReplaceAllStringFunc(err.Error(), func(raw string) string {
		u, perr := url.Parse(strings.TrimRight(raw, ".,;:)"))
		if perr != nil || u.Host == "" {
			return "(url)"
		}
		return u.Scheme + "://" + u.Host + u.EscapedPath()
	})
}

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
	s.mu.RLock()
	name, known := s.remote[req.Tool.ID]
	gone := s.gone
	s.mu.RUnlock()
	if gone != nil {
		return nil, gone
	}
	if !known {
		return nil, fmt.Errorf("mcp server %q no longer offers tool %q", s.id, req.Tool.ID)
	}

	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	start := time.Now()
	act := Activity{
		Time: start.UTC(), ThreadID: req.ThreadID, Tool: req.Tool.ID, Method: mcpCallMethod,
		Path: name, Page: req.Page, Retry: req.Retry, Cursor: Fingerprint(req.Cursor),
	}
	res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: wireArgs(req.Tool, req.Args)})
	var out *Response
	var wire *jsonrpc.Error
	switch {
	case err == nil:
		out = renderMCPResult(res, s.max)
	case errors.As(err, &wire) && ctx.Err() == nil:
		out = renderMCPProtocolError(wire)
	default:
		act.DurationMs = time.Since(start).Milliseconds()
		var ferr error = s.fail("calling tool "+name, err)
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			ferr = fmt.Errorf("mcp server %q: calling tool %s: the connection ended: %w", s.id, name, ErrMCPClosed)
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
//   - isError: status 502 and {"error": the result's text};
//   - structuredContent: that value (the text copy the server usually
//     sends beside it is preferred when it says the same, as it keeps
//     number precision and key order);
//   - exactly one text item holding JSON: that JSON;
//   - otherwise {"content": [...]}: text items as strings, other items
//     summarised ({"type", "mimeType", "uri", "bytes"…}) without binary data.
func renderMCPResult(res *mcp.CallToolResult, limit int64) *Response {
	out := &Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}}
	var body []byte
	switch {
	case res == nil:
		out.Status = http.StatusBadGateway
		body = errorJSON("the MCP server returned no result")
	case res.IsError:
		out.Status = http.StatusBadGateway
		msg := strings.TrimSpace(strings.Join(texts(res.Content), "\n"))
		if msg == "" {
			msg = "the MCP tool reported an error without a message"
		}
		body = errorJSON(msg)
	case res.NeedsInput():
		out.Status = http.StatusBadGateway
		body = errorJSON("the MCP tool asked for user input, which trawl cannot give")
	case res.StructuredContent != nil:
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
			body = contentJSON(res.Content)
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
func contentJSON(content []mcp.Content) []byte {
	items := make([]any, 0, len(content))
	for _, c := range content {
		items = append(items, contentItem(c))
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
}

func contentItem(c mcp.Content) any {
	switch x := c.(type) {
	case *mcp.TextContent:
		return x.Text
	case *mcp.ImageContent:
		return mcpItem{Type: "image", MIMEType: x.MIMEType, Bytes: len(x.Data)}
	case *mcp.AudioContent:
		return mcpItem{Type: "audio", MIMEType: x.MIMEType, Bytes: len(x.Data)}
	case *mcp.ResourceLink:
		return mcpItem{Type: "resource_link", MIMEType: x.MIMEType, URI: x.URI, Name: x.Name, Description: x.Description}
	case *mcp.EmbeddedResource:
		item := mcpItem{Type: "resource"}
		if r := x.Resource; r != nil {
			item.MIMEType, item.URI, item.Text, item.Bytes = r.MIMEType, r.URI, r.Text, len(r.Blob)
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

// mapMCPTools turns a server's tool list into trawl tools. Names are made
// valid function names and unique: a name that is already valid keeps
// itself; another is sanitised, and when that collides, suffixed with a
// hash of the server's name (so it stays the same as tools come and go).
// Tools the server lists twice, or whose input schema cannot be read, are
// left out and logged.
func mapMCPTools(serverID string, list []*mcp.Tool, logger *slog.Logger) ([]*Tool, map[string]string) {
	type entry struct {
		src  *mcp.Tool
		base string
	}
	var entries []entry
	seen := map[string]bool{}
	for _, t := range list {
		if t == nil {
			continue
		}
		if seen[t.Name] {
			logger.Warn("mcp server lists a tool twice; keeping the first", "tool", t.Name)
			continue
		}
		seen[t.Name] = true
		entries = append(entries, entry{src: t, base: mcpBaseName(t.Name)})
	}

	// Who keeps each base name: the tool whose name it is unchanged, else
	// the alphabetically first of those that sanitise to it.
	keeper := map[string]string{}
	for _, e := range entries {
		k, ok := keeper[e.base]
		switch {
		case !ok, e.src.Name == e.base, k != e.base && e.src.Name < k:
			keeper[e.base] = e.src.Name
		}
	}
	taken := map[string]bool{}
	for base := range keeper {
		taken[base] = true
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		if keeper[e.base] == e.src.Name {
			names[i] = e.base
			continue
		}
		stem := e.base
		if len(stem) > 57 {
			stem = stem[:57]
		}
		key := e.src.Name
		for n := 1; ; n++ {
			name := stem + "_" + shortHash(key)
			if !taken[name] {
				names[i], taken[name] = name, true
				break
			}
			key = fmt.Sprintf("%s#%d", e.src.Name, n)
		}
	}

	conv := newSchemaConverter()
	out := make([]*Tool, 0, len(entries))
	remote := make(map[string]string, len(entries))
	for i, e := range entries {
		params, err := mcpParams(conv, e.src.InputSchema)
		if err != nil {
			logger.Warn("mcp tool left out: its input schema cannot be read", "tool", e.src.Name, "error", err)
			continue
		}
		desc := e.src.Description
		if strings.TrimSpace(desc) == "" {
			desc = e.src.Title
		}
		if strings.TrimSpace(desc) == "" && e.src.Annotations != nil {
			desc = e.src.Annotations.Title
		}
		t := &Tool{
			ID:          serverID + "." + names[i],
			Provider:    serverID,
			Name:        names[i],
			Description: trimText(cleanText(desc), maxToolDescription),
			Kind:        KindMCP,
			Params:      params,
		}
		if err := t.Validate(); err != nil {
			logger.Warn("mcp tool left out", "tool", e.src.Name, "error", err)
			continue
		}
		out = append(out, t)
		remote[t.ID] = e.src.Name
	}
	return out, remote
}

// mcpBaseName is a server's tool name sanitised to a function name.
func mcpBaseName(name string) string {
	n := strings.Trim(invalidNameRun.ReplaceAllString(name, "_"), "_-")
	if n == "" {
		n = "tool"
	}
	return fitName(n)
}

// mcpParams turns a tool's input schema (an object) into parameters, one
// per top-level property, all In body. Local $refs are inlined first.
func mcpParams(conv *schemaConverter, inputSchema any) ([]Param, error) {
	if inputSchema == nil {
		return []Param{}, nil
	}
	raw, err := json.Marshal(inputSchema)
	if err != nil {
		return nil, err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, err
	}
	root, ok := tree.(map[string]any)
	if !ok {
		if b, isBool := tree.(bool); isBool && b {
			return []Param{}, nil // "true": any object
		}
		return nil, errors.New("input schema is not a JSON Schema object")
	}
	inl := &refInliner{root: root, budget: maxInlineNodes}
	inlined := inl.schema(root, 0)
	rewriteTupleItems(inlined, false)
	raw, err = json.Marshal(inlined)
	if err != nil {
		return nil, err
	}
	var s openapi3.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	if typ := primaryType(s.Type); typ != "" && typ != "object" {
		return nil, fmt.Errorf("input schema has type %q; it must describe an object", typ)
	}
	cs := conv.convert(&openapi3.SchemaRef{Value: &s}, modeRequest)
	if cs == nil || len(cs.Properties) == 0 {
		return []Param{}, nil
	}
	props := make([]string, 0, len(cs.Properties))
	for name := range cs.Properties {
		props = append(props, name)
	}
	slices.Sort(props)
	out := make([]Param, 0, len(props))
	taken := map[string]bool{}
	for _, prop := range props {
		ps := cs.Properties[prop]
		name := uniqueName(taken, paramName(prop), string(InBody))
		wire := wireName(name, prop)
		if name == wholeBody {
			wire = prop // a property named "body", not the whole body
		}
		p := Param{
			Name:     name,
			Wire:     wire,
			In:       InBody,
			Required: slices.Contains(cs.Required, prop),
			Schema:   ps,
		}
		if ps != nil {
			p.Description = ps.Description
		}
		out = append(out, p)
	}
	return out, nil
}

// Bounds of $ref inlining: references nested deeper than the converter
// reads are not expanded, and a schema whose expansion would pass
// maxInlineNodes (a diamond of references doubling at each level) has its
// remaining references cut to their type.
const (
	maxInlineDepth = maxSchemaDepth + 2
	maxInlineNodes = 20000
)

// refInliner copies a JSON Schema with its local references ("#/$defs/x",
// "#/definitions/x", any pointer into the document) replaced by what they
// point to. A reference that forms a cycle, or lies past the bounds, is
// replaced by the target's type alone; one that cannot be resolved (or
// points outside the document) by an unconstrained schema.
type refInliner struct {
	root   map[string]any
	budget int
	stack  []string
}

// Keywords whose value is one schema, a list of schemas, or a map of them.
var (
	schemaKeywords    = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	schemaListKeyword = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMapKeywords = []string{"properties", "patternProperties", "dependentSchemas"}
)

func (r *refInliner) schema(v any, depth int) any {
	r.budget--
	x, ok := v.(map[string]any)
	if !ok {
		if list, isList := v.([]any); isList { // draft-4 tuple items
			return r.list(list, depth)
		}
		return v // true, false, or not a schema at all
	}
	if ref, isRef := x["$ref"].(string); isRef {
		return r.ref(ref, x, depth)
	}
	out := make(map[string]any, len(x))
	for k, child := range x {
		switch {
		case k == "$defs" || k == "definitions":
			// Inlined where used.
		case slices.Contains(schemaKeywords, k):
			out[k] = r.schema(child, depth+1)
		case slices.Contains(schemaListKeyword, k):
			if list, isList := child.([]any); isList {
				out[k] = r.list(list, depth)
			}
		case slices.Contains(schemaMapKeywords, k):
			if m, isMap := child.(map[string]any); isMap {
				cm := make(map[string]any, len(m))
				for name, ps := range m {
					cm[name] = r.schema(ps, depth+1)
				}
				out[k] = cm
			}
		default:
			out[k] = child
		}
	}
	return out
}

func (r *refInliner) list(list []any, depth int) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = r.schema(s, depth)
	}
	return out
}

func (r *refInliner) ref(ref string, at map[string]any, depth int) any {
	var target any
	if strings.HasPrefix(ref, "#") {
		target = jsonPointer(r.root, ref[1:])
	}
	// Keywords beside $ref (2020-12) apply too; they win over the target's.
	siblings := make(map[string]any, len(at))
	for k, v := range at {
		if k != "$ref" {
			siblings[k] = v
		}
	}
	var resolved map[string]any
	switch t := target.(type) {
	case nil:
		resolved = map[string]any{}
	case map[string]any:
		if slices.Contains(r.stack, ref) || depth >= maxInlineDepth || r.budget <= 0 {
			resolved = map[string]any{}
			if typ, ok := t["type"]; ok {
				resolved["type"] = typ
			}
		} else {
			r.stack = append(r.stack, ref)
			resolved, _ = r.schema(t, depth).(map[string]any)
			r.stack = r.stack[:len(r.stack)-1]
			if resolved == nil {
				resolved = map[string]any{}
			}
		}
	default:
		return target // a boolean schema
	}
	if len(siblings) == 0 {
		return resolved
	}
	merged, _ := r.schema(siblings, depth).(map[string]any)
	for k, v := range resolved {
		if _, own := merged[k]; !own {
			merged[k] = v
		}
	}
	return merged
}

// jsonPointer resolves an RFC 6901 pointer (as in a URI fragment) in doc;
// nil when it does not resolve.
func jsonPointer(doc any, pointer string) any {
	if p, err := url.PathUnescape(pointer); err == nil {
		pointer = p
	}
	if pointer == "" {
		return doc
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := cur.(type) {
		case map[string]any:
			cur = x[tok]
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}

// stderrLogger writes a command server's stderr to the logger, a line at
// a time, at debug level (a server's log may hold what it was given).
type stderrLogger struct {
	logger *slog.Logger
	buf    []byte
}

const maxStderrLine = 4096

func (w *stderrLogger) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxStderrLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *stderrLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	if len(line) > 0 {
		w.logger.Debug("mcp server stderr", "line", string(line))
	}
}

// Router is the Caller for tools of every kind: an MCP tool goes to the
// source of its provider, any other tool to the HTTP invoker. The MCP map
// must not be modified once calls start; Router is then safe for
// concurrent use.
type Router struct {
	HTTP *Invoker
	MCP  map[string]*MCPSource // by server id
}

// Call sends req to where its tool lives.
func (r Router) Call(ctx context.Context, req Request) (*Response, error) {
	if req.Tool == nil {
		return nil, errors.New("call: no tool")
	}
	if req.Tool.Kind == KindMCP {
		src := r.MCP[req.Tool.Provider]
		if src == nil {
			return nil, fmt.Errorf("tool %q: no MCP server %q is connected", req.Tool.ID, req.Tool.Provider)
		}
		return src.Call(ctx, req)
	}
	if r.HTTP == nil {
		return nil, fmt.Errorf("tool %q: no HTTP invoker is configured", req.Tool.ID)
	}
	return r.HTTP.Call(ctx, req)
}
