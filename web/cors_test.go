package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

const frontEnd = "http://app.example:3000"

func preflight(t *testing.T, url, origin, method, headers string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("OPTIONS", url, nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestCORSPreflight: an allowed origin's preflight for what a useChat
// transport sends is granted with no credential; another origin's, a
// header outside the list, and the connect page are not; real responses
// name the origin and expose the stream header.
func TestCORSPreflight(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.CORS.AllowedOrigins = []string{frontEnd} })
	chat := ts.URL + "/v1/agents/demo/chat"

	resp := preflight(t, chat, frontEnd, "POST", "authorization,content-type")
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != frontEnd {
		t.Fatalf("allowed preflight: %d %v", resp.StatusCode, resp.Header)
	}
	for h, want := range map[string][]string{
		"Access-Control-Allow-Methods": {"POST", "GET"},
		"Access-Control-Allow-Headers": {"Authorization", "Content-Type", "Last-Event-ID"},
		"Vary":                         {"Origin"},
	} {
		got := strings.Join(resp.Header.Values(h), ", ")
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s = %q lacks %s", h, got, w)
			}
		}
	}
	if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("credentials are bearer tokens: no Allow-Credentials")
	}
	// The resume endpoint, with Last-Event-ID.
	resume := ts.URL + "/v1/agents/demo/chat/c1/stream"
	if r := preflight(t, resume, frontEnd, "GET", "authorization, last-event-id"); r.StatusCode != 204 {
		t.Errorf("resume preflight: %d", r.StatusCode)
	}
	// Case differences in the origin's host still match; scheme or port do not.
	if r := preflight(t, chat, "http://APP.example:3000", "POST", "content-type"); r.StatusCode != 204 {
		t.Errorf("origin in upper case: %d", r.StatusCode)
	}
	for _, origin := range []string{"http://evil.example", "https://app.example:3000", "http://app.example:3001", "null"} {
		r := preflight(t, chat, origin, "POST", "authorization")
		if r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("origin %s: %d ACAO=%q", origin, r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
		}
	}
	if r := preflight(t, chat, frontEnd, "POST", "authorization, x-evil"); r.StatusCode != 403 || r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a header outside the list: %d", r.StatusCode)
	}
	if r := preflight(t, ts.URL+"/connect/chat", frontEnd, "POST", ""); r.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Error("the connect page is same-origin only")
	}

	// The real request from the allowed origin, with a session token.
	_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "u1"})
	var sess struct{ Token string }
	json.Unmarshal(b, &sess)
	r := ts.post(t, "/v1/agents/demo/chat", sess.Token, chatBody("c1", "m1", "How many open orders worth more than 100?"), "Origin", frontEnd)
	types := chunkTypes(readSSE(t, r.Body))
	r.Body.Close()
	if r.Header.Get("Access-Control-Allow-Origin") != frontEnd || !strings.Contains(strings.ToLower(r.Header.Get("Access-Control-Expose-Headers")), "x-vercel-ai-ui-message-stream") {
		t.Errorf("chat response headers: %v", r.Header)
	}
	if types[len(types)-2] != "finish" {
		t.Errorf("chat stream: %v", types)
	}
	// An error answer is readable too, so the UI can show it.
	r = ts.post(t, "/v1/agents/demo/chat", "wrong", chatBody("c1", "m1", "hi"), "Origin", frontEnd)
	r.Body.Close()
	if r.StatusCode != 401 || r.Header.Get("Access-Control-Allow-Origin") != frontEnd {
		t.Errorf("a refused request: %d ACAO=%q", r.StatusCode, r.Header.Get("Access-Control-Allow-Origin"))
	}
	// Without the config, no origin is allowed.
	plain := startDemo(t, nil)
	if r := preflight(t, plain.URL+"/v1/agents/demo/chat", frontEnd, "POST", "authorization"); r.StatusCode != 403 {
		t.Errorf("no cors config: %d", r.StatusCode)
	}
}

