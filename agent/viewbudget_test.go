package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
)

// oaiScript is a fake OpenAI-compatible model: answer gets the index and
// body of each request and writes its stream. It records every request,
// raw and decoded.
type oaiScript struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []oaiRequestBody
	raws   []map[string]json.RawMessage
	answer func(w http.ResponseWriter, n int, body oaiRequestBody, raw map[string]json.RawMessage)
}

func newOAIScript(t *testing.T, answer func(w http.ResponseWriter, n int, body oaiRequestBody, raw map[string]json.RawMessage)) *oaiScript {
	f := &oaiScript{answer: answer}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body oaiRequestBody
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &body); err != nil || json.Unmarshal(b, &raw) != nil {
			http.Error(w, "bad body", 400)
			return
		}
		f.mu.Lock()
		f.reqs = append(f.reqs, body)
		f.raws = append(f.raws, raw)
		n := len(f.reqs) - 1
		f.mu.Unlock()
		f.answer(w, n, body, raw)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *oaiScript) requests() []oaiRequestBody {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]oaiRequestBody(nil), f.reqs...)
}

// oaiCall streams one tool call, with usage (the characters / 3.5).
func oaiToolCall(w http.ResponseWriter, body oaiRequestBody, id, name, args string) {
	a, _ := json.Marshal(args)
	oaiWriteSSE(w, oaiDelta(fmt.Sprintf(`{"role":"assistant","tool_calls":[{"index":0,"id":%q,"type":"function","function":{"name":%q,"arguments":%s}}]}`, id, name, a)),
		oaiFinish("tool_calls"), oaiUsageChunk(body))
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// oaiText streams a text answer, with usage.
func oaiText(w http.ResponseWriter, body oaiRequestBody, text string) {
	b, _ := json.Marshal(text)
	oaiWriteSSE(w, oaiDelta(`{"role":"assistant","content":`+string(b)+`}`), oaiFinish("stop"), oaiUsageChunk(body))
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func oaiUsageChunk(body oaiRequestBody) string {
	p := int(float64(body.chars()) / 3.5)
	return fmt.Sprintf(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":5,"total_tokens":%d}}`, p, p+5)
}

// lastResultID is the newest _resultId a tool message of body holds.
func lastResultID(body oaiRequestBody) string {
	id := ""
	for _, m := range body.Messages {
		if m.Role != "tool" {
			continue
		}
		var v struct {
			ID string `json:"_resultId"`
		}
		if json.Unmarshal([]byte(m.Content), &v) == nil && v.ID != "" {
			id = v.ID
		}
	}
	return id
}

func toolNames(body oaiRequestBody) []string {
	var out []string
	for _, t := range body.Tools {
		out = append(out, t.Function.Name)
	}
	return out
}

// A result larger than a small agent budget does not kill the turn: with
// context {max_tokens: 6000}, an ordinary _all_pages call is cut to what
// is left of the context for the step (not the deployment's 32,000
// characters), kept whole under its _resultId, and the turn goes on — the
// next step offers only the retrieval tools, the model queries the whole
// result, and answers. Every request stays within the budget.
func TestSmallContextCutsTheViewAndGoesOn(t *testing.T) {
	fake := newOAIScript(t, func(w http.ResponseWriter, n int, body oaiRequestBody, _ map[string]json.RawMessage) {
		switch n {
		case 0:
			oaiToolCall(w, body, "call_all", "list_orders", `{"_all_pages": true}`)
		case 1:
			oaiToolCall(w, body, "call_q", loop.QueryToolResult,
				fmt.Sprintf(`{"resultId": %q, "filter": [{"field": "status", "op": "eq", "value": "open"}], "fields": ["id", "total"], "limit": 20}`, lastResultID(body)))
		default:
			oaiText(w, body, "Here are the open orders.")
		}
	})
	model := NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1"})
	g := newDemoRig(t, model, &ContextConfig{MaxTokens: 6000})
	th := &Thread{Key: ThreadKey("", "support", "small-ctx")}
	rec := g.turn(t, th, "List every order.")
	if errs := chunksOf(rec, "error"); len(errs) > 0 {
		t.Fatalf("the turn failed: %+v", errs)
	}
	reqs := fake.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests, want 3 (call, query, answer)", len(reqs))
	}
	if got := strings.Join(toolNames(reqs[1]), ","); got != loop.QueryToolResult+","+loop.FetchToolResult {
		t.Errorf("the step after the cut offers %s; want the retrieval tools only", got)
	}
	// The cut view, as the model read it.
	var cut struct {
		Truncated bool   `json:"_truncated"`
		Shown     int    `json:"_shownItems"`
		Total     int    `json:"_totalItems"`
		ResultID  string `json:"_resultId"`
	}
	var view string
	for _, m := range reqs[1].Messages {
		if m.Role == "tool" {
			view = m.Content
		}
	}
	if err := json.Unmarshal([]byte(view), &cut); err != nil || !cut.Truncated || cut.ResultID == "" || cut.Shown == 0 || cut.Shown >= cut.Total {
		t.Fatalf("the result was not cut at an item boundary with a _resultId: %v %.300s", err, view)
	}
	t.Logf("the view: %d characters, %d of %d items", len(view), cut.Shown, cut.Total)
	if len(view) >= loop.DefaultViewBudget/2 {
		t.Errorf("the view is %d characters: the deployment's budget, not what the context leaves", len(view))
	}
	// The query read the whole stored result.
	outs := chunksOf(rec, "tool-output-available")
	if len(outs) != 2 {
		t.Fatalf("%d tool outputs", len(outs))
	}
	q, _ := json.Marshal(outs[1].(stream.ToolOutputAvailable).Output)
	if !strings.Contains(string(q), `"matched"`) && !strings.Contains(string(q), `"rows"`) {
		t.Logf("query output: %.400s", q)
	}
	if !strings.Contains(string(q), "ord_") {
		t.Errorf("the query returned no orders: %.400s", q)
	}
	// Every step fitted the budget, by the estimate the runner used.
	for i, r := range reqs {
		if r.chars() > int(6000*DefaultCharsPerToken*1.2) {
			t.Errorf("request %d sent %d characters for a 6000-token budget", i, r.chars())
		}
	}
	if texts := textOf(rec); !strings.Contains(texts, "Here are the open orders.") {
		t.Errorf("no answer: %q", texts)
	}
}

// textOf is the text a turn streamed.
func textOf(rec *recorder) string {
	var b strings.Builder
	for _, c := range chunksOf(rec, "text-delta") {
		b.WriteString(c.(stream.TextDelta).Delta)
	}
	return b.String()
}

// This turn's own results make room too: when the step after several
// reads would not fit, the oldest of this turn's results are sent as
// their verdicts (the stored thread keeps them whole), and the turn goes
// on; the data-context chunk says which calls were compacted.
func TestSmallContextCompactsThisTurnsResults(t *testing.T) {
	fake := newOAIScript(t, func(w http.ResponseWriter, n int, body oaiRequestBody, _ map[string]json.RawMessage) {
		id := lastResultID(body)
		switch n {
		case 0:
			oaiToolCall(w, body, "call_all", "list_orders", `{"_all_pages": true}`)
		case 1:
			oaiToolCall(w, body, "call_q", loop.QueryToolResult, fmt.Sprintf(`{"resultId": %q, "limit": 500}`, id))
		case 2:
			oaiToolCall(w, body, "call_f", loop.FetchToolResult, fmt.Sprintf(`{"resultId": %q, "offset": 0, "length": 50000}`, id))
		default:
			oaiText(w, body, "Done reading.")
		}
	})
	model := NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1"})
	g := newDemoRig(t, model, &ContextConfig{MaxTokens: 6000})
	th := &Thread{Key: ThreadKey("", "support", "small-ctx-2")}
	rec := g.turn(t, th, "Read every order.")
	if errs := chunksOf(rec, "error"); len(errs) > 0 {
		t.Fatalf("the turn failed: %+v", errs)
	}
	reqs := fake.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d model requests, want 4", len(reqs))
	}
	var reports []stream.ContextReport
	for _, c := range chunksOf(rec, "data-context") {
		reports = append(reports, c.(stream.Data).Data.(stream.ContextReport))
	}
	compacted := map[string]bool{}
	for _, r := range reports {
		if r.BudgetChars > 0 && r.Chars > r.BudgetChars {
			t.Errorf("step %d sent %d characters over its budget %d", r.Step, r.Chars, r.BudgetChars)
		}
		for _, id := range r.CompactedCalls {
			compacted[id] = true
		}
	}
	if !compacted["call_all"] {
		t.Errorf("no step compacted this turn's first result; reports: %+v", reports)
	}
	last := reqs[len(reqs)-1]
	found := false
	for _, m := range last.Messages {
		if m.Role == "tool" && m.ToolCallID == "call_all" {
			found = strings.Contains(m.Content, `"_compacted"`) && strings.Contains(m.Content, `"_resultId"`)
		}
	}
	if !found {
		t.Error("the last step did not send the first result as its verdict with its _resultId")
	}
	// The stored thread keeps every result whole.
	for _, p := range th.Msgs[len(th.Msgs)-1].Parts {
		if p.IsTool() && strings.Contains(string(p.Output), `"_compacted"`) {
			t.Errorf("the stored part %s was compacted", p.ToolCallID)
		}
	}
	if !strings.Contains(textOf(rec), "Done reading.") {
		t.Errorf("no answer: %q", textOf(rec))
	}
}
