package web

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestMCPObserved: an MCP tools/call is traced as the HTTP span → the
// mcp server span (tools/call, its session) → execute_tool → tool_call
// (the verdict) → one client span per upstream page; /metrics counts it
// by agent and outcome; and the activity log holds its upstream calls
// under the conversation (agent_id & conversation), the call named.
func TestMCPObserved(t *testing.T) {
	recv := newOTLPReceiver(t)
	ts := startDemo(t, func(c *Config) {
		c.Telemetry.OTLPEndpoint = recv.URL
		c.Telemetry.ServiceName = "trawl-test"
		c.Metrics.Enabled = true
	})
	cs := mcpConnect(t, ts, ts.AdminKey(), "2025-11-25")
	res := mcpCall(t, cs, "list_orders", map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id"}, "_thread": "observed"})
	if res.IsError {
		t.Fatalf("the walk: %s", mcpText(res))
	}
	if res := mcpCall(t, cs, "queryToolResult", map[string]any{"resultId": "nope", "_thread": "observed"}); !res.IsError {
		t.Fatalf("an unknown result id: %s", mcpText(res))
	}
	fams := scrape(t, ts)
	if v := metricValue(fams, "trawl_mcp_calls_total", map[string]string{"agent": "demo", "outcome": "ok"}); v != 1 {
		t.Errorf("MCP calls ok = %v, want 1", v)
	}
	if v := metricValue(fams, "trawl_mcp_calls_total", map[string]string{"agent": "demo", "outcome": "tool_error"}); v != 1 {
		t.Errorf("MCP calls tool_error = %v, want 1", v)
	}
	upstreamCounted := metricValue(fams, "trawl_upstream_requests_total", map[string]string{"provider": "acme"})

	// The activity log, by conversation.
	st, b := ts.do(t, "GET", "/v1/activity?agent_id=demo&conversation=observed&limit=1000", "", nil)
	var acts struct {
		Activity []struct {
			CallID string `json:"callId"`
			Tool   string `json:"tool"`
			Status int    `json:"status"`
		} `json:"activity"`
	}
	if err := json.Unmarshal(b, &acts); st != 200 || err != nil {
		t.Fatalf("activity: %d %s", st, b)
	}
	if len(acts.Activity) == 0 || float64(len(acts.Activity)) != upstreamCounted {
		t.Errorf("the conversation's activity holds %d records; %v upstream requests counted: %s", len(acts.Activity), upstreamCounted, b)
	}
	for _, a := range acts.Activity {
		if a.CallID == "" || a.Status != 200 {
			t.Errorf("activity record %+v", a)
		}
	}
	if st, b := ts.do(t, "GET", "/v1/activity?agent_id=demo&conversation=another", "", nil); st != 200 || strings.Contains(string(b), `"callId"`) {
		t.Errorf("another conversation's activity: %d %s", st, b)
	}

	cs.Close()
	ts.Server.Close() // flushes the spans
	recv.mu.Lock()
	defer recv.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	for _, s := range recv.spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	parent := func(s *tracepb.Span) *tracepb.Span { return byID[hex.EncodeToString(s.ParentSpanId)] }
	name := func(s *tracepb.Span) string {
		if s == nil {
			return ""
		}
		return s.Name
	}
	var call *tracepb.Span
	for _, s := range recv.spans {
		if s.Name == "tools/call list_orders" {
			call = s
		}
	}
	if call == nil {
		var names []string
		for _, s := range recv.spans {
			names = append(names, s.Name)
		}
		t.Fatalf("no tools/call span in %v", names)
	}
	a := pbAttrs(call)
	if call.Kind != tracepb.Span_SPAN_KIND_SERVER || a["mcp.method.name"] != "tools/call" || a["mcp.session.id"] != cs.ID() ||
		a["gen_ai.tool.name"] != "list_orders" || a["trawl.mcp.outcome"] != "ok" || name(parent(call)) != "POST /v1/agents/:id/mcp" {
		t.Errorf("tools/call span: kind %v, parent %q, %v", call.Kind, name(parent(call)), a)
	}
	var exec, toolCall *tracepb.Span
	upstream := 0
	for _, s := range recv.spans {
		if s.Name == "execute_tool list_orders" && parent(s) == call {
			exec = s
		}
	}
	for _, s := range recv.spans {
		if strings.HasPrefix(s.Name, "tool_call ") && exec != nil && parent(s) == exec {
			toolCall = s
		}
	}
	for _, s := range recv.spans {
		if strings.HasPrefix(s.Name, "GET /") && toolCall != nil && parent(s) == toolCall {
			upstream++
		}
	}
	if exec == nil || toolCall == nil {
		t.Fatalf("under tools/call: execute_tool %v, tool_call %v", exec != nil, toolCall != nil)
	}
	if ta := pbAttrs(toolCall); ta["trawl.loop.completion"] != "complete" || ta["trawl.loop.pages"] != fmt.Sprint(upstream) {
		t.Errorf("tool_call span %v; %d upstream spans under it", ta, upstream)
	}
	t.Logf("%d upstream requests under the tools/call span", upstream)
	if float64(upstream) != upstreamCounted {
		t.Errorf("%d upstream spans, %v upstream requests counted", upstream, upstreamCounted)
	}
}

// TestMCPLimits: the MCP route is under the body limit (413, declared
// or chunked) and the failed-authentication limit (after a burst of one
// bad token, that token is refused with 429 and Retry-After; the admin key
// from the same address is not).
func TestMCPLimits(t *testing.T) {
	ts := startDemo(t, nil)
	big := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_orders","arguments":{"status":"` + strings.Repeat("x", 5<<20) + `"}}}`
	post := func(token string, body io.Reader) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("POST", ts.URL+"/v1/agents/demo/mcp", body)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	for _, chunked := range []bool{false, true} {
		var body io.Reader = strings.NewReader(big)
		if chunked {
			body = chunkedReader{body}
		}
		if resp, b := post(ts.AdminKey(), body); resp.StatusCode != 413 {
			t.Errorf("chunked=%v: an oversized body: %d %.200s", chunked, resp.StatusCode, b)
		}
	}
	now := time.Now()
	ts.clock.set(func() time.Time { return now })
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`
	for i := range authFailBurst {
		if resp, b := post("wrong", strings.NewReader(list)); resp.StatusCode != 401 {
			t.Fatalf("failure %d: %d %s", i+1, resp.StatusCode, b)
		}
	}
	// The guesser is held back; the limit keys on the credential presented
	// as well as the address, so the admin key from the same address is
	// still served.
	resp, b := post("wrong", strings.NewReader(list))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("after %d failures, the same wrong key: %d %s (Retry-After %q)", authFailBurst, resp.StatusCode, b, resp.Header.Get("Retry-After"))
	}
	if resp, b := post(ts.AdminKey(), strings.NewReader(list)); resp.StatusCode == 429 || resp.StatusCode == 401 {
		t.Errorf("after %d failures of another key, the admin key: %d %s", authFailBurst, resp.StatusCode, b)
	}
}

// TestMCPShutdown: when the server is told to stop, an MCP tool call
// still walking gets what is left of shutdown_grace, then is cancelled:
// the walk stops upstream with its partial verdict in the activity log,
// the client's call ends (it does not hang), and Serve returns.
func TestMCPShutdown(t *testing.T) {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.ShutdownGrace = 300 * time.Millisecond
	// Slow pages: the walk outlives the grace.
	if err := cfg.SetDemoLatency(400); err != nil {
		t.Fatal(err)
	}
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, _ := netListen()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	ts := &testServer{Server: srv, URL: "http://" + ln.Addr().String()}
	cs := mcpConnect(t, ts, srv.AdminKey(), "2025-11-25")
	called := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders",
			Arguments: map[string]any{"status": "open", "_all_pages": true, "_thread": "shutdown"}})
		called <- err
	}()
	key := agent.ConversationKey("", "demo", "shutdown")
	activity := func() []tools.Activity {
		acts, _ := srv.dep.Activity().List(context.Background(), key, 1000)
		return acts
	}
	waitFor(t, func() bool { return len(activity()) > 0 }) // the walk has begun
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	select {
	case <-called:
	case <-time.After(15 * time.Second):
		t.Fatal("the MCP client still waits for its call after the server stopped")
	}
	var verdict string
	pages := 0
	for _, a := range activity() {
		if a.Verdict != "" {
			verdict = a.Verdict
		} else {
			pages++
		}
	}
	// A partial verdict: the walk was stopped, not run to its end.
	if !strings.Contains(verdict, "partial") || pages == 0 {
		t.Errorf("after the shutdown: %d pages fetched, verdict %q", pages, verdict)
	}
}
