package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A client trawl registered is registered anew only when the token
// endpoint refuses it as invalid_client after it worked, and a probe
// with a refresh token no one issued is refused the same way (the server
// forgot the client): the user's grant is then reported gone
// (ErrClientReregistered, RefreshRefused). A client that never worked is
// not replaced again however often it is refused (no registration per
// request), and a refusal the probe does not repeat replaces nothing.
func TestOAuthReregistersOnlyAForgottenClient(t *testing.T) {
	var mode atomic.Value // "ok", "forgot" (every client refused), "flaky" (only the users' tokens refused)
	mode.Store("ok")
	var mu sync.Mutex
	known := map[string]bool{} // client_ids the server knows
	srv := fakeAuthServer(t, func(w http.ResponseWriter, r *http.Request) {
		id, _, _ := r.BasicAuth()
		r.ParseForm()
		mu.Lock()
		ok := known[id]
		mu.Unlock()
		switch m := mode.Load().(string); {
		case !ok || m == "forgot":
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
		case m == "flaky" && !strings.HasPrefix(r.Form.Get("refresh_token"), "trawl-probe-"):
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":"invalid_client"}`)
		case strings.HasPrefix(r.Form.Get("refresh_token"), "trawl-probe-"):
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
		default:
			fmt.Fprint(w, `{"access_token":"at","token_type":"Bearer","refresh_token":"rt2","expires_in":60}`)
		}
	})
	var registered []string // the stale argument of each registration
	register := func(ctx context.Context, issuer, endpoint, stale string) (string, string, error) {
		mu.Lock()
		defer mu.Unlock()
		registered = append(registered, stale)
		id := fmt.Sprintf("client-%d", len(registered))
		known[id] = true
		return id, "secret-" + id, nil
	}
	cfg := MCPConfig{ID: "notes", URL: srv.URL + "/mcp", Auth: AuthSpec{Type: AuthOAuth2,
		OAuth2: OAuth2{Flow: FlowAuthorizationCode, Issuer: srv.URL, Scopes: "read"}}}
	c, err := NewMCPOAuthClient(context.Background(), cfg, srv.Client(), register)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	refresh := func() error { _, err := c.Refresh(ctx, "rt"); return err }
	regs := func() int { mu.Lock(); defer mu.Unlock(); return len(registered) }

	// Refused before it ever worked: nothing replaced.
	mode.Store("forgot")
	if err := refresh(); err == nil || errors.Is(err, ErrClientReregistered) || RefreshRefused(err) || regs() != 1 {
		t.Fatalf("a client that never worked, refused: %v, %d registrations", err, regs())
	}
	mode.Store("ok")
	if err := refresh(); err != nil {
		t.Fatal(err)
	}
	// Refused, but the probe is not: a refusal of that request only.
	mode.Store("flaky")
	if err := refresh(); err == nil || errors.Is(err, ErrClientReregistered) || regs() != 1 || c.Spec().ClientID != "client-1" {
		t.Fatalf("a refusal the probe does not repeat: %v, %d registrations, client %s", err, regs(), c.Spec().ClientID)
	}
	// The server forgot its clients: one new client, the grant gone.
	mode.Store("ok")
	refresh()
	mu.Lock()
	known = map[string]bool{}
	mu.Unlock()
	err = refresh()
	if !errors.Is(err, ErrClientReregistered) || !RefreshRefused(err) || !strings.Contains(OAuthFailure(err), "registered a new one") || strings.Contains(OAuthFailure(err), "connect again") {
		t.Fatalf("the forgotten client's refresh: %v (refused %v)", err, RefreshRefused(err))
	}
	if regs() != 2 || registered[1] != "client-1" || c.Spec().ClientID != "client-2" {
		t.Fatalf("after the server forgot the client: registrations %q, client %s", registered, c.Spec().ClientID)
	}
	// Refused for good (every client): the new client never worked, so
	// no registration per request.
	mode.Store("forgot")
	for range 5 {
		if err := refresh(); err == nil || errors.Is(err, ErrClientReregistered) {
			t.Fatalf("the new client refused: %v", err)
		}
	}
	if regs() != 2 {
		t.Errorf("%d registrations after the new client was refused five times, want 2", regs())
	}
}

// A client kept from before a restart has not worked in this process;
// once it is reregisterAfter old here, a refusal the probe confirms
// replaces it all the same (the server may have forgotten it while
// trawl was down), once.
func TestOAuthReregistersAKeptClientAfterARestart(t *testing.T) {
	defer func(d time.Duration) { reregisterAfter = d }(reregisterAfter)
	var registrations atomic.Int32
	srv := fakeAuthServer(t, func(w http.ResponseWriter, r *http.Request) { // it knows no client: restarted since
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
	})
	register := func(ctx context.Context, issuer, endpoint, stale string) (string, string, error) {
		n := registrations.Add(1)
		if n == 1 {
			return "kept-client", "kept-secret", nil // as kept before the restart
		}
		return fmt.Sprintf("client-%d", n), "secret", nil
	}
	cfg := MCPConfig{ID: "notes", URL: srv.URL + "/mcp", Auth: AuthSpec{Type: AuthOAuth2,
		OAuth2: OAuth2{Flow: FlowAuthorizationCode, Issuer: srv.URL, Scopes: "read"}}}
	c, err := NewMCPOAuthClient(context.Background(), cfg, srv.Client(), register)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Refresh(context.Background(), "rt"); errors.Is(err, ErrClientReregistered) || registrations.Load() != 1 {
		t.Fatalf("a client set up just now, refused: %v, %d registrations", err, registrations.Load())
	}
	reregisterAfter = 0
	if _, err := c.Refresh(context.Background(), "rt"); !errors.Is(err, ErrClientReregistered) || registrations.Load() != 2 || c.Spec().ClientID != "client-2" {
		t.Fatalf("the kept client refused past reregisterAfter: %v, %d registrations, client %s", err, registrations.Load(), c.Spec().ClientID)
	}
}

// fakeAuthServer is an authorization server whose metadata offers
// registration and PKCE and whose token endpoint is token.
func fakeAuthServer(t *testing.T, token http.HandlerFunc) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize",
				"token_endpoint": srv.URL + "/token", "registration_endpoint": srv.URL + "/register", "code_challenge_methods_supported": []string{"S256"}})
		case "/token":
			token(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}
