package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools/leaktest"
	"github.com/trawl-dev/trawl/tools/oauthtest"
	"github.com/trawl-dev/trawl/web/deploy"
)

// mcpOAuthFixture is a deployment with the TypeScript MCP SDK's server
// behind oidc-provider twice: notes, which each user connects (flow
// authorization_code, its client registered dynamically, its
// authorization server found in the server's protected-resource
// metadata), bound to agent a; and orgnotes, the organization's (client
// credentials), bound to agent o.
type mcpOAuthFixture struct {
	*oauthFixture
	replicas []*testServer
	mcpURL   string // the MCP server's endpoint
}

func newMCPOAuthFixture(t *testing.T, ttl time.Duration, redisURL string, replicas int) *mcpOAuthFixture {
	t.Helper()
	return mcpOAuthDeployment(t, oauthtest.Start(t, oauthtest.Options{AccessTTL: ttl, DCR: true}), redisURL, replicas)
}

// mcpOAuthDeployment is newMCPOAuthFixture with the authorization
// server as (prepared, or running).
func mcpOAuthDeployment(t *testing.T, as *oauthtest.Server, redisURL string, replicas int) *mcpOAuthFixture {
	t.Helper()
	mcpURL := as.StartMCP(t)
	dir := t.TempDir()
	f := &mcpOAuthFixture{oauthFixture: &oauthFixture{as: as, model: &turnScript{}}, mcpURL: mcpURL}
	for range replicas {
		ln, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		// Every replica has the first's public URL: one redirect URI,
		// one registered client.
		public := "http://" + ln.Addr().String()
		if f.ts != nil {
			public = f.ts.URL
		}
		// token_url is oidc-provider's behind the test's counting proxy,
		// which keeps every code, verifier and token it carries for the
		// hunt; the rest is discovered.
		text := fmt.Sprintf(`listen: %s
public_url: %s
mcp_servers:
  - id: notes
    url: %s
    auth: {type: oauth2, flow: authorization_code, token_url: %s, scopes: [api:read]}
  - id: orgnotes
    url: %s
    auth: {type: oauth2, flow: client_credentials, client_id: trawl-cc, client_secret: %s}
agents:
  - id: a
    agentTools: [{toolkit: notes}]
  - id: o
    agentTools: [{toolkit: orgnotes}]
`, ln.Addr(), public, mcpURL, as.TokenURL, mcpURL, as.CCSecret)
		if redisURL != "" {
			text += fmt.Sprintf("redis_url: %s\nadmin_key: %s\nsecret_key: %s\n", redisURL, testAdminKey, testSecretKey)
		}
		if err := os.WriteFile(filepath.Join(dir, "trawl.yaml"), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := deploy.LoadConfig(filepath.Join(dir, "trawl.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.DataDir = t.TempDir()
		logs, clock := &syncBuffer{}, &testClock{}
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: f.model, Now: clock.Now,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler()}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close(); srv.Close() })
		ts := &testServer{Server: srv, URL: "http://" + ln.Addr().String(), logs: logs, clock: clock}
		if f.ts == nil {
			f.ts = ts
		}
		f.replicas = append(f.replicas, ts)
	}
	f.token = f.session(t, "ann")
	return f
}

func (f *mcpOAuthFixture) session(t *testing.T, user string) string {
	t.Helper()
	_, body := f.ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": user})
	var sess struct{ Token string }
	json.Unmarshal(body, &sess)
	return sess.Token
}

// call is a turn of the session token's on agent whose model calls
// tool; it answers what the tool answered.
func (f *mcpOAuthFixture) call(t *testing.T, ts *testServer, token, agentID, chat, tool string) string {
	t.Helper()
	return f.callArgs(t, ts, token, agentID, chat, tool, `{}`)
}

