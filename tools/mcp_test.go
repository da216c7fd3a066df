package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The stdio tests run this test binary again as an MCP server: with
// mcpServerEnv=1 it serves the test tools on stdin/stdout and exits.
const mcpServerEnv = "TRAWL_MCP_TEST_SERVER"

func TestMain(m *testing.M) {
	if os.Getenv(mcpServerEnv) == "1" {
		srv := newTestMCPServer(mcpTestServerOptions{stdio: true})
		if err := srv.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			fmt.Fprintln(os.Stderr, "test mcp server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type mcpTestServerOptions struct {
	stdio     bool          // add the "exit" tool, which ends the process
	listCalls *atomic.Int32 // counts tools/list requests when set
	release   chan struct{} // "slow" answers when it is closed (or its call is cancelled)
}

// bigTotal does not fit a float64 exactly: it tells the text copy of a
// structured result from a re-encoding of the decoded value.
const bigTotal = "12345678901234567"

// newTestMCPServer is a real MCP server (the official SDK) with a page
// size of 2, so that its eight tools take four tools/list pages.
func newTestMCPServer(o mcpTestServerOptions) *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "trawl-test", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	if o.listCalls != nil {
		srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/list" {
					o.listCalls.Add(1)
				}
				return next(ctx, method, req)
			}
		})
	}
	text := func(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

	srv.AddTool(&mcp.Tool{
		Name:        "search.orders",
		Description: "Search orders.\n\nReturns the arguments it got.",
		InputSchema: json.RawMessage(`{
			"type": "object",
			"properties": {
				"query": {"type": "string", "description": "Free text."},
				"limit": {"type": "integer", "minimum": 1, "maximum": 100},
				"filter": {"$ref": "#/$defs/filter"},
				"_private": {"type": "string"},
				"body": {"type": "string", "description": "A property named body."}
			},
			"required": ["query"],
			"$defs": {"filter": {"type": "object", "properties": {
				"status": {"type": "string", "enum": ["open", "closed"]},
				"tags": {"type": "array", "items": {"type": "string"}}
			}}}
		}`),
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var args any
		if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
			return nil, err
		}
		return &mcp.CallToolResult{StructuredContent: map[string]any{"got": args}}, nil
	})
	srv.AddTool(&mcp.Tool{Name: "structured", Description: "Structured result with a text copy.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			raw := `{"total": ` + bigTotal + `, "items": [{"id": "a"}, {"id": "b"}]}`
			var v any
			_ = json.Unmarshal([]byte(raw), &v)
			return &mcp.CallToolResult{StructuredContent: v, Content: text(raw)}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "text_json", Description: "One text item holding JSON.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text("{\n  \"a\": [1, 2]\n}")}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "plain_text", Description: "Text that is not JSON.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: text("hello")}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "mixed", Description: "Every kind of content.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				&mcp.TextContent{Text: "see attached"},
				&mcp.ImageContent{MIMEType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}},
				&mcp.ResourceLink{URI: "file:///report.csv", Name: "report", MIMEType: "text/csv"},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///a.txt", MIMEType: "text/plain", Text: "alpha"}},
				&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///b.bin", MIMEType: "application/octet-stream", Blob: []byte{1, 2, 3}}},
			}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "fails", Description: "Reports a tool error.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: text("quota exceeded")}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "slow", Description: "Answers when cancelled.",
		InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-ctx.Done():
			case <-o.release:
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "late"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "strict", Description: "Fails with a Go error.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("the server broke")
		})
	if o.stdio {
		srv.AddTool(&mcp.Tool{Name: "exit", Description: "Ends the server process.",
			InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				os.Exit(3)
				return nil, nil
			})
	}
	return srv
}

// serveMCP serves srv over streamable HTTP and returns its URL.
func serveMCP(t *testing.T, srv *mcp.Server) string {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

func connectTest(t *testing.T, cfg MCPConfig, opt MCPOptions) *MCPSource {
	t.Helper()
	src, err := ConnectMCP(t.Context(), cfg, opt)
	if err != nil {
		t.Fatalf("ConnectMCP: %v", err)
	}
	t.Cleanup(func() { _ = src.Close() })
	return src
}

func toolByName(t *testing.T, ts []*Tool, name string) *Tool {
	t.Helper()
	for _, tool := range ts {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool %q among %v", name, toolNames(ts))
	return nil
}

func toolNames(ts []*Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Name)
	}
	slices.Sort(out)
	return out
}

