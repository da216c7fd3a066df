package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/web/deploy"
)

// Token-endpoint fault modes of faultyToken.
const (
	tokenForward     = iota // pass the request on
	tokenUnavailable        // 503 {"error":"temporarily_unavailable"}
	tokenBadGateway         // 502 with an HTML page (a load balancer's)
	tokenSlowAnswer         // pass it on, then hold the answer for a second
)

// faultyToken is a proxy in front of the token endpoint whose answers
// the test picks (mode).
func faultyToken(t *testing.T, mode *atomic.Int32) func(string) string {
	return func(target string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch mode.Load() {
			case tokenUnavailable:
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":"temporarily_unavailable","error_description":"maintenance"}`)
				return
			case tokenBadGateway:
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(http.StatusBadGateway)
				_, _ = io.WriteString(w, `<html><body>502 Bad Gateway</body></html>`)
				return
			}
			body, _ := io.ReadAll(r.Body)
			// The request reaches the authorization server whatever the
			// caller does meanwhile (as on a real network).
			req, _ := http.NewRequestWithContext(context.Background(), r.Method, target, bytes.NewReader(body))
			req.Header = r.Header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if mode.Load() == tokenSlowAnswer {
				time.Sleep(time.Second)
			}
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(out)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/token"
	}
}

func (f *oauthFixture) connectionStatus(t *testing.T) string {
	t.Helper()
	_, body := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	return string(body)
}

// Review: a refresh the token endpoint answers with a 5xx (the provider
// in maintenance, a load balancer's 502) is the authorization server
// being unavailable, not the user's connection being revoked: the
// connection must be kept (provider_unavailable), not marked broken with
// its refresh token thrown away.
func TestOAuthReviewRefreshOn5xxKeepsConnection(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode int32
	}{{"503 temporarily_unavailable", tokenUnavailable}, {"502 html", tokenBadGateway}} {
		t.Run(tc.name, func(t *testing.T) {
			var mode atomic.Int32
			f, _ := newOAuthFixture(t, oauthOptions{ttl: 4 * time.Second, tokenURL: faultyToken(t, &mode)})
			f.connect(t, f.connectLink(t, "c1"))
			if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
				t.Fatalf("after connecting: %s", out)
			}
			time.Sleep(3200 * time.Millisecond) // near expiry: the next call refreshes
			mode.Store(tc.mode)
			out := f.callCRM(t, f.ts, "c1")
			if strings.Contains(out, "connection_broken") || strings.Contains(out, "reconnect with") || strings.Contains(out, "give them the fresh link") {
				t.Errorf("a %s from the token endpoint broke the connection; the model read %s", tc.name, out)
			}
			if st := f.connectionStatus(t); strings.Contains(st, `"status":"broken"`) {
				t.Errorf("connections after a %s: %s", tc.name, st)
			}
			mode.Store(tokenForward)
			if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
				t.Errorf("once the token endpoint answers again, the call answered %s", out)
			}
		})
	}
}

// Review: a refresh whose caller goes away while the token request is
// on its way (the user closed the chat, a client timeout) — the
// provider rotated the refresh token, and the answer with the new one
// is lost; the next refresh sends the rotated-out token, which
// oidc-provider takes for a replay and revokes the grant. A refresh
// should finish whatever its caller does.
func TestOAuthReviewRefreshCancelledKeepsRotation(t *testing.T) {
	var mode atomic.Int32
	f, _ := newOAuthFixture(t, oauthOptions{ttl: 4 * time.Second, tokenURL: faultyToken(t, &mode)})
	f.connect(t, f.connectLink(t, "c1"))
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("after connecting: %s", out)
	}
	time.Sleep(3200 * time.Millisecond)
	mode.Store(tokenSlowAnswer)
	conns := f.ts.Deployment().Connections()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, _, err := conns.AccessToken(ctx, "ann", "crm")
	cancel()
	t.Logf("the cancelled caller got: %v", err)
	time.Sleep(1500 * time.Millisecond) // the provider's answer was held, then dropped
	mode.Store(tokenForward)
	tok, ok, err := conns.AccessToken(context.Background(), "ann", "crm")
	if err != nil || !ok || tok == "" {
		t.Errorf("after a cancelled refresh, the next one: %q %v %v; connections: %s", tok, ok, err, f.connectionStatus(t))
	}
}

