package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trawl-dev/trawl/agent"
)

// fakeOverclaimer is an OpenAI-compatible model that lists the inbox's
// first page (no _all_pages), then says it holds every message; told by
// the claim check, it corrects itself.
func fakeOverclaimer(t *testing.T) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			fin := "null"
			if finish != "" {
				fin = fmt.Sprintf("%q", finish)
			}
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
		}
		say := func(text string) {
			b, _ := json.Marshal(text)
			chunk(`{"role":"assistant","content":`+string(b)+`}`, "")
			chunk(`{}`, "stop")
		}
		switch last := body.Messages[len(body.Messages)-1]; {
		case last.Role == "user":
			chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_list","type":"function","function":{"name":"MAIL_LIST_MESSAGES","arguments":"{\"maxResults\":3}"}}]}`, "")
			chunk(`{}`, "tool_calls")
		case last.Role == "system" && strings.Contains(last.Content, "do not support"):
			say("Correction: I read only the first page, 3 messages; the inbox holds more.")
		default:
			say("Your inbox holds exactly 3 messages, and I listed all of them.")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func startOverclaimDemo(t *testing.T, check string) *testServer {
	fake := fakeOverclaimer(t)
	ts := startDemo(t, func(c *Config) {
		c.Model = ModelConfig{Provider: "openai", BaseURL: fake.URL + "/v1", APIKey: "sk-test", Name: "gpt-test"}
	})
	st, b := ts.do(t, "PUT", "/v1/agents/counter", "", map[string]any{"system": "Count mail.", "answer_check": check,
		"agentTools": []any{map[string]any{"tool_id": "mail.MAIL_LIST_MESSAGES", "loop_responses": true}}})
	if st != http.StatusOK {
		t.Fatalf("PUT agent: %d %s", st, b)
	}
	return ts
}

// TestClaimCheckOverHTTP: over a first-page-only call, warn streams a
// data-claim-check part after the answer and the thread keeps it; revise
// streams it, then the correction, as the turn's last text.
func TestClaimCheckOverHTTP(t *testing.T) {
	for _, check := range []string{"warn", "revise"} {
		t.Run(check, func(t *testing.T) {
			ts := startOverclaimDemo(t, check)
			resp := ts.post(t, "/v1/agents/counter/chat", "", chatBody("c1", "u1", "How many messages are in my inbox?"))
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				t.Fatalf("chat: %d %s", resp.StatusCode, b)
			}
			events := readSSE(t, resp.Body)
			resp.Body.Close()
			all := strings.Join(chunkTypes(events), " ")
			want := "text-end finish-step data-claim-check finish"
			if check == "revise" {
				want = "text-end finish-step data-claim-check start-step"
			}
			if !strings.Contains(all, want) {
				t.Fatalf("stream: %s", all)
			}
			var cc agent.ClaimCheck
			for _, e := range events {
				var c struct {
					Type string           `json:"type"`
					Data agent.ClaimCheck `json:"data"`
				}
				if json.Unmarshal([]byte(e.Data), &c) == nil && c.Type == "data-claim-check" {
					cc = c.Data
				}
			}
			if len(cc.Findings) != 1 || cc.Findings[0].Tool != "MAIL_LIST_MESSAGES" || cc.Findings[0].Verdict != "first_page_only" {
				t.Errorf("claim check: %+v", cc)
			}
			_, b := ts.do(t, "GET", "/v1/agents/counter/chats/c1", "", nil)
			var msgs []agent.UIMessage
			if err := json.Unmarshal(b, &msgs); err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, p := range msgs[len(msgs)-1].Parts {
				if p.Type == "text" || p.Type == "data-claim-check" {
					kinds = append(kinds, p.Type)
				}
			}
			wantKinds := "text data-claim-check"
			if check == "revise" {
				wantKinds = "text data-claim-check text"
				if text := msgs[len(msgs)-1].Text(); !strings.Contains(text, "Correction: I read only the first page") {
					t.Errorf("the revision is not the turn's last text: %q", text)
				}
			}
			if got := strings.Join(kinds, " "); got != wantKinds {
				t.Errorf("the thread's parts: %s; want %s", got, wantKinds)
			}
		})
	}
}

// TestStudioShowsClaimCheck: the Studio shows the claim check under the
// answer it checks, live and when the chat is opened again, with the
// correction under it.
func TestStudioShowsClaimCheck(t *testing.T) {
	br := startBrowser(t, 90*time.Second)
	defer br.finish()
	ts := startOverclaimDemo(t, "revise")
	br.login(ts, "/studio/#/chat/counter/claims-1")
	check := func(step string) {
		t.Helper()
		got := br.text(`.msg-assistant .claim-check`)
		if !strings.Contains(got, "a correction follows") || !strings.Contains(got, "exactly 3 messages") || !strings.Contains(got, "MAIL_LIST_MESSAGES was first page only") {
			t.Errorf("%s: the claim check reads %q", step, got)
		}
		// Under the answer, above the correction.
		if !br.eval(`(() => { const kids = [...document.querySelector('.msg-assistant .msg-body').children];
			const i = kids.findIndex((k) => k.matches('.claim-check'));
			return i > 0 && kids.slice(0, i).some((k) => k.textContent.includes('listed all of them')) &&
				kids.slice(i + 1).some((k) => k.textContent.includes('Correction:')); })()`) {
			t.Errorf("%s: the claim check is not between the answer and its correction", step)
		}
	}
	br.run("ask",
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SetValue(chromedp.ID("chat-input"), "How many messages are in my inbox?"),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS(`.msg-assistant .claim-check`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('Correction:')`),
		jsTrue(`document.querySelector('#chat-stop').hidden`),
		br.view("chat-claim-check"))
	check("live")
	br.run("reopen",
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.CSS(`.msg-assistant .claim-check`)),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('Correction:')`))
	check("reopened")
}
