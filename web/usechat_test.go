package web

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/trawl-dev/trawl/agent"
)

// useChatPage bundles testdata/usechat/app.jsx (README's useChat snippet
// on the AI SDK's own @ai-sdk/react) with esbuild and serves it on an
// origin of its own; it skips the test when the packages are not
// installed.
func useChatPage(t *testing.T) *httptest.Server {
	t.Helper()
	dir, _ := filepath.Abs(filepath.Join("testdata", "usechat"))
	esbuild := filepath.Join(dir, "node_modules", ".bin", "esbuild")
	for _, p := range []string{esbuild, filepath.Join(dir, "node_modules", "@ai-sdk", "react")} {
		if _, err := os.Stat(p); err != nil {
			t.Skipf("useChat page: %s is not installed; run web/testdata/usechat/install.sh (bash .ci/run does)", p)
		}
	}
	bundle := filepath.Join(t.TempDir(), "app.js")
	cmd := exec.Command(esbuild, "app.jsx", "--bundle", "--format=esm", "--jsx=automatic",
		`--define:process.env.NODE_ENV="production"`, "--log-level=warning", "--outfile="+bundle)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("esbuild: %v\n%s", err, out)
	}
	js, err := os.ReadFile(bundle)
	if err != nil {
		t.Fatal(err)
	}
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!doctype html><meta charset="utf-8"><title>useChat</title><div id="root"></div><script type="module" src="/app.js"></script>`)
		case "/app.js":
			w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
			w.Write(js)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(page.Close)
	return page
}

// TestUseChatInBrowser drives a page built on the real useChat in
// headless Chromium against trawl on another origin: a turn; regenerate
// (trigger regenerate-message with the answer's messageId) and
// sendMessage with a messageId (an edit) leave the server's thread equal
// to useChat's list, ids and roles; README's stop (useChat's stop() plus
// the stop endpoint) ends the turn on the server; a message sent while a
// turn runs stops it and takes its place (replace: true); and without
// replace the 409 says how to follow, stop or replace the turn.
func TestUseChatInBrowser(t *testing.T) {
	page := useChatPage(t)
	br := startBrowser(t, 4*time.Minute)
	defer br.finish()
	// Slow enough for a turn to be running when it is stopped or
	// replaced; no cache, so each ask walks.
	ts := startDemo(t, func(c *Config) {
		c.Demo, c.Cache.Mode = &DemoSettings{LatencyMs: 300}, "off"
		c.CORS.AllowedOrigins = []string{page.URL}
	})
	const chat = "usechat-1"
	key := agent.ThreadKey("", "demo", chat)
	q := url.Values{"trawl": {ts.URL}, "chat": {chat}, "token": {ts.AdminKey()}}
	br.run("open the page", chromedp.Navigate(page.URL+"/?"+q.Encode()), jsTrue(`window.chat && window.chat.status === 'ready'`))

	// clientIDs is useChat's list as role:id.
	clientIDs := func() string {
		t.Helper()
		s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`window.chat.messages.map((m) => m.role + ':' + m.id).join(' ')`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	lastText := func() string {
		t.Helper()
		s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`(() => { const m = window.chat.messages.at(-1);
			return m ? m.parts.filter((p) => p.type === 'text').map((p) => p.text).join('') : ''; })()`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	ready := jsTrue(`window.chat.status === 'ready' || window.chat.status === 'error'`)
	noError := func(step string) {
		t.Helper()
		if s, _ := chromedp.Run(br.ctx, chromedp.Evaluate[string](`window.chat.error`)); s != "" {
			t.Fatalf("%s: useChat reports an error: %s", step, s)
		}
	}
	same := func(step string) []agent.UIMessage {
		t.Helper()
		msgs := ts.thread(t, chat)
		if got, want := clientIDs(), msgIDs(msgs); got != want {
			t.Errorf("%s: useChat holds %s, the server's thread %s", step, got, want)
		}
		return msgs
	}
	send := func(text string) string {
		return `window.chat.sendMessage({ text: ` + strconv.Quote(text) + ` }), true`
	}
	running := func() {
		t.Helper()
		waitActive(t, ts, key)
		br.run("the turn streams", jsTrue(`window.chat.status === 'streaming' && window.chat.messages.at(-1).parts.some((p) => p.type === 'dynamic-tool' || p.type.startsWith('tool-'))`))
	}

	q1 := "How many open orders worth more than 100 do we have, and how do they split by currency?"
	q2 := "Across all our properties, how many confirmed bookings were for a week or longer?"
	br.run("a turn", jsTrue(send(q1)), jsTrue(`window.chat.status !== 'ready'`), ready)
	noError("a turn")
	first := same("after a turn")
	if len(first) != 2 || !strings.Contains(lastText(), "278 open orders") {
		t.Fatalf("after a turn: %s, answer %q", msgIDs(first), lastText())
	}

	// Retry: regenerate the answer by its id.
	br.run("regenerate", jsTrue(`window.chat.regenerate({ messageId: `+strconv.Quote(first[1].ID)+` }), true`),
		jsTrue(`window.chat.status !== 'ready'`), ready)
	noError("regenerate")
	retried := same("after regenerate")
	if len(retried) != 2 || retried[0].ID != first[0].ID || retried[1].ID == first[1].ID || !strings.Contains(lastText(), "278 open orders") {
		t.Errorf("after regenerate: %s (before %s)", msgIDs(retried), msgIDs(first))
	}

	// Edit: the question sent again with its messageId, reworded.
	edited := "How many open orders worth more than 100?"
	br.run("edit", jsTrue(`window.chat.sendMessage({ text: `+strconv.Quote(edited)+`, messageId: `+strconv.Quote(first[0].ID)+` }), true`),
		jsTrue(`window.chat.status !== 'ready'`), ready)
	noError("edit")
	after := same("after the edit")
	if len(after) != 2 || after[0].ID != first[0].ID || after[0].Text() != edited {
		t.Errorf("after the edit: %s, first message %q", msgIDs(after), after[0].Text())
	}

	// README's stop: useChat's stop() and the stop endpoint end the turn.
	br.run("a long turn", jsTrue(send(q2)))
	running()
	br.run("stop it", chromedp.Evaluate[chromedp.Void](`window.chat.stop().then(() => true)`, chromedp.EvalAwaitPromise), ready)
	if id, _ := ts.runs.Active(context.Background(), key); id != "" {
		t.Error("the turn still runs on the server after README's stop")
	}
	stopped := ts.thread(t, chat)
	if n := len(stopped); n != 4 || strings.Contains(stopped[n-1].Text(), "157 confirmed bookings") {
		t.Errorf("after stop the thread is %s, its last message %q", msgIDs(stopped), stopped[n-1].Text())
	}

	// Without replace, a message sent while a turn runs gets a 409 that
	// says what to do.
	br.run("another long turn", jsTrue(send(q2)))
	running()
	conflict, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`fetch(`+strconv.Quote(ts.URL+"/v1/agents/demo/chat")+`, {
		method: 'POST', headers: { Authorization: `+strconv.Quote("Bearer "+ts.AdminKey())+`, 'Content-Type': 'application/json' },
		body: JSON.stringify({ id: `+strconv.Quote(chat)+`, messages: [{ id: 'm-409', role: 'user', parts: [{ type: 'text', text: 'hi' }] }] }),
	}).then(async (r) => r.status + ' ' + await r.text())`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	status, body, _ := strings.Cut(conflict, " ")
	var refusal struct {
		Error   struct{ Code, Message string } `json:"error"`
		Running struct{ Stream, Stop string }  `json:"running"`
	}
	if err := json.Unmarshal([]byte(body), &refusal); err != nil || status != "409" {
		t.Fatalf("a second message while a turn runs: %s %s (%v)", status, body, err)
	}
	base := "/v1/agents/demo/chat/" + chat
	if refusal.Error.Code != "conflict" || refusal.Running.Stop != base+"/stop" || refusal.Running.Stream != base+"/stream" ||
		!strings.Contains(refusal.Error.Message, "POST "+base+"/stop") || !strings.Contains(refusal.Error.Message, `"replace": true`) {
		t.Errorf("the 409 says %s", body)
	}

	// With replace (README's transport), it stops the turn and answers.
	br.run("replace the running turn", jsTrue(send(q1)), jsTrue(`window.chat.messages.at(-1).role === 'assistant' && window.chat.messages.length === 8`), ready)
	noError("replace")
	replaced := same("after the replace")
	n := len(replaced)
	if n != 8 || replaced[n-2].Text() != q1 || !strings.Contains(replaced[n-1].Text(), "278 open orders") || strings.Contains(replaced[n-3].Text(), "157 confirmed") {
		t.Errorf("after the replace the thread is %s; last answer %q", msgIDs(replaced), replaced[n-1].Text())
	}
	if id, _ := ts.runs.Active(context.Background(), key); id != "" {
		t.Error("a turn still runs after the replacing turn ended")
	}
	br.run("the page", br.shot("usechat"))
}
