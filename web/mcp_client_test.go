package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// upstreamMCP is an MCP server over streamable HTTP whose tools count
// their calls.
type upstreamMCP struct {
	srv   *mcp.Server
	url   string
	calls atomic.Int64
	// beforeStep, when set, runs before the "work" tool reports step i
	// of 3, and with i = 4 before it answers.
	beforeStep func(i int)
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
	u.srv.AddTool(&mcp.Tool{Name: "work", Description: "Works in three steps, reporting each.", InputSchema: map[string]any{"type": "object"},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.calls.Add(1)
			if token := req.Params.GetProgressToken(); token != nil {
				for i := 1; i <= 4; i++ {
					if u.beforeStep != nil {
						u.beforeStep(i)
					}
					if i <= 3 {
						_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
							Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d of 3", i)})
					}
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"done":true}`}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.srv }, nil))
	t.Cleanup(hs.Close)
	u.url = hs.URL
	return u
}

// An MCP tool's own progress is relayed: a streamed invoke gets it as a
// data-tool-loop-progress chunk (upstream: progress, total, message),
// and an MCP client of an agent binding the tool gets each report as
// notifications/progress, as the upstream worded it.
func TestMCPUpstreamProgressRelayed(t *testing.T) {
	up := newUpstreamMCP(t)
	ts := startDemo(t, func(c *Config) { c.MCPServers = []tools.MCPConfig{{ID: "up", URL: up.url}} })
	// The SDK hands a notification to its handler beside reading on, so a
	// report racing the answer may come too late to relay: the tool
	// answers only once its reports were seen.
	seenFirst := make(chan struct{})
	up.beforeStep = func(i int) {
		if i == 4 {
			<-seenFirst
		}
	}
	resp, err := ts.invokeSSE(t, context.Background(), "up.work", map[string]any{"args": map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	var first *stream.UpstreamProgress
	var types []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var c struct {
			Type string          `json:"type"`
			Data stream.Progress `json:"data"`
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(sc.Text(), "data: ")), &c) != nil {
			continue
		}
		types = append(types, c.Type)
		if c.Type == "data-tool-loop-progress" && first == nil {
			first = c.Data.Upstream
			close(seenFirst)
		}
	}
	resp.Body.Close()
	if first == nil {
		close(seenFirst)
	}
	if diff := cmp.Diff(&stream.UpstreamProgress{Progress: 1, Total: 3, Message: "step 1 of 3"}, first); diff != "" {
		t.Errorf("the first progress chunk's upstream (-want +got):\n%s\n%v", diff, types)
	}

	if st, b := ts.do(t, "PUT", "/v1/agents/worker", "", map[string]any{"agentTools": []any{map[string]any{"toolkit": "up"}}}); st != 200 {
		t.Fatalf("agent worker: %d %s", st, b)
	}
	got := make(chan *mcp.ProgressNotificationParams, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "progress", Version: "v0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) { got <- req.Params }})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/v1/agents/worker/mcp",
		HTTPClient: &http.Client{Transport: tokenTransport{ts.AdminKey()}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	// Each report comes once the client has the one before, and a
	// throttle interval after it (progress is throttled as in chat).
	var seen []string
	up.beforeStep = func(i int) {
		if i == 1 {
			return
		}
		select {
		case p := <-got:
			seen = append(seen, fmt.Sprintf("%v/%v %s", p.Progress, p.Total, p.Message))
		case <-time.After(20 * time.Second):
			t.Errorf("report %d did not reach the client", i-1)
		}
		if i <= 3 {
			time.Sleep(stream.ProgressInterval)
		}
	}
	params := &mcp.CallToolParams{Name: "work", Arguments: map[string]any{}}
	params.SetProgressToken("client-token")
	res, err := cs.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("work: %v %s", err, mcpText(res))
	}
	if diff := cmp.Diff([]string{"1/3 step 1 of 3", "2/3 step 2 of 3", "3/3 step 3 of 3"}, seen); diff != "" {
		t.Errorf("notifications the MCP client got (-want +got):\n%s", diff)
	}
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
