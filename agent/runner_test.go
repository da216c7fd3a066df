package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// scriptModel plays one scripted step per call and records each request.
type scriptModel struct {
	mu    sync.Mutex
	steps []func(req ModelRequest) []ModelEvent
	reqs  []ModelRequest
}

func (m *scriptModel) Stream(ctx context.Context, req ModelRequest) iter.Seq2[ModelEvent, error] {
	return func(yield func(ModelEvent, error) bool) {
		m.mu.Lock()
		i := len(m.reqs)
		m.reqs = append(m.reqs, req)
		m.mu.Unlock()
		evs := []ModelEvent{{Kind: EventTextDelta, Text: "done"}, {Kind: EventFinish, FinishReason: "stop"}}
		if i < len(m.steps) {
			evs = m.steps[i](req)
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func call(id, name, args string) []ModelEvent {
	return []ModelEvent{
		{Kind: EventToolCallStart, ToolCallID: id, ToolName: name},
		{Kind: EventToolCallDelta, ArgsDelta: args},
		{Kind: EventFinish, FinishReason: "tool_calls"},
	}
}

// fakeClock advances by step on every read, so throttled progress is
// deterministic.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	step time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(c.step)
	return c.now
}

// upstream serves /items: 5 pages of 10 items (page + per_page), and
// /big: one page of 3,000 items.
func upstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/big" {
			var items []string
			for i := range 3000 {
				items = append(items, fmt.Sprintf(`{"id":%d,"name":"item number %d"}`, i, i))
			}
			fmt.Fprintf(w, `{"items":[%s]}`, strings.Join(items, ","))
			return
		}
		var page int
		fmt.Sscan(r.URL.Query().Get("page"), &page)
		if page < 1 {
			page = 1
		}
		var items []string
		for i := range 10 {
			if page <= 5 {
				items = append(items, fmt.Sprintf(`{"id":%d}`, (page-1)*10+i))
			}
		}
		fmt.Fprintf(w, `{"data":[%s],"total":50}`, strings.Join(items, ","))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testCatalog(t *testing.T, origin string) *tools.Catalog {
	cat := tools.NewCatalog()
	intS := &tools.Schema{Type: "integer"}
	err := cat.Add(
		&tools.Tool{ID: "p.list_items", Provider: "p", Name: "list_items", Description: "List items.", Method: "GET", Path: "/items", Origin: origin,
			Params:   []tools.Param{{Name: "page", In: tools.InQuery, Schema: intS}, {Name: "per_page", In: tools.InQuery, Schema: intS}},
			Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{"data": {Type: "array"}, "total": {Type: "integer"}}}},
		&tools.Tool{ID: "p.big", Provider: "p", Name: "big", Description: "Everything.", Method: "GET", Path: "/big", Origin: origin},
	)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

type recorder struct {
	mu     sync.Mutex
	chunks []stream.Chunk
}

func (r *recorder) emit(c stream.Chunk) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.chunks = append(r.chunks, c)
	return nil
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, c := range r.chunks {
		out = append(out, c.Type())
	}
	return out
}

func newTestRunner(t *testing.T, m Model, clock *fakeClock) (*Runner, *tools.Catalog) {
	up := upstream(t)
	cat := testCatalog(t, up.URL)
	now := time.Now
	if clock != nil {
		now = clock.Now
	}
	// The engine keeps results where the runner's retrieval tools read.
	results := loop.NewRetrieval(loop.RetrievalOptions{Now: now})
	eng := loop.New(loop.Options{Caller: tools.NewInvoker(tools.InvokerOptions{}), Results: results,
		Clock: paginate.NewFakeClock(time.Now())})
	r := NewRunner(RunnerOptions{Model: m, Engine: eng, Retrieval: results, Catalog: cat, Now: now})
	return r, cat
}

func turn(def Definition, rec *recorder) *Turn {
	th := &Thread{Key: ThreadKey("", def.ID, "c1"), Msgs: []UIMessage{{ID: "u1", Role: RoleUser, Parts: []Part{{Type: "text", Text: "how many items?"}}}}}
	return &Turn{Agent: func() (Definition, bool) { return def, true }, Thread: th, Org: "o", Emit: rec.emit}
}

