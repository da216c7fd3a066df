package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools/demo"
)

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func studioGet(t *testing.T, method, url string, header http.Header) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func embedded(t *testing.T, name string) []byte {
	t.Helper()
	b, err := fs.ReadFile(studioFiles, "studio/"+name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStudioServesAssets(t *testing.T) {
	ts := startDemo(t, nil)
	tests := []struct {
		path, file, ctype string
	}{
		{"/studio/", "index.html", "text/html; charset=utf-8"},
		{"/studio/index.html", "index.html", "text/html; charset=utf-8"},
		{"/studio/studio.css", "studio.css", "text/css; charset=utf-8"},
		{"/studio/js/app.js", "js/app.js", "text/javascript; charset=utf-8"},
		{"/studio/js/agents.js", "js/agents.js", "text/javascript; charset=utf-8"},
		{"/studio/favicon.svg", "favicon.svg", "image/svg+xml"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := studioGet(t, "GET", ts.URL+tt.path, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			want := map[string]string{
				"Content-Type":            tt.ctype,
				"Cache-Control":           "no-cache",
				"Content-Security-Policy": studioCSP,
				"X-Content-Type-Options":  "nosniff",
			}
			got := map[string]string{}
			for k := range want {
				got[k] = resp.Header.Get(k)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
			if !strings.HasPrefix(studioCSP, "default-src 'self'") {
				t.Errorf("CSP %q does not start with default-src 'self'", studioCSP)
			}
			if string(body) != string(embedded(t, tt.file)) {
				t.Errorf("body is not the embedded %s", tt.file)
			}

			// The ETag makes the no-cache revalidation cheap.
			etag := resp.Header.Get("ETag")
			if etag == "" {
				t.Fatal("no ETag")
			}
			resp, body = studioGet(t, "GET", ts.URL+tt.path, http.Header{"If-None-Match": {etag}})
			if resp.StatusCode != http.StatusNotModified || len(body) != 0 {
				t.Errorf("revalidation: %d with %d bytes, want 304 and none", resp.StatusCode, len(body))
			}
			resp, body = studioGet(t, "HEAD", ts.URL+tt.path, nil)
			if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != tt.ctype {
				t.Errorf("HEAD: %d, %d bytes, %q", resp.StatusCode, len(body), resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestStudioRedirect(t *testing.T) {
	ts := startDemo(t, nil)
	for _, tt := range []struct{ path, location string }{
		{"/studio", "/studio/"},
		{"/studio?tab=1", "/studio/?tab=1"},
	} {
		resp, _ := studioGet(t, "GET", ts.URL+tt.path, nil)
		if resp.StatusCode != http.StatusMovedPermanently || resp.Header.Get("Location") != tt.location {
			t.Errorf("GET %s = %d → %q, want 301 → %q", tt.path, resp.StatusCode, resp.Header.Get("Location"), tt.location)
		}
	}
}

func TestStudioUnknownAsset(t *testing.T) {
	ts := startDemo(t, nil)
	for _, p := range []string{
		"/studio/nope.js",
		"/studio/js/",
		"/studio/js",
		"/studio/js/../../server.go",
		"/studio/%2e%2e/server.go",
		"/studio//index.html",
		"/studio/INDEX.HTML",
	} {
		resp, body := studioGet(t, "GET", ts.URL+p, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", p, resp.StatusCode)
			continue
		}
		if code := errorCode(t, body); code != "not_found" {
			t.Errorf("GET %s: code %q", p, code)
		}
	}
	resp, _ := studioGet(t, "POST", ts.URL+"/studio/", nil)
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /studio/ = %d, want 405", resp.StatusCode)
	}
}

var (
	htmlRef    = regexp.MustCompile(`\s(?:src|href)\s*=\s*"([^"]*)"`)
	cssRef     = regexp.MustCompile(`url\(\s*['"]?([^'")\s]+)|@import\s+['"]([^'"]+)`)
	jsRef      = regexp.MustCompile(`(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]`)
	anyScheme  = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>)]*`)
	inlineCode = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>\s*[^<\s]|<style[\s>]|\sstyle\s*=|\son[a-z]+\s*=|javascript:`)
	// XML namespace names are identifiers, not references.
	namespaces = []string{"http://www.w3.org/2000/svg"}
)

// TestStudioSelfContained checks every embedded asset: it has a declared
// content type, references only other embedded assets (relative paths, no
// other origin), and the HTML holds no inline script, style or handler —
// which the Content-Security-Policy would refuse.
func TestStudioSelfContained(t *testing.T) {
	assets := studioAssets()
	if len(assets) < 5 {
		t.Fatalf("only %d assets embedded", len(assets))
	}
	var refs int
	for name, a := range assets {
		if _, ok := studioTypes[path.Ext(name)]; !ok {
			t.Errorf("%s: extension %q has no entry in studioTypes", name, path.Ext(name))
		}
		text := string(a.body)
		for _, u := range anyScheme.FindAllString(text, -1) {
			if !slices.Contains(namespaces, u) {
				t.Errorf("%s references another origin: %s", name, u)
			}
		}
		var found [][]string
		switch path.Ext(name) {
		case ".html":
			found = htmlRef.FindAllStringSubmatch(text, -1)
			if m := inlineCode.FindString(text); m != "" {
				t.Errorf("%s has inline code the CSP forbids: %q", name, m)
			}
		case ".css":
			found = cssRef.FindAllStringSubmatch(text, -1)
		case ".js":
			found = jsRef.FindAllStringSubmatch(text, -1)
		}
		for _, m := range found {
			ref := m[1]
			if ref == "" && len(m) > 2 {
				ref = m[2]
			}
			if strings.HasPrefix(ref, "#") {
				continue // an in-page route
			}
			refs++
			if strings.HasPrefix(ref, "/") || strings.Contains(ref, ":") {
				t.Errorf("%s: reference %q is not relative", name, ref)
				continue
			}
			target := path.Join(path.Dir(name), ref)
			if _, ok := assets[target]; !ok {
				t.Errorf("%s: reference %q resolves to %q, which is not embedded", name, ref, target)
			}
		}
	}
	if refs < 8 {
		t.Errorf("found only %d references: the patterns no longer match the assets", refs)
	}
}

// chromium finds a Chromium or Chrome binary, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium binary on PATH (apt-get install chromium): skipping the Studio browser test")
	return ""
}

// browser is headless Chromium driving the Studio of one test server,
// collecting what the page reports on its console (exceptions, console
// errors, CSP refusals; failed fetches are expected and not problems).
type browser struct {
	t     *testing.T
	ctx   context.Context
	shots string // where screenshots go

	mu       sync.Mutex
	problems []string
	stop     func()
}

// startBrowser starts Chromium (browserContext; or skips the test) on a
// 1440×1000 screen, the steps bounded by timeout. Screenshots go to
// $TRAWL_STUDIO_SCREENSHOTS when set, else to the test's temporary folder
// (its path is logged).
func startBrowser(t *testing.T, timeout time.Duration) *browser {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	bctx := browserContext(t, chromium(t))
	bctx, cancel := context.WithTimeout(bctx, timeout)
	if _, err := chromedp.Run(bctx, desktop); err != nil {
		cancel()
		t.Fatalf("starting Chromium: %v", err)
	}
	b := &browser{t: t, ctx: bctx, shots: os.Getenv("TRAWL_STUDIO_SCREENSHOTS")}
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	t.Logf("screenshots in %s", b.shots)
	cctx, ccancel := context.WithCancel(bctx)
	messages := chromedp.Console(cctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.IsException() || m.Type == chromedp.ConsoleError && m.Source != "network" {
				b.mu.Lock()
				b.problems = append(b.problems, m.String()+" @ "+m.URL)
				b.mu.Unlock()
			}
		}
	}()
	b.stop = func() {
		ccancel()
		<-done
		cancel()
	}
	return b
}

// finish stops the browser and fails the test for every console problem.
func (b *browser) finish() {
	b.stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("console: %s", p)
	}
}

func (b *browser) save(ctx context.Context, tg *chromedp.Target, name string) error {
	png, err := chromedp.FullScreenshot(100)(ctx, tg)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
}

// view saves the view light and dark at desktop width, then checks it on
// a phone: at 390 CSS px nothing may make the page scroll sideways (wide
// tables scroll inside their own box), and saves it there too.
func (b *browser) view(name string) chromedp.Action[chromedp.Void] {
	t := b.t
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if err := b.save(ctx, tg, name); err != nil {
			return err
		}
		dark := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}}
		if _, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, dark); err != nil {
			return err
		}
		if err := b.save(ctx, tg, name+"-dark"); err != nil {
			return err
		}
		if _, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{}); err != nil {
			return err
		}
		if _, err := chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)(ctx, tg); err != nil {
			return err
		}
		width, err := chromedp.Evaluate[int](`document.documentElement.scrollWidth`)(ctx, tg)
		if err != nil {
			return err
		}
		if width > 390 {
			t.Errorf("%s: the page is %d px wide on a 390 px phone screen", name, width)
		}
		if err := b.save(ctx, tg, name+"-phone"); err != nil {
			return err
		}
		_, err = desktop(ctx, tg)
		return err
	})
}