func (f *mcpOAuthFixture) callArgs(t *testing.T, ts *testServer, token, agentID, chat, tool, args string) string {
	t.Helper()
	f.model.push(toolCall("t1", tool, args))
	resp := ts.post(t, "/v1/agents/"+agentID+"/chat", token, chatBody(chat, fmt.Sprintf("m%d", time.Now().UnixNano()), "go"))
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	f.mu.Lock()
	f.streams = append(f.streams, string(b))
	f.mu.Unlock()
	return f.model.lastOutput()
}

// link is a turn of the session token's on agent a whose model calls
// connect_toolkit for notes; it answers the link.
func (f *mcpOAuthFixture) link(t *testing.T, token, chat string) string {
	t.Helper()
	f.callArgs(t, f.ts, token, "a", chat, "connect_toolkit", `{"toolkit": "notes"}`)
	var got struct{ URL string }
	if err := json.Unmarshal([]byte(f.model.lastOutput()), &got); err != nil || got.URL == "" {
		t.Fatalf("connect_toolkit answered %s", f.model.lastOutput())
	}
	return got.URL
}

// An MCP server behind OAuth, the TypeScript MCP SDK's own server with
// its bearer-auth middleware, reached through trawl by one user and by
// the organization: before anyone connected, agent a is offered only
// connect_toolkit for notes; ann connects through the connect link
// (oidc-provider's login and consent pages, trawl's client registered
// dynamically, PKCE, the server's URL as resource indicator), the
// server's tools are then listed and her call answers with her
// identity; her token expires and the next call refreshes it; bob, not
// connected, is told to connect; the organization's server answers with
// the client-credentials client. The registered client's secret, every
// code, PKCE verifier, access and refresh token are in no stream, model
// read, thread, connections list, log, data file or Redis value.
func TestOAuthMCPPerUser(t *testing.T) {
	rs := redistest.Start(t)
	f := newMCPOAuthFixture(t, 3*time.Second, "redis://"+rs.Addr+"/0", 2)

	// No user has connected notes: agent a has no tool of it, only
	// connect_toolkit.
	if out := f.call(t, f.ts, f.token, "a", "c1", "whoami"); !strings.Contains(out, `no tool \"whoami\"`) {
		t.Fatalf("before anyone connected, whoami answered %s", out)
	}
	link := f.link(t, f.token, "c1")
	b := newBrowser(t)
	resp := openOAuthLink(t, b, link)
	if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected for account") {
		t.Fatalf("after signing in: %s", page)
	}
	client, ok := f.ts.conns.OAuthClient("notes")
	if !ok || client.Spec().ClientID == "" || client.Spec().ClientSecret == "" {
		t.Fatalf("no registered client for notes: %v", ok)
	}
	c2, _ := f.replicas[1].conns.OAuthClient("notes")
	if c2 == nil || c2.Spec().ClientID != client.Spec().ClientID {
		t.Errorf("the replicas registered two clients (or none)")
	}

	whoami := func(ts *testServer, token, agentID, tool string) map[string]any {
		t.Helper()
		out := f.call(t, ts, token, agentID, "c1", tool)
		var got struct {
			Content []struct{ Text string }
		}
		var who map[string]any
		if json.Unmarshal([]byte(out), &got) != nil || len(got.Content) == 0 || json.Unmarshal([]byte(got.Content[0].Text), &who) != nil {
			if json.Unmarshal([]byte(out), &who) != nil {
				t.Fatalf("%s answered %s", tool, out)
			}
		}
		return who
	}
	who := whoami(f.ts, f.token, "a", "whoami")
	if who["sub"] != "ann" || who["client_id"] != client.Spec().ClientID || who["echo"] != "[redacted]" {
		t.Fatalf("ann's call answered %v", who)
	}
	// Her token expires while trawl's clock stands still (it does not
	// refresh before expiry): the server's 401 makes the refresh, once,
	// and the call goes again on the same session.
	frozen := time.Now()
	for _, r := range f.replicas {
		r.clock.set(func() time.Time { return frozen })
	}
	before := f.as.TokenRequests.Load()
	time.Sleep(3200 * time.Millisecond)
	if who := whoami(f.ts, f.token, "a", "whoami"); who["sub"] != "ann" {
		t.Fatalf("after a 401, ann's call answered %v", who)
	}
	if n := f.as.TokenRequests.Load() - before; n != 1 {
		t.Errorf("the 401 made %d token requests, want one refresh", n)
	}
	for _, r := range f.replicas {
		r.clock.set(nil)
	}
	// Before expiry, on the other replica (its tools listed with her
	// connection, the refreshed token read from the shared store).
	time.Sleep(3200 * time.Millisecond)
	if who := whoami(f.replicas[1], f.token, "a", "whoami"); who["sub"] != "ann" {
		t.Fatalf("after expiry, on the other replica, ann's call answered %v", who)
	}
	_, list := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	var conns struct{ Connections []deploy.ConnectionInfo }
	json.Unmarshal(list, &conns)
	if len(conns.Connections) != 1 || conns.Connections[0].Toolkit != "notes" || conns.Connections[0].LastRefresh == nil {
		t.Errorf("ann's connections after a refresh: %s", list)
	}

	// She withdraws consent at the provider: the next call's 401 finds
	// the refresh refused, and the model is told to reconnect with a
	// fresh link, which works.
	revokeAs(t, f.as.Issuer, client.Spec().ClientID, client.Spec().ClientSecret, f.as.Secrets()[len(f.as.Secrets())-1])
	for _, r := range f.replicas {
		r.clock.set(func() time.Time { return frozen.Add(6400 * time.Millisecond) })
	}
	if out := f.call(t, f.ts, f.token, "a", "c1", "whoami"); !strings.Contains(out, "no longer works") || !strings.Contains(out, "connect_toolkit") {
		t.Fatalf("after consent was withdrawn, ann's call answered %s", out)
	}
	for _, r := range f.replicas {
		r.clock.set(nil)
	}
	link = f.link(t, f.token, "c1")
	b = newBrowser(t)
	resp = openOAuthLink(t, b, link)
	if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected for account") {
		t.Fatalf("reconnecting: %s", page)
	}
	if who := whoami(f.ts, f.token, "a", "whoami"); who["sub"] != "ann" {
		t.Fatalf("after reconnecting, ann's call answered %v", who)
	}

	// Every token request named the MCP server as its resource (RFC
	// 8707): the code exchanges and the refreshes.
	grants := f.as.Grants()
	var codes, refreshes int
	for _, g := range grants {
		kind, resource, _ := strings.Cut(g, " ")
		if resource != f.mcpURL {
			t.Errorf("token request %q names resource %q", kind, resource)
		}
		switch kind {
		case "authorization_code":
			codes++
		case "refresh_token":
			refreshes++
		}
	}
	if codes != 2 || refreshes < 2 {
		t.Errorf("token requests %v: want two code exchanges and two refreshes or more", grants)
	}

	bob := f.session(t, "bob")
	if out := f.call(t, f.ts, bob, "a", "b1", "whoami"); !strings.Contains(out, "connect_toolkit") || strings.Contains(out, "ann") {
		t.Errorf("bob, not connected, was answered %s", out)
	}

	org := whoami(f.ts, f.token, "o", "whoami")
	if org["client_id"] != "trawl-cc" || org["echo"] != "[redacted]" {
		t.Errorf("the organization's server answered %v", org)
	}

	_, thread := f.ts.do(t, "GET", "/v1/agents/a/chats/c1", f.token, nil)
	f.model.mu.Lock()
	read := strings.Join(f.model.out, "\n")
	f.model.mu.Unlock()
	secrets := append(f.as.Secrets(), client.Spec().ClientSecret)
	if len(secrets) < 3+1+2+4 { // client secrets, the registered one, a code and verifier, two token pairs
		t.Fatalf("only %d secrets seen", len(secrets))
	}
	channels := map[string]string{"streams": strings.Join(f.streams, "\n"), "the model's reads": read,
		"thread": string(thread), "connections": string(list)}
	for i, r := range f.replicas {
		channels[fmt.Sprintf("logs of replica %d", i)] = r.logs.String()
		filepath.WalkDir(r.Deployment().Config().DataDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				channels[fmt.Sprintf("file %s of replica %d", filepath.Base(path), i)] = string(b)
			}
			return nil
		})
	}
	dump, _ := redisDump(t, rs.Client(t))
	channels["Redis"] = dump
	for name, text := range channels {
		h := leaktest.New([]byte(text))
		for _, s := range secrets {
			if found := h.Find(s); len(found) > 0 {
				t.Errorf("%s: a secret %s", name, found[0])
			}
		}
	}
}