func TestRunnerLoopingTurn(t *testing.T) {
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent { return call("c1", "list_items", `{"_all_pages":true}`) },
	}}
	clock := &fakeClock{now: time.Unix(0, 0), step: 100 * time.Millisecond}
	r, _ := newTestRunner(t, m, clock)
	def := Definition{ID: "a", System: "Be brief.", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	rec := &recorder{}
	tr := turn(def, rec)
	if err := r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	// The guidance is a separate system message after the agent's own.
	first := m.reqs[0]
	if first.Messages[0].Content != "Be brief." || first.Messages[1].Role != RoleSystem || first.Messages[1].Content != prompts.Text("looping") {
		t.Errorf("system messages: %+v", first.Messages[:2])
	}
	var names []string
	for _, s := range first.Tools {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "list_items,queryToolResult,fetchToolResult" {
		t.Errorf("tools = %v", names)
	}
	if !strings.Contains(string(first.Tools[0].Parameters), "_all_pages") {
		t.Errorf("looping schema lacks _all_pages: %s", first.Tools[0].Parameters)
	}
	// The second step saw the tool result.
	second := m.reqs[1].Messages
	last := second[len(second)-1]
	if last.Role != RoleTool || !strings.Contains(last.Content, `"_pagingComplete":true`) {
		t.Errorf("tool message: %+v", last)
	}
	types := strings.Join(rec.types(), " ")
	want := "start start-step data-context tool-input-start tool-input-delta tool-input-available data-tool-loop-progress"
	if !strings.HasPrefix(types, want) || !strings.HasSuffix(types, "finish-step finish") {
		t.Errorf("chunks: %s", types)
	}
	// 5 pages at 100 ms each: progress is throttled to one per 750 ms.
	if n := strings.Count(types, "data-tool-loop-progress"); n != 1 {
		t.Errorf("%d progress chunks; want 1 (throttled)", n)
	}
	msg := tr.Thread.Msgs[1]
	if msg.Role != RoleAssistant || msg.Parts[1].Type != "dynamic-tool" || msg.Parts[1].State != "output-available" {
		t.Errorf("assistant message: %+v", msg)
	}
}

func TestRunnerGatesOnTruncation(t *testing.T) {
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent { return call("c1", "big", `{}`) },
		func(req ModelRequest) []ModelEvent {
			var id struct {
				ResultID string `json:"_resultId"`
			}
			json.Unmarshal([]byte(req.Messages[len(req.Messages)-1].Content), &id)
			return call("c2", "queryToolResult", fmt.Sprintf(`{"resultId":%q,"limit":5}`, id.ResultID))
		},
	}}
	r, _ := newTestRunner(t, m, nil)
	def := Definition{ID: "a", AgentTools: []Binding{{ToolID: "p.big"}}} // not looping: only the size guard
	rec := &recorder{}
	if err := r.Run(context.Background(), turn(def, rec)); err != nil {
		t.Fatal(err)
	}
	toolNames := func(i int) string {
		var n []string
		for _, s := range m.reqs[i].Tools {
			n = append(n, s.Name)
		}
		return strings.Join(n, ",")
	}
	if got := toolNames(0); got != "big" {
		t.Errorf("step 1 tools = %s (no looping binding, no stored result: no retrieval tools)", got)
	}
	if got := toolNames(1); got != "queryToolResult,fetchToolResult" {
		t.Errorf("step 2 tools = %s; want only the retrieval tools", got)
	}
	if got := toolNames(2); got != "big,queryToolResult,fetchToolResult" {
		t.Errorf("step 3 tools = %s; the thread holds a live result", got)
	}
}

