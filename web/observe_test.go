package web

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/tools"
)

func getWithHeader(t *testing.T, url, key, val string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if key != "" {
		req.Header.Set(key, val)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
	return resp, []byte(b.String())
}

// TestRequestIDs: every response has an X-Request-Id (a caller's
// well-formed one is kept, a malformed one replaced), error bodies carry
// it, and the request's log lines (JSON) carry it too.
func TestRequestIDs(t *testing.T) {
	logs := &syncBuffer{}
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	srv, err := New(context.Background(), cfg, Options{Logger: NewLogger(logs, LogConfig{Format: "json", Level: "debug"}), Stdout: &syncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })

	resp, _ := getWithHeader(t, hs.URL+"/healthz", "", "")
	gen := resp.Header.Get(RequestIDHeader)
	if !strings.HasPrefix(gen, "req_") || !validRequestID(gen) {
		t.Errorf("generated request id %q", gen)
	}
	resp, _ = getWithHeader(t, hs.URL+"/healthz", RequestIDHeader, "caller-42.a:b_c")
	if got := resp.Header.Get(RequestIDHeader); got != "caller-42.a:b_c" {
		t.Errorf("caller's id not kept: %q", got)
	}
	for _, bad := range []string{"has space", "tab\there", strings.Repeat("x", 129), `quote"`, "ü"} {
		resp, _ = getWithHeader(t, hs.URL+"/healthz", RequestIDHeader, bad)
		if got := resp.Header.Get(RequestIDHeader); got == bad || !strings.HasPrefix(got, "req_") {
			t.Errorf("malformed id %q answered with %q", bad, got)
		}
	}
	resp, b := getWithHeader(t, hs.URL+"/v1/tools", RequestIDHeader, "report-me")
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil || resp.StatusCode != 401 || e.Error.RequestID != "report-me" {
		t.Errorf("error body: %d %s", resp.StatusCode, b)
	}
	// The request's line is JSON and carries the id.
	found := false
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not a JSON log line: %q", line)
		}
		if rec["msg"] == "request" && rec["request_id"] == "report-me" && rec["status"] == 401.0 && rec["route"] == "/v1/tools" {
			found = true
		}
	}
	if !found {
		t.Errorf("no request line with the id in:\n%s", logs.String())
	}
}

// TestReadyzReportsEachPart: /readyz lists the store and each MCP server
// with its state; a gone MCP server degrades it (still 200), and the
// cause is not shown. (deploy's TestReadyReportsEachPart checks each
// state; a store that does not answer is a 503: TestServesOnRedis.)
func TestReadyzReportsEachPart(t *testing.T) {
	msrv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	msrv.AddTool(&mcp.Tool{Name: "stat", Description: "Describe one file.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return msrv }, nil))
	t.Cleanup(hs.Close)
	ts := startDemo(t, func(c *Config) { c.MCPServers = []tools.MCPConfig{{ID: "files", URL: hs.URL}} })
	st, b := ts.do(t, "GET", "/readyz", "-", nil)
	var r Readiness
	if err := json.Unmarshal(b, &r); err != nil || st != 200 || r.Status != "ready" || r.Stores["bolt"] != "ok" || r.MCPServers["files"] != "ok" {
		t.Fatalf("readyz: %d %s", st, b)
	}
	ts.dep.MCP("files").Close()
	st, b = ts.do(t, "GET", "/readyz", "-", nil)
	r = Readiness{}
	if err := json.Unmarshal(b, &r); err != nil || st != 200 || r.Status != "degraded" || r.MCPServers["files"] != "unreachable" || r.Stores["bolt"] != "ok" {
		t.Errorf("readyz with the mcp server gone: %d %s", st, b)
	}
	if strings.Contains(string(b), "closed") || strings.Contains(string(b), hs.URL) {
		t.Errorf("readyz shows a cause: %s", b)
	}
	if !strings.Contains(ts.logs.String(), "readiness check failed") {
		t.Errorf("cause not logged")
	}
}
