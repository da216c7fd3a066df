package tools

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/trawl-dev/trawl/tools/oauthtest"
)

// An MCP server behind OAuth for the organization: the MCP SDK's server
// with its bearer-auth middleware, accepting only tokens oidc-provider
// issued for its URL (introspected) and publishing its protected-resource
// metadata. trawl finds the authorization server there, its endpoints in
// the RFC 8414 metadata, gets a client-credentials token with the
// server's URL as resource indicator, lists and calls tools, and when the
// token expires gets a new one; the tokens go to the scrubber.
func TestOAuthMCPServer(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{AccessTTL: 3 * time.Second})
	var mu sync.Mutex
	var accepted []string
	var serverURL string
	srv := newTestMCPServer(mcpTestServerOptions{})
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		info, err := as.Introspect(ctx, tok)
		if err != nil || !info.Active || info.Aud != serverURL {
			return nil, auth.ErrInvalidToken
		}
		mu.Lock()
		accepted = append(accepted, tok)
		mu.Unlock()
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close) // after the source's Close (cleanups run last first)
	serverURL = hs.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: serverURL, AuthorizationServers: []string{as.Issuer}}))
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: hs.URL + "/.well-known/oauth-protected-resource/mcp"})(
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)))

	inv := NewInvoker(InvokerOptions{})
	cfg := MCPConfig{ID: "notes", URL: serverURL, Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{
		Flow: FlowClientCredentials, ClientID: "trawl-cc", ClientSecret: as.CCSecret}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	inv.AddSecrets(cfg.Secrets()...)
	src := connectTest(t, cfg, MCPOptions{Scrub: inv.Scrubber, OnToken: func(tok string) { inv.RememberToken("notes", tok) }})
	tool := toolByName(t, src.Tools(), "search_orders")
	call := func() {
		t.Helper()
		resp, err := src.Call(context.Background(), Request{Tool: tool, Args: map[string]any{"query": "x"}})
		if err != nil || resp.Status != 200 {
			t.Fatalf("call: %v %+v", err, resp)
		}
	}
	call()
	time.Sleep(3500 * time.Millisecond) // the token expired at the provider
	call()
	mu.Lock()
	toks := append([]string(nil), accepted...)
	mu.Unlock()
	if len(toks) < 2 || toks[0] == toks[len(toks)-1] {
		t.Fatalf("the server accepted %d tokens; want a new one after expiry", len(toks))
	}
	if s := inv.Scrubber().String(toks[len(toks)-1] + " " + as.CCSecret); strings.Contains(s, toks[len(toks)-1]) || strings.Contains(s, as.CCSecret) {
		t.Errorf("the scrubber lets the MCP token or the client secret through: %s", s)
	}
}

func TestOAuthMCPConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  MCPConfig
		want string
	}{
		{MCPConfig{ID: "a", Command: []string{"x"}, Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "c", ClientSecret: "s"}}}, "not a command"},
		{MCPConfig{ID: "a", URL: "https://m.example/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientSecret: "s"}}}, "client_secret without client_id"},
		{MCPConfig{ID: "a", URL: "https://m.example/mcp", Auth: AuthSpec{Type: AuthBearer, Token: "t"}}, "is type oauth2"},
		{MCPConfig{ID: "a", URL: "https://m.example/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "c"}}}, "needs client_secret"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
	for _, ok := range []MCPConfig{
		{ID: "a", URL: "https://m.example/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "c", ClientSecret: "s"}}},
		// Each user connects; the client registered (RFC 7591) or pre-registered.
		{ID: "a", URL: "https://m.example/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode}}},
		{ID: "a", URL: "https://m.example/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", TokenURL: "https://as.example/token"}}},
	} {
		if err := ok.Validate(); err != nil {
			t.Error(err)
		}
		if !ok.PerUser() {
			continue
		}
		if _, err := ConnectMCP(context.Background(), ok, MCPOptions{}); err == nil || !strings.Contains(err.Error(), "NewMCPUserSource") {
			t.Errorf("ConnectMCP of a per-user server: %v", err)
		}
	}
	_, err := mcpAuthServer(context.Background(), "http://127.0.0.1:1/mcp", nil)
	if err == nil || errors.Is(err, context.Canceled) {
		t.Errorf("no metadata: %v", err)
	}
}