func TestRunnerToolErrors(t *testing.T) {
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent {
			evs := call("c1", "no_such_tool", `{}`)
			evs = append(evs[:2], append([]ModelEvent{{Kind: EventToolCallStart, Index: 1, ToolCallID: "c2", ToolName: "list_items"},
				{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{not json`},
				{Kind: EventToolCallStart, Index: 2, ToolCallID: "c3", ToolName: "list_items"},
				{Kind: EventToolCallDelta, Index: 2, ArgsDelta: `{"_for_each":{"key":"nope","values":[1]}}`}}, evs[2:]...)...)
			return evs
		},
	}}
	r, _ := newTestRunner(t, m, nil)
	def := Definition{ID: "a", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	rec := &recorder{}
	tr := turn(def, rec)
	if err := r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	types := strings.Join(rec.types(), " ")
	if strings.Count(types, "tool-input-error") != 2 || strings.Count(types, "tool-output-error") != 1 || strings.Contains(types, " error") {
		t.Errorf("chunks: %s", types)
	}
	var errs []string
	for _, p := range tr.Thread.Msgs[1].Parts {
		if p.State == "output-error" {
			errs = append(errs, p.ErrorText)
		}
	}
	if len(errs) != 3 || !strings.Contains(strings.Join(errs, "|"), "invalid") {
		t.Errorf("errors the model reads: %q", errs)
	}
	// The model read them and answered.
	if len(m.reqs) != 2 {
		t.Errorf("steps = %d", len(m.reqs))
	}
}

func TestRunnerMaxStepsAndBindingChange(t *testing.T) {
	looping := true
	var mu sync.Mutex
	m := &scriptModel{}
	for i := 0; i < 10; i++ {
		m.steps = append(m.steps, func(ModelRequest) []ModelEvent {
			mu.Lock()
			looping = false // the console turns looping off mid-turn
			mu.Unlock()
			return call(fmt.Sprintf("c%d", i), "list_items", `{}`)
		})
	}
	r, _ := newTestRunner(t, m, nil)
	rec := &recorder{}
	tr := turn(Definition{}, rec)
	tr.Agent = func() (Definition, bool) {
		mu.Lock()
		defer mu.Unlock()
		return Definition{ID: "a", MaxSteps: 3, AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: looping}}}, true
	}
	if err := r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if len(m.reqs) != 3 {
		t.Errorf("steps = %d; want max_steps 3", len(m.reqs))
	}
	if !strings.Contains(string(m.reqs[0].Tools[0].Parameters), "_all_pages") || strings.Contains(string(m.reqs[1].Tools[0].Parameters), "_all_pages") {
		t.Errorf("the binding change did not apply from the next step")
	}
}

func TestModelMessagesRoundTrip(t *testing.T) {
	thread := []UIMessage{
		{Role: RoleUser, Parts: []Part{{Type: "text", Text: "q"}}},
		{Role: RoleAssistant, Parts: []Part{
			{Type: "step-start"}, {Type: "text", Text: "looking"},
			{Type: "dynamic-tool", ToolCallID: "c1", ToolName: "t", Input: json.RawMessage(`{"a":1}`), State: "output-available", Output: json.RawMessage(`{"x":1}`)},
			{Type: "dynamic-tool", ToolCallID: "c2", ToolName: "t", Input: json.RawMessage(`{}`), State: "output-error", ErrorText: "boom"},
			{Type: "step-start"}, {Type: "text", Text: "answer"},
		}},
	}
	got := ModelMessages(thread)
	want := []string{"user:q", "assistant:looking[c1 c2]", "tool:c1", "tool:c2", "assistant:answer[]"}
	var have []string
	for _, m := range got {
		s := string(m.Role) + ":"
		switch m.Role {
		case RoleTool:
			s += m.ToolCallID
		case RoleAssistant:
			var ids []string
			for _, c := range m.ToolCalls {
				ids = append(ids, c.ID)
			}
			s += m.Content + "[" + strings.Join(ids, " ") + "]"
		default:
			s += m.Content
		}
		have = append(have, s)
	}
	if strings.Join(have, "|") != strings.Join(want, "|") {
		t.Errorf("messages = %v; want %v", have, want)
	}
	if got[3].Content != `{"error":"boom"}` {
		t.Errorf("error result = %s", got[3].Content)
	}
}

// TestRunnerCheckpointsEveryStep: after each step with tool calls the
// runner hands out a copy of the thread holding the turn so far — what a
// crash in the next step would leave — without touching the live thread.
func TestRunnerCheckpointsEveryStep(t *testing.T) {
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent { return call("c1", "list_items", `{"page":1}`) },
		func(ModelRequest) []ModelEvent { return call("c2", "list_items", `{"page":2}`) },
	}}
	r, _ := newTestRunner(t, m, nil)
	def := Definition{ID: "a", AgentTools: []Binding{{ToolID: "p.list_items"}}}
	rec := &recorder{}
	tr := turn(def, rec)
	var saved []*Thread
	tr.Checkpoint = func(_ context.Context, th *Thread) error {
		if len(tr.Thread.Msgs) != 1 {
			t.Errorf("the live thread holds %d messages mid-turn; want only the user's", len(tr.Thread.Msgs))
		}
		b, _ := json.Marshal(th) // a deep copy, as a store would keep it
		var c Thread
		json.Unmarshal(b, &c)
		saved = append(saved, &c)
		return fmt.Errorf("the store is down") // logged; the turn goes on
	}
	if err := r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if len(saved) != 2 {
		t.Fatalf("%d checkpoints; want one per step with tool calls (2)", len(saved))
	}
	for i, th := range saved {
		if len(th.Msgs) != 2 || th.Msgs[0].ID != "u1" || th.Msgs[1].Role != RoleAssistant {
			t.Fatalf("checkpoint %d: %+v", i, th.Msgs)
		}
		var done []string
		for _, p := range th.Msgs[1].Parts {
			if p.Type == "dynamic-tool" && p.State == "output-available" {
				done = append(done, p.ToolCallID)
			}
		}
		if len(done) != i+1 || done[i] != fmt.Sprintf("c%d", i+1) {
			t.Errorf("checkpoint %d holds finished calls %v", i, done)
		}
	}
	final := tr.Thread.Msgs[len(tr.Thread.Msgs)-1]
	if final.ID != saved[1].Msgs[1].ID || len(final.Parts) <= len(saved[1].Msgs[1].Parts) {
		t.Errorf("the final message should extend the checkpointed one: %d vs %d parts", len(final.Parts), len(saved[1].Msgs[1].Parts))
	}
}

// An agent with rows: compact: the model reads the looping result's rows
// and queryToolResult's as a header and one text of rows (values
// comma-separated, rows by semicolons), told the layout in one system
// line; the stream's tool outputs and the stored thread keep the objects.
func TestRunnerCompactRows(t *testing.T) {
	resultID := regexp.MustCompile(`"_resultId":"([^"]+)"`)
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent { return call("c1", "list_items", `{"_all_pages":true}`) },
		func(req ModelRequest) []ModelEvent {
			id := resultID.FindStringSubmatch(req.Messages[len(req.Messages)-1].Content)
			if id == nil {
				t.Fatalf("no _resultId in %s", req.Messages[len(req.Messages)-1].Content)
			}
			return call("c2", "queryToolResult", `{"resultId":"`+id[1]+`","limit":3}`)
		},
	}}
	r, _ := newTestRunner(t, m, &fakeClock{now: time.Unix(0, 0), step: 100 * time.Millisecond})
	def := Definition{ID: "a", Rows: RowsCompact, AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	if err := def.Validate(); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	tr := turn(def, rec)
	if err := r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if len(m.reqs) != 3 {
		t.Fatalf("%d model requests, want 3", len(m.reqs))
	}
	note := 0
	for _, msg := range m.reqs[0].Messages {
		if msg.Role == RoleSystem && msg.Content == prompts.Text("compact_rows") {
			note++
		}
	}
	if note != 1 {
		t.Errorf("the layout is told %d times in the system messages, want once", note)
	}
	last := func(req ModelRequest) string { return req.Messages[len(req.Messages)-1].Content }
	if got := last(m.reqs[1]); !strings.Contains(got, `"data":{"fields":"id","rows":"0;1;2;`) || strings.Contains(got, `{"id":0}`) {
		t.Errorf("the looping result as the model read it: %.300s", got)
	}
	if got := last(m.reqs[2]); !strings.Contains(got, `"items":{"fields":"id","rows":"0;1;2"}`) {
		t.Errorf("queryToolResult as the model read it: %.300s", got)
	}
	rec.mu.Lock()
	outputs := 0
	for _, c := range rec.chunks {
		if o, ok := c.(stream.ToolOutputAvailable); ok {
			outputs++
			if b, _ := json.Marshal(o.Output); !strings.Contains(string(b), `{"id":0}`) {
				t.Errorf("the stream's tool output lost the objects: %.300s", b)
			}
		}
	}
	rec.mu.Unlock()
	if outputs != 2 {
		t.Errorf("%d tool outputs streamed, want 2", outputs)
	}
	for _, p := range tr.Thread.Msgs[1].Parts {
		if p.IsTool() && !strings.Contains(string(p.Output), `{"id":0}`) {
			t.Errorf("the stored %s output lost the objects: %.300s", p.Name(), p.Output)
		}
	}
	bad := Definition{ID: "b", Rows: "csv"}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "rows") {
		t.Errorf("rows: csv: %v", err)
	}
}
