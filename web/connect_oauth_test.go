package web

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools/leaktest"
	"github.com/trawl-dev/trawl/tools/oauthtest"
	"github.com/trawl-dev/trawl/web/deploy"
)

// oauthFixture is a deployment whose toolkit crm (a loopback API that
// accepts oidc-provider's tokens) each user connects with OAuth, ann's
// session, and the scripted model that drives the chat.
type oauthFixture struct {
	as    *oauthtest.Server
	api   *oauthtest.API
	ts    *testServer
	model *turnScript
	token string // ann's session

	mu      sync.Mutex
	streams []string // every chat stream, as the client read it
}

// turnScript is a model whose answers the test queues turn by turn: a
// tool call, then text once the tool answered.
type turnScript struct {
	mu    sync.Mutex
	queue [][]agent.ModelEvent
	out   []string // the tool outputs it read
}

func (m *turnScript) push(evs ...[]agent.ModelEvent) {
	m.mu.Lock()
	m.queue = append(m.queue, evs...)
	m.mu.Unlock()
}

func (m *turnScript) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	return func(yield func(agent.ModelEvent, error) bool) {
		m.mu.Lock()
		if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == agent.RoleTool {
			m.out = append(m.out, req.Messages[n-1].Content)
		}
		evs := []agent.ModelEvent{{Kind: agent.EventTextDelta, Text: "ok"}, {Kind: agent.EventFinish, FinishReason: "stop"}}
		if len(m.queue) > 0 {
			evs, m.queue = m.queue[0], m.queue[1:]
		}
		m.mu.Unlock()
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func (m *turnScript) lastOutput() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.out) == 0 {
		return ""
	}
	return m.out[len(m.out)-1]
}

const crmTool = "CRM_WHOAMI"

type oauthOptions struct {
	ttl      time.Duration
	redisURL string
	replicas int
	otlp     string // an OTLP receiver's URL: traces exported there, with content
	// asDown: the deployment starts before oidc-provider does (the test
	// calls f.as.Run); the agent also has crmorg, a toolkit whose one
	// organization token is a client-credentials one.
	asDown bool
	// tokenURL, when set, is the token URL the deployment is given in
	// place of the counting proxy's (a test's own proxy in front of it).
	tokenURL func(proxied string) string
}

const crmOrgTool = "CRMORG_WHOAMI"

