package web

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/agent"
)

// screen is a browser window size the Studio is tried at.
type screen struct {
	name          string
	width, height int
	mobile        bool
}

// studioScreens are the sizes every chat test runs at: a laptop and a
// phone.
var studioScreens = []screen{{"desktop", 1440, 900, false}, {"phone", 390, 844, true}}

func (s screen) emulate() chromedp.Action[chromedp.Void] {
	if s.mobile {
		return chromedp.EmulateViewport(int64(s.width), int64(s.height), chromedp.EmulateMobile)
	}
	return chromedp.EmulateViewport(int64(s.width), int64(s.height))
}

// shot saves what the screen shows now (the viewport, not the whole
// page: what a user sees without scrolling), as name.png.
func (b *browser) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.CaptureScreenshot()(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(b.shots, name+".png"), png, 0o644)
	})
}

// inView is a script that reports whether the element sel finds is
// wholly on screen and above the chat's composer.
func inView(sel string) string {
	return `(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); if (!e) return false;
		const r = e.getBoundingClientRect(), f = document.getElementById('chat-form').getBoundingClientRect();
		return r.height > 0 && r.top >= 0 && r.bottom <= f.top + 1 && r.bottom <= innerHeight; })()`
}

// onScreen is a script: the element sel finds is wholly in the viewport.
func onScreen(sel string) string {
	return `(() => { const e = document.querySelector(` + strconv.Quote(sel) + `); if (!e) return false;
		const r = e.getBoundingClientRect(); return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.right <= innerWidth; })()`
}

// logAtBottom is a script: the conversation is scrolled to its end.
const logAtBottom = `(() => { const l = document.getElementById('chat-log'); return l.scrollHeight - l.scrollTop - l.clientHeight <= 24; })()`