// Review: a connect link of ann's, opened by bob (she sent it to him, or
// it was sent to him as a lure), signs bob in at the provider and
// stores bob's tokens as ann's connection: ann's agent then acts as bob.
// Unlike the token form ("This connects CRM for account ann. If that is
// not your account, close this page"), the OAuth link goes straight to
// the provider; when bob has a session there and has consented to the
// client before (he connected his own account), there is no page at
// all — one click.
func TestOAuthReviewLinkCompletedByAnotherUser(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{})
	// Bob connects his own account first, in his browser.
	_, body := f.ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "bob"})
	var sess struct{ Token string }
	json.Unmarshal(body, &sess)
	bobToken := sess.Token
	f.model.push(toolCall("t1", "connect_toolkit", `{"toolkit": "crm"}`))
	resp := f.ts.post(t, "/v1/agents/a/chat", bobToken, chatBody("b1", "mb1", "go"))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var out struct{ URL string }
	json.Unmarshal([]byte(f.model.lastOutput()), &out)
	bobBrowser := newBrowser(t)
	resp = openOAuthLink(t, bobBrowser, out.URL)
	if _, page := signIn(t, bobBrowser, resp, "bob"); !strings.Contains(page, "connected for account <code>bob</code>") {
		t.Fatalf("bob's own connect: %s", page)
	}

	// Ann's link, opened in bob's browser: trawl's page names ann's
	// account, and nothing reaches the provider or connects until bob
	// confirms it.
	link := f.connectLink(t, "c1")
	provider := 0
	bobBrowser.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), f.ts.URL) {
			provider++
		}
		return nil
	}
	st, page := get(t, bobBrowser, link)
	t.Logf("bob opened ann's link: %d, %d redirects to the provider: %.200s", st, provider, page)
	if st != 200 || !strings.Contains(page, "for account <code>ann</code>") || !strings.Contains(page, "If that is not your account, close this page") ||
		!strings.Contains(page, `<form method="post">`) {
		t.Errorf("ann's link, opened by bob, shows no page naming ann's account: %d %s", st, page)
	}
	if provider != 0 || strings.Contains(page, "is connected for account") {
		t.Errorf("ann's link, opened by bob, went on to the provider (%d redirects) without bob's confirming: %s", provider, page)
	}
	if st := f.connectionStatus(t); !strings.Contains(st, `"connections":[]`) {
		who := f.callCRM(t, f.ts, "c1")
		t.Errorf("ann's link, opened by bob, connected ann without a confirmation: %s; ann's call acts as bob: %v", st, strings.Contains(who, `"sub":"bob"`))
	}
}

// Review: an MCP server each user connects (flow authorization_code)
// whose server or authorization server does not answer at start stops
// the deployment from starting — unlike an OAuth toolkit (degraded,
// /readyz auth_servers) or an MCP server reached with the
// organization's client (degraded, retried).
func TestOAuthReviewUserMCPDownAtStart(t *testing.T) {
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	down := "http://" + ln.Addr().String()
	dir := t.TempDir()
	for _, tc := range []struct{ name, auth string }{
		{"issuer set", `{type: oauth2, flow: authorization_code, issuer: ` + down + `, client_id: trawl-web, client_secret: s3cr3t-s3cr3t}`},
		{"discovered", `{type: oauth2, flow: authorization_code, client_id: trawl-web, client_secret: s3cr3t-s3cr3t}`},
		{"organization", `{type: oauth2, flow: client_credentials, issuer: ` + down + `, client_id: trawl-cc, client_secret: s3cr3t-s3cr3t}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "listen: 127.0.0.1:0\nmcp_servers:\n  - id: notes\n    url: " + down + "/mcp\n    auth: " + tc.auth +
				"\nagents:\n  - id: a\n    agentTools: [{toolkit: notes}]\n"
			if err := os.WriteFile(filepath.Join(dir, "trawl.yaml"), []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := deploy.LoadConfig(filepath.Join(dir, "trawl.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			cfg.DataDir = t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			srv, err := New(ctx, cfg, Options{Stdout: io.Discard, Model: &turnScript{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Errorf("with the MCP server and its authorization server down, the deployment does not start: %v", err)
				return
			}
			srv.Close()
		})
	}
}

// Review: two connect links opened in one browser before the first is
// finished (the model gave two, or the user asked twice and opened both
// tabs): each start overwrites the browser's one trawl_oauth cookie with
// a value of its own, so the first sign-in lands on "This sign-in was
// not started in this browser" — and its authorization request is spent
// before the cookie is compared, so even the right cookie could not
// finish it afterwards.
func TestOAuthReviewTwoLinksOneBrowser(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{})
	b := newBrowser(t)
	stop := func(link string) string {
		t.Helper()
		b.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		resp := openOAuthLink(t, b, link)
		resp.Body.Close()
		b.CheckRedirect = nil
		return resp.Header.Get("Location")
	}
	first := stop(f.connectLink(t, "c1"))
	second := stop(f.connectLink(t, "c1"))
	if first == "" || second == "" {
		t.Fatal("no authorize URL")
	}
	resp, err := b.Get(first)
	if err != nil {
		t.Fatal(err)
	}
	if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected for account") {
		t.Errorf("the first of two links opened in one browser: %.600s", page[strings.Index(page, "<body>"):])
	}
	if resp, err = b.Get(second); err != nil {
		t.Fatal(err)
	}
	if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected for account") {
		t.Errorf("the second of two links opened in one browser: %.600s", page[strings.Index(page, "<body>"):])
	}
}