// A degraded start: oidc-provider is down when the deployment starts,
// so notes' authorization server cannot be reached to register trawl's
// client — the deployment starts anyway: /readyz says degraded with
// notes unreachable under auth_servers, the agent's list_connections
// and connect_toolkit say why notes cannot be connected, and its
// connect link answers that sign-in cannot be reached, without
// spending the link. Once oidc-provider runs, the background setup
// registers the client: /readyz lists notes ok, the same link
// connects, and ann's call answers with her identity — no restart.
func TestOAuthMCPPerUserDegradedStart(t *testing.T) {
	as := oauthtest.Prepare(t, oauthtest.Options{AccessTTL: time.Minute, DCR: true})
	f := mcpOAuthDeployment(t, as, "", 1)
	st, body := f.ts.do(t, "GET", "/readyz", "", nil)
	var ready deploy.Readiness
	json.Unmarshal(body, &ready)
	if st != 200 || ready.Status != "degraded" || ready.AuthServers["notes"] != "unreachable" {
		t.Fatalf("readyz with the authorization server down: %d %s", st, body)
	}
	if !strings.Contains(f.ts.logs.String(), "mcp server's OAuth setup failed at start") {
		t.Errorf("the degraded start was not logged")
	}
	if out := f.call(t, f.ts, f.token, "a", "c1", "list_connections"); !strings.Contains(out, `"toolkit":"notes"`) ||
		!strings.Contains(out, "sign-in cannot be reached right now") || !strings.Contains(out, "trawl keeps trying") {
		t.Errorf("list_connections while notes' authorization server is down: %s", out)
	}
	f.callArgs(t, f.ts, f.token, "a", "c1", "connect_toolkit", `{"toolkit": "notes"}`)
	var got struct{ URL, Waiting string }
	if err := json.Unmarshal([]byte(f.model.lastOutput()), &got); err != nil || got.URL == "" || !strings.Contains(got.Waiting, "cannot be reached right now") {
		t.Fatalf("connect_toolkit while notes' authorization server is down: %s", f.model.lastOutput())
	}
	if st, page := get(t, newBrowser(t), got.URL); st != 503 || !strings.Contains(page, "cannot be reached right now") || !strings.Contains(page, "same link") {
		t.Errorf("the link while the authorization server is down: %d %s", st, page)
	}

	as.Run(t)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, body = f.ts.do(t, "GET", "/readyz", "", nil)
		ready = deploy.Readiness{}
		json.Unmarshal(body, &ready)
		if ready.AuthServers["notes"] == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz two minutes after the authorization server started: %d %s", st, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	client, ok := f.ts.conns.OAuthClient("notes")
	if !ok || client.Spec().ClientID == "" || client.Spec().ClientSecret == "" {
		t.Fatalf("no client registered for notes once its authorization server answers")
	}
	if out := f.call(t, f.ts, f.token, "a", "c1", "list_connections"); strings.Contains(out, "cannot be reached") {
		t.Errorf("list_connections once notes' authorization server answers: %s", out)
	}
	b := newBrowser(t)
	resp := openOAuthLink(t, b, got.URL) // the link the page refused, now unspent
	if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected for account") {
		t.Fatalf("after signing in: %s", page)
	}
	out := f.call(t, f.ts, f.token, "a", "c1", "whoami")
	if !strings.Contains(out, `\"sub\":\"ann\"`) && !strings.Contains(out, `"sub":"ann"`) {
		t.Errorf("ann's call once connected answered %s", out)
	}
	if strings.Contains(out, client.Spec().ClientSecret) || strings.Contains(f.ts.logs.String(), client.Spec().ClientSecret) {
		t.Errorf("the client secret registered in the background leaked")
	}
}