// thread reads a chat's saved messages from the server.
func (ts *testServer) thread(t *testing.T, chat string) []agent.UIMessage {
	t.Helper()
	st, b := ts.do(t, "GET", "/v1/agents/demo/chats/"+chat, "", nil)
	if st != 200 {
		t.Fatalf("GET chat %s: %d %s", chat, st, b)
	}
	var msgs []agent.UIMessage
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// toolOutput is the output of the call with id in a thread.
func toolOutput(t *testing.T, msgs []agent.UIMessage, id string) json.RawMessage {
	t.Helper()
	for _, m := range msgs {
		for _, p := range m.Parts {
			if p.ToolCallID == id && p.Output != nil {
				return p.Output
			}
		}
	}
	t.Fatalf("no output of %s in the thread", id)
	return nil
}

// TestStudioFirstHour follows README as a new user does, at desktop and
// phone size: the console opens on Chat; the first question's walk
// streams in view (the conversation follows the stream, measured while
// it streams, with the card above the composer); scrolled up, the log
// stays put and "↓ new activity" appears, and brings it back; the card's
// stale progress line becomes the call's final figures; the second
// question's queryToolResult card shows exactly the rows that call
// returned, with its query as chips; Retry regenerates the last answer
// and Edit reruns from a question, the server's thread and the page
// agreeing after each; threads show their first question and a time;
// Activity names the chat by its first question; with looping off the
// card says "First page only".
func TestStudioFirstHour(t *testing.T) {
	for _, sc := range studioScreens {
		t.Run(sc.name, func(t *testing.T) { studioFirstHour(t, sc) })
	}
}

func studioFirstHour(t *testing.T, sc screen) {
	br := startBrowser(t, 4*time.Minute)
	defer br.finish()
	// Slow enough to watch the walk; no cache, so each ask walks.
	ts := startDemo(t, func(c *Config) { c.Demo, c.Cache.Mode = &DemoSettings{LatencyMs: 300}, "off" })
	shot := func(name string) chromedp.Action[chromedp.Void] { return br.shot("firsthour-" + sc.name + "-" + name) }
	br.run("open the console as README says",
		sc.emulate(),
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("key-input")),
		chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitNotVisible(chromedp.ID("key-dialog")),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		jsTrue(`location.hash.startsWith('#/chat/demo/studio-')`),
		shot("open"))
	if !br.eval(onScreen("#chat-form")) {
		t.Error("the composer is not on screen when the console opens")
	}
	chat, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`decodeURIComponent(location.hash.split('/')[3])`))
	if err != nil {
		t.Fatal(err)
	}

	// The first question: its walk streams in view, the log at its end.
	q1 := "How many open orders worth more than 100 do we have, and how do they split by currency?"
	card := `.tool-call[data-tool-call-id="call_0_0_0"]`
	progress := card + ` [data-tool-loop-progress]:not([hidden])`
	br.run("ask the first question",
		chromedp.SetValue(chromedp.ID("chat-input"), q1),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(progress)),
		jsTrue(`!document.querySelector('`+card+`').dataset.verdict`), // still walking
		shot("first-walk"))
	if !br.eval(logAtBottom) {
		t.Error("while the walk streams, the conversation is not at its end")
	}
	if !br.eval(inView(progress)) {
		t.Error("while the walk streams, its progress line is not on screen above the composer")
	}

	// The end of the walk: the final figures replace the progress line.
	br.run("the first answer",
		chromedp.WaitVisible(chromedp.CSS(card+` [data-verdict="complete"]`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('278 open orders worth more than 100')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		jsTrue(logAtBottom),
		shot("first-answer"))
	var env struct {
		Boundary struct{ Pages, Records, Requests int } `json:"_boundary"`
	}
	if err := json.Unmarshal(toolOutput(t, ts.thread(t, chat), "call_0_0_0"), &env); err != nil {
		t.Fatal(err)
	}
	wantFinal := fmt.Sprintf("done: %d pages · %d items · %d requests", env.Boundary.Pages, env.Boundary.Records, env.Boundary.Requests)
	if got := br.text(card + ` [data-tool-loop-progress]`); got != wantFinal {
		t.Errorf("the progress line after the walk says %q, want the final figures %q", got, wantFinal)
	}

	// The second question: the queryToolResult card shows the rows that
	// call returned, its query as chips.
	q2 := "Across all our properties, how many confirmed bookings were for a week or longer?"
	query := `.tool-call[data-tool-call-id="call_1_2_0"]`
	br.run("ask the second question",
		chromedp.SetValue(chromedp.ID("chat-input"), q2),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(`.tool-call[data-tool-call-id="call_1_1_0"] [data-tool-loop-progress]:not([hidden])`)),
		jsTrue(logAtBottom),
		shot("second-walk"))
	if !br.eval(inView(`.tool-call[data-tool-call-id="call_1_1_0"] [data-tool-loop-progress]`)) {
		t.Error("while the second walk streams, its progress line is not on screen above the composer")
	}
	// Scrolled up mid-stream (the first answer's card and table make
	// the log taller than its box): the log stays where the user put it,
	// and the pill says there is more.
	if !br.eval(`(() => { const l = document.getElementById('chat-log'); return l.scrollHeight > l.clientHeight + 200; })()`) {
		t.Fatal("the conversation fits its box: nothing to scroll")
	}
	br.run("scroll up while it streams",
		chromedp.Evaluate[chromedp.Void](`document.getElementById('chat-log').scrollTop = 0`),
		chromedp.WaitVisible(chromedp.ID("chat-newer")),
		shot("scrolled-up"))
	if top, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.getElementById('chat-log').scrollTop`)); err != nil || top != 0 {
		t.Errorf("the log moved to %d (%v) after the user scrolled to the top", top, err)
	}
	if !br.eval(onScreen("#chat-newer")) {
		t.Error("the new-activity pill is not on screen")
	}
	br.run("the pill brings the end back",
		chromedp.Click(chromedp.ID("chat-newer")),
		jsTrue(logAtBottom),
		jsTrue(`document.getElementById('chat-newer').hidden`),
		chromedp.WaitVisible(chromedp.CSS(query+` .rows-table tbody td`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('157 confirmed bookings')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`))
	br.run("look at the query card", centre(query+` .rows`), shot("query-card"))
	var answer struct {
		Items   []map[string]any `json:"items"`
		Matched int              `json:"matched"`
		Total   int              `json:"total"`
	}
	if err := json.Unmarshal(toolOutput(t, ts.thread(t, chat), "call_1_2_0"), &answer); err != nil {
		t.Fatal(err)
	}
	if answer.Matched != 157 || len(answer.Items) == 0 {
		t.Fatalf("the recorded query matched %d rows, returned %d", answer.Matched, len(answer.Items))
	}
	cells, err := chromedp.Run(br.ctx, chromedp.Evaluate[[][]string](`(() => {
		const q = document.querySelector('`+query+`');
		const cols = [...q.querySelectorAll('.rows-table thead th')].map((th) => th.textContent);
		return [cols, ...[...q.querySelectorAll('.rows-table tbody tr')].map((tr) => [...tr.children].map((td) => td.textContent))];
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	var want [][]string
	want = append(want, []string{"id", "property_id", "nights"})
	for _, it := range answer.Items[:min(20, len(answer.Items))] {
		want = append(want, []string{fmt.Sprint(it["id"]), fmt.Sprint(it["property_id"]), fmt.Sprint(it["nights"])})
	}
	if diff := cmp.Diff(want, cells); diff != "" {
		t.Errorf("the query card's first page is not the rows the call returned (-want +got):\n%s", diff)
	}
	wantStatus := fmt.Sprintf("rows 1–%d of the %d rows this call returned (matches 1–%d of %d matched, %d stored)",
		min(20, len(answer.Items)), len(answer.Items), len(answer.Items), answer.Matched, answer.Total)
	if got := br.text(query + ` .rows-status`); got != wantStatus {
		t.Errorf("query card status %q, want %q", got, wantStatus)
	}
	if got := br.text(query + ` .chips`); !strings.Contains(got, "status eq confirmed") || !strings.Contains(got, "nights gte 7") ||
		!strings.Contains(got, "fields: id, property_id, nights") {
		t.Errorf("the query's chips: %q", got)
	}

	// Retry the last answer: regenerate-message with its id.
	before := ts.thread(t, chat)
	if len(before) != 4 {
		t.Fatalf("%d messages after two questions", len(before))
	}
	br.run("retry the last answer",
		centre(`.msg-assistant[data-last="true"] .msg-retry`),
		chromedp.Click(chromedp.CSS(`.msg-assistant[data-last="true"] .msg-retry`)),
		chromedp.WaitVisible(chromedp.CSS(`.msg-assistant[data-state="streaming"]`)),
		jsTrue(`document.querySelector('#chat-stop').hidden && document.querySelectorAll('.msg-assistant').length === 2`),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('157 confirmed bookings')`),
		shot("retried"))
	after := ts.thread(t, chat)
	if len(after) != 4 || after[2].ID != before[2].ID || after[3].ID == before[3].ID || after[3].Role != agent.RoleAssistant {
		t.Errorf("after Retry the thread is %s, before %s", msgIDs(after), msgIDs(before))
	}
	if page := pageIDs(t, br); page != msgIDs(after) {
		t.Errorf("after Retry the page shows %s, the server %s", page, msgIDs(after))
	}

	// Copy takes the answer's text.
	br.run("copy the answer", chromedp.Click(chromedp.CSS(`.msg-assistant[data-last="true"] .msg-copy`)),
		jsTrue(`(document.querySelector('.msg-assistant[data-last="true"]').dataset.copied || '').includes('157 confirmed bookings')`))

	// Edit the first question and rerun from it: the rest is replaced.
	edited := "How many open orders worth more than 100?"
	br.run("edit the first question",
		centre(`.msg-user .msg-edit`),
		chromedp.Click(chromedp.CSS(`.msg-user .msg-edit`)),
		chromedp.WaitVisible(chromedp.CSS(`.msg-editor textarea`)),
		chromedp.SetValue(chromedp.CSS(`.msg-editor textarea`), edited),
		chromedp.Click(chromedp.CSS(`.msg-editor button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.tool-call[data-tool-call-id="call_0_0_0"] [data-verdict="complete"]`)),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		jsTrue(logAtBottom),
		shot("edited"))
	after = ts.thread(t, chat)
	if len(after) != 2 || after[0].ID != before[0].ID || after[0].Text() != edited {
		t.Errorf("after the edit the thread is %s (first message %q), want the first question edited in place and one answer", msgIDs(after), after[0].Text())
	}
	if page := pageIDs(t, br); page != msgIDs(after) {
		t.Errorf("after the edit the page shows %s, the server %s", page, msgIDs(after))
	}

	// Threads: each by its first question, with a time.
	if sc.mobile && br.eval(`document.querySelector('.chat-threads').open`) {
		t.Error("on a phone the thread list is open, above the conversation")
	}
	br.run("a second chat",
		jsTrue(`document.querySelector('.chat-threads').open || (document.querySelector('.chat-threads > summary').click(), true)`),
		chromedp.Click(chromedp.ID("chat-new")), chromedp.WaitVisible(chromedp.CSS(`.chat-empty`)),
		jsTrue(`document.querySelector('.chat-threads').open || (document.querySelector('.chat-threads > summary').click(), true)`),
		jsTrue(`document.querySelectorAll('#chat-threads .thread-link time').length >= 1`))
	got := br.text(`#chat-threads .thread-link[data-chat-id="` + chat + `"]`)
	if !strings.Contains(got, edited) || !strings.Contains(got, "2 messages") {
		t.Errorf("the thread's entry says %q, want its first question and its messages", got)
	}
	br.run("the thread list", shot("threads"))

	// Activity names the chat by its first question.
	br.run("open the activity",
		chromedp.Click(chromedp.CSS(`a[data-nav="activity"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#activity-trace .trace-title`)),
		shot("activity"))
	if got := br.text(`#activity-trace .trace-title`); got != "“"+edited+"”" {
		t.Errorf("the activity's chat is titled %q", got)
	}

	// Looping off: the replayed call sees one page, and its card says so.
	ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false})
	br.run("ask with looping off",
		chromedp.Navigate(ts.URL+"/studio/#/chat/demo/looping-off"),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SetValue(chromedp.ID("chat-input"), q1),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(card+` [data-verdict="first_page"]`)),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		shot("first-page-only"))
	if got := br.text(card + ` .tc-badge`); got != "First page only" {
		t.Errorf("the non-looping call's badge says %q", got)
	}
	br.run("look at the card", centre(card+` .tc-head`), shot("first-page-only-card"))
}