// newOAuthFixture starts oidc-provider, the API and the deployment (or
// several replicas on one Redis).
func newOAuthFixture(t *testing.T, opt oauthOptions) (*oauthFixture, []*testServer) {
	t.Helper()
	if opt.replicas == 0 {
		opt.replicas = 1
	}
	var lns []net.Listener
	var redirects []string
	for range opt.replicas {
		ln, err := netListen()
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		redirects = append(redirects, "http://"+ln.Addr().String()+deploy.OAuthCallbackPath)
	}
	as := oauthtest.Prepare(t, oauthtest.Options{AccessTTL: opt.ttl, RedirectURIs: redirects})
	if !opt.asDown {
		as.Run(t)
	}
	api := as.StartAPI(t)
	dir := t.TempDir()
	tokenURL := as.TokenURL
	if opt.tokenURL != nil {
		tokenURL = opt.tokenURL(as.TokenURL)
	}
	manifest := map[string]any{"toolkit": "crm", "name": "CRM", "description": "The CRM", "base_url": api.URL,
		"auth": map[string]any{"type": "oauth2", "flow": "authorization_code", "issuer": as.Issuer, "token_url": tokenURL,
			"client_id": "trawl-web", "client_secret": "${TRAWL_TEST_WEB_SECRET}", "scopes": []string{"api:read"}},
		"tools": []any{map[string]any{"name": crmTool, "description": "Who the CRM token is for", "http": map[string]any{"method": "GET", "path": "/whoami"}}}}
	b, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(dir, "crm.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TRAWL_TEST_WEB_SECRET", as.WebSecret)
	kits, bound := "[crm.json]", "[{toolkit: crm}]"
	if opt.asDown {
		org := map[string]any{"toolkit": "crmorg", "name": "CRM (organization)", "description": "The CRM as the organization", "base_url": api.URL,
			"auth": map[string]any{"type": "oauth2", "flow": "client_credentials", "issuer": as.Issuer,
				"client_id": "trawl-cc", "client_secret": "${TRAWL_TEST_CC_SECRET}", "scopes": []string{"api:read"}},
			"tools": []any{map[string]any{"name": crmOrgTool, "description": "Who the organization's CRM token is for", "http": map[string]any{"method": "GET", "path": "/whoami"}}}}
		b, _ := json.Marshal(org)
		if err := os.WriteFile(filepath.Join(dir, "crmorg.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("TRAWL_TEST_CC_SECRET", as.CCSecret)
		kits, bound = "[crm.json, crmorg.json]", "[{toolkit: crm}, {toolkit: crmorg}]"
	}
	model := &turnScript{}
	var servers []*testServer
	for _, ln := range lns {
		text := fmt.Sprintf("listen: %s\npublic_url: http://%s\ntoolkits: %s\nagents:\n  - id: a\n    agentTools: %s\n", ln.Addr(), ln.Addr(), kits, bound)
		if opt.redisURL != "" {
			text += fmt.Sprintf("redis_url: %s\nadmin_key: %s\nsecret_key: %s\n", opt.redisURL, testAdminKey, testSecretKey)
		}
		if opt.otlp != "" {
			text += fmt.Sprintf("telemetry: {otlp_endpoint: %q, record_content: true}\n", opt.otlp)
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
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: model, Now: clock.Now,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler()}
		go hs.Serve(ln)
		t.Cleanup(func() { hs.Close(); srv.Close() })
		servers = append(servers, &testServer{Server: srv, URL: "http://" + ln.Addr().String(), logs: logs, clock: clock})
	}
	f := &oauthFixture{as: as, api: api, ts: servers[0], model: model}
	_, body := f.ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"})
	var sess struct{ Token string }
	json.Unmarshal(body, &sess)
	f.token = sess.Token
	return f, servers
}

// turn runs one chat turn of ann's on ts and returns the stream's text.
func (f *oauthFixture) turn(t *testing.T, ts *testServer, chat string, evs ...[]agent.ModelEvent) string {
	t.Helper()
	f.model.push(evs...)
	resp := ts.post(t, "/v1/agents/a/chat", f.token, chatBody(chat, fmt.Sprintf("m%d", time.Now().UnixNano()), "go"))
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	f.mu.Lock()
	f.streams = append(f.streams, string(b))
	f.mu.Unlock()
	return string(b)
}

// callCRM is a turn whose model calls the CRM tool; it returns what the
// tool answered.
func (f *oauthFixture) callCRM(t *testing.T, ts *testServer, chat string) string {
	t.Helper()
	f.turn(t, ts, chat, toolCall("t1", crmTool, `{}`))
	return f.model.lastOutput()
}

// connectLink is a turn whose model calls connect_toolkit; it returns
// the link.
func (f *oauthFixture) connectLink(t *testing.T, chat string) string {
	t.Helper()
	f.turn(t, f.ts, chat, toolCall("t1", "connect_toolkit", `{"toolkit": "crm"}`))
	var out struct{ URL string }
	if err := json.Unmarshal([]byte(f.model.lastOutput()), &out); err != nil || out.URL == "" {
		t.Fatalf("connect_toolkit answered %s", f.model.lastOutput())
	}
	return out.URL
}

var formAction = regexp.MustCompile(`<form[^>]*action="([^"]+)"`)

// signIn drives oidc-provider's login and consent pages in browser b,
// from the page resp it is on, and returns the last response's page.
func signIn(t *testing.T, b *http.Client, resp *http.Response, user string) (*http.Response, string) {
	t.Helper()
	page := readPage(t, resp)
	for range 4 {
		m := formAction.FindStringSubmatch(page)
		if m == nil || !strings.Contains(resp.Request.URL.Path, "/interaction/") {
			return resp, page
		}
		action, _ := resp.Request.URL.Parse(m[1])
		form := url.Values{}
		if strings.Contains(page, `name="login"`) {
			form.Set("prompt", "login")
			form.Set("login", user)
			form.Set("password", "any")
		} else {
			form.Set("prompt", "consent")
		}
		var err error
		resp, err = b.PostForm(action.String(), form)
		if err != nil {
			t.Fatal(err)
		}
		page = readPage(t, resp)
	}
	return resp, page
}

func readPage(t *testing.T, resp *http.Response) string {
	t.Helper()
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openOAuthLink opens an OAuth toolkit's connect link in browser b:
// trawl's page, which must name the account it connects (no redirect to
// the provider yet), then its button — a same-origin post, whose
// redirect to the provider b follows as its CheckRedirect says. It
// returns the post's response.
func openOAuthLink(t *testing.T, b *http.Client, link string) *http.Response {
	t.Helper()
	page := *b // the same cookie jar; redirects within trawl followed
	page.CheckRedirect = nil
	resp, err := page.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body := readPage(t, resp)
	m := csrfField.FindStringSubmatch(body)
	if resp.StatusCode != 200 || m == nil || !strings.Contains(body, "for account <code>") || !strings.Contains(body, "Continue to sign in") {
		t.Fatalf("the connect page: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(resp.Request.URL.RawQuery, "code=") {
		t.Errorf("the page stays at the code's URL %s", resp.Request.URL)
	}
	req, _ := http.NewRequest("POST", resp.Request.URL.String(), strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", resp.Request.URL.Scheme+"://"+resp.Request.URL.Host)
	if resp, err = b.Do(req); err != nil {
		t.Fatal(err)
	}
	return resp
}

// connect opens link in a new browser, confirms trawl's page and signs
// in as ann.
func (f *oauthFixture) connect(t *testing.T, link string) string {
	t.Helper()
	b := newBrowser(t)
	resp := openOAuthLink(t, b, link)
	_, page := signIn(t, b, resp, "ann")
	if !strings.Contains(page, "is connected for account") {
		t.Fatalf("after signing in: %s", page)
	}
	return page
}

// The whole authorization-code flow: the model's call is refused (not
// connected), connect_toolkit gives a link, the provider's login and
// consent pages are filled, the callback lands, and the call then
// succeeds with ann's token; the connection is listed with its scopes and
// expiry, never a token; the tokens are in no stream, thread or log.
func TestOAuthConnectFlow(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{})
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "connect_toolkit") {
		t.Fatalf("before connecting, the call answered %s", out)
	}
	link := f.connectLink(t, "c1")
	f.connect(t, link)
	out := f.callCRM(t, f.ts, "c1")
	var who struct{ Sub, ClientID string }
	if json.Unmarshal([]byte(out), &who); who.Sub != "ann" || who.ClientID != "trawl-web" {
		// The tool output may wrap the body.
		if !strings.Contains(out, `ann`) || !strings.Contains(out, "trawl-web") {
			t.Fatalf("after connecting, the call answered %s", out)
		}
	}
	st, body := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	var list struct {
		Connections []deploy.ConnectionInfo
	}
	json.Unmarshal(body, &list)
	if st != 200 || len(list.Connections) != 1 || list.Connections[0].Kind != "oauth2" || list.Connections[0].ExpiresAt == nil ||
		fmt.Sprint(list.Connections[0].Scopes) != "[api:read]" || list.Connections[0].Status != "connected" {
		t.Fatalf("connections: %d %s", st, body)
	}
	accepted, _ := f.api.Tokens()
	if len(accepted) == 0 {
		t.Fatal("the API accepted no token")
	}
	_, thread := f.ts.do(t, "GET", "/v1/agents/a/chats/c1", f.token, nil)
	for what, text := range map[string]string{"connections": string(body), "thread": string(thread), "logs": f.ts.logs.String()} {
		for _, tok := range append(accepted, f.as.WebSecret) {
			if strings.Contains(text, tok) {
				t.Errorf("the %s hold a secret", what)
			}
		}
	}
}

// Refusals: a wrong state, a replayed callback, a link opened in one
// browser and finished in another, a redirect URI the client is not
// registered with, an expired link, and the user declining access —
// which the model then reads in words.
func TestOAuthConnectRefusals(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{})
	cb := f.ts.URL + deploy.OAuthCallbackPath
	if st, page := get(t, newBrowser(t), cb+"?state=bogus&code=x"); st != 400 || !strings.Contains(page, "was not started in this browser") {
		t.Errorf("wrong state: %d %s", st, page)
	}

	// A callback replayed (the same state and code, the same browser).
	link := f.connectLink(t, "c1")
	b := newBrowser(t)
	var landed string
	b.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Path == deploy.OAuthCallbackPath {
			landed = req.URL.String()
		}
		return nil
	}
	resp := openOAuthLink(t, b, link)
	if _, page := signIn(t, b, resp, "ann"); !strings.Contains(page, "is connected") || landed == "" {
		t.Fatalf("first connect: %s", page)
	}
	if st, page := get(t, b, landed); st != 400 || !strings.Contains(page, "already used") {
		t.Errorf("replayed callback: %d %s", st, page)
	}
	f.ts.do(t, "DELETE", "/v1/connections/crm", f.token, nil)

	// Opened in one browser, finished in another: the provider's page is
	// reached, but the callback lacks the first browser's cookie.
	link = f.connectLink(t, "c2")
	b1 := newBrowser(t)
	b1.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.URL.Port() != strings.TrimPrefix(f.ts.URL[strings.LastIndex(f.ts.URL, ":"):], ":") {
			return http.ErrUseLastResponse // stop at the provider
		}
		return nil
	}
	resp = openOAuthLink(t, b1, link)
	resp.Body.Close()
	authorize := resp.Header.Get("Location")
	b2 := newBrowser(t)
	// The second browser holds a cookie of the request's name, not its
	// value (one it forged, or a stale one).
	au, _ := url.Parse(authorize)
	cbURL, _ := url.Parse(cb)
	b2.Jar.SetCookies(cbURL, []*http.Cookie{{Name: oauthCookieName(au.Query().Get("state")), Value: strings.Repeat("0", 64), Path: deploy.OAuthCallbackPath}})
	resp, err := b2.Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	if _, page := signIn(t, b2, resp, "mallory"); !strings.Contains(page, "was not started in this browser") {
		t.Errorf("second browser: %s", page)
	}
	if st, body := f.ts.do(t, "GET", "/v1/connections", f.token, nil); !strings.Contains(string(body), `"connections":[]`) {
		t.Errorf("after the second browser: %d %s", st, body)
	}
	// The callback without the cookie spent nothing: the first browser
	// still finishes the same authorization request.
	b1.CheckRedirect = nil
	if resp, err = b1.Get(authorize); err != nil {
		t.Fatal(err)
	}
	if _, page := signIn(t, b1, resp, "ann"); !strings.Contains(page, "is connected for account <code>ann</code>") {
		t.Errorf("the first browser, after the second's callback was refused: %s", page)
	}
	f.ts.do(t, "DELETE", "/v1/connections/crm", f.token, nil)

	// A redirect URI the client is not registered with: the provider
	// refuses and nothing reaches trawl.
	u, _ := url.Parse(authorize)
	q := u.Query()
	q.Set("redirect_uri", "http://127.0.0.1:1/elsewhere")
	u.RawQuery = q.Encode()
	resp, err = newBrowser(t).Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	if page := readPage(t, resp); resp.Request.URL.Port() == "1" || !strings.Contains(page, "redirect_uri") {
		t.Errorf("wrong redirect URI: %d %s", resp.StatusCode, page)
	}

	// An expired link.
	link = f.connectLink(t, "c3")
	f.ts.clock.set(func() time.Time { return time.Now().Add(deploy.ConnectCodeTTL + time.Minute) })
	if st, page := get(t, newBrowser(t), link); st != 400 || !strings.Contains(page, "expired") {
		t.Errorf("expired link: %d %s", st, page)
	}
	f.ts.clock.set(nil)

	// The user declines at the provider: the page and then the model say so.
	link = f.connectLink(t, "c4")
	b = newBrowser(t)
	resp = openOAuthLink(t, b, link)
	resp.Body.Close()
	uid := resp.Request.URL.Path // /interaction/<uid>
	if st, page := get(t, b, resp.Request.URL.Scheme+"://"+resp.Request.URL.Host+uid+"/abort"); st != 400 || !strings.Contains(page, "access was denied") {
		t.Errorf("declined: %d %s", st, page)
	}
	if out := f.callCRM(t, f.ts, "c4"); !strings.Contains(out, "access was denied") || !strings.Contains(out, "connect_toolkit") {
		t.Errorf("after declining, the model read %s", out)
	}
}

