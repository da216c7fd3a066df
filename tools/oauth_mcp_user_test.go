package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// An MCP server each user connects, at the unit level, against the Go
// MCP SDK's server behind its bearer-auth middleware (which binds a
// session to its user): each user's calls go over a session of their
// own with their own token; a token the server stops accepting is
// refreshed once through the call's TokenRefresher and the call goes
// again on the same session, which the refreshed token then names; a
// refresher's refusal (a broken connection) reaches the caller as it
// is; a call without a credential is told to connect; idle sessions are
// closed.
func TestMCPUserSource(t *testing.T) {
	var mu sync.Mutex
	valid := map[string]string{"tok-ann-1": "ann", "tok-bob-1": "bob"} // token → user
	var sessions atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "per-user", Version: "1"}, nil)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "initialize" {
				sessions.Add(1)
			}
			return next(ctx, method, req)
		}
	})
	srv.AddTool(&mcp.Tool{Name: "whoami", Description: "Who the caller is.", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "user=" + req.Extra.TokenInfo.UserID}}}, nil
		})
	verify := func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		mu.Lock()
		defer mu.Unlock()
		u, ok := valid[tok]
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: u, Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, nil)(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))

	cfg := MCPConfig{ID: "notes", URL: hs.URL + "/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{
		Flow: FlowAuthorizationCode, ClientID: "c", AuthorizeURL: hs.URL + "/authorize", TokenURL: hs.URL + "/token"}}}
	var changed atomic.Int64
	u, err := NewMCPUserSource(cfg, MCPOptions{OnChange: func([]*Tool) { changed.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	if len(u.Tools()) != 0 {
		t.Fatal("tools before any user connected")
	}
	ts, err := u.Prime(t.Context(), "tok-ann-1")
	if err != nil || len(ts) != 1 || !ts[0].PerUser || ts[0].Kind != KindMCP {
		t.Fatalf("Prime: %v %+v", err, ts)
	}
	tool := ts[0]
	var refreshes atomic.Int64
	refresher := func(_ context.Context, provider, stale string) (string, error) {
		refreshes.Add(1)
		if provider != "notes" {
			t.Errorf("refresh for %q", provider)
		}
		if strings.HasPrefix(stale, "tok-bob") {
			return "", ConnectionBroken(tool, "the provider no longer accepts this connection")
		}
		mu.Lock()
		defer mu.Unlock()
		valid["tok-ann-2"] = "ann"
		return "tok-ann-2", nil
	}
	call := func(cred string) (string, error) {
		ctx := WithTokenRefresh(context.Background(), refresher)
		resp, err := u.Call(ctx, Request{Tool: tool, Args: map[string]any{}, Credential: cred})
		if err != nil {
			return "", err
		}
		return string(resp.Body), nil
	}
	for _, c := range []struct{ cred, want string }{{"tok-ann-1", "user=ann"}, {"tok-bob-1", "user=bob"}, {"tok-ann-1", "user=ann"}} {
		if got, err := call(c.cred); err != nil || !strings.Contains(got, c.want) {
			t.Fatalf("call with %s: %v %s", c.cred, err, got)
		}
	}
	if n := sessions.Load(); n != 2 {
		t.Errorf("%d server sessions for two users", n)
	}

	// Ann's token stops being accepted: one refresh, the same session.
	mu.Lock()
	delete(valid, "tok-ann-1")
	mu.Unlock()
	if got, err := call("tok-ann-1"); err != nil || !strings.Contains(got, "user=ann") {
		t.Fatalf("after ann's token was refused: %v %s", err, got)
	}
	if got, err := call("tok-ann-2"); err != nil || !strings.Contains(got, "user=ann") || refreshes.Load() != 1 {
		t.Fatalf("with ann's refreshed token: %v %s (%d refreshes)", err, got, refreshes.Load())
	}
	if n := sessions.Load(); n != 2 {
		t.Errorf("%d server sessions after ann's refresh; want her session kept", n)
	}

	// Bob's connection breaks: the refusal reaches the caller.
	mu.Lock()
	delete(valid, "tok-bob-1")
	mu.Unlock()
	got, err := call("tok-bob-1")
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Code != CodeConnectionBroken {
		t.Fatalf("bob's broken connection: %v %s", err, got)
	}
	if _, err := call(""); !errors.As(err, &refused) || refused.Code != CodeNotConnected || !strings.Contains(refused.Msg, "connect_toolkit") {
		t.Errorf("no credential: %v", err)
	}

	// Idle sessions are closed: a later call makes a new one.
	u.mu.Lock()
	for _, us := range u.all {
		us.used = time.Now().Add(-2 * u.idle)
	}
	u.mu.Unlock()
	before := sessions.Load()
	if got, err := call("tok-ann-2"); err != nil || !strings.Contains(got, "user=ann") {
		t.Fatalf("after the idle sessions were closed: %v %s", err, got)
	}
	u.mu.Lock()
	n := len(u.all)
	u.mu.Unlock()
	if sessions.Load() != before+1 || n != 1 {
		t.Errorf("after idling: %d new server sessions, %d kept; want 1 and 1", sessions.Load()-before, n)
	}
}