func TestCORSConfig(t *testing.T) {
	for _, bad := range []string{"*", "app.example", "http://app.example/", "http://app.example/path", "ftp://app.example", "http://user@app.example"} {
		_, err := ParseConfig("trawl.yaml", []byte("cors:\n  allowed_origins: [\""+bad+"\"]\n"), env(nil))
		if err == nil || !strings.Contains(err.Error(), "trawl.yaml:2: cors.allowed_origins[0]") {
			t.Errorf("origin %q: %v", bad, err)
		}
	}
	cfg, err := ParseConfig("trawl.yaml", []byte("cors: {allowed_origins: [\"https://App.example\", \"http://127.0.0.1:5173\"]}\n"), env(nil))
	if err != nil || cfg.CORS.AllowedOrigins[0] != "https://app.example" {
		t.Errorf("valid origins: %v %v", cfg, err)
	}
}

// corsPage is a front end on another origin that talks to trawl as a
// useChat transport does: a POST with a session token and a JSON body,
// reading the stream; then a resume GET with Last-Event-ID.
const corsPage = `<!doctype html><html><body><script>
async function run(api, token) {
  const out = {};
  try {
    const r = await fetch(api + '/v1/agents/demo/chat', {method: 'POST',
      headers: {'Authorization': 'Bearer ' + token, 'Content-Type': 'application/json'},
      body: JSON.stringify({id: 'b1', trigger: 'submit-message', messages: [{id: 'm1', role: 'user',
        parts: [{type: 'text', text: 'How many open orders worth more than 100?'}]}]})});
    out.status = r.status;
    out.streamHeader = r.headers.get('x-vercel-ai-ui-message-stream');
    out.body = await r.text();
    const again = await fetch(api + '/v1/agents/demo/chat/b1/stream', {
      headers: {'Authorization': 'Bearer ' + token, 'Last-Event-ID': '3'}});
    out.resume = again.status;
  } catch (e) { out.error = String(e); }
  return JSON.stringify(out);
}
</script></body></html>`

// browserContext starts headless Chromium for one test, kept from
// reaching out on its own (updates, sync, QUIC probes).
func browserContext(t *testing.T, bin string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	actx, acancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(func() { bcancel(); acancel(); cancel() })
	return bctx
}

// TestCORSInBrowser runs a real cross-origin fetch in headless Chromium:
// a page on one loopback origin streams a chat turn from trawl on
// another; a page on an origin not listed cannot.
func TestCORSInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	bin := chromium(t)
	page := func() *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, corsPage)
		}))
		t.Cleanup(s.Close)
		return s
	}
	allowed, other := page(), page()
	ts := startDemo(t, func(c *Config) { c.CORS.AllowedOrigins = []string{allowed.URL} })
	_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "browser"})
	var sess struct{ Token string }
	json.Unmarshal(b, &sess)

	bctx := browserContext(t, bin)
	type result struct {
		Status       int    `json:"status"`
		StreamHeader string `json:"streamHeader"`
		Body         string `json:"body"`
		Resume       int    `json:"resume"`
		Error        string `json:"error"`
	}
	fetchFrom := func(origin string) result {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Navigate(origin+"/")); err != nil {
			t.Fatal(err)
		}
		raw, err := chromedp.Run(bctx, chromedp.Evaluate[string](fmt.Sprintf("run(%q, %q)", ts.URL, sess.Token), chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatal(err)
		}
		var r result
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatalf("page said %q", raw)
		}
		return r
	}
	r := fetchFrom(allowed.URL)
	if r.Error != "" || r.Status != 200 || r.StreamHeader != "v1" {
		t.Fatalf("allowed origin: %+v", r)
	}
	if !strings.Contains(r.Body, `"type":"finish"`) || !strings.Contains(r.Body, `"type":"tool-output-available"`) {
		t.Errorf("the stream read in the browser: %.400s", r.Body)
	}
	if r.Resume != 204 {
		t.Errorf("resume after the turn: %d", r.Resume)
	}
	if r := fetchFrom(other.URL); r.Error == "" || r.Status != 0 {
		t.Errorf("an origin not listed could read the API: %+v", r)
	}
}