func TestConnectMCPHTTPListsEveryPage(t *testing.T) {
	var lists atomic.Int32
	url := serveMCP(t, newTestMCPServer(mcpTestServerOptions{listCalls: &lists}))
	src := connectTest(t, MCPConfig{ID: "files", URL: url}, MCPOptions{})

	if got := lists.Load(); got != 4 {
		t.Errorf("tools/list requests = %d, want 4 (8 tools, pages of 2)", got)
	}
	want := []string{"fails", "mixed", "plain_text", "search_orders", "slow", "strict", "structured", "text_json"}
	if diff := cmp.Diff(want, toolNames(src.Tools())); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
	for _, tool := range src.Tools() {
		if tool.Kind != KindMCP || tool.Provider != "files" || tool.ID != "files."+tool.Name || tool.Response != nil {
			t.Errorf("tool %+v: want kind mcp, provider files, id files.<name>, no response schema", tool)
		}
	}

	search := toolByName(t, src.Tools(), "search_orders")
	one, hundred := 1.0, 100.0
	wantTool := &Tool{
		ID: "files.search_orders", Provider: "files", Name: "search_orders", Kind: KindMCP,
		Effect: EffectDestructive, EffectDeclared: true, // no annotations: the MCP defaults
		Description: "Search orders. Returns the arguments it got.",
		Params: []Param{
			{Name: "private", Wire: "_private", In: InBody, Schema: &Schema{Type: "string"}},
			{Name: "body", Wire: "body", In: InBody, Description: "A property named body.",
				Schema: &Schema{Type: "string", Description: "A property named body."}},
			{Name: "filter", In: InBody, Schema: &Schema{Type: "object", Properties: map[string]*Schema{
				"status": {Type: "string", Enum: []any{"open", "closed"}},
				"tags":   {Type: "array", Items: &Schema{Type: "string"}},
			}}},
			{Name: "limit", In: InBody, Schema: &Schema{Type: "integer", Minimum: &one, Maximum: &hundred}},
			{Name: "query", In: InBody, Required: true, Description: "Free text.",
				Schema: &Schema{Type: "string", Description: "Free text."}},
		},
	}
	if diff := cmp.Diff(wantTool, search, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("search_orders (-want +got):\n%s", diff)
	}
}

// callBody calls the tool named name and returns status and body.
func callBody(t *testing.T, src *MCPSource, name string, args map[string]any) (int, string) {
	t.Helper()
	resp, err := src.Call(t.Context(), Request{Tool: toolByName(t, src.Tools(), name), Args: args})
	if err != nil {
		t.Fatalf("Call %s: %v", name, err)
	}
	return resp.Status, string(resp.Body)
}