// msgIDs is a thread as role:id, joined.
func msgIDs(msgs []agent.UIMessage) string {
	var parts []string
	for _, m := range msgs {
		parts = append(parts, string(m.Role)+":"+m.ID)
	}
	return strings.Join(parts, " ")
}

// pageIDs is the Studio's conversation as role:id, joined.
func pageIDs(t *testing.T, br *browser) string {
	t.Helper()
	s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('#chat-log > .msg')].map((m) =>
		(m.classList.contains('msg-user') ? 'user:' : 'assistant:') + m.dataset.messageId).join(' ')`))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStudioPages: the Agents and Tools pages at desktop and phone size:
// no badge is clipped by its card, and a tool's Try it is on screen when
// the page opens on it.
func TestStudioPages(t *testing.T) {
	for _, sc := range studioScreens {
		t.Run(sc.name, func(t *testing.T) {
			br := startBrowser(t, 2*time.Minute)
			defer br.finish()
			ts := startDemo(t, nil)
			shot := func(name string) chromedp.Action[chromedp.Void] { return br.shot("pages-" + sc.name + "-" + name) }
			br.run("the agents page", sc.emulate(), chromedp.Navigate(ts.URL+"/studio/#/agents/demo"),
				chromedp.WaitVisible(chromedp.ID("key-input")),
				chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
				chromedp.Click(chromedp.ID("key-submit")),
				chromedp.WaitNotVisible(chromedp.ID("key-dialog")),
				chromedp.WaitVisible(chromedp.CSS(`article[data-tool-id="acme.list_orders"]`)),
				shot("agents"))
			clipped := func() string {
				s, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`[...document.querySelectorAll('main .badge, main .pill')].filter((b) => {
					const r = b.getBoundingClientRect(); if (!r.width) return false;
					for (let p = b.parentElement; p && p !== document.body; p = p.parentElement) {
						const s = getComputedStyle(p);
						if (s.overflow !== 'visible' || s.overflowX !== 'visible') {
							const q = p.getBoundingClientRect();
							if (r.left < q.left - 0.5 || r.right > q.right + 0.5) return true;
						}
					}
					return r.right > innerWidth + 0.5;
				}).map((b) => b.textContent).slice(0, 5).join(', ')`))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			if c := clipped(); c != "" {
				t.Errorf("badges clipped on the agents page: %s", c)
			}
			br.run("a tool's page", chromedp.Navigate(ts.URL+"/studio/#/tools/acme.list_orders"),
				chromedp.WaitVisible(chromedp.ID("try-args")), shot("tool"))
			if !br.eval(onScreen("#try-run")) {
				t.Error("Try it's Run is not on screen when the page opens on the tool")
			}
			if c := clipped(); c != "" {
				t.Errorf("badges clipped on the tools page: %s", c)
			}
		})
	}
}