// desktop is the screen the Studio is driven on between phone checks.
var desktop = chromedp.EmulateViewport(1440, 1000)

// run runs one step's actions within 20 s, failing the test (with a
// screenshot, "failed.png") when they do not complete.
func (b *browser) run(step string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	sctx, scancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer scancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		fctx, fcancel := context.WithTimeout(b.ctx, 5*time.Second)
		_ = chromedp.Do(fctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error { return b.save(ctx, tg, "failed") }))
		fcancel()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.t.Fatalf("%s: %v\nconsole problems: %q", step, err, b.problems)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (b *browser) eval(expr string) bool {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](expr))
	if err != nil {
		b.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// tableRows is each body row of the table at sel, its cells' text
// joined by "|".
func (b *browser) tableRows(sel string) []string {
	b.t.Helper()
	rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll(`+strconv.Quote(sel+` tbody tr`)+`)].map(tr => [...tr.cells].map(c => c.textContent).join('|'))`))
	if err != nil {
		b.t.Fatalf("rows of %s: %v", sel, err)
	}
	return rows
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
	if err != nil {
		b.t.Fatalf("count %s: %v", sel, err)
	}
	return n
}

// login opens the console at path and enters the admin key.
func (b *browser) login(ts *testServer, path string) {
	b.run("log in",
		chromedp.Navigate(ts.URL+path),
		chromedp.WaitVisible(chromedp.ID("key-input")),
		chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitNotVisible(chromedp.ID("key-dialog")))
}

// TestStudioInBrowser drives the console in headless Chromium against a
// demo server: the admin-key prompt (a refused key is asked for again, at
// the start and mid-session), the looping switch of a binding (checked
// through the server), a refused change rolled back with the API's
// message, "Try it" with the complete verdict, the activity table, each
// view on a phone-sized screen, and no console error or CSP refusal.
func TestStudioInBrowser(t *testing.T) {
	br := startBrowser(t, 90*time.Second)
	defer br.finish()
	ts := startDemo(t, nil)
	bctx, run, text, eval, view := br.ctx, br.run, br.text, br.eval, br.view

	// The admin key: a wrong one is refused and asked for again.
	run("open the console",
		chromedp.Navigate(ts.URL+"/studio"),
		chromedp.WaitVisible(chromedp.ID("key-input")),
		view("key"),
		chromedp.SendKeys(chromedp.ID("key-input"), "not-the-key"),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitVisible(chromedp.ID("key-error")))
	if got := text("#key-error"); !strings.Contains(got, "refused") {
		t.Errorf("after a wrong key the dialog says %q", got)
	}
	run("enter the admin key",
		chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitNotVisible(chromedp.ID("key-dialog")),
		chromedp.WaitVisible(chromedp.ID("chat-input")), // it opens on Chat
		chromedp.Click(chromedp.CSS(`a[data-nav="agents"]`)),
		chromedp.Click(chromedp.CSS(`a[data-agent-id="demo"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[data-agent-id="demo"][aria-current="page"]`)))
	if !eval(`sessionStorage.getItem('trawl.studio.adminKey') === ` + strconv.Quote(ts.AdminKey())) {
		t.Error("the admin key is not kept in sessionStorage")
	}

	// Flip the looping switch of acme.list_orders off.
	card := `article[data-tool-id="acme.list_orders"]`
	sw := card + ` input[role="switch"]`
	run("see the tool card", chromedp.WaitVisible(chromedp.CSS(sw)), view("agents"))
	if !eval(`document.querySelector('` + sw + `').checked`) {
		t.Fatal("acme.list_orders does not start with looping on")
	}
	if got := text(card + ` .switch-row label`); got != "Allow response looping for this tool" {
		t.Errorf("switch label = %q", got)
	}
	run("flip the switch",
		chromedp.Click(chromedp.CSS(sw)),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-state="saved"]`)))
	if eval(`document.querySelector('` + sw + `').checked`) {
		t.Error("the switch is back on after saving")
	}
	binding := func() (loop bool, ttl float64) {
		d, ok := ts.agents.Get("demo")
		if !ok {
			t.Fatal("agent demo is gone")
		}
		for _, b := range d.AgentTools {
			if b.ToolID == "acme.list_orders" {
				return b.LoopResponses, b.DatasetTTLHours
			}
		}
		t.Fatal("the binding of acme.list_orders is gone")
		return false, 0
	}
	if loop, _ := binding(); loop {
		t.Error("the server still has looping on for acme.list_orders")
	}

	// A change the API refuses is rolled back, with its message inline.
	ttl := card + ` input[type="number"]`
	run("enter a negative TTL",
		chromedp.SendKeys(chromedp.CSS(ttl), "-1\t"),
		chromedp.WaitVisible(chromedp.CSS(card+`[data-state="error"] .inline-error`)))
	if got := text(card + ` .inline-error`); !strings.Contains(got, "must not be negative") {
		t.Errorf("inline error = %q", got)
	}
	if v, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS(ttl))); err != nil || v != "" {
		t.Errorf("TTL input after the refusal = %q (%v), want it rolled back to empty", v, err)
	}
	if _, ttlHours := binding(); ttlHours != 0 {
		t.Errorf("server TTL = %v after a refused change", ttlHours)
	}

	// Try it: walk every open order.
	link := `a.tool-link[href="#/tools/acme.list_orders"]`
	run("find the tool",
		chromedp.Click(chromedp.CSS(`a[data-nav="tools"]`)),
		chromedp.WaitVisible(chromedp.ID("tool-search")),
		chromedp.SendKeys(chromedp.ID("tool-search"), "list_orders"),
		chromedp.Click(chromedp.CSS(link)),
		chromedp.WaitVisible(chromedp.ID("try-args")))
	if !eval(`document.getElementById('try-loop').checked`) {
		t.Error(`"loop responses" is not checked by default`)
	}
	// The tool's card and its row in the list show its effect.
	if !eval(`document.querySelector('.try-head .card-badges .effect-read') !== null`) {
		t.Error("the tool's card lacks its effect badge")
	}
	if !eval(`document.querySelector('tr[data-tool-id="mail.MAIL_TRASH_MESSAGE"] .effect-write') !== null`) {
		t.Error("the trash tool's row lacks its write badge")
	}
	args := `{"status":"open","_all_pages":true,"_fields":["id"]}`
	run("run it",
		chromedp.SetValue(chromedp.ID("try-args"), args),
		chromedp.Click(chromedp.ID("try-run")),
		chromedp.WaitVisible(chromedp.CSS(`#verdict[data-complete="complete"]`)),
		view("tools"))
	// The page must say what the server says.
	st, b := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{"args": json.RawMessage(args)})
	var env struct {
		Complete  bool           `json:"_pagingComplete"`
		StoppedBy string         `json:"_stoppedBy"`
		Boundary  map[string]any `json:"_boundary"`
	}
	if err := json.Unmarshal(b, &env); st != 200 || err != nil || !env.Complete {
		t.Fatalf("direct invoke: %d %v %s", st, err, b)
	}
	verdict := text("#verdict")
	for _, want := range []string{"Complete", "stopped by " + env.StoppedBy, "completion", "records"} {
		if !strings.Contains(verdict, want) {
			t.Errorf("verdict lacks %q:\n%s", want, verdict)
		}
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll('#verdict table.boundary tbody tr').length`))
	if err != nil || rows != len(env.Boundary) {
		t.Errorf("boundary table has %d rows (%v), the envelope %d keys", rows, err, len(env.Boundary))
	}
	if got := text(".json-view summary"); !strings.Contains(got, "Response JSON") {
		t.Errorf("JSON summary = %q", got)
	}

	// Activity shows the walk's upstream calls.
	run("open the activity",
		chromedp.Click(chromedp.CSS(`a[data-nav="activity"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#activity-trace td.time`)),
		view("activity"))
	if got := text("#activity-trace"); !strings.Contains(got, "acme.list_orders") || !strings.Contains(got, "/orders?") {
		t.Errorf("activity table:\n%s", got)
	}

	// A key the server stops accepting mid-session is asked for again,
	// and the view comes back with the new one.
	run("use a stale key",
		chromedp.Evaluate[chromedp.Void](`sessionStorage.setItem('trawl.studio.adminKey', 'stale')`),
		chromedp.Click(chromedp.ID("activity-refresh")),
		chromedp.WaitVisible(chromedp.ID("key-error")))
	if got := text("#key-error"); !strings.Contains(got, "refused") {
		t.Errorf("after a refused key the dialog says %q", got)
	}
	run("enter the key again",
		chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitNotVisible(chromedp.ID("key-dialog")),
		chromedp.WaitVisible(chromedp.CSS(`#activity-trace td.time`)))

}

