package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/trawl-dev/trawl/web/deploy"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// newBrowser is a client with its own cookie jar: one browser.
func newBrowser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar}
}

// openConnect opens a connect link in a new browser and returns it, the
// form's CSRF token and the page.
func openConnect(t *testing.T, link string) (*http.Client, string, string) {
	t.Helper()
	b := newBrowser(t)
	resp, err := b.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(body))
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("connect page: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(resp.Request.URL.RawQuery, "code=") {
		t.Errorf("the page stays at the code's URL %s", resp.Request.URL)
	}
	return b, m[1], string(body)
}

// submitConnect posts the connect form as a browser on origin would.
func submitConnect(t *testing.T, b *http.Client, page, origin, csrf, cred string, header ...string) (int, string) {
	t.Helper()
	form := url.Values{"credential": {cred}}
	if csrf != "" {
		form.Set("csrf", csrf)
	}
	req, _ := http.NewRequest("POST", page, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := b.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	checkConnectHeaders(t, resp)
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func checkConnectHeaders(t *testing.T, resp *http.Response) {
	t.Helper()
	for h, want := range map[string]string{
		"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
		"Referrer-Policy": "no-referrer", "Cache-Control": "no-store",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s %s: %s = %q; want %q", resp.Request.Method, resp.Request.URL.Path, h, got, want)
		}
	}
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "frame-ancestors 'none'", "form-action 'self'", "style-src 'sha256-"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
}

// connectFixture is a demo whose chat toolkit each user must connect, a
// session for ann, and a link her session got from connect_toolkit.
type connectFixture struct {
	ts    *testServer
	token string // ann's session
	link  string
	page  string // the link without its code
}

func newConnectFixture(t *testing.T) *connectFixture {
	t.Helper()
	ts := startDemo(t, func(c *Config) { c.ConnectDemoToolkits() })
	_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"})
	var sess struct{ Token string }
	json.Unmarshal(b, &sess)
	f := &connectFixture{ts: ts, token: sess.Token, page: ts.URL + "/connect/chat"}
	f.link = f.mint(t)
	return f
}

// mint asks for a link as ann's session does through connect_toolkit.
func (f *connectFixture) mint(t *testing.T) string {
	t.Helper()
	link, err := userConnections{s: f.ts.Server, user: "ann", sessionHash: deploy.TokenHash(f.token)}.ConnectLink(context.Background(), "chat")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	return f.ts.URL + u.Path + "?" + u.RawQuery
}

func (f *connectFixture) stored(t *testing.T) (string, bool) {
	t.Helper()
	cred, ok, err := f.ts.conns.Credential(context.Background(), "ann", "chat")
	if err != nil {
		t.Fatal(err)
	}
	return cred, ok
}

func get(t *testing.T, b *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := b.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	checkConnectHeaders(t, resp)
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestConnectPageNamesTheAccount: the form says which toolkit and which
// account it connects, escaped, and carries no code.
func TestConnectPageNamesTheAccount(t *testing.T) {
	f := newConnectFixture(t)
	_, _, page := openConnect(t, f.link)
	for _, want := range []string{"<h1>Connect Chat</h1>", "(<code>chat</code>) for account <code>ann</code>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "code=") || strings.Contains(page, `name="code"`) {
		t.Errorf("the page repeats the link's code:\n%s", page)
	}
	// A hostile user id is text, not markup.
	_, b := f.ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": `<img src=x onerror=alert(1)>`})
	var sess struct{ Token string }
	json.Unmarshal(b, &sess)
	link, _ := userConnections{s: f.ts.Server, user: `<img src=x onerror=alert(1)>`, sessionHash: deploy.TokenHash(sess.Token)}.ConnectLink(context.Background(), "chat")
	u, _ := url.Parse(link)
	_, _, page = openConnect(t, f.ts.URL+u.Path+"?"+u.RawQuery)
	if strings.Contains(page, "<img") || !strings.Contains(page, "&lt;img src=x") {
		t.Errorf("user id not escaped:\n%s", page)
	}
}

// TestConnectLinkIsBoundToOneBrowser: opening the link spends its code;
// another browser — before or after — gets nothing to submit, and what it
// posts stores nothing, even with the right CSRF token.
func TestConnectLinkIsBoundToOneBrowser(t *testing.T) {
	f := newConnectFixture(t)
	ann, csrf, _ := openConnect(t, f.link)

	mallory := newBrowser(t)
	if st, body := get(t, mallory, f.link); st != 400 || !strings.Contains(body, "already opened") {
		t.Errorf("a second browser opening the link: %d %s", st, body)
	}
	if st, _ := get(t, mallory, f.page); st != 400 {
		t.Errorf("the bare page without the cookie: %d", st)
	}
	if st, _ := submitConnect(t, mallory, f.page, f.ts.URL, csrf, "mallory-token"); st != 403 {
		t.Errorf("a post with ann's CSRF token but not her cookie: %d", st)
	}
	if _, ok := f.stored(t); ok {
		t.Fatal("a foreign browser stored a credential for ann")
	}
	// Reloading the page in ann's browser shows the same form.
	if st, body := get(t, ann, f.page); st != 200 || !strings.Contains(body, csrf) {
		t.Errorf("ann reloading: %d", st)
	}
	if st, body := submitConnect(t, ann, f.page, f.ts.URL, csrf, "ann-token"); st != 200 || !strings.Contains(body, "connected for account <code>ann</code>") {
		t.Fatalf("ann's submit: %d %s", st, body)
	}
	if cred, _ := f.stored(t); cred != "ann-token" {
		t.Errorf("stored %q", cred)
	}
	// Spent: neither a replay nor the same code again stores anything.
	if st, _ := submitConnect(t, ann, f.page, f.ts.URL, csrf, "again"); st != 403 {
		t.Errorf("a replayed post: %d", st)
	}
	if st, _ := get(t, newBrowser(t), f.link); st != 400 {
		t.Errorf("the spent link: %d", st)
	}
	if cred, _ := f.stored(t); cred != "ann-token" {
		t.Errorf("stored %q after replays", cred)
	}
}

// TestConnectRefusesForgedPosts: a post without the CSRF token, with a
// wrong one, from another origin or another site stores nothing; the
// attempt survives them, so the real form still works.
func TestConnectRefusesForgedPosts(t *testing.T) {
	f := newConnectFixture(t)
	ann, csrf, _ := openConnect(t, f.link)
	forged := []struct {
		name, origin, csrf string
		header             []string
	}{
		{"no CSRF token", f.ts.URL, "", nil},
		{"wrong CSRF token", f.ts.URL, strings.Repeat("0", len(csrf)), nil},
		{"CSRF token of another attempt", f.ts.URL, func() string { _, c, _ := openConnect(t, f.mint(t)); return c }(), nil},
		{"cross-origin", "http://evil.example", csrf, nil},
		{"same host, other port", "http://127.0.0.1:1", csrf, nil},
		{"opaque origin", "null", csrf, nil},
		{"opaque origin, cross-site", "null", csrf, []string{"Sec-Fetch-Site", "cross-site"}},
		{"same-origin claimed by a foreign Origin", "http://evil.example", csrf, []string{"Sec-Fetch-Site", "same-origin"}},
		{"no Origin", "", csrf, nil},
		{"Sec-Fetch-Site cross-site", f.ts.URL, csrf, []string{"Sec-Fetch-Site", "cross-site"}},
		{"Sec-Fetch-Site same-site", f.ts.URL, csrf, []string{"Sec-Fetch-Site", "same-site"}},
	}
	for _, tt := range forged {
		t.Run(tt.name, func(t *testing.T) {
			if st, body := submitConnect(t, ann, f.page, tt.origin, tt.csrf, "forged", tt.header...); st != 403 {
				t.Errorf("%d %s", st, body)
			}
			if _, ok := f.stored(t); ok {
				t.Fatal("a forged post stored a credential")
			}
		})
	}
	// As a browser sends it under the page's Referrer-Policy: no-referrer.
	if st, _ := submitConnect(t, ann, f.page, "null", csrf, "real", "Sec-Fetch-Site", "same-origin"); st != 200 {
		t.Fatalf("the real form after the forgeries: %d", st)
	}
	if cred, _ := f.stored(t); cred != "real" {
		t.Errorf("stored %q", cred)
	}
}

// TestConnectEndsWithTheSession: a link dies with the session that asked
// for it (revoked or expired), opened or not, and after its TTL.
func TestConnectEndsWithTheSession(t *testing.T) {
	f := newConnectFixture(t)
	opened, csrf, _ := openConnect(t, f.link)
	unopened := f.mint(t)
	if st, _ := f.ts.do(t, "DELETE", "/v1/sessions/"+f.token, f.token, nil); st != 204 {
		t.Fatalf("revoke: %d", st)
	}
	if st, body := submitConnect(t, opened, f.page, f.ts.URL, csrf, "late"); st != 400 || !strings.Contains(body, "has ended") {
		t.Errorf("submit after revocation: %d %s", st, body)
	}
	if st, _ := get(t, newBrowser(t), unopened); st != 400 {
		t.Errorf("open after revocation: %d", st)
	}
	if _, ok := f.stored(t); ok {
		t.Fatal("stored a credential for an ended session")
	}

	g := newConnectFixture(t)
	g.ts.clock.set(func() time.Time { return time.Now().Add(deploy.ConnectCodeTTL + time.Minute) })
	if st, _ := get(t, newBrowser(t), g.link); st != 400 {
		t.Errorf("an expired link: %d", st)
	}
}

// TestConnectInvalidPageHeaders: the refusals carry the same headers.
func TestConnectInvalidPageHeaders(t *testing.T) {
	f := newConnectFixture(t)
	if st, _ := get(t, newBrowser(t), f.page+"?code=nope"); st != 400 {
		t.Errorf("unknown code: %d", st)
	}
	if st, _ := get(t, newBrowser(t), f.ts.URL+"/connect/nosuch"); st != 404 {
		t.Errorf("unknown toolkit: %d", st)
	}
}

// TestConnectInBrowser drives the connect page in headless Chromium: the
// link opens the form (its style admitted by the CSP, no console
// error), a form posted from another site with the right CSRF token
// stores nothing, and the real form connects the account.
func TestConnectInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	bin := chromium(t)
	f := newConnectFixture(t)
	var csrf atomic.Value
	csrf.Store("")
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="post" action="%s">
<input name="csrf" value="%s"><input name="credential" value="evil-token"></form>
<script>document.getElementById('f').submit()</script>`, f.page, csrf.Load())
	}))
	defer evil.Close()
	bctx := browserContext(t, bin)
	var mu sync.Mutex
	var problems []string
	messages := chromedp.Console(bctx) // starts the browser
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
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

	do("open the link", chromedp.Navigate(f.link), chromedp.WaitVisible(chromedp.CSS(`input[name=credential]`)))
	if u := eval(`location.href`); strings.Contains(u, "code=") {
		t.Errorf("the code stays in the address bar: %s", u)
	}
	if w := eval(`getComputedStyle(document.body).maxWidth`); w != "544px" {
		t.Errorf("the page's style is not applied (max-width %q): the CSP refused it?", w)
	}
	csrf.Store(eval(`document.querySelector('[name=csrf]').value`))

	do("a cross-site post", chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS(`p.err`)))
	if got := eval(`document.body.innerText`); !strings.Contains(got, "not sent from trawl") && !strings.Contains(got, "expired") {
		t.Errorf("the cross-site post answered %q", got)
	}
	if _, ok := f.stored(t); ok {
		t.Fatal("a cross-site post stored a credential")
	}

	do("the real form", chromedp.Navigate(f.page), chromedp.WaitVisible(chromedp.CSS(`input[name=credential]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=credential]`), "browser-token"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`p.ok, p.err`)))
	if got := eval(`document.body.innerText`); !strings.Contains(got, "is connected for account ann") {
		t.Errorf("the real form answered %q", got)
	}
	if cred, _ := f.stored(t); cred != "browser-token" {
		t.Errorf("stored %q", cred)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("console problems: %q", problems)
	}
}