// revokeAs revokes token at the authorization server as client id (RFC
// 7009): the user withdrawing consent.
func revokeAs(t *testing.T, issuer, id, secret, token string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, issuer+"/token/revocation", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revocation: %s", resp.Status)
	}
}

// The authorization server forgets the client trawl registered there
// (oidc-provider restarted: its dynamic clients and grants were in
// memory): ann's next call finds her token refused, and the refresh
// answered invalid_client — trawl's own registration, not the
// operator's, so trawl registers a new client at once, the model is told
// her connection no longer works and to connect again, and the new link
// connects with the new client — opened on the other replica, which
// takes the client the first registered.
func TestOAuthMCPForgottenClientIsRegisteredAgain(t *testing.T) {
	rs := redistest.Start(t)
	f := newMCPOAuthFixture(t, time.Minute, "redis://"+rs.Addr+"/0", 2)
	connect := func(on *testServer) {
		t.Helper()
		b := newBrowser(t)
		link := f.link(t, f.token, "c1")
		if !strings.HasPrefix(link, f.ts.URL) {
			t.Fatalf("link %s is not on %s", link, f.ts.URL)
		}
		resp := openOAuthLink(t, b, on.URL+strings.TrimPrefix(link, f.ts.URL))
		if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected for account") {
			t.Fatalf("after signing in: %s", page)
		}
	}
	whoami := func() map[string]any {
		t.Helper()
		out := f.call(t, f.ts, f.token, "a", "c1", "whoami")
		var got struct{ Content []struct{ Text string } }
		var who map[string]any
		if json.Unmarshal([]byte(out), &got) != nil || len(got.Content) == 0 || json.Unmarshal([]byte(got.Content[0].Text), &who) != nil {
			if json.Unmarshal([]byte(out), &who) != nil {
				t.Fatalf("whoami answered %s", out)
			}
		}
		return who
	}
	connect(f.ts)
	client, _ := f.ts.conns.OAuthClient("notes")
	old := client.Spec().ClientID
	if who := whoami(); who["sub"] != "ann" || who["client_id"] != old {
		t.Fatalf("ann's call answered %v", who)
	}

	f.as.Restart(t)
	out := f.call(t, f.ts, f.token, "a", "c1", "whoami")
	if !strings.Contains(out, "no longer works") || !strings.Contains(out, "connect_toolkit") {
		t.Fatalf("after the authorization server forgot trawl's client, ann's call answered %s", out)
	}
	now := client.Spec().ClientID
	if now == "" || now == old {
		t.Fatalf("trawl's client after the refusal: %q (before: %q): not registered again", now, old)
	}
	if !strings.Contains(f.ts.logs.String(), "no longer accepted trawl's registered OAuth client") {
		t.Errorf("the operator's log does not say the client was registered again")
	}
	other, _ := f.replicas[1].conns.OAuthClient("notes")
	if other.Spec().ClientID != old {
		t.Fatalf("the other replica's client before its connect page: %s, want the old %s", other.Spec().ClientID, old)
	}
	connect(f.replicas[1])
	if other.Spec().ClientID != now {
		t.Errorf("the other replica's client after its connect page: %s, want the new %s", other.Spec().ClientID, now)
	}
	if who := whoami(); who["sub"] != "ann" || who["client_id"] != now {
		t.Fatalf("after reconnecting, ann's call answered %v (the new client is %s)", who, now)
	}
	// The new client's secret went to the scrubber with the old one's.
	if secret := client.Spec().ClientSecret; secret == "" || strings.Contains(f.ts.logs.String(), secret) {
		t.Errorf("the new client's secret is empty or in the logs")
	}
}
