package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tokenTransport sends every request with a bearer token.
type tokenTransport struct{ token string }

func (t tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+t.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mcpConnect opens a Go SDK client session on agent demo's MCP endpoint
// at protocol version v, authenticated with token.
func mcpConnect(t *testing.T, ts *testServer, token, v string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "web-test", Version: "v0"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: ts.URL + "/v1/agents/demo/mcp", HTTPClient: &http.Client{Transport: tokenTransport{token}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatalf("connect at %s: %v", v, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func mcpCall(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The MCP endpoint takes the admin key or a session token; anything else
// is a 401 with WWW-Authenticate, counted by the failed-authentication
// limit; a browser page from an origin not in cors.allowed_origins is
// refused.
func TestMCPAuth(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.CORS.AllowedOrigins = []string{"https://app.example.com"} })
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`
	post := func(token, origin string) *http.Response {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/agents/demo/mcp", strings.NewReader(initialize))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tok := range []string{"", "not-a-key"} {
		resp := post(tok, "")
		if resp.StatusCode != 401 || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("token %q: %d, WWW-Authenticate %q", tok, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
		}
	}
	if resp := post(ts.AdminKey(), "https://evil.example"); resp.StatusCode != 403 {
		t.Errorf("a foreign origin: %d, want 403", resp.StatusCode)
	}
	if resp := post(ts.AdminKey(), "https://app.example.com"); resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" {
		t.Errorf("an allowed origin: %d, session %q", resp.StatusCode, resp.Header.Get("Mcp-Session-Id"))
	}
	if resp := post(ts.AdminKey(), ""); resp.StatusCode != 200 {
		t.Errorf("the admin key: %d", resp.StatusCode)
	}
}

// A session token's calls see only that user's results: another user
// (or the admin) asking for its _resultId is told it does not exist,
// whatever the revision; and a 2025-11-25 session opened by one user
// answers no other's token.
func TestMCPSessionTokenSeesOnlyItsOwnResults(t *testing.T) {
	ts := startDemo(t, nil)
	alice, bob := demoSession(t, ts, "alice"), demoSession(t, ts, "bob")
	args := map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total"}}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			a := mcpConnect(t, ts, alice, v)
			res := mcpCall(t, a, "list_orders", args)
			var env map[string]any
			if err := json.Unmarshal([]byte(mcpText(res)), &env); err != nil || res.IsError {
				t.Fatalf("alice's walk: %v %s", err, mcpText(res))
			}
			id, _ := env["_resultId"].(string)
			if id == "" {
				t.Fatalf("no _resultId: %s", mcpText(res))
			}
			query := map[string]any{"resultId": id, "limit": 2}
			if res := mcpCall(t, a, "queryToolResult", query); res.IsError {
				t.Errorf("alice cannot read her own result: %s", mcpText(res))
			}
			for who, tok := range map[string]string{"bob": bob, "the admin": ts.AdminKey()} {
				res := mcpCall(t, mcpConnect(t, ts, tok, v), "queryToolResult", query)
				if !res.IsError || !strings.Contains(mcpText(res), "not found") {
					t.Errorf("%s read alice's result: %s", who, mcpText(res))
				}
			}
			// Another conversation of alice's own is another scope too.
			if res := mcpCall(t, a, "queryToolResult", map[string]any{"resultId": id, "_thread": "other"}); !res.IsError {
				t.Errorf("a result read from another conversation: %s", mcpText(res))
			}
		})
	}
	// The session binding: bob's token on alice's session is refused.
	a := mcpConnect(t, ts, alice, "2025-11-25")
	req, _ := http.NewRequest("POST", ts.URL+"/v1/agents/demo/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+bob)
	req.Header.Set("Mcp-Session-Id", a.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob on alice's session: %d %s", resp.StatusCode, body)
	}
}

// demoSession mints a session token for user on the demo.
func demoSession(t *testing.T, ts *testServer, user string) string {
	t.Helper()
	st, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": user, "ttl_seconds": 600})
	var out struct{ Token string }
	if json.Unmarshal(b, &out); st != 201 || out.Token == "" {
		t.Fatalf("mint a session: %d %s", st, b)
	}
	return out.Token
}