// jsTrue polls a JavaScript condition until it holds.
func jsTrue(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))
}

// TestStudioChatInBrowser: with a slow demo upstream, the chat pane
// streams the demo turn — a visible progress line on the tool card, then
// the verdict badge and the stored rows (filtered through
// queryToolResult); a reload mid-turn reattaches to the running turn;
// Stop ends a turn on the server.
func TestStudioChatInBrowser(t *testing.T) {
	br := startBrowser(t, 120*time.Second)
	defer br.finish()
	// No dataset cache: every turn walks anew, as Stop needs.
	ts := startDemo(t, func(c *Config) { c.Demo, c.Cache.Mode = &DemoSettings{LatencyMs: 300}, "off" })
	br.login(ts, "/studio/#/chat/demo/browser-1")
	br.run("the chat pane", chromedp.WaitVisible(chromedp.ID("chat-input")), chromedp.WaitVisible(chromedp.CSS("#chat-model .banner")))
	if got := br.text("#chat-model"); !strings.Contains(got, "Replay model") {
		t.Errorf("the pane does not say the model is a replay: %q", got)
	}

	q1 := "How many open orders worth more than 100 do we have, and how do they split by currency?"
	card := `.tool-call[data-tool-call-id="call_0_0_0"]`
	br.run("send the first question",
		chromedp.SetValue(chromedp.ID("chat-input"), q1),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(card+` [data-tool-loop-progress]`)),
		br.view("chat-progress"))
	// Live ("page 2 · 200 of 364 items …"), or already the final figures
	// ("done: 4 pages · 364 items · 4 requests") once the walk ended.
	if got := br.text(card + ` [data-tool-loop-progress]`); !strings.Contains(got, "page") || !strings.Contains(got, "items") {
		t.Errorf("progress line: %q", got)
	}
	br.run("the verdict and rows",
		chromedp.WaitVisible(chromedp.CSS(card+` [data-verdict="complete"]`)),
		chromedp.WaitVisible(chromedp.CSS(card+` .rows[data-source="stored"] .rows-table tbody td`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('278 open orders worth more than 100')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		br.view("chat"))
	// The call asked _aggregate: the card shows its groups × metrics
	// with the verdict, equal to the test's own count over the data.
	br.run("the aggregate", chromedp.WaitVisible(chromedp.CSS(card+` .aggregate[data-completion="complete"] .aggregate-table tbody tr`)))
	if got := br.text(card + ` .aggregate-verdict`); got != "over the 278 of all 364 rows that match the filter (complete)" {
		t.Errorf("aggregate verdict %q", got)
	}
	if br.count(card+` .aggregate [data-verdict="complete"]`) != 1 {
		t.Error("the aggregate has no complete badge")
	}
	var want []string
	for _, c := range demo.TallyOrders("open", 100) {
		want = append(want, fmt.Sprintf("%s|%d|%s", c.Currency, c.Count, c.Sum))
	}
	if diff := cmp.Diff(want, br.tableRows(card+` .aggregate-table`)); diff != "" {
		t.Errorf("aggregate table (-the test's own count, +shown):\n%s", diff)
	}
	// Each step's data-context chunk is a meter: what was sent against
	// the agent's context budget.
	if got := br.text(`#chat-log .context-meter`); !strings.Contains(got, "Context tokens") || !strings.Contains(got, " of ") {
		t.Errorf("context meter: %q", got)
	}
	if br.count(`#chat-log .context-meter meter`) == 0 {
		t.Error("the context meter draws no <meter>")
	}
	if n := br.count(card + ` .rows-table tbody tr`); n != 20 {
		t.Errorf("%d rows on the first page, want 20", n)
	}
	// The stored result holds the 364 rows walked; the call's _filter
	// (total > 100) applies again, so the table shows the 278 it kept.
	if got := br.text(card + ` .rows-status`); !strings.Contains(got, "of 278 matched (364 in all)") {
		t.Errorf("rows status %q, want the 278 rows the call's filter kept of the 364 stored", got)
	}
	// Filter the stored rows on the server: total > 1000 as well.
	br.run("filter the rows",
		chromedp.SetValue(chromedp.CSS(card+` .rows-filter select[aria-label="Filter field"]`), "total"),
		chromedp.SetValue(chromedp.CSS(card+` .rows-filter select[aria-label="Filter operator"]`), "gt"),
		chromedp.SetValue(chromedp.CSS(card+` .rows-filter input`), "1000"),
		chromedp.Click(chromedp.CSS(card+` .rows-filter button[type="submit"]`)),
		jsTrue(`!document.querySelector('`+card+` .rows-status').textContent.includes('of 278 matched')`))
	filtered := br.text(card + ` .rows-status`)
	var matched int
	for _, cell := range strings.Fields(filtered) {
		if n, err := strconv.Atoi(cell); err == nil {
			matched = n // the last number before "matched"
		}
		if cell == "matched" {
			break
		}
	}
	if matched == 0 || matched >= 278 {
		t.Errorf("after the filter the rows say %q", filtered)
	}
	if href := br.text(card + ` .tc-trace`); href != "Trace" {
		t.Errorf("trace link %q", href)
	}

	// The second question runs long (40 properties, every page, 300 ms
	// per answer): reload mid-turn, and the page reattaches.
	q2 := "Across all our properties, how many confirmed bookings were for a week or longer?"
	fan := `.tool-call[data-tool-call-id="call_1_1_0"]`
	br.run("send the second question",
		chromedp.SetValue(chromedp.ID("chat-input"), q2),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(fan+` [data-tool-loop-progress]`)),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		jsTrue(`document.querySelector('#chat-state').textContent.includes('Resumed')`),
		chromedp.WaitVisible(chromedp.CSS(fan+` [data-tool-loop-progress]`)))
	if got := br.text("#chat-log"); strings.Count(got, q2) != 1 || strings.Count(got, q1) != 1 {
		t.Errorf("after the reload the log holds each question %d and %d times", strings.Count(got, q1), strings.Count(got, q2))
	}
	br.run("the resumed turn ends",
		jsTrue(`document.querySelector('#chat-log').textContent.includes('157 confirmed bookings')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`))
	if n := br.count(`.msg-assistant`); n != 2 {
		t.Errorf("%d assistant messages after the resumed turn, want 2", n)
	}
	if !br.eval(`[...document.querySelectorAll('#chat-threads .thread-link')].some(a => a.dataset.chatId === 'browser-1')`) {
		t.Error("the thread list lacks the chat")
	}

	// Stop: a new chat, the first question again, stopped mid-walk.
	br.run("open a new chat",
		chromedp.Click(chromedp.ID("chat-new")),
		jsTrue(`location.hash.startsWith('#/chat/demo/studio-')`),
		chromedp.WaitVisible(chromedp.CSS(`.chat-empty`)))
	br.run("send and watch it walk",
		chromedp.SetValue(chromedp.ID("chat-input"), q1),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(card+` [data-tool-loop-progress]`)))
	br.run("stop the turn",
		chromedp.Click(chromedp.ID("chat-stop")),
		chromedp.WaitVisible(chromedp.CSS(`.msg-assistant[data-state="stopped"]`)),
		jsTrue(`document.querySelector('#chat-stop').hidden`))
	hash, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`decodeURIComponent(location.hash.split('/')[3])`))
	if err != nil {
		t.Fatal(err)
	}
	if id, _ := ts.runs.Active(context.Background(), agent.ThreadKey("", "demo", hash)); id != "" {
		t.Error("the turn still runs on the server after Stop")
	}
	if got := br.text(`.msg-assistant[data-state="stopped"]`); strings.Contains(got, "278 open orders") {
		t.Errorf("the stopped turn still answered: %q", got)
	}

	// The tool card's trace link opens the activity filtered to the chat,
	// with the call's requests under it.
	br.run("follow a trace link",
		chromedp.Navigate(ts.URL+"/studio/#/chat/demo/browser-1"),
		chromedp.WaitVisible(chromedp.CSS(card+` .tc-trace`)),
		chromedp.Click(chromedp.CSS(card+` .tc-trace`)),
		chromedp.WaitVisible(chromedp.CSS(`.trace-call[data-call-id="call_0_0_0"][data-highlight="true"] td.time`)),
		br.view("trace"))
	if n := br.count(`.trace-call[data-call-id="call_0_0_0"] tbody tr`); n != 4 {
		t.Errorf("the list_orders call shows %d requests, want its 4 pages", n)
	}
}