func TestMCPSourceCallRendersResults(t *testing.T) {
	var log = NewActivityLog(nil, 0)
	url := serveMCP(t, newTestMCPServer(mcpTestServerOptions{}))
	src := connectTest(t, MCPConfig{ID: "files", URL: url}, MCPOptions{Log: log})

	tests := []struct {
		tool       string
		args       map[string]any
		wantStatus int
		wantBody   string
	}{
		// Argument names go back to the server's property names.
		{"search_orders", map[string]any{"query": "x", "private": "p", "body": "b", "filter": map[string]any{"status": "open"}},
			200, `{"got":{"_private":"p","body":"b","filter":{"status":"open"},"query":"x"}}`},
		// The text copy of structured content keeps the number exact.
		{"structured", nil, 200, `{"total":` + bigTotal + `,"items":[{"id":"a"},{"id":"b"}]}`},
		{"text_json", nil, 200, `{"a":[1,2]}`},
		{"plain_text", nil, 200, `{"content":["hello"]}`},
		{"mixed", nil, 200, `{"content":["see attached",` +
			`{"type":"image","mimeType":"image/png","bytes":4},` +
			`{"type":"resource_link","mimeType":"text/csv","uri":"file:///report.csv","name":"report"},` +
			`{"type":"resource","mimeType":"text/plain","uri":"file:///a.txt","text":"alpha"},` +
			`{"type":"resource","mimeType":"application/octet-stream","uri":"file:///b.bin","bytes":3}]}`},
		// isError is the tool's answer, never retried: 422, not 502.
		{"fails", nil, 422, `{"error":"quota exceeded"}`},
		// A Go error from an SDK tool handler reaches the client as a
		// protocol error: 502.
		{"strict", nil, 502, `{"error":"the server broke"}`},
	}
	for _, tt := range tests {
		t.Run(tt.tool, func(t *testing.T) {
			status, body := callBody(t, src, tt.tool, tt.args)
			if status != tt.wantStatus {
				t.Errorf("status = %d, want %d", status, tt.wantStatus)
			}
			if diff := cmp.Diff(tt.wantBody, body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}

	acts, err := log.List(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != len(tests) {
		t.Fatalf("activity records = %d, want %d", len(acts), len(tests))
	}
	last := acts[0]
	if last.Tool != "files.strict" || last.Method != "MCP" || last.Path != "strict" || last.Status != 502 || last.Bytes == 0 {
		t.Errorf("last activity = %+v", last)
	}
}

func TestMCPSourceCallErrors(t *testing.T) {
	release := make(chan struct{})
	url := serveMCP(t, newTestMCPServer(mcpTestServerOptions{release: release}))
	src := connectTest(t, MCPConfig{ID: "files", URL: url}, MCPOptions{CallTimeout: 200 * time.Millisecond})

	t.Run("timeout", func(t *testing.T) {
		defer close(release)
		_, err := src.Call(t.Context(), Request{Tool: toolByName(t, src.Tools(), "slow")})
		var me *MCPError
		if !errors.As(err, &me) || !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "timed out") {
			t.Fatalf("err = %v, want an MCPError saying timed out", err)
		}
	})
	t.Run("unknown to the server", func(t *testing.T) {
		ghost := &Tool{ID: "files.ghost", Provider: "files", Name: "ghost", Kind: KindMCP}
		_, err := src.Call(t.Context(), Request{Tool: ghost})
		if err == nil || !strings.Contains(err.Error(), `no longer offers tool "files.ghost"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("continuation URL", func(t *testing.T) {
		_, err := src.Call(t.Context(), Request{Tool: toolByName(t, src.Tools(), "fails"), URL: "https://x.example/next"})
		if err == nil {
			t.Fatal("want an error")
		}
	})
	t.Run("closed", func(t *testing.T) {
		if err := src.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := src.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		_, err := src.Call(t.Context(), Request{Tool: toolByName(t, src.Tools(), "fails")})
		if !errors.Is(err, ErrMCPClosed) {
			t.Fatalf("err = %v, want ErrMCPClosed", err)
		}
	})
}

func TestMCPProtocolErrorIsAResponse(t *testing.T) {
	url := serveMCP(t, newTestMCPServer(mcpTestServerOptions{}))
	src := connectTest(t, MCPConfig{ID: "files", URL: url}, MCPOptions{})
	// The source still maps "files.gone" to a name the server no longer
	// has: the server answers with a JSON-RPC error (invalid params).
	src.mu.Lock()
	src.remote["files.gone"] = "gone"
	src.mu.Unlock()
	resp, err := src.Call(t.Context(), Request{Tool: &Tool{ID: "files.gone", Provider: "files", Name: "gone", Kind: KindMCP}})
	if err != nil {
		t.Fatalf("Call: %v", err)
	}
	if resp.Status != http.StatusBadRequest || !strings.Contains(string(resp.Body), `unknown tool \"gone\"`) {
		t.Fatalf("got %d %s, want 400 naming the unknown tool", resp.Status, resp.Body)
	}
}

func TestMCPListChanged(t *testing.T) {
	srv := newTestMCPServer(mcpTestServerOptions{})
	url := serveMCP(t, srv)
	changes := make(chan []*Tool, 4)
	src := connectTest(t, MCPConfig{ID: "files", URL: url}, MCPOptions{
		OnChange: func(ts []*Tool) { changes <- ts },
	})
	before := toolNames(src.Tools())

	next := func() []*Tool {
		t.Helper()
		select {
		case ts := <-changes:
			return ts
		case <-time.After(10 * time.Second):
			t.Fatal("OnChange was not called")
			return nil
		}
	}

	srv.AddTool(&mcp.Tool{Name: "added/later", Description: "Added at runtime.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "number"}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true}`}}}, nil
		})
	got := next()
	want := append(slices.Clone(before), "added_later")
	slices.Sort(want)
	if diff := cmp.Diff(want, toolNames(got)); diff != "" {
		t.Fatalf("OnChange list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, toolNames(src.Tools())); diff != "" {
		t.Errorf("Tools after the change (-want +got):\n%s", diff)
	}
	if status, body := callBody(t, src, "added_later", map[string]any{"n": 1}); status != 200 || body != `{"ok":true}` {
		t.Errorf("calling the new tool: %d %s", status, body)
	}

	srv.RemoveTools("fails")
	got = next()
	if slices.Contains(toolNames(got), "fails") || len(got) != len(want)-1 {
		t.Fatalf("after RemoveTools: %v", toolNames(got))
	}
	_, err := src.Call(t.Context(), Request{Tool: &Tool{ID: "files.fails", Provider: "files", Name: "fails", Kind: KindMCP}})
	if err == nil || !strings.Contains(err.Error(), "no longer offers") {
		t.Errorf("calling a removed tool: %v", err)
	}
}

func TestConnectMCPStdio(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	// The child gets only what Env gives it (and PATH, HOME…): the test
	// binary serves MCP because Env says so.
	src := connectTest(t, MCPConfig{ID: "local", Command: []string{os.Args[0]},
		Env: map[string]MCPEnvValue{mcpServerEnv: {Value: "1"}}}, MCPOptions{Logger: logger,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})

	if got := len(src.Tools()); got != 9 {
		t.Errorf("tools = %d (%v), want 9", got, toolNames(src.Tools()))
	}
	if status, body := callBody(t, src, "text_json", nil); status != 200 || body != `{"a":[1,2]}` {
		t.Errorf("text_json: %d %s", status, body)
	}
	if status, body := callBody(t, src, "search_orders", map[string]any{"query": "q"}); status != 200 || body != `{"got":{"query":"q"}}` {
		t.Errorf("search_orders: %d %s", status, body)
	}

	// The server process dies: the call fails plainly; the source starts
	// the server again and the tools work again.
	exit := toolByName(t, src.Tools(), "exit")
	if _, err := src.Call(t.Context(), Request{Tool: exit}); !errors.Is(err, ErrMCPClosed) || !strings.Contains(err.Error(), `mcp server "local"`) {
		t.Fatalf("calling exit: %v, want ErrMCPClosed naming the server", err)
	}
	waitConnected(t, src)
	if status, body := callBody(t, src, "text_json", nil); status != 200 || body != `{"a":[1,2]}` {
		t.Errorf("text_json after the server was started again: %d %s", status, body)
	}
}

// waitConnected waits until src has a session again.
func waitConnected(t *testing.T, src *MCPSource) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !src.Connected() {
		if time.Now().After(deadline) {
			t.Fatal("the source did not connect again within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A remote server that restarts forgets its sessions: the source opens a
// new one and reads the tools again.
func TestMCPReconnectsToARestartedServer(t *testing.T) {
	var h atomic.Pointer[http.Handler]
	restart := func() {
		var next http.Handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer(mcpTestServerOptions{}) }, nil)
		h.Store(&next)
	}
	restart()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(hs.Close)
	src := connectTest(t, MCPConfig{ID: "files", URL: hs.URL}, MCPOptions{ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond})
	if status, _ := callBody(t, src, "text_json", nil); status != 200 {
		t.Fatalf("before the restart: %d", status)
	}
	restart()
	// The first call after the restart finds the session gone; the
	// source connects again and the next one works.
	_, err := src.Call(t.Context(), Request{Tool: toolByName(t, src.Tools(), "text_json")})
	if err == nil {
		t.Log("the call after the restart went through (the session was made again first)")
	}
	waitConnected(t, src)
	if status, body := callBody(t, src, "text_json", nil); status != 200 || body != `{"a":[1,2]}` {
		t.Errorf("after the restart: %d %s", status, body)
	}
}

// With Degraded, a server down at start is no error: the source starts
// without tools, its calls fail with ErrMCPClosed, and when the server
// comes up the tools arrive through OnChange.
func TestMCPDegradedStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there yet
	got := make(chan []*Tool, 1)
	src, err := ConnectMCP(t.Context(), MCPConfig{ID: "late", URL: "http://" + addr}, MCPOptions{Degraded: true,
		ReconnectMin: 10 * time.Millisecond, ReconnectMax: 50 * time.Millisecond, ConnectTimeout: time.Second,
		OnChange: func(ts []*Tool) { got <- ts }})
	if err != nil {
		t.Fatalf("a degraded start failed: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	if src.Connected() || len(src.Tools()) != 0 {
		t.Fatalf("connected %v with %d tools to nothing", src.Connected(), len(src.Tools()))
	}
	if err := src.Ping(t.Context()); !errors.Is(err, ErrMCPClosed) || !strings.Contains(err.Error(), "not reachable") {
		t.Errorf("ping: %v", err)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer(mcpTestServerOptions{}) }, nil)}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	select {
	case ts := <-got:
		if len(ts) != 8 || !src.Connected() {
			t.Errorf("tools when the server came up: %v", toolNames(ts))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no tools 30 s after the server came up")
	}
	if status, _ := callBody(t, src, "text_json", nil); status != 200 {
		t.Errorf("a call once connected: %d", status)
	}
}

// syncWriter serialises writes from the source's goroutines.
type syncWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func TestConnectMCPFailures(t *testing.T) {
	notFound := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(notFound.Close)
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hanging.Close)
	t.Cleanup(func() { close(hang) })

	tests := []struct {
		name    string
		cfg     MCPConfig
		opt     MCPOptions
		wantErr string
	}{
		{"no such program", MCPConfig{ID: "x", Command: []string{"trawl-no-such-mcp-server"}}, MCPOptions{}, `mcp server "x": connecting:`},
		{"not an MCP endpoint", MCPConfig{ID: "x", URL: notFound.URL + "/mcp?token=s3cret"}, MCPOptions{}, `mcp server "x": connecting:`},
		{"no answer", MCPConfig{ID: "x", URL: hanging.URL}, MCPOptions{ConnectTimeout: 300 * time.Millisecond}, "timed out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := ConnectMCP(t.Context(), tt.cfg, tt.opt)
			if err == nil {
				_ = src.Close()
				t.Fatal("want an error")
			}
			if !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("err = %q, want it to contain %q and no secret", err, tt.wantErr)
			}
			if !errors.Is(err, ErrUpstream) {
				t.Errorf("err = %v, want ErrUpstream", err)
			}
		})
	}
}

func TestMCPConfigValidate(t *testing.T) {
	tests := []struct {
		cfg     MCPConfig
		wantErr string
	}{
		{MCPConfig{ID: "files", Command: []string{"srv", "--stdio"}}, ""},
		{MCPConfig{ID: "web", URL: "https://mcp.example/mcp"}, ""},
		{MCPConfig{ID: "", Command: []string{"srv"}}, "id must be"},
		{MCPConfig{ID: "a.b", Command: []string{"srv"}}, "id must be"},
		{MCPConfig{ID: "x"}, "command or url is required"},
		{MCPConfig{ID: "x", Command: []string{"srv"}, URL: "https://mcp.example"}, "not both"},
		{MCPConfig{ID: "x", Command: []string{" "}}, "empty program"},
		{MCPConfig{ID: "x", URL: "ftp://mcp.example"}, "absolute http(s) URL"},
		{MCPConfig{ID: "x", URL: "/relative"}, "absolute http(s) URL"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v %s", tt.cfg.ID, tt.cfg.Command, tt.cfg.URL), func(t *testing.T) {
			err := tt.cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Validate = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if _, err := ConnectMCP(t.Context(), MCPConfig{ID: "x"}, MCPOptions{}); err == nil {
		t.Error("ConnectMCP accepted an invalid config")
	}
}

func TestRenderMCPResult(t *testing.T) {
	text := func(s string) *mcp.TextContent { return &mcp.TextContent{Text: s} }
	tests := []struct {
		name       string
		res        *mcp.CallToolResult
		limit      int64
		wantStatus int
		wantBody   string
		wantTrunc  bool
	}{
		{"structured only", &mcp.CallToolResult{StructuredContent: map[string]any{"b": 1.0, "a": []any{"x"}}}, 0,
			200, `{"a":["x"],"b":1}`, false},
		{"structured beats a different text", &mcp.CallToolResult{StructuredContent: []any{1.0, 2.0},
			Content: []mcp.Content{text(`[1, 3]`)}}, 0, 200, `[1,2]`, false},
		{"structured scalar", &mcp.CallToolResult{StructuredContent: "done"}, 0, 200, `"done"`, false},
		{"text JSON array", &mcp.CallToolResult{Content: []mcp.Content{text(" [1,\n2] ")}}, 0, 200, `[1,2]`, false},
		{"two JSON texts", &mcp.CallToolResult{Content: []mcp.Content{text(`{}`), text(`[]`)}}, 0,
			200, `{"content":["{}","[]"]}`, false},
		{"empty text", &mcp.CallToolResult{Content: []mcp.Content{text("")}}, 0, 200, `{"content":[""]}`, false},
		{"no content", &mcp.CallToolResult{}, 0, 200, `{"content":[]}`, false},
		{"audio", &mcp.CallToolResult{Content: []mcp.Content{&mcp.AudioContent{MIMEType: "audio/wav", Data: make([]byte, 10)}}}, 0,
			200, `{"content":[{"type":"audio","mimeType":"audio/wav","bytes":10}]}`, false},
		{"error texts joined", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{text("bad"), text("input")}}, 0,
			422, `{"error":"bad\ninput"}`, false},
		{"error without text", &mcp.CallToolResult{IsError: true}, 0,
			422, `{"error":"the MCP tool reported an error without a message"}`, false},
		{"nil", nil, 0, 502, `{"error":"the MCP server returned no result"}`, false},
		{"cut at the limit", &mcp.CallToolResult{Content: []mcp.Content{text(`{"long":"abcdefghij"}`)}}, 10,
			200, `{"long":"a`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limit := tt.limit
			if limit == 0 {
				limit = 1 << 20
			}
			got := renderMCPResult(tt.res, limit, nil)
			if got.Status != tt.wantStatus || got.Truncated != tt.wantTrunc {
				t.Errorf("status %d truncated %v, want %d %v", got.Status, got.Truncated, tt.wantStatus, tt.wantTrunc)
			}
			if diff := cmp.Diff(tt.wantBody, string(got.Body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if ct := got.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}
		})
	}
}

func TestMCPParams(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		want    []Param
		wantErr string
	}{
		{"no properties", `{"type":"object"}`, []Param{}, ""},
		{"no schema", `null`, []Param{}, ""},
		{"true", `true`, []Param{}, ""},
		{"not an object", `{"type":"array"}`, nil, `type "array"`},
		{"not a schema", `[1]`, nil, "not a JSON Schema object"},
		{"nullable type list", `{"type":"object","properties":{"since":{"type":["string","null"],"format":"date-time"}}}`,
			[]Param{{Name: "since", In: InBody, Schema: &Schema{Type: "string", Format: "date-time", Nullable: true}}}, ""},
		{"sibling description beside $ref", `{"type":"object","properties":{
			"a":{"$ref":"#/definitions/id","description":"Which one."}},
			"definitions":{"id":{"type":"string","description":"An id."}}}`,
			[]Param{{Name: "a", In: InBody, Description: "Which one.", Schema: &Schema{Type: "string", Description: "Which one."}}}, ""},
		{"recursive $ref is cut", `{"type":"object","properties":{"node":{"$ref":"#/$defs/node"}},
			"$defs":{"node":{"type":"object","properties":{"child":{"$ref":"#/$defs/node"},"v":{"type":"integer"}}}}}`,
			[]Param{{Name: "node", In: InBody, Schema: &Schema{Type: "object", Properties: map[string]*Schema{
				"child": {Type: "object"}, "v": {Type: "integer"}}}}}, ""},
		{"unresolvable and external refs", `{"type":"object","properties":{
			"x":{"$ref":"#/$defs/missing"},"y":{"$ref":"https://schemas.example/y.json"}}}`,
			[]Param{{Name: "x", In: InBody, Schema: &Schema{}}, {Name: "y", In: InBody, Schema: &Schema{}}}, ""},
		{"names a model can use", `{"type":"object","required":["page[size]"],"properties":{
			"page[size]":{"type":"integer"},"page_size":{"type":"string"}}}`,
			[]Param{
				{Name: "page_size", Wire: "page[size]", In: InBody, Required: true, Schema: &Schema{Type: "integer"}},
				{Name: "page_size_body", Wire: "page_size", In: InBody, Schema: &Schema{Type: "string"}},
			}, ""},
		{"anyOf of objects", `{"type":"object","properties":{"who":{"anyOf":[
			{"type":"object","properties":{"email":{"type":"string"}}},
			{"type":"object","properties":{"id":{"type":"integer"}}}]}}}`,
			[]Param{{Name: "who", In: InBody, Schema: &Schema{Type: "object", Properties: map[string]*Schema{
				"email": {Type: "string"}, "id": {Type: "integer"}}}}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var schema any
			if err := json.Unmarshal([]byte(tt.schema), &schema); err != nil {
				t.Fatal(err)
			}
			got, _, err := mcpParams(newSchemaConverter(), schema)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("mcpParams: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}

// A diamond of references doubles at each level; inlining stays bounded.
func TestMCPParamsRefDiamond(t *testing.T) {
	defs := map[string]any{"d0": map[string]any{"type": "string"}}
	for i := 1; i <= 40; i++ {
		prev := fmt.Sprintf("#/$defs/d%d", i-1)
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"type": "object", "properties": map[string]any{
			"l": map[string]any{"$ref": prev}, "r": map[string]any{"$ref": prev}}}
	}
	schema := map[string]any{"type": "object", "$defs": defs,
		"properties": map[string]any{"top": map[string]any{"$ref": "#/$defs/d40"}}}
	got, _, err := mcpParams(newSchemaConverter(), schema)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Schema.Type != "object" {
		t.Fatalf("params = %+v", got)
	}
}

func TestMapMCPToolNames(t *testing.T) {
	obj := map[string]any{"type": "object"}
	tests := []struct {
		name string
		in   []string
		want map[string]string // server name → trawl name
	}{
		{"valid names stay", []string{"list_files", "read-file"},
			map[string]string{"list_files": "list_files", "read-file": "read-file"}},
		{"dots and slashes", []string{"files.list", "a/b c"},
			map[string]string{"files.list": "files_list", "a/b c": "a_b_c"}},
		{"the exact name keeps it", []string{"a.b", "a_b"},
			map[string]string{"a_b": "a_b", "a.b": "a_b_" + shortHash("a.b")}},
		{"first alphabetically keeps it", []string{"a/b", "a.b"},
			map[string]string{"a.b": "a_b", "a/b": "a_b_" + shortHash("a/b")}},
		{"nothing usable", []string{"..."}, map[string]string{"...": "tool"}},
		{"long", []string{strings.Repeat("x", 70)},
			map[string]string{strings.Repeat("x", 70): strings.Repeat("x", 57) + "_" + shortHash(strings.Repeat("x", 70))}},
		{"listed twice", []string{"dup", "dup"}, map[string]string{"dup": "dup"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var list []*mcp.Tool
			for _, n := range tt.in {
				list = append(list, &mcp.Tool{Name: n, Description: "d", InputSchema: obj})
			}
			ts, remote := mapMCPTools("srv", list, slog.New(slog.DiscardHandler))
			got := map[string]string{}
			for _, tool := range ts {
				if err := tool.Validate(); err != nil {
					t.Errorf("invalid tool: %v", err)
				}
				got[remote[tool.ID]] = tool.Name
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("names (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMapMCPToolsSkipsUnreadableSchemas(t *testing.T) {
	list := []*mcp.Tool{
		{Name: "good", Description: "ok", InputSchema: map[string]any{"type": "object"}},
		{Name: "bad", Description: "array input", InputSchema: map[string]any{"type": "array"}},
		{Name: "titled", Title: "Has a title only", InputSchema: map[string]any{"type": "object"}},
	}
	ts, _ := mapMCPTools("srv", list, slog.New(slog.DiscardHandler))
	if diff := cmp.Diff([]string{"good", "titled"}, toolNames(ts)); diff != "" {
		t.Fatalf("tools (-want +got):\n%s", diff)
	}
	if d := ts[1].Description; d != "Has a title only" {
		t.Errorf("description = %q, want the title", d)
	}
}

func TestRouter(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"from":"http"}`)
	}))
	t.Cleanup(upstream.Close)
	src := connectTest(t, MCPConfig{ID: "files", URL: serveMCP(t, newTestMCPServer(mcpTestServerOptions{}))}, MCPOptions{})
	r := Router{HTTP: NewInvoker(InvokerOptions{}), MCP: map[string]*MCPSource{"files": src}}

	httpTool := &Tool{ID: "acme.ping", Provider: "acme", Name: "ping", Kind: KindAPI, Method: "GET", Path: "/ping", Origin: upstream.URL}
	resp, err := r.Call(t.Context(), Request{Tool: httpTool})
	if err != nil || string(resp.Body) != `{"from":"http"}` {
		t.Fatalf("HTTP tool: %v %v", resp, err)
	}
	resp, err = r.Call(t.Context(), Request{Tool: toolByName(t, src.Tools(), "text_json")})
	if err != nil || string(resp.Body) != `{"a":[1,2]}` {
		t.Fatalf("MCP tool: %v %v", resp, err)
	}
	other := &Tool{ID: "other.x", Provider: "other", Name: "x", Kind: KindMCP}
	if _, err := r.Call(t.Context(), Request{Tool: other}); err == nil || !strings.Contains(err.Error(), `no MCP server "other"`) {
		t.Fatalf("unknown server: %v", err)
	}
	if _, err := (Router{}).Call(t.Context(), Request{Tool: httpTool}); err == nil {
		t.Fatal("a router without an invoker called an HTTP tool")
	}
}

// Calls run concurrently with list refreshes; run with -race.
func TestMCPSourceConcurrentUse(t *testing.T) {
	srv := newTestMCPServer(mcpTestServerOptions{})
	src := connectTest(t, MCPConfig{ID: "files", URL: serveMCP(t, srv)}, MCPOptions{OnChange: func([]*Tool) {}})
	tool := toolByName(t, src.Tools(), "text_json")
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 8 {
		wg.Go(func() {
			for range 8 {
				resp, err := src.Call(context.Background(), Request{Tool: tool})
				if err != nil {
					errs <- err
					return
				}
				if string(resp.Body) != `{"a":[1,2]}` {
					errs <- fmt.Errorf("body %s", resp.Body)
				}
				_ = src.Tools()
			}
		})
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("extra%d", i), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSafeMCPCause(t *testing.T) {
	err := errors.New(`Post "https://user:pw@mcp.example/v1/mcp?api_key=s3cret": dial tcp: refused`)
	got := safeMCPCause(err)
	want := `Post "https://mcp.example/v1/mcp": dial tcp: refused`
	if got != want {
		t.Errorf("safeMCPCause = %q, want %q", got, want)
	}
}

func FuzzMCPParams(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#"}}}`)
	f.Add(`{"type":"object","properties":{"x":{"items":[{"type":"string"},{"$ref":"#/properties/x"}]}}}`)
	f.Add(`{"properties":{"a b":{"type":["integer","null"]},"a_b":{"allOf":[{"$ref":"#/$defs/q"}]}},"$defs":{"q":{"enum":[1]}}}`)
	f.Fuzz(func(t *testing.T, schema string) {
		var v any
		if json.Unmarshal([]byte(schema), &v) != nil {
			return
		}
		params, _, err := mcpParams(newSchemaConverter(), v)
		if err != nil {
			return
		}
		tool := &Tool{ID: "s.t", Provider: "s", Name: "t", Kind: KindMCP, Params: params}
		if err := tool.Validate(); err != nil {
			t.Fatalf("invalid params from %s: %v", schema, err)
		}
		for _, p := range params {
			if p.WireName() == "" || strings.HasPrefix(p.Name, "_") {
				t.Fatalf("param %+v from %s", p, schema)
			}
		}
		if _, err := json.Marshal(tool.InputSchema()); err != nil {
			t.Fatalf("input schema of %s: %v", schema, err)
		}
	})
}

func ExampleConnectMCP() {
	// A server built with the official SDK, served over streamable HTTP.
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "notes.count", Description: "Counts the notes.",
		InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"count": 3}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer hs.Close()

	ctx := context.Background()
	src, err := ConnectMCP(ctx, MCPConfig{ID: "notes", URL: hs.URL}, MCPOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close()
	// One Caller for the looping engine, whatever the tool's kind.
	router := Router{HTTP: NewInvoker(InvokerOptions{}), MCP: map[string]*MCPSource{"notes": src}}
	for _, tool := range src.Tools() {
		resp, err := router.Call(ctx, Request{Tool: tool})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(tool.ID, resp.Status, string(resp.Body))
	}
	// Output: notes.notes_count 200 {"count":3}
}

func BenchmarkMCPCallHTTP(b *testing.B) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return newTestMCPServer(mcpTestServerOptions{}) }, nil)
	hs := httptest.NewServer(h)
	defer hs.Close()
	src, err := ConnectMCP(context.Background(), MCPConfig{ID: "files", URL: hs.URL}, MCPOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	var tool *Tool
	for _, t := range src.Tools() {
		if t.Name == "structured" {
			tool = t
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := src.Call(context.Background(), Request{Tool: tool}); err != nil {
			b.Fatal(err)
		}
	}
}

// A large server: 500 tools with a nested, $ref-using input schema each.
func BenchmarkMapMCPTools(b *testing.B) {
	var schema any
	_ = json.Unmarshal([]byte(`{"type":"object","required":["q"],"properties":{
		"q":{"type":"string","description":"Query text."},
		"page":{"$ref":"#/$defs/page"},
		"filters":{"type":"array","items":{"$ref":"#/$defs/filter"}}},
		"$defs":{"page":{"type":"object","properties":{"size":{"type":"integer"},"cursor":{"type":"string"}}},
		"filter":{"type":"object","properties":{"field":{"type":"string"},"op":{"enum":["eq","lt","gt"]},"value":{}}}}}`), &schema)
	list := make([]*mcp.Tool, 500)
	for i := range list {
		list[i] = &mcp.Tool{Name: fmt.Sprintf("ns.tool_%d", i), Description: "A tool.", InputSchema: schema}
	}
	logger := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		ts, _ := mapMCPTools("srv", list, logger)
		if len(ts) != len(list) {
			b.Fatal(len(ts))
		}
	}
}

// A server that writes its URL key into its tool list — a tool's name,
// description, schema — has it masked there like in its answers; the
// masked tool is still called by the server's own name.
func TestMCPToolListScrubbed(t *testing.T) {
	const key = "MCPQSECRET/Zq+4444hh"
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo_MCPQSECRET_Zq_4444hh", Description: "Call with key " + url.QueryEscape(key),
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string", "description": "the key is " + key}}}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"ok":true}`}}}, nil
		})
	scrub := NewScrubber(key, "MCPQSECRET_Zq_4444hh")
	src := connectTest(t, MCPConfig{ID: "leaky", URL: serveMCP(t, srv)}, MCPOptions{Scrub: func(...string) *Scrubber { return scrub }})
	ts := src.Tools()
	if len(ts) != 1 {
		t.Fatalf("tools = %v", toolNames(ts))
	}
	listed, _ := json.Marshal(ts[0])
	if strings.Contains(string(listed), "MCPQSECRET") || !strings.Contains(string(listed), Mask) {
		t.Errorf("listed tool: %s", listed)
	}
	if status, body := callBody(t, src, ts[0].Name, map[string]any{"q": "x"}); status != 200 || body != `{"ok":true}` {
		t.Errorf("calling the masked tool: %d %s", status, body)
	}
}

// TestRenderMCPResultAttachesMedia: with a sink, a picture (an image
// item, an embedded image resource, one beside structured content) is
// attached whole and named in the JSON without its data; a picture past
// the sink's room is summarised only; an embedded text resource keeps its
// text and a resource link its URI.
func TestRenderMCPResultAttachesMedia(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n-picture-")
	_, sink := WithMediaSink(t.Context())
	got := renderMCPResult(&mcp.CallToolResult{Content: []mcp.Content{
		&mcp.TextContent{Text: "Here it is:"},
		&mcp.ImageContent{MIMEType: "image/png", Data: png},
		&mcp.ImageContent{MIMEType: "image/png", Data: make([]byte, MaxMediaBytes)},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://static/resource/1", MIMEType: "text/plain", Text: "Resource 1 text"}},
		&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "test://pic", MIMEType: "image/gif", Blob: []byte("GIF89a")}},
		&mcp.ResourceLink{URI: "test://static/resource/2", Name: "Resource 2", MIMEType: "text/plain"},
	}}, 1<<30, sink)
	want := `{"content":["Here it is:",` +
		`{"type":"image","mimeType":"image/png","bytes":17,"attached":true},` +
		`{"type":"image","mimeType":"image/png","bytes":4194304},` +
		`{"type":"resource","mimeType":"text/plain","uri":"test://static/resource/1","text":"Resource 1 text"},` +
		`{"type":"resource","mimeType":"image/gif","uri":"test://pic","bytes":6,"attached":true},` +
		`{"type":"resource_link","mimeType":"text/plain","uri":"test://static/resource/2","name":"Resource 2"}]}`
	if diff := cmp.Diff(want, string(got.Body)); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
	media := sink.Media()
	if len(media) != 2 || string(media[0].Data) != string(png) || media[0].MIMEType != "image/png" || media[1].MIMEType != "image/gif" {
		t.Errorf("media = %+v, want the PNG and the GIF", media)
	}
	_, sink = WithMediaSink(t.Context())
	got = renderMCPResult(&mcp.CallToolResult{StructuredContent: map[string]any{"ok": true},
		Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/jpeg", Data: []byte("jpeg")}}}, 1<<30, sink)
	if string(got.Body) != `{"ok":true}` || len(sink.Media()) != 1 {
		t.Errorf("structured with a picture: body %s, media %d", got.Body, len(sink.Media()))
	}
}
