package web

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawl-dev/trawl/tools"
)

// upstreamMCP is an MCP server over streamable HTTP whose tools count
// their calls.
type upstreamMCP struct {
	srv   *mcp.Server
	url   string
	calls atomic.Int64
}

func newUpstreamMCP(t *testing.T) *upstreamMCP {
	u := &upstreamMCP{srv: mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, nil)}
	u.srv.AddTool(&mcp.Tool{Name: "deny", Description: "Always refuses.", InputSchema: map[string]any{"type": "object"}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "access denied"}}}, nil
		})
	u.srv.AddTool(&mcp.Tool{Name: "greet", Description: "Greets someone.", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"name": map[string]any{"type": "string"}, "times": map[string]any{"type": "integer", "minimum": 1}},
		"required":   []any{"name"}}, Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"greeting":"hello"}`}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil))
	t.Cleanup(hs.Close)
	u.url = hs.URL
	return u
}

// An MCP tool's isError is the tool's answer: it is called once, never
// retried like a 502, and its words reach the caller.
func TestMCPToolErrorIsNotRetried(t *testing.T) {
	up := newUpstreamMCP(t)
	ts := startDemo(t, func(c *Config) { c.MCPServers = []tools.MCPConfig{{ID: "up", URL: up.url}} })
	st, b := ts.do(t, "POST", "/v1/tools/up.deny/invoke", "", map[string]any{"args": map[string]any{}})
	if n := up.calls.Load(); n != 1 {
		t.Errorf("the tool was called %d times for one isError answer", n)
	}
	if st == 200 || !strings.Contains(string(b), "access denied") {
		t.Errorf("the tool's error: %d %s", st, b)
	}
}

// Arguments are checked against the MCP server's input schema before
// the call: a number is not a string, a missing required one is missing.
func TestMCPArgumentsCheckedAgainstTheSchema(t *testing.T) {
	up := newUpstreamMCP(t)
	ts := startDemo(t, func(c *Config) { c.MCPServers = []tools.MCPConfig{{ID: "up", URL: up.url}} })
	for _, args := range []map[string]any{{"name": 5}, {}, {"name": "a", "times": 0}, {"name": "a", "times": 1.5}} {
		st, b := ts.do(t, "POST", "/v1/tools/up.greet/invoke", "", map[string]any{"args": args})
		if st != 400 || !strings.Contains(string(b), "invalid_argument") {
			t.Errorf("args %v: %d %s", args, st, b)
		}
	}
	if n := up.calls.Load(); n != 0 {
		t.Errorf("%d calls reached the server with bad arguments", n)
	}
	if st, b := ts.do(t, "POST", "/v1/tools/up.greet/invoke", "", map[string]any{"args": map[string]any{"name": "Ann", "times": 2}}); st != 200 || up.calls.Load() != 1 {
		t.Errorf("good arguments: %d %s", st, b)
	}
}

// A server unreachable at start leaves trawl degraded, not down: it
// starts, /readyz says degraded, an agent may bind the server's tools,
// and when the server comes up its tools join the catalog.
func TestMCPServerUnreachableAtStart(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ts := startDemo(t, func(c *Config) {
		c.MCPServers = []tools.MCPConfig{{ID: "up", URL: "http://" + addr}}
	})
	st, b := ts.do(t, "GET", "/readyz", "", nil)
	var ready struct {
		Status     string            `json:"status"`
		MCPServers map[string]string `json:"mcp_servers"`
	}
	if err := json.Unmarshal(b, &ready); err != nil || st != 200 || ready.Status != "degraded" || ready.MCPServers["up"] != "unreachable" {
		t.Fatalf("readyz with the server down: %d %s", st, b)
	}
	if st, b := ts.do(t, "PUT", "/v1/agents/files", "", map[string]any{"agentTools": []any{map[string]any{"toolkit": "up"}}}); st != 200 {
		t.Errorf("binding the unreachable server's tools: %d %s", st, b)
	}
	if st, b := ts.do(t, "POST", "/v1/agents/files/search_tools", "", map[string]any{"query": "greet"}); st >= 500 {
		t.Errorf("an agent bound to the unreachable server: %d %s", st, b)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	up := newUpstreamMCP(t)
	hs := &http.Server{Handler: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.srv }, nil)}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	// The source retries with backoff from 1 s: within seconds.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, ok := ts.catalog.Get("up.greet"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the server's tools did not join the catalog within 30 s of it coming up")
		}
	}
	if st, b := ts.do(t, "POST", "/v1/tools/up.greet/invoke", "", map[string]any{"args": map[string]any{"name": "Ann"}}); st != 200 {
		t.Errorf("once the server answers: %d %s", st, b)
	}
	if st, b := ts.do(t, "GET", "/readyz", "", nil); st != 200 || !strings.Contains(string(b), `"status":"ready"`) {
		t.Errorf("readyz once the server answers: %d %s", st, b)
	}
}