// Refresh: before expiry (rotated, the new refresh token kept); once on a
// 401 when the clocks disagree; a revoked grant makes the connection
// broken and the model is told to reconnect, with a fresh link that
// works; disconnect revokes at the provider.
func TestOAuthRefresh(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{ttl: 4 * time.Second})
	f.connect(t, f.connectLink(t, "c1"))
	f.callCRM(t, f.ts, "c1")
	n0 := f.as.TokenRequests.Load() // the code exchange
	accepted, _ := f.api.Tokens()
	first := accepted[len(accepted)-1]

	time.Sleep(3200 * time.Millisecond) // within a quarter of the lifetime of the end
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("after the refresh before expiry: %s", out)
	}
	accepted, refused := f.api.Tokens()
	if f.as.TokenRequests.Load() != n0+1 || accepted[len(accepted)-1] == first || len(refused) != 0 {
		t.Fatalf("refresh before expiry: %d token requests, %d refused", f.as.TokenRequests.Load()-n0, len(refused))
	}
	_, body := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	if !strings.Contains(string(body), `"last_refresh"`) {
		t.Errorf("connections after a refresh: %s", body)
	}

	// The deployment's clock runs an hour behind: it holds the token
	// valid after the provider let it expire; the 401 refreshes once.
	f.ts.clock.set(func() time.Time { return time.Now().Add(-time.Hour) })
	time.Sleep(4200 * time.Millisecond)
	n1 := f.as.TokenRequests.Load()
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("after the 401: %s", out)
	}
	if _, refused = f.api.Tokens(); f.as.TokenRequests.Load() != n1+1 || len(refused) != 1 {
		t.Errorf("on the 401: %d token requests, %d refused", f.as.TokenRequests.Load()-n1, len(refused))
	}
	f.ts.clock.set(nil)

	// Consent withdrawn at the provider (the grant revoked): the next
	// refresh fails, the connection is broken, the model is told to
	// reconnect, and connect_toolkit gives a fresh link that works.
	accepted, _ = f.api.Tokens()
	if err := f.as.Revoke(context.Background(), accepted[len(accepted)-1]); err != nil {
		t.Fatal(err)
	}
	out := f.callCRM(t, f.ts, "c1")
	if !strings.Contains(out, "no longer works") || !strings.Contains(out, "connect_toolkit") || !strings.Contains(out, "revoked") {
		t.Fatalf("after the revocation, the model read %s", out)
	}
	_, body = f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	if !strings.Contains(string(body), `"status":"broken"`) {
		t.Errorf("connections after the revocation: %s", body)
	}
	f.connect(t, f.connectLink(t, "c1"))
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("after reconnecting: %s", out)
	}

	// Disconnect revokes at the provider and forgets the tokens.
	accepted, _ = f.api.Tokens()
	last := accepted[len(accepted)-1]
	st, body := f.ts.do(t, "DELETE", "/v1/connections/crm", f.token, nil)
	if st != 200 || !strings.Contains(string(body), `"revoked":true`) {
		t.Fatalf("disconnect: %d %s", st, body)
	}
	if info, err := f.as.Introspect(context.Background(), last); err != nil || info.Active {
		t.Errorf("after disconnect the provider still accepts the token: %+v %v", info, err)
	}
	if st, _ := f.ts.do(t, "DELETE", "/v1/connections/crm", f.token, nil); st != 404 {
		t.Errorf("second disconnect: %d", st)
	}
	if st, _ := f.ts.do(t, "DELETE", "/v1/connections/crm", "", nil); st != 400 {
		t.Errorf("admin without user_id: %d", st)
	}
	if st, _ := f.ts.do(t, "GET", "/v1/connections?user_id=ann", "", nil); st != 200 {
		t.Errorf("admin with user_id: %d", st)
	}
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "not connected") {
		t.Errorf("after disconnect the call answered %s", out)
	}
}

