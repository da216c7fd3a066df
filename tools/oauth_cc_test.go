package tools

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools/oauthtest"
)

// ccInvoker is an invoker whose provider "crm" authenticates with
// oidc-provider's client-credentials client, and crm's one tool.
func ccInvoker(t *testing.T, as *oauthtest.Server, api *oauthtest.API) (*Invoker, *Tool) {
	t.Helper()
	spec := AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "trawl-cc",
		ClientSecret: as.CCSecret, TokenURL: as.TokenURL, Scopes: "api:read"}}
	c, err := NewOAuthClient(context.Background(), spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	inv := NewInvoker(InvokerOptions{})
	inv.SetAuth("crm", ProviderAuth{Org: spec})
	inv.SetOAuth("crm", c)
	return inv, &Tool{ID: "crm.whoami", Provider: "crm", Method: "GET", Path: "/whoami", Origin: api.URL}
}

func whoami(t *testing.T, inv *Invoker, tool *Tool) map[string]any {
	t.Helper()
	resp, err := inv.Call(context.Background(), Request{Tool: tool})
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if resp.Status != 200 || json.Unmarshal(resp.Body, &out) != nil {
		t.Fatalf("whoami: %d %s", resp.Status, resp.Body)
	}
	return out
}

// Client credentials: one token, fetched on first use and cached until
// it nearly expires, then fetched again; a 401 for a token the cache
// still holds valid (the server revoked it, or the clocks disagree)
// fetches a new one once and the call goes through; the token and the
// client secret are in the scrubber.
func TestOAuthClientCredentials(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{AccessTTL: 4 * time.Second})
	api := as.StartAPI(t)
	inv, tool := ccInvoker(t, as, api)

	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); whoami(t, inv, tool) }()
	}
	wg.Wait()
	if got := whoami(t, inv, tool)["client_id"]; got != "trawl-cc" {
		t.Errorf("the API saw client %v", got)
	}
	if n := as.TokenRequests.Load(); n != 1 {
		t.Errorf("%d token requests for five calls; want 1 (cached)", n)
	}
	accepted, _ := api.Tokens()
	first := accepted[0]
	if s := inv.Scrubber().String("x " + first + " " + as.CCSecret + " y"); strings.Contains(s, first) || strings.Contains(s, as.CCSecret) {
		t.Errorf("the scrubber lets through the token or the client secret: %s", s)
	}

	// Near its expiry the token is fetched again before the call.
	time.Sleep(3500 * time.Millisecond)
	whoami(t, inv, tool)
	if n := as.TokenRequests.Load(); n != 2 {
		t.Errorf("%d token requests after expiry; want 2", n)
	}

	// The cache's clock runs behind: it holds the token valid after the
	// server let it expire; the 401 fetches a new one, once.
	o := inv.orgOAuth("crm")
	o.now = func() time.Time { return time.Now().Add(-time.Hour) }
	o.mu.Lock()
	o.got = time.Now().Add(-time.Hour)
	o.mu.Unlock()
	time.Sleep(4500 * time.Millisecond)
	before := as.TokenRequests.Load()
	whoami(t, inv, tool)
	if n := as.TokenRequests.Load() - before; n != 1 {
		t.Errorf("%d token requests on the 401; want 1", n)
	}
	if _, refused := api.Tokens(); len(refused) != 1 {
		t.Errorf("the API refused %d tokens; want 1 (the expired one)", len(refused))
	}
}

// A client whose secret is wrong gets no token: the call is refused in
// words, without the secret.
func TestOAuthClientCredentialsRefused(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{})
	api := as.StartAPI(t)
	spec := AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "trawl-cc",
		ClientSecret: "wrong-secret-value", TokenURL: as.TokenURL}}
	c, _ := NewOAuthClient(context.Background(), spec, nil)
	inv := NewInvoker(InvokerOptions{})
	inv.SetAuth("crm", ProviderAuth{Org: spec})
	inv.SetOAuth("crm", c)
	_, err := inv.Call(context.Background(), Request{Tool: &Tool{ID: "crm.whoami", Provider: "crm", Method: "GET", Path: "/whoami", Origin: api.URL}})
	if err == nil || !strings.Contains(err.Error(), "refused trawl's client") || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Errorf("err = %v", err)
	}
}

// The organization's token in the minute before its expiry is fetched
// anew; when the authorization server cannot answer then, the token held
// — which still works — is sent rather than the call refused, and each
// call asks again; once it has expired, or a 401 refused it, the call is
// refused (provider_unavailable).
func TestOAuthClientCredentialsUnavailableUsesTheTokenUntilItExpires(t *testing.T) {
	var down atomic.Bool
	var requests atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"temporarily_unavailable"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"org-1","token_type":"Bearer","expires_in":600}`))
	}))
	t.Cleanup(as.Close)
	c, err := NewOAuthClient(context.Background(), AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials,
		ClientID: "trawl-cc", ClientSecret: "s3cret-value", TokenURL: as.URL + "/token"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	o := &orgToken{client: c, provider: "crm", now: func() time.Time { return now }}
	ctx := context.Background()
	if tok, _, err := o.token(ctx, ""); tok != "org-1" || err != nil {
		t.Fatalf("first token: %q %v", tok, err)
	}
	down.Store(true)
	expiry := o.tok.Expiry
	for i, left := range []time.Duration{30 * time.Second, 5 * time.Second} {
		now = expiry.Add(-left)
		if tok, _, err := o.token(ctx, ""); tok != "org-1" || err != nil {
			t.Fatalf("%s before expiry, the token endpoint down: %q %v", left, tok, err)
		}
		if n := requests.Load(); n != int32(2+i) {
			t.Errorf("%d token requests; want one a call in the window", n)
		}
	}
	if _, _, err := o.token(ctx, "org-1"); err == nil || !strings.Contains(err.Error(), "cannot be used right now") {
		t.Errorf("the token a 401 refused, the endpoint down: %v", err)
	}
	now = expiry
	if _, _, err := o.token(ctx, ""); err == nil || !strings.Contains(err.Error(), "cannot be used right now") {
		t.Errorf("expired, the endpoint down: %v", err)
	}
}

// An MCP server's organization token whose endpoint cannot answer names
// the server in what the model reads.
func TestMCPOrgTokenUnavailableNamesTheServer(t *testing.T) {
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte(`{"error":"temporarily_unavailable"}`))
	}))
	t.Cleanup(as.Close)
	h := newMCPOAuth(MCPConfig{ID: "notes", URL: as.URL + "/mcp", Auth: AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials,
		ClientID: "trawl-cc", ClientSecret: "s3cret-value", TokenURL: as.URL + "/token"}}}, nil, nil)
	o, err := h.client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.token(context.Background(), ""); err == nil || !strings.HasPrefix(err.Error(), "notes cannot be used right now") {
		t.Errorf("the token endpoint down: %v", err)
	}
}
