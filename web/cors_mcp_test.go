package web

import (
	"io"
	"strings"
	"testing"
)

// A page from an allowed origin can speak MCP: the preflight admits the
// headers the MCP clients send (the revision, the session, the
// 2026-07-28 method and name, a tool's Mcp-Param-*), only on the MCP
// route, and the answer exposes Mcp-Session-Id for a 2025-11-25 client to
// send back. Any other origin is refused as before.
func TestCORSForMCP(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.CORS.AllowedOrigins = []string{frontEnd} })
	mcpURL := ts.URL + "/v1/agents/demo/mcp"
	const sent = "authorization, content-type, mcp-protocol-version, mcp-session-id, mcp-method, mcp-name, mcp-param-region, last-event-id"
	for _, method := range []string{"POST", "GET", "DELETE"} {
		resp := preflight(t, mcpURL, frontEnd, method, sent)
		allow := strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers"))
		if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != frontEnd {
			t.Fatalf("%s preflight: %d %v", method, resp.StatusCode, resp.Header)
		}
		for _, h := range strings.Split(sent, ", ") {
			if !strings.Contains(allow, h) {
				t.Errorf("%s preflight: Allow-Headers %q lacks %s", method, allow, h)
			}
		}
	}
	if r := preflight(t, mcpURL, "http://evil.example", "POST", "mcp-session-id"); r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("another origin: %d", r.StatusCode)
	}
	if r := preflight(t, mcpURL, frontEnd, "POST", "mcp-session-id, x-evil"); r.StatusCode != 403 {
		t.Errorf("a header outside the list: %d", r.StatusCode)
	}
	if r := preflight(t, ts.URL+"/v1/agents/demo/chat", frontEnd, "POST", "mcp-session-id"); r.StatusCode != 403 {
		t.Errorf("the MCP headers reach the chat route: %d", r.StatusCode)
	}

	// The real initialize from the page's origin opens a session whose id
	// the page can read.
	resp := ts.post(t, "/v1/agents/demo/mcp", "", map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize",
		"params": map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "page", "version": "1"}}},
		"Origin", frontEnd, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	expose := strings.ToLower(resp.Header.Get("Access-Control-Expose-Headers"))
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" || resp.Header.Get("Access-Control-Allow-Origin") != frontEnd ||
		!strings.Contains(expose, "mcp-session-id") {
		t.Errorf("initialize from the page: %d %v %.300s", resp.StatusCode, resp.Header, b)
	}
}