// Two replicas on one Redis whose token is near its expiry, asked for it
// at once (four callers each): one refresh at the provider, and every
// caller gets the same new token — a second refresh with the rotated-out
// refresh token would have made oidc-provider revoke the grant.
func TestOAuthRefreshAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	f, replicas := newOAuthFixture(t, oauthOptions{ttl: 4 * time.Second, redisURL: "redis://" + rs.Addr + "/0", replicas: 2})
	f.connect(t, f.connectLink(t, "c1"))
	if out := f.callCRM(t, replicas[1], "c2"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("the other replica's call: %s", out)
	}
	time.Sleep(3200 * time.Millisecond)
	n0 := f.as.TokenRequests.Load()
	var wg sync.WaitGroup
	toks := make([]string, 8)
	errs := make([]error, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], _, errs[i] = replicas[i%2].Deployment().Connections().AccessToken(context.Background(), "ann", "crm")
		}()
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] == "" || toks[i] != toks[0] {
			t.Fatalf("caller %d: %q %v (first got %q)", i, toks[i], errs[i], toks[0])
		}
	}
	if n := f.as.TokenRequests.Load() - n0; n != 1 {
		t.Errorf("%d refreshes at the provider; want 1", n)
	}
	if info, err := f.as.Introspect(context.Background(), toks[0]); err != nil || !info.Active {
		t.Errorf("the refreshed token: %+v %v", info, err)
	}
	if out := f.callCRM(t, replicas[1], "c2"); !strings.Contains(out, "trawl-web") {
		t.Errorf("after the refresh: %s", out)
	}
}

