package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// oaiRecorder is a fake OpenAI-compatible model that records every
// request body. A request whose last message is the user's asks for the
// tool call next() gives; one that requires a tool call (tool_choice
// "required": a cut result waits) reads three rows of the newest stored
// result with queryToolResult; any other is answered in text. Each answer
// reports usage, prompt_tokens being the characters sent / 3.5.
type oaiRecorder struct {
	*oaiScript
}

type oaiRequestBody struct {
	Model    string `json:"model"`
	Messages []struct {
		Role       string `json:"role"`
		Content    string `json:"content"`
		ToolCallID string `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	ToolChoice json.RawMessage `json:"tool_choice"`
}

// chars counts a request as the budget does.
func (b *oaiRequestBody) chars() int {
	n := 0
	for _, m := range b.Messages {
		n += messageOverhead + len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += messageOverhead + len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	for _, t := range b.Tools {
		n += toolOverhead + len(t.Function.Name) + len(t.Function.Description) + len(t.Function.Parameters)
	}
	return n
}

func newOAIRecorder(t *testing.T, next func(user string) (string, string)) *oaiRecorder {
	return &oaiRecorder{newOAIScript(t, func(w http.ResponseWriter, n int, body oaiRequestBody, _ map[string]json.RawMessage) {
		last := body.Messages[len(body.Messages)-1]
		switch {
		case string(body.ToolChoice) == `"required"`:
			oaiToolCall(w, body, fmt.Sprintf("call_%d", n+1), loop.QueryToolResult, fmt.Sprintf(`{"resultId":%q,"fields":["id"],"limit":3}`, lastResultID(body)))
		case last.Role == "user":
			name, args := next(last.Content)
			oaiToolCall(w, body, fmt.Sprintf("call_%d", n+1), name, args)
		default:
			oaiText(w, body, "Here is what I found.")
		}
	})}
}

// demoRig is a runner on the demo Acme API with the dataset cache and
// stored results, on a fake clock.
type demoRig struct {
	runner *Runner
	clock  *paginate.FakeClock
	def    Definition
}

func newDemoRig(t *testing.T, model Model, ctxCfg *ContextConfig) *demoRig {
	t.Helper()
	up := demo.NewServer(demo.Options{})
	url, err := up.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	acme, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: url})
	if err != nil {
		t.Fatal(err)
	}
	cat := tools.NewCatalog()
	if err := cat.Add(acme...); err != nil {
		t.Fatal(err)
	}
	clock := paginate.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	results := loop.NewRetrieval(loop.RetrievalOptions{Now: clock.Now})
	cache, err := loop.NewDatasetCache(loop.CacheOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	eng := loop.New(loop.Options{Caller: tools.NewInvoker(tools.InvokerOptions{}), Clock: clock, Results: results, Cache: cache})
	def := Definition{ID: "support", System: "You help the support team.", MaxSteps: 4, Context: ctxCfg}
	for _, name := range []string{"list_orders", "get_order", "list_customers"} {
		def.AgentTools = append(def.AgentTools, Binding{ToolID: "acme." + name, ProviderID: "acme", LoopResponses: true})
	}
	r := NewRunner(RunnerOptions{Model: model, ModelName: "gpt-4o-mini", Engine: eng, Retrieval: results, Catalog: cat, Now: clock.Now})
	return &demoRig{runner: r, clock: clock, def: def}
}

func (g *demoRig) turn(t *testing.T, th *Thread, text string) *recorder {
	t.Helper()
	th.Msgs = append(th.Msgs, UIMessage{ID: fmt.Sprintf("u%d", len(th.Msgs)), Role: RoleUser, Parts: []Part{{Type: "text", Text: text}}})
	rec := &recorder{}
	err := g.runner.Run(context.Background(), &Turn{Agent: func() (Definition, bool) { return g.def, true }, Thread: th, Org: "o", Emit: rec.emit})
	if err != nil {
		t.Fatalf("turn %q: %v", text, err)
	}
	return rec
}

func intp(n int) *int { return &n }

// TestContextLongConversation plays 30 turns, each walking a looping
// tool, against a fake OpenAI-compatible server that records every
// request, and checks each request against the budget.
func TestContextLongConversation(t *testing.T) {
	const budgetChars = 60_000
	statuses := []string{"open", "paid", "refunded", "cancelled"}
	var turnArgs []string
	fake := newOAIRecorder(t, func(user string) (string, string) {
		var i int
		fmt.Sscanf(user, "Question %d", &i)
		if i == 25 { // the walk of turn 1 again
			return "list_orders", turnArgs[1]
		}
		return "list_orders", turnArgs[i]
	})
	for i := range 30 {
		args := fmt.Sprintf(`{"status":%q,"_all_pages":true}`, statuses[i%4]) // large: the guard cuts it and keeps it
		if i%2 == 1 {
			args = fmt.Sprintf(`{"status":%q,"_all_pages":true,"_fields":["id","total","customer_id"]}`, statuses[i%4])
		}
		turnArgs = append(turnArgs, args)
	}
	model := NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1", StreamUsage: StreamUsageOn})
	g := newDemoRig(t, model, &ContextConfig{MaxChars: budgetChars, KeepRecentSteps: intp(1)})
	th := &Thread{Key: ThreadKey("", "support", "long")}

	var outputs []string // every tool output as stored, in order
	sent := 0
	for i := range 30 {
		question := fmt.Sprintf("Question %d: how are the %s orders doing?", i, statuses[i%4])
		rec := g.turn(t, th, question)
		for _, c := range rec.chunks {
			if e, ok := c.(stream.Error); ok {
				t.Fatalf("turn %d: %s", i, e.ErrorText)
			}
		}
		reqs := fake.requests()
		stored := th.Msgs[len(th.Msgs)-1]
		var outs []string // this turn's: the walk, then a read of it when it was cut
		for _, p := range stored.Parts {
			if p.IsTool() {
				outs = append(outs, string(p.Output))
			}
		}
		if len(outs) == 0 {
			t.Fatalf("turn %d: no tool output in %+v", i, stored.Parts)
		}
		out := outs[0]
		outputs = append(outputs, outs...)
		if i == 25 && !strings.Contains(out, `"_cache":{"hit":true`) {
			t.Errorf("turn 25 re-ran turn 1's walk: not a cache hit: %.300s", out)
		}
		// A cut walk is read (the step after it requires a tool call).
		cut := strings.Contains(out, `"_truncated":true`)
		if want := map[bool]int{false: 1, true: 2}[cut]; len(outs) != want {
			t.Errorf("turn %d: %d tool calls, want %d (cut: %v)", i, len(outs), want, cut)
		}
		// The reports: one per step, within the budget.
		var reports []stream.ContextReport
		for _, c := range rec.chunks {
			if d, ok := c.(stream.Data); ok && d.Name == stream.ContextName {
				reports = append(reports, d.Data.(stream.ContextReport))
			}
		}
		if len(reports) != len(outs)+1 || len(reqs[sent:]) != len(reports) {
			t.Fatalf("turn %d: %d context reports and %d requests, want %d", i, len(reports), len(reqs[sent:]), len(outs)+1)
		}
		for j, req := range reqs[sent:] {
			if n := req.chars(); n > budgetChars {
				t.Errorf("turn %d step %d: sent %d characters, budget %d", i, j, n, budgetChars)
			} else if n != reports[j].Chars {
				t.Errorf("turn %d step %d: sent %d characters, report says %d", i, j, n, reports[j].Chars)
			}
			checkPairing(t, fmt.Sprintf("turn %d step %d", i, j), req)
			// The newest turn is whole: its question, then its call and
			// the output exactly as stored.
			var newest int
			for k, m := range req.Messages {
				if m.Role == "user" {
					newest = k
				}
			}
			if req.Messages[newest].Content != question {
				t.Errorf("turn %d step %d: newest user message %q", i, j, req.Messages[newest].Content)
			}
			if j >= 1 {
				tail := req.Messages[newest+1:]
				if len(tail) != 2*j || tail[1].Role != "tool" || tail[1].Content != out {
					t.Errorf("turn %d step %d: the current turn is not whole: %d messages after the question", i, j, len(tail))
				}
			}
			// Older results: whole only within the window (the newest
			// older step), verdicts otherwise.
			var older []string
			for _, m := range req.Messages[:newest] {
				if m.Role == "tool" {
					older = append(older, m.Content)
				}
			}
			for k, c := range older {
				if k == len(older)-1 && i > 0 && reports[j].DroppedTurns == 0 && !strings.Contains(c, `"_compacted"`) {
					continue // the window: may stay whole
				}
				if len(c) < 500 && !strings.Contains(c, `"_compacted"`) {
					continue // a read of three ids: shorter than any verdict, and compaction only shortens
				}
				if !strings.Contains(c, `"_compacted"`) || !strings.Contains(c, `"_tool":"list_orders"`) && !strings.Contains(c, `"_tool":"queryToolResult"`) || !strings.Contains(c, `"_arguments"`) {
					t.Errorf("turn %d step %d: older result %d not compacted to its verdict: %.200s", i, j, k, c)
				}
				if len(c) > 2500 {
					t.Errorf("turn %d step %d: compacted result of %d characters", i, j, len(c))
				}
			}
		}
		if i >= 3 {
			last := reqs[len(reqs)-1]
			if reports[len(reports)-1].Compacted == 0 {
				t.Errorf("turn %d: nothing compacted: %+v", i, reports[len(reports)-1])
			}
			if !last.hasVerdictOf("_boundary") || !last.hasVerdictOf(`"completion":"complete"`) {
				t.Errorf("turn %d: compacted results lack their boundary", i)
			}
		}
		sent = len(reqs)
		g.clock.Advance(2 * time.Minute)
	}
	reqs := fake.requests()
	if len(reqs) != 30+len(outputs) {
		t.Errorf("%d requests, want %d (a step per call, and each turn's answer)", len(reqs), 30+len(outputs))
	}
	// Calibration: the fake reports characters / 3.5.
	if reqs[0].StreamOptions == nil || !reqs[0].StreamOptions.IncludeUsage {
		t.Errorf("usage was not asked for")
	}

	// Expired ids: the last request was made at 09:58; results kept
	// before 09:43 have expired and are marked so, never offered.
	last := reqs[len(reqs)-1]
	now := g.clock.Now().Add(-2 * time.Minute)
	var expired, live int
	for _, m := range last.Messages {
		if m.Role != "tool" || !strings.Contains(m.Content, `"_compacted"`) {
			continue
		}
		var v struct {
			ResultID string `json:"_resultId"`
			Expires  string `json:"_resultExpires"`
			Expired  string `json:"_resultExpired"`
			Note     string `json:"_note"`
		}
		if err := json.Unmarshal([]byte(m.Content), &v); err != nil {
			t.Fatalf("a compacted result is not JSON: %v\n%s", err, m.Content)
		}
		switch {
		case v.Expired != "":
			expired++
			if strings.Contains(v.Note, v.Expired) {
				t.Errorf("an expired id is still offered by the note: %s", v.Note)
			}
		case v.ResultID != "":
			live++
			exp, err := time.Parse(time.RFC3339, v.Expires)
			if err != nil || !exp.After(now) {
				t.Errorf("id %s offered as live, expiring %q at %v", v.ResultID, v.Expires, now)
			}
		}
	}
	if expired == 0 || live == 0 {
		t.Errorf("last request: %d expired and %d live compacted ids; want both", expired, live)
	}

	// The stored thread is whole: every question and every output.
	var users, tools int
	for _, m := range th.Msgs {
		switch m.Role {
		case RoleUser:
			users++
		case RoleAssistant:
			for _, p := range m.Parts {
				if p.IsTool() {
					if string(p.Output) != outputs[tools] || strings.Contains(string(p.Output), `"_compacted"`) {
						t.Errorf("stored output %d changed", tools)
					}
					tools++
				}
			}
		}
	}
	if users != 30 || tools != len(outputs) {
		t.Errorf("stored thread: %d user messages, %d tool outputs; want 30 and %d", users, tools, len(outputs))
	}
}

func (b *oaiRequestBody) hasVerdictOf(s string) bool {
	for _, m := range b.Messages {
		if m.Role == "tool" && strings.Contains(m.Content, `"_compacted"`) && strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

// checkPairing checks the OpenAI API's rule on a request: every tool
// message answers a call of the assistant message before it (after only
// other answers), and every call is answered.
func checkPairing(t *testing.T, what string, req oaiRequestBody) {
	t.Helper()
	var open map[string]bool
	for i, m := range req.Messages {
		if m.Role == "tool" {
			if !open[m.ToolCallID] {
				t.Errorf("%s: message %d answers %q, no open call", what, i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			continue
		}
		if len(open) > 0 {
			t.Errorf("%s: message %d (%s) before calls %v are answered", what, i, m.Role, open)
		}
		open = map[string]bool{}
		for _, c := range m.ToolCalls {
			open[c.ID] = true
		}
	}
	if len(open) > 0 {
		t.Errorf("%s: calls %v never answered", what, open)
	}
}

// TestContextBudgetTooSmall: a budget that the system prompt, tools and
// question alone exceed fails the turn with a clear error, and the model
// is never asked.
func TestContextBudgetTooSmall(t *testing.T) {
	fake := newOAIRecorder(t, func(string) (string, string) { return "list_orders", `{}` })
	model := NewOpenAI(OpenAIOptions{BaseURL: fake.srv.URL + "/v1"})
	for _, cfg := range []*ContextConfig{{MaxChars: 2_000}, {MaxTokens: 500}} {
		g := newDemoRig(t, model, cfg)
		th := &Thread{Key: ThreadKey("", "support", "small")}
		th.Msgs = append(th.Msgs, UIMessage{ID: "u1", Role: RoleUser, Parts: []Part{{Type: "text", Text: "How many open orders?"}}})
		rec := &recorder{}
		err := g.runner.Run(context.Background(), &Turn{Agent: func() (Definition, bool) { return g.def, true }, Thread: th, Org: "o", Emit: rec.emit})
		var be *ContextBudgetError
		if !errors.As(err, &be) {
			t.Fatalf("Run: %v, want a ContextBudgetError", err)
		}
		types := strings.Join(rec.types(), " ")
		if types != "start error" {
			t.Errorf("chunks: %s", types)
		}
		e := rec.chunks[len(rec.chunks)-1].(stream.Error)
		if !strings.Contains(e.ErrorText, "does not fit the model's context") || !strings.Contains(e.ErrorText, "context.max_") {
			t.Errorf("error text: %s", e.ErrorText)
		}
		if n := len(fake.requests()); n != 0 {
			t.Errorf("%d requests to the model", n)
		}
	}
}
