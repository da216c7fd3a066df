package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/prompts"
)

// askedWhy reports whether body carries the re-ask's reason.
func askedWhy(body oaiRequestBody) bool {
	for _, m := range body.Messages {
		if m.Role == "system" && m.Content == prompts.Text("preview") {
			return true
		}
	}
	return false
}

func toolChoice(raw map[string]json.RawMessage) string {
	return string(raw["tool_choice"])
}

// A retrieval-only step requires a tool call: tool_choice "required" is
// sent then, and only then.
func TestRetrievalOnlyStepRequiresAToolCall(t *testing.T) {
	fake := newOAIScript(t, func(w http.ResponseWriter, n int, body oaiRequestBody, raw map[string]json.RawMessage) {
		switch {
		case n == 0:
			oaiToolCall(w, body, "call_all", "list_orders", `{"_all_pages": true}`)
		case toolChoice(raw) == `"required"`:
			oaiToolCall(w, body, "call_q", loop.QueryToolResult, fmt.Sprintf(`{"resultId": %q, "fields": ["id"], "limit": 5}`, lastResultID(body)))
		default:
			oaiText(w, body, "Counted them all.")
		}
	})
	g := newDemoRig(t, NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1"}), &ContextConfig{MaxTokens: 6000})
	rec := g.turn(t, &Thread{Key: ThreadKey("", "support", "tc")}, "How many orders are there?")
	if errs := chunksOf(rec, "error"); len(errs) > 0 {
		t.Fatalf("the turn failed: %+v", errs)
	}
	fake.mu.Lock()
	raws := fake.raws
	fake.mu.Unlock()
	if len(raws) != 3 {
		for _, r := range fake.requests() {
			last := r.Messages[len(r.Messages)-1]
			t.Logf("%s %.300s", last.Role, last.Content)
		}
		t.Fatalf("%d requests, want 3", len(raws))
	}
	for i, want := range []string{"", `"required"`, ""} {
		if got := toolChoice(raws[i]); got != want {
			t.Errorf("request %d: tool_choice %s, want %q", i, got, want)
		}
	}
}

// A server that rejects tool_choice gets the step again at once without
// it, and never with it again. Its text answer off the preview is never
// shown: the step is asked once more with the reason, and the model
// reads the stored result before it answers.
func TestTextAnswerOffAPreviewIsReAsked(t *testing.T) {
	var rejected atomic.Int32
	fake := newOAIScript(t, func(w http.ResponseWriter, n int, body oaiRequestBody, raw map[string]json.RawMessage) {
		last := body.Messages[len(body.Messages)-1]
		switch {
		case toolChoice(raw) != "":
			rejected.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"tool_choice is not supported by this server","type":"invalid_request_error"}}`)
		case last.Role == "user":
			oaiToolCall(w, body, fmt.Sprintf("call_all_%d", n), "list_orders", `{"_all_pages": true}`)
		case askedWhy(body):
			oaiToolCall(w, body, fmt.Sprintf("call_q_%d", n), loop.QueryToolResult, fmt.Sprintf(`{"resultId": %q, "fields": ["id"], "limit": 5}`, lastResultID(body)))
		case last.Role == "tool" && strings.Contains(last.Content, `"_truncated":true`):
			oaiText(w, body, "There are 53 items in total.") // off the preview
		default:
			oaiText(w, body, "There are 3,000 orders.")
		}
	})
	g := newDemoRig(t, NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1"}), &ContextConfig{MaxTokens: 6000})
	th := &Thread{Key: ThreadKey("", "support", "reask")}
	for turn := range 2 {
		rec := g.turn(t, th, "How many orders are there?")
		if errs := chunksOf(rec, "error"); len(errs) > 0 {
			t.Fatalf("turn %d failed: %+v", turn, errs)
		}
		text := textOf(rec)
		if strings.Contains(text, "53 items") || !strings.Contains(text, "3,000 orders") {
			t.Errorf("turn %d streamed %q; want the answer after the read, never the one off the preview", turn, text)
		}
		for _, p := range th.Msgs[len(th.Msgs)-1].Parts {
			if strings.Contains(p.Text, "53 items") {
				t.Errorf("turn %d: the thread keeps the answer off the preview", turn)
			}
		}
		if n := len(chunksOf(rec, "tool-output-available")); n != 2 {
			t.Errorf("turn %d: %d tool outputs, want the walk and the read", turn, n)
		}
	}
	if n := rejected.Load(); n != 1 {
		t.Errorf("tool_choice was sent and refused %d times; want once, then remembered", n)
	}
	asked := 0
	for _, r := range fake.requests() {
		if askedWhy(r) {
			asked++
		}
	}
	if asked != 2 {
		t.Errorf("the reason was sent %d times; want once per turn", asked)
	}
}

// A model that answers off the preview again when re-asked is not asked a
// third time: its second answer stands.
func TestReAskedOnce(t *testing.T) {
	fake := newOAIScript(t, func(w http.ResponseWriter, n int, body oaiRequestBody, raw map[string]json.RawMessage) {
		last := body.Messages[len(body.Messages)-1]
		switch {
		case last.Role == "user":
			oaiToolCall(w, body, "call_all", "list_orders", `{"_all_pages": true}`)
		case askedWhy(body):
			oaiText(w, body, "I saw only a preview of 53 rows.")
		default:
			oaiText(w, body, "There are 53 items in total.")
		}
	})
	g := newDemoRig(t, NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1"}), &ContextConfig{MaxTokens: 6000})
	rec := g.turn(t, &Thread{Key: ThreadKey("", "support", "twice")}, "How many orders are there?")
	if got := textOf(rec); got != "I saw only a preview of 53 rows." {
		t.Errorf("streamed %q; want the second answer alone", got)
	}
	if n := len(fake.requests()); n != 3 {
		t.Errorf("%d requests, want 3 (the call, the answer off the preview, the re-ask)", n)
	}
}