// The credential hunter of the secrets work (leaktest, which decodes
// rather than spells) finds none of the OAuth secrets — the client
// secret, every access and refresh token issued, every authorization
// code and PKCE verifier — in any channel: the chat streams, what the
// model read (the API echoes the token it is sent and the refresh token
// issued with it, each raw, base64, base64url at an offset, percent- and
// JSON-escaped), the threads, the connections listing, the activity log,
// the traces, the logs, the files under data_dir and every Redis value;
// through a connect, a call, a refresh, a refresh on a 401, a
// revocation, a callback whose error_description repeats the client
// secret and the state, and a disconnect, on two replicas.
func TestOAuthSecretsStayHome(t *testing.T) {
	rs := redistest.Start(t)
	traces := newOTLPReceiver(t)
	f, replicas := newOAuthFixture(t, oauthOptions{ttl: 4 * time.Second, redisURL: "redis://" + rs.Addr + "/0", replicas: 2, otlp: traces.URL})
	f.callCRM(t, f.ts, "c1")
	f.connect(t, f.connectLink(t, "c1"))
	f.callCRM(t, replicas[1], "c1")
	time.Sleep(3200 * time.Millisecond)
	f.callCRM(t, f.ts, "c1") // refreshed before expiry
	accepted, _ := f.api.Tokens()
	f.api.Reject(accepted[len(accepted)-1])
	f.callCRM(t, replicas[1], "c1") // refreshed on the 401
	accepted, _ = f.api.Tokens()
	f.as.Revoke(context.Background(), accepted[len(accepted)-1])
	f.callCRM(t, replicas[1], "c1") // refused: broken
	// A provider whose error page repeats what it knows: the client
	// secret and the request's state, in several spellings.
	b, state := f.stopAtProvider(t, f.connectLink(t, "c1"))
	said := f.as.WebSecret + " " + base64.StdEncoding.EncodeToString([]byte(f.as.WebSecret)) + " " + url.QueryEscape(state) + " " + state
	get(t, b, f.ts.URL+deploy.OAuthCallbackPath+"?"+url.Values{"state": {state}, "iss": {f.as.Issuer}, "error": {"server_error"}, "error_description": {said}}.Encode())
	f.callCRM(t, f.ts, "c1") // the model reads the failure
	f.connect(t, f.connectLink(t, "c1"))
	f.callCRM(t, f.ts, "c1")
	_, list := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	_, activity := f.ts.do(t, "GET", "/v1/activity?limit=1000", "", nil)

	secrets := f.as.Secrets()
	if len(secrets) < 3+2*2+4 { // client secrets, two codes and verifiers, four tokens at least
		t.Fatalf("only %d secrets seen at the token endpoint", len(secrets))
	}
	f.model.mu.Lock()
	read := strings.Join(f.model.out, "\n")
	f.model.mu.Unlock()
	if !strings.Contains(read, `"echo":"[redacted]"`) {
		t.Errorf("the API's echo of the token did not reach the model masked: %.300s", read)
	}
	if !strings.Contains(read, `"refresh_echo":"[redacted]"`) {
		t.Errorf("the API's echo of the refresh token did not reach the model masked: %.300s", read)
	}
	// Each encoded echo reaches the model with the secret's part masked
	// (a base64 core inside a longer run, its padding left).
	masked := `"[^"]*\[redacted\][^"]*"`
	for _, field := range []string{`"echo_forms":\[` + masked + `,` + masked + `,` + masked + `\]`, `"refresh_forms":\[` + masked + `,` + masked + `,` + masked + `\]`,
		`"echo_json":"\[redacted\]"`, `"refresh_json":"\[redacted\]"`} {
		if !regexp.MustCompile(field).MatchString(read) {
			t.Errorf("the API's encoded echoes did not reach the model masked (no %s): %.600s", field, read)
		}
	}
	if !strings.Contains(read, "the provider said") || !strings.Contains(read, "[redacted]") {
		t.Errorf("the callback's error did not reach the model: %.300s", read)
	}
	_, thread := f.ts.do(t, "GET", "/v1/agents/a/chats/c1", f.token, nil)
	f.ts.do(t, "DELETE", "/v1/connections/crm", f.token, nil)
	for _, r := range replicas {
		r.Close() // flushes the spans
	}
	traces.mu.Lock()
	var spans []string
	for _, b := range traces.raw {
		spans = append(spans, string(b))
	}
	traces.mu.Unlock()
	if len(spans) == 0 {
		t.Error("no trace was exported")
	}
	channels := map[string]string{"streams": strings.Join(f.streams, "\n"), "the model's reads": read,
		"thread": string(thread), "connections": string(list), "activity log": string(activity), "traces": strings.Join(spans, "\n")}
	if !strings.Contains(string(activity), "/whoami") {
		t.Errorf("the activity log holds no CRM call: %.300s", activity)
	}
	for i, r := range replicas {
		channels[fmt.Sprintf("logs of replica %d", i)] = r.logs.String()
		filepath.WalkDir(r.Deployment().Config().DataDir, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				b, _ := os.ReadFile(path)
				channels[fmt.Sprintf("file %s of replica %d", filepath.Base(path), i)] = string(b)
			}
			return nil
		})
	}
	c := rs.Client(t)
	dump, keys := redisDump(t, c)
	if keys < 5 {
		t.Errorf("only %d keys in Redis", keys)
	}
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