// TestStudioTryItStreams: Try it shows the walk's progress as it streams
// and Stop ends it (the server makes no further upstream requests); "as
// agent" applies that agent's binding; the result's rows are a table.
func TestStudioTryItStreams(t *testing.T) {
	br := startBrowser(t, 90*time.Second)
	defer br.finish()
	// One request at a time (limits.concurrency 1), so that the walk
	// takes 20 × 250 ms and Stop lands mid-walk.
	ts := startDemo(t, func(c *Config) { c.Demo, c.Limits.Concurrency = &DemoSettings{LatencyMs: 250}, 1 })
	br.login(ts, "/studio/#/tools/acme.list_orders")
	requests := func() int {
		_, b := ts.do(t, "GET", "/v1/activity?limit=1000", "", nil)
		return strings.Count(string(b), `"tool":"acme.list_orders"`)
	}
	br.run("run a long walk and stop it",
		chromedp.WaitVisible(chromedp.ID("try-args")),
		chromedp.SetValue(chromedp.ID("try-args"), `{"_all_pages":true,"_fields":["id","status"]}`),
		chromedp.Click(chromedp.ID("try-run")),
		chromedp.WaitVisible(chromedp.CSS(`#try-progress[data-tool-loop-progress]`)),
		br.view("try-progress"),
		chromedp.Click(chromedp.ID("try-stop")),
		chromedp.WaitVisible(chromedp.CSS(`#verdict[data-complete="stopped"]`)))
	time.Sleep(400 * time.Millisecond) // the request in flight ends
	after := requests()
	time.Sleep(800 * time.Millisecond)
	if n := requests(); n != after || n >= 20 {
		t.Errorf("upstream requests after Stop: %d then %d (the whole walk is 20)", after, n)
	}
	// As agent demo with looping off for the tool: one plain call.
	ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false})
	br.run("run as the agent",
		chromedp.SetValue(chromedp.ID("try-args"), `{"status":"open","_all_pages":true,"_fields":["id","status"]}`),
		chromedp.SetValue(chromedp.ID("try-agent"), "demo"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('try-agent').dispatchEvent(new Event('change'))`),
		chromedp.Click(chromedp.ID("try-run")),
		chromedp.WaitVisible(chromedp.CSS(`#verdict[data-complete="none"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#try-result .rows-table tbody td`)))
	if n := br.count(`#try-result .rows-table tbody tr`); n != 20 {
		t.Errorf("%d rows shown, want a first page of 20", n)
	}
	if br.eval(`!document.querySelector('#try-loop').closest('.check').hidden`) {
		t.Error("the loop switch is offered while the agent's binding decides")
	}
	br.run("run with looping", chromedp.SetValue(chromedp.ID("try-agent"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('try-agent').dispatchEvent(new Event('change'))`),
		chromedp.Click(chromedp.ID("try-run")),
		chromedp.WaitVisible(chromedp.CSS(`#verdict[data-complete="complete"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#try-result .rows[data-source="stored"] .rows-table tbody td`)),
		br.view("try"))

	// _aggregate over the first page only: the table says partial and
	// that its numbers are not totals.
	br.run("aggregate the first page",
		chromedp.SetValue(chromedp.ID("try-args"), `{"status":"open","_aggregate":{"group_by":["currency"],"metrics":[{"op":"count"},{"op":"sum","field":"total"}]}}`),
		chromedp.Click(chromedp.ID("try-run")),
		chromedp.WaitVisible(chromedp.CSS(`#try-result .aggregate[data-completion="partial"] .aggregate-table tbody tr`)),
		chromedp.ScrollIntoView(chromedp.CSS(`#try-result .aggregate`)),
		br.view("try-aggregate"))
	got := br.text(`#try-result .aggregate-verdict`)
	if !strings.HasPrefix(got, "over the 25 rows of the first page") || !strings.HasSuffix(got, "(partial): rows are missing, so these are not totals") {
		t.Errorf("partial aggregate verdict %q", got)
	}
	if br.count(`#try-result .aggregate [data-verdict="partial"]`) != 1 || br.count(`#verdict[data-complete="partial"]`) != 1 {
		t.Error("the partial aggregate has no partial badge")
	}
	if section := br.text(`#try-result .aggregate`); strings.Contains(section, "complete") || strings.Contains(strings.ToLower(section), "all 364") {
		t.Errorf("the partial aggregate reads as complete: %q", section)
	}
	n := 0
	for _, r := range br.tableRows(`#try-result .aggregate-table`) {
		var cur string
		var count int
		var sum string
		if k, _ := fmt.Sscanf(strings.ReplaceAll(r, "|", " "), "%s %d %s", &cur, &count, &sum); k != 3 {
			t.Errorf("aggregate row %q", r)
		}
		n += count
	}
	if n != 25 {
		t.Errorf("the first page's groups count %d rows, want 25", n)
	}
}

// TestStudioGroupSwitch: the switch of a group flips looping for every
// tool of it that has something to loop, each binding saved on the
// server, and the page shows the same after a reload; a tool with
// nothing to loop has no switch.
func TestStudioGroupSwitch(t *testing.T) {
	br := startBrowser(t, 90*time.Second)
	defer br.finish()
	ts := startDemo(t, nil)
	br.login(ts, "/studio/#/agents/demo")
	group := `details[data-group="toolkit:crm"]`
	gsw := group + ` input[data-group-switch]`
	br.run("open the crm group",
		chromedp.WaitVisible(chromedp.CSS(`details[data-group="provider:acme"]`)),
		chromedp.Click(chromedp.CSS(group+` > summary .group-title`)),
		chromedp.WaitVisible(chromedp.CSS(gsw)))
	loopable := br.count(group + ` article[data-loopable="true"]`)
	if loopable == 0 || br.count(group+` article[data-loopable="false"] input[role="switch"]`) != 0 {
		t.Fatalf("crm: %d loopable tools; tools without anything to loop must have no switch", loopable)
	}
	if br.eval(`document.querySelector('` + gsw + `').checked`) {
		t.Fatal("the crm group starts with looping on")
	}
	br.run("flip the group",
		chromedp.Click(chromedp.CSS(gsw)),
		jsTrue(`document.querySelectorAll('`+group+` article[data-state="saved"]').length === `+strconv.Itoa(loopable)),
		br.view("agents-group"))
	def, _ := ts.agents.Get("demo")
	on := 0
	for _, b := range def.AgentTools {
		if strings.HasPrefix(b.ToolID, "crm.") && b.LoopResponses {
			on++
		}
	}
	if on != loopable {
		t.Errorf("the server has looping on for %d crm tools, want %d", on, loopable)
	}
	br.run("reload",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`details[data-group="provider:acme"]`)),
		chromedp.Click(chromedp.CSS(group+` > summary .group-title`)),
		chromedp.WaitVisible(chromedp.CSS(gsw)))
	if !br.eval(`document.querySelector('`+gsw+`').checked`) ||
		br.count(group+` article[data-loopable="true"][data-looping="true"]`) != loopable {
		t.Error("after a reload the crm group is not all looping")
	}
}

// TestStudioApprovalInBrowser: an agent whose trash call needs approval
// (the fake model lists the inbox, then trashes a message). The card
// shows the evidence and Approve / Deny; Approve runs the call (its
// output on the card, the write in the upstream log) and the answer goes
// on, with what the turn changed under it. In a second chat, reopened
// while it waits, Deny answers the call as denied and the model goes on.
func TestStudioApprovalInBrowser(t *testing.T) {
	br := startBrowser(t, 120*time.Second)
	defer br.finish()
	ts := startApprovalDemo(t)
	writes := func() int {
		_, b := ts.do(t, "GET", "/v1/activity?limit=1000", "", nil)
		return strings.Count(string(b), `"writes":true`)
	}
	trash := `.tool-call[data-tool-call-id="call_trash"]`
	br.login(ts, "/studio/#/chat/cleaner/approve-1")
	br.run("ask, and the trash waits",
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SetValue(chromedp.ID("chat-input"), "Trash the first message."),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(trash+` button[data-approve]`)),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		br.view("chat-approval"))
	if got := br.text(trash + ` .tc-evidence`); !strings.Contains(got, "MAIL_LIST_MESSAGES") {
		t.Errorf("the evidence lacks the turn's read: %q", got)
	}
	var args struct{ MessageID string }
	if err := json.Unmarshal([]byte(br.text(trash+` .tc-args pre`)), &args); err != nil || args.MessageID == "" {
		t.Errorf("the evidence lacks the call's arguments: %v", err)
	}
	messageID := args.MessageID
	if got := br.text(trash + ` .tc-head`); !strings.Contains(got, "write") || !strings.Contains(got, "Waits for approval") {
		t.Errorf("card head: %q", got)
	}
	if n := br.count(trash + ` button[data-deny]`); n != 1 {
		t.Errorf("%d Deny buttons", n)
	}
	if got := br.text(`.msg-assistant .turn-changes`); !strings.Contains(got, "waits for approval") {
		t.Errorf("turn changes while waiting: %q", got)
	}
	if n := writes(); n != 0 {
		t.Fatalf("%d writes upstream before the approval", n)
	}
	br.run("approve",
		centre(trash+` button[data-approve]`),
		chromedp.Click(chromedp.CSS(trash+` button[data-approve]`)),
		chromedp.WaitVisible(chromedp.CSS(trash+`[data-state="done"]`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('Trashed it.')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		br.view("chat-approved"))
	if n := writes(); n != 1 {
		t.Errorf("%d writes upstream after the approval, want 1", n)
	}
	if got := br.text(trash + ` .tc-result`); !strings.Contains(got, "Output") || !strings.Contains(got, `"id": "`+messageID+`"`) || strings.Contains(got, "null") {
		t.Errorf("the approved card's output: %q", got)
	}
	if n := br.count(trash + ` button[data-approve]`); n != 0 {
		t.Errorf("the approved card still offers %d Approve buttons", n)
	}
	if n := br.count(`.msg-assistant`); n != 1 {
		t.Errorf("%d assistant messages, want the continuation in the same one", n)
	}
	if got := br.text(`.msg-assistant .turn-changes`); !strings.Contains(got, "MAIL_TRASH_MESSAGE") || !strings.Contains(got, "done") {
		t.Errorf("turn changes after the approval: %q", got)
	}
	if !br.eval(`[...document.querySelectorAll('.msg-assistant .msg-body > *')].pop().matches('.turn-changes')`) {
		t.Error("what the turn changed is not under the answer")
	}

	// A second chat: reopened while it waits, the buttons are there.
	br.run("ask in a second chat",
		chromedp.Navigate(ts.URL+"/studio/#/chat/cleaner/approve-2"),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SetValue(chromedp.ID("chat-input"), "Trash the first message."),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(trash+` button[data-deny]`)),
		jsTrue(`document.querySelector('#chat-stop').hidden`))
	br.run("reopen the waiting thread",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(trash+` button[data-deny]`)),
		chromedp.WaitVisible(chromedp.CSS(trash+` .tc-evidence`)))
	if got := br.text(trash + ` .tc-evidence`); !strings.Contains(got, "MAIL_LIST_MESSAGES") {
		t.Errorf("the reopened card's evidence: %q", got)
	}
	if !br.eval(`[...document.querySelectorAll('.tool-call')].map(c => c.dataset.toolCallId).join() === 'call_list,call_trash'`) {
		t.Error("the reopened thread does not show the calls in their order")
	}
	br.run("deny",
		centre(trash+` button[data-deny]`),
		chromedp.Click(chromedp.CSS(trash+` button[data-deny]`)),
		chromedp.WaitVisible(chromedp.CSS(trash+`[data-state="denied"]`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('Left it alone.')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		br.view("chat-denied"))
	if got := br.text(trash + ` .tc-badge`); !strings.Contains(got, "Denied") {
		t.Errorf("denied card badge: %q", got)
	}
	if n := writes(); n != 1 {
		t.Errorf("%d writes upstream after the denial, want still 1", n)
	}
	if got := br.text(`.msg-assistant .turn-changes`); !strings.Contains(got, "denied") {
		t.Errorf("turn changes after the denial: %q", got)
	}
	// Reopened once more, the thread shows the denial.
	br.run("reopen the denied thread",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(trash+`[data-state="denied"]`)))
	if n := br.count(trash + ` button[data-deny]`); n != 0 {
		t.Errorf("the denied thread still offers %d Deny buttons", n)
	}
}

// centre scrolls the element sel finds to the middle of the screen,
// clear of the chat form that sticks to the bottom.
func centre(sel string) chromedp.Action[chromedp.Void] {
	return jsTrue(`(document.querySelector(` + strconv.Quote(sel) + `).scrollIntoView({block: 'center'}), true)`)
}

// TestStudioProgressLineWords: the live progress line says when a walk
// waits for its provider's rate limit, and how many requests a walk
// fetching ahead has in flight; a progress chunk without either says
// neither.
func TestStudioProgressLineWords(t *testing.T) {
	br := startBrowser(t, 60*time.Second)
	defer br.finish()
	ts := startDemo(t, nil)
	br.login(ts, "/studio/")
	words := func(p string) string {
		t.Helper()
		s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`import('/studio/js/verdict.js').then(m => m.progressText(`+p+`))`, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("progressText(%s): %v", p, err)
		}
		return s
	}
	for _, c := range []struct{ chunk, want string }{
		{`{"page":4,"items":400,"requests":6,"elapsedMs":1200,"inFlight":2,"rateLimit":{"provider":"acme","cause":"rate","waitMs":2000}}`,
			"waiting for acme's rate limit (2 s) · page 4 · 400 items · 6 requests · 2 requests in flight · 1.2 s"},
		{`{"page":4,"items":400,"requests":6,"elapsedMs":1200,"inFlight":1,"rateLimit":{"provider":"acme","cause":"concurrency"}}`,
			"waiting for acme's rate limit · page 4 · 400 items · 6 requests · 1.2 s"},
		{`{"page":1,"items":50,"requests":1,"elapsedMs":0,"inFlight":0}`, "page 1 · 50 items · 1 request · 0.0 s"},
	} {
		if got := words(c.chunk); got != c.want {
			t.Errorf("progressText(%s) = %q, want %q", c.chunk, got, c.want)
		}
	}
}