// The authorization-code flow in headless Chromium: the link the model
// got opens, oidc-provider's own login and consent pages are filled and
// submitted, the callback lands on trawl's page, and the model's call
// then succeeds; going back to the callback's URL (a replayed code) is
// refused and stores nothing new.
func TestOAuthConnectInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	bin := chromium(t)
	f, _ := newOAuthFixture(t, oauthOptions{})
	link := f.connectLink(t, "c1")
	bctx := browserContext(t, bin)
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	do("open the link: trawl's page", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`button[type=submit]`)))
	if got := eval(`document.body.innerText`); !strings.Contains(got, "for account ann") || !strings.Contains(got, "If that is not your account, close this page") {
		t.Fatalf("the link's page says %q", got)
	}
	if u := eval(`location.origin + location.search`); u != f.ts.URL {
		t.Errorf("the link's page is at %s (the code stays out of the history); want %s", u, f.ts.URL)
	}
	do("continue to the provider's login", chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`input[name=login]`)))
	if u := eval(`location.origin`); u != f.as.Issuer {
		t.Errorf("the link opened %s; want the provider %s", u, f.as.Issuer)
	}
	do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=login]`), "ann"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "any password"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitReady(chromedp.CSS(`input[name=prompt][value=consent]`)))
	do("consent", chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`p.ok, p.err`)))
	if got := eval(`document.body.innerText`); !strings.Contains(got, "CRM is connected for account ann") {
		t.Fatalf("after consent the page says %q", got)
	}
	landed := eval(`location.href`)
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") || !strings.Contains(out, `ann`) {
		t.Fatalf("after connecting in the browser, the call answered %s", out)
	}
	n := f.as.TokenRequests.Load()
	do("replay the callback", chromedp.Navigate(landed), chromedp.WaitVisible(chromedp.CSS(`p.err`)))
	if got := eval(`document.body.innerText`); !strings.Contains(got, "already used") {
		t.Errorf("the replayed callback says %q", got)
	}
	if f.as.TokenRequests.Load() != n {
		t.Error("the replayed code was exchanged again")
	}
}

// stopAtProvider opens link in a new browser that stops where trawl
// sends it to the provider: the browser (holding trawl's cookie for the
// callback) and the authorization request's state.
func (f *oauthFixture) stopAtProvider(t *testing.T, link string) (*http.Client, string) {
	t.Helper()
	b := newBrowser(t)
	b.CheckRedirect = func(req *http.Request, via []*http.Request) error { return http.ErrUseLastResponse }
	resp := openOAuthLink(t, b, link)
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if resp.StatusCode != http.StatusSeeOther || err != nil || loc.Query().Get("state") == "" {
		t.Fatalf("opening the link: %d, to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	// The request's own cookie, sent only to the callback, for as long
	// as the request lives.
	var bound bool
	for _, ck := range resp.Cookies() {
		if ck.Name == oauthCookieName(loc.Query().Get("state")) && regexp.MustCompile(`^trawl_oauth_[0-9a-f]{8}$`).MatchString(ck.Name) {
			bound = ck.Path == deploy.OAuthCallbackPath && ck.HttpOnly && ck.MaxAge > 0 && ck.MaxAge <= int(deploy.ConnectAttemptTTL/time.Second)
		}
	}
	if !bound {
		t.Errorf("the authorization request's cookie: %v", resp.Header.Values("Set-Cookie"))
	}
	b.CheckRedirect = nil
	return b, loc.Query().Get("state")
}

// toolCalls is one model step that calls tool n times at once.
func toolCalls(n int, tool, args string) []agent.ModelEvent {
	var evs []agent.ModelEvent
	for i := range n {
		evs = append(evs, agent.ModelEvent{Kind: agent.EventToolCallStart, ToolCallID: fmt.Sprintf("p%d", i), ToolName: tool},
			agent.ModelEvent{Kind: agent.EventToolCallDelta, ArgsDelta: args})
	}
	return append(evs, agent.ModelEvent{Kind: agent.EventFinish, FinishReason: "tool_calls"})
}

// Refresh on a 401 through the chat, against oidc-provider: the API
// stops accepting an access token the provider still calls active (it
// revoked it early); three calls of one step that get its 401 at once
// make one refresh (single flight) and each is retried once, with the
// new token; the provider rotated the refresh token and trawl sealed the
// new one (the old one is spent at the provider; a second 401 refreshes
// with the new one, which a reused old one would have made oidc-provider
// revoke the whole grant for). A 401 that does not say the token is
// invalid (insufficient_scope) is not refreshed; a 401 that still comes
// after the refresh is answered, not looped.
func TestOAuthRefreshOn401(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{ttl: 10 * time.Minute})
	f.connect(t, f.connectLink(t, "c1"))
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("after connecting: %s", out)
	}
	accepted, _ := f.api.Tokens()
	first := accepted[len(accepted)-1]
	oldRefresh := f.as.RefreshOf(first)
	if oldRefresh == "" {
		t.Fatal("no refresh token was issued with the first access token")
	}
	n0 := f.as.TokenRequests.Load()

	f.api.Reject(first)
	f.turn(t, f.ts, "c1", toolCalls(3, crmTool, `{}`))
	accepted, refused := f.api.Tokens()
	if n := f.as.TokenRequests.Load() - n0; n != 1 {
		t.Errorf("three calls refused at once made %d refreshes; want 1", n)
	}
	// Each call sent the first token (refused) unless another had
	// replaced it already: the calls of a step run at once, but not in
	// lockstep.
	if len(refused) == 0 || len(refused) > 3 || slices.ContainsFunc(refused, func(tok string) bool { return tok != first }) {
		t.Errorf("the API refused %d requests; want 1 to 3, all with the first token", len(refused))
	}
	second := accepted[len(accepted)-1]
	if len(accepted) != 4 || second == first || accepted[1] != second || accepted[2] != second {
		t.Fatalf("after the 401s the API accepted %d requests (want 1 + 3 with one new token)", len(accepted))
	}
	if info, err := f.as.Introspect(context.Background(), oldRefresh); err != nil || info.Active {
		t.Errorf("the rotated-out refresh token is still active: %+v %v", info, err)
	}
	newRefresh := f.as.RefreshOf(second)
	if info, err := f.as.Introspect(context.Background(), newRefresh); newRefresh == oldRefresh || err != nil || !info.Active {
		t.Errorf("the rotated refresh token: %+v %v", info, err)
	}
	_, thread := f.ts.do(t, "GET", "/v1/agents/a/chats/c1", f.token, nil)
	if c := strings.Count(string(thread), `trawl-web`); c < 3 {
		t.Errorf("the thread holds %d successful answers of the three calls: %.400s", c, thread)
	}

	// The sealed refresh token is the rotated one: refreshing again works.
	f.api.Reject(second)
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Fatalf("the second refresh on a 401: %s", out)
	}
	if n := f.as.TokenRequests.Load() - n0; n != 2 {
		t.Errorf("%d refreshes after the second 401; want 2", n)
	}
	_, body := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	if !strings.Contains(string(body), `"status":"connected"`) || !strings.Contains(string(body), `"last_refresh"`) {
		t.Errorf("connections after two refreshes: %s", body)
	}

	// insufficient_scope: the token is fine, the scope is not — no refresh.
	n1 := f.as.TokenRequests.Load()
	accepted, refused = f.api.Tokens()
	before := len(accepted) + len(refused)
	f.api.Challenge(`Bearer error="insufficient_scope", scope="api:write", error_description="needs api:write"`, 1)
	out := f.callCRM(t, f.ts, "c1")
	if !strings.Contains(out, "401") || f.as.TokenRequests.Load() != n1 {
		t.Errorf("insufficient_scope: %d token requests, the model read %s", f.as.TokenRequests.Load()-n1, out)
	}
	accepted, refused = f.api.Tokens()
	if n := len(accepted) + len(refused) - before; n != 1 {
		t.Errorf("insufficient_scope: the API saw %d requests; want 1 (no retry)", n)
	}

	// Still 401 after the refresh: one refresh, one retry, then the 401
	// is the answer.
	before = len(accepted) + len(refused)
	f.api.Challenge(`Bearer error="invalid_token"`, 2)
	out = f.callCRM(t, f.ts, "c1")
	if !strings.Contains(out, "401") || f.as.TokenRequests.Load() != n1+1 {
		t.Errorf("a 401 after the refresh: %d token requests, the model read %s", f.as.TokenRequests.Load()-n1, out)
	}
	accepted, refused = f.api.Tokens()
	if n := len(accepted) + len(refused) - before; n != 2 {
		t.Errorf("a 401 after the refresh: the API saw %d requests; want 2 (the call and one retry)", n)
	}
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Errorf("after the looped 401 the connection does not work: %s", out)
	}

	// A 401 when the token endpoint does not answer: provider_unavailable
	// in words, the connection kept; once it answers, the call works.
	accepted, _ = f.api.Tokens()
	f.api.Reject(accepted[len(accepted)-1])
	f.as.TokenEndpointDown(true)
	out = f.callCRM(t, f.ts, "c1")
	if !strings.Contains(out, "provider_unavailable") || !strings.Contains(out, "could not be refreshed") || !strings.Contains(out, "do not ask them to reconnect") {
		t.Errorf("a refresh the token endpoint did not answer: %s", out)
	}
	if _, body := f.ts.do(t, "GET", "/v1/connections", f.token, nil); !strings.Contains(string(body), `"status":"connected"`) {
		t.Errorf("connections after a refresh that got no answer: %s", body)
	}
	f.as.TokenEndpointDown(false)
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Errorf("once the token endpoint answers again: %s", out)
	}
}

// The provider's error on the callback, crafted: what its code means
// comes back in words, on the page and to the model; its
// error_description is repeated only scrubbed (the client secret, the
// state, in every spelling), cut short, on one line and escaped (no
// markup reaches the page). Opening an OAuth toolkit's link and confirming
// its page leaves only the authorization request in the grants store (the
// page's attempt is spent).
func TestOAuthCallbackError(t *testing.T) {
	rs := redistest.Start(t)
	f, _ := newOAuthFixture(t, oauthOptions{redisURL: "redis://" + rs.Addr + "/0"})
	c := rs.Client(t)
	ctx := context.Background()
	count := func(kind string) int {
		t.Helper()
		keys, err := c.Keys(ctx, "*"+kind+":*").Result()
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	link := f.connectLink(t, "c1")
	if count("code") != 1 {
		t.Fatalf("%d codes after minting a link", count("code"))
	}
	b, state := f.stopAtProvider(t, link)
	if a, o, cd := count("attempt"), count("oauth"), count("code"); a != 0 || o != 1 || cd != 0 {
		t.Errorf("after opening an OAuth link: %d token-form attempts, %d authorization requests, %d codes; want 0, 1, 0", a, o, cd)
	}

	hostile := "<script>alert(1)</script><b>wrong account</b>: use your work account\n\x00" + f.as.WebSecret + " " +
		base64.StdEncoding.EncodeToString([]byte(f.as.WebSecret)) + " " + url.QueryEscape(state) + " " + strings.Repeat("very long ", 200)
	st, page := get(t, b, f.ts.URL+deploy.OAuthCallbackPath+"?"+url.Values{"state": {state}, "iss": {f.as.Issuer}, "error": {"account_selection_required"},
		"error_description": {hostile}}.Encode())
	if st != 400 || !strings.Contains(page, "choose which account") || !strings.Contains(page, "wrong account") {
		t.Errorf("the callback's page: %d %s", st, page)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, "<b>") || !strings.Contains(page, "&lt;script&gt;") {
		t.Errorf("the provider's markup reached the page: %s", page)
	}
	if strings.Count(page, "very long") > 30 {
		t.Errorf("the provider's words are not cut short: %d repeats", strings.Count(page, "very long"))
	}
	out := f.callCRM(t, f.ts, "c1")
	if !strings.Contains(out, "choose which account") || !strings.Contains(out, "wrong account") || !strings.Contains(out, "connect_toolkit") {
		t.Errorf("the model read %s", out)
	}
	_, list := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	for name, text := range map[string]string{"page": page, "model": out, "connections": string(list), "logs": f.ts.logs.String()} {
		h := leaktest.New([]byte(text))
		for _, s := range []string{f.as.WebSecret, state} {
			if found := h.Find(s); len(found) > 0 {
				t.Errorf("the %s: a secret %s", name, found[0])
			}
		}
	}
	if !strings.Contains(page, "[redacted]") {
		t.Errorf("nothing was masked on the page: %s", page)
	}

	// An error code that is not a word is not repeated.
	b, state = f.stopAtProvider(t, f.connectLink(t, "c2"))
	if _, page := get(t, b, f.ts.URL+deploy.OAuthCallbackPath+"?"+url.Values{"state": {state}, "iss": {f.as.Issuer}, "error": {"<img src=x onerror=alert(1)>"}}.Encode()); strings.Contains(page, "img src") ||
		!strings.Contains(page, "does not know") {
		t.Errorf("a code that is markup: %s", page)
	}
}

// Declining consent at oidc-provider in headless Chromium: the user
// signs in, then cancels on the consent page; trawl's callback page says
// access was denied, with the provider's own words, and the model's next
// call reads the same and the way to try again.
func TestOAuthDeclineInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	bin := chromium(t)
	f, _ := newOAuthFixture(t, oauthOptions{})
	link := f.connectLink(t, "c1")
	bctx := browserContext(t, bin)
	do := func(step string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, actions...); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	do("open the link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`button[type=submit]`)))
	do("continue to the provider's login", chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`input[name=login]`)))
	do("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=login]`), "ann"),
		chromedp.SendKeys(chromedp.CSS(`input[name=password]`), "any password"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitReady(chromedp.CSS(`input[name=prompt][value=consent]`)))
	do("cancel on the consent page", chromedp.Click(chromedp.CSS(`.login-help a`)), chromedp.WaitVisible(chromedp.CSS(`p.ok, p.err`)))
	got, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "Nothing was connected: access was denied") || !strings.Contains(got, "End-User aborted interaction") {
		t.Fatalf("after declining the page says %q", got)
	}
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "access was denied") || !strings.Contains(out, "connect_toolkit") {
		t.Errorf("after declining, the model read %s", out)
	}
	// The way back: a fresh link connects.
	f.connect(t, f.connectLink(t, "c1"))
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") {
		t.Errorf("after connecting: %s", out)
	}
}

// A degraded start: oidc-provider is down when the deployment starts —
// it starts anyway, /readyz says degraded with each OAuth toolkit's
// authorization server unreachable; the organization toolkit's call is
// refused with provider_unavailable in words (not a generic upstream
// error), and a connect link answers that the sign-in cannot be reached
// without spending the link. Once oidc-provider starts, the background
// discovery finds it: /readyz is ready, the same link connects, and both
// toolkits' calls succeed — no restart.
func TestOAuthDegradedStart(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{asDown: true})
	st, body := f.ts.do(t, "GET", "/readyz", "", nil)
	var ready deploy.Readiness
	json.Unmarshal(body, &ready)
	if st != 200 || ready.Status != "degraded" || ready.AuthServers["crm"] != "unreachable" || ready.AuthServers["crmorg"] != "unreachable" {
		t.Fatalf("readyz with the authorization server down: %d %s", st, body)
	}
	if !strings.Contains(f.ts.logs.String(), "oauth authorization server unreachable at start") {
		t.Errorf("the degraded start was not logged")
	}
	f.turn(t, f.ts, "c1", toolCall("t1", crmOrgTool, `{}`))
	if out := f.model.lastOutput(); !strings.Contains(out, "provider_unavailable") || !strings.Contains(out, "cannot be used right now") ||
		!strings.Contains(out, "trawl keeps trying") || strings.Contains(out, "upstream") {
		t.Errorf("the organization toolkit's call while its authorization server is down: %s", out)
	}
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "connect_toolkit") {
		t.Errorf("the user toolkit's call before connecting: %s", out)
	}
	link := f.connectLink(t, "c1")
	if st, page := get(t, newBrowser(t), link); st != 503 || !strings.Contains(page, "cannot be reached right now") || !strings.Contains(page, "same link") {
		t.Errorf("the link while the authorization server is down: %d %s", st, page)
	}

	f.as.Run(t)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		st, body = f.ts.do(t, "GET", "/readyz", "", nil)
		json.Unmarshal(body, &ready)
		if ready.Status == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz two minutes after the authorization server started: %d %s", st, body)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if ready.AuthServers["crm"] != "ok" || ready.AuthServers["crmorg"] != "ok" {
		t.Errorf("readyz once it answers: %s", body)
	}
	f.turn(t, f.ts, "c1", toolCall("t1", crmOrgTool, `{}`))
	if out := f.model.lastOutput(); !strings.Contains(out, "trawl-cc") {
		t.Errorf("the organization toolkit's call once the authorization server answers: %s", out)
	}
	f.connect(t, link) // the link the page refused, now unspent
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "trawl-web") || !strings.Contains(out, "ann") {
		t.Errorf("the user toolkit's call once connected: %s", out)
	}
}

// RFC 9207 (mix-up attacks): oidc-provider names itself in iss on every
// authorization response and says so in its metadata. A real response
// whose iss was changed, or dropped, is refused before its code is
// exchanged or its words repeated: nothing is connected, the page and the
// model's next call say why, and the same sign-in's untouched answer is
// spent with it (its state was). The untouched answer of a new sign-in
// connects.
func TestOAuthCallbackIssuer(t *testing.T) {
	f, _ := newOAuthFixture(t, oauthOptions{})
	// landedAt signs in at the provider and returns the callback URL the
	// provider sent the browser to, not followed.
	landedAt := func(chat string) (*http.Client, *url.URL) {
		t.Helper()
		b := newBrowser(t)
		var landed *url.URL
		b.CheckRedirect = func(req *http.Request, via []*http.Request) error {
			if req.URL.Path == deploy.OAuthCallbackPath {
				landed = req.URL
				return http.ErrUseLastResponse
			}
			return nil
		}
		resp := openOAuthLink(t, b, f.connectLink(t, chat))
		signIn(t, b, resp, "ann")
		if landed == nil || landed.Query().Get("code") == "" || landed.Query().Get("iss") != f.as.Issuer {
			t.Fatalf("the provider's answer: %v (issuer %s)", landed, f.as.Issuer)
		}
		b.CheckRedirect = nil
		return b, landed
	}
	exchanges := func() int64 { return f.as.TokenRequests.Load() }
	for _, tc := range []struct {
		name string
		edit func(q url.Values)
		want string
	}{
		{"another issuer", func(q url.Values) { q.Set("iss", "https://evil.example") }, "names another server"},
		{"the issuer with a slash", func(q url.Values) { q.Set("iss", f.as.Issuer+"/") }, "names another server"},
		{"no issuer", func(q url.Values) { q.Del("iss") }, "does not name its server"},
		{"an error from another issuer", func(q url.Values) {
			q.Del("code")
			q.Set("error", "access_denied")
			q.Set("error_description", "sign in at https://evil.example/login instead")
			q.Set("iss", "https://evil.example")
		}, "names another server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, landed := landedAt("c-" + strings.ReplaceAll(tc.name, " ", "-"))
			before := exchanges()
			q := landed.Query()
			tc.edit(q)
			forged := *landed
			forged.RawQuery = q.Encode()
			st, page := get(t, b, forged.String())
			if st != 400 || !strings.Contains(page, "Nothing was connected") || !strings.Contains(page, tc.want) ||
				strings.Contains(page, "evil.example") {
				t.Errorf("the forged answer's page: %d %s", st, page)
			}
			if n := exchanges() - before; n != 0 {
				t.Errorf("%d code exchanges after a refused answer", n)
			}
			if st, page := get(t, b, landed.String()); st != 400 || !strings.Contains(page, "already used") {
				t.Errorf("the untouched answer after the refusal: %d %s", st, page)
			}
			if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "connect_toolkit") || !strings.Contains(out, tc.want) {
				t.Errorf("the model read %s", out)
			}
		})
	}
	_, list := f.ts.do(t, "GET", "/v1/connections", f.token, nil)
	if strings.Contains(string(list), `"connected"`) {
		t.Fatalf("connected after refused answers: %s", list)
	}
	b, landed := landedAt("c-real")
	before := exchanges()
	if st, page := get(t, b, landed.String()); st != 200 || !strings.Contains(page, "is connected for account") {
		t.Fatalf("the provider's own answer: %d %s", st, page)
	}
	if exchanges() == before {
		t.Error("the provider's own answer was connected without a code exchange the proxy counted")
	}
	if out := f.callCRM(t, f.ts, "c1"); !strings.Contains(out, "ann") {
		t.Errorf("after connecting, the call answered %s", out)
	}
}
