package tokens_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools/demo"
	"github.com/trawl-dev/trawl/web"
	"github.com/trawl-dev/trawl/web/deploy"
)

// modelName is the model trawl believes it talks to: a gpt-4.1 window
// (about a million tokens) lets the hand-paging run send everything it
// reads without the context budget cutting it, and its tokenizer is
// o200k_base like every current OpenAI model's.
const modelName = "gpt-4.1-mini"

// The demo's recorded questions (tools/demo/replay.json).
var questions = []string{
	"How many open orders worth more than 100 do we have, and how do they split by currency?",
	"Across all our properties, how many confirmed bookings were for a week or longer?",
}

// The page sizes the hand-paging model is run with: 50, the largest whose
// pages of orders the size guard does not cut (the API allows 100, but a
// page of 100 orders is over the view budget), so the fewest pages and
// steps a model can page by hand in, the comparison kindest to paging by
// hand; and none, the API's default of 25, as a model that does not set
// per_page pages.
const (
	perPageLargest = 50
	perPageDefault = 25
)

// wireMessage is a chat completion request's message as trawl sends it.
type wireMessage struct {
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
}

type wireRequest struct {
	Model    string        `json:"model"`
	Messages []wireMessage `json:"messages"`
	Tools    []struct {
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
}

func (w *wireRequest) model() agent.ModelRequest {
	var req agent.ModelRequest
	for _, m := range w.Messages {
		am := agent.Message{Role: agent.Role(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			am.ToolCalls = append(am.ToolCalls, agent.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		req.Messages = append(req.Messages, am)
	}
	for _, t := range w.Tools {
		req.Tools = append(req.Tools, agent.ToolSpec{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req
}

// chars is what the model reads, in characters (UTF-8 bytes): every
// message's content, its tool calls' names and arguments, and every
// tool's name, description and schema.
func chars(req *agent.ModelRequest) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
		for _, c := range m.ToolCalls {
			n += len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	return n
}

// call is one tool call the scripted model makes.
type call struct {
	name string
	args map[string]any
}

// step is the scripted model's answer to one request: calls, or a text.
type step struct {
	calls []call
	text  string
}

// turnView is the current turn as the model's request shows it.
type turnView struct {
	turn  int           // 0 for the first question
	steps int           // assistant messages since the question
	calls []wireMessage // the assistant messages since the question
	tools []wireMessage // the tool results since the question, in order
}

func viewOf(req *wireRequest) turnView {
	var v turnView
	last := -1
	for i, m := range req.Messages {
		if m.Role == "user" {
			last = i
			v.turn = -1
		}
	}
	for _, m := range req.Messages[:last+1] {
		if m.Role == "user" {
			v.turn++
		}
	}
	for _, m := range req.Messages[last+1:] {
		switch m.Role {
		case "assistant":
			v.steps++
			v.calls = append(v.calls, m)
		case "tool":
			v.tools = append(v.tools, m)
		}
	}
	return v
}

// script decides the model's next step from what it was sent.
type script func(v turnView) (step, error)

// transcript is the demo's own recorded conversation, looping on.
type transcript struct {
	Turns []struct {
		Steps []struct {
			Text      string `json:"text"`
			ToolCalls []struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
			} `json:"tool_calls"`
		} `json:"steps"`
	} `json:"turns"`
}

func loadTranscript(b *testing.B) transcript {
	var t transcript
	if err := json.Unmarshal(demo.ReplayScript(), &t); err != nil {
		b.Fatal(err)
	}
	if len(t.Turns) != len(questions) {
		b.Fatalf("the demo transcript has %d turns, the bench asks %d questions", len(t.Turns), len(questions))
	}
	return t
}

// loopingScript plays the transcript: the demo's calls with looping on.
// Before each answer it checks the figures the answer states against the
// tool results it was sent (checkAnswer), as the hand-paging model checks
// the rows it counted.
func loopingScript(t transcript) script {
	return func(v turnView) (step, error) {
		steps := t.Turns[v.turn].Steps
		if v.steps >= len(steps) {
			return step{}, fmt.Errorf("turn %d: step %d past the transcript", v.turn+1, v.steps+1)
		}
		s := steps[v.steps]
		out := step{text: s.Text}
		if len(s.ToolCalls) == 0 {
			return out, checkAnswer(v)
		}
		out.text = ""
		resultID := ""
		for _, m := range v.tools {
			var r struct {
				ID string `json:"_resultId"`
			}
			if json.Unmarshal([]byte(m.Content), &r) == nil && r.ID != "" {
				resultID = r.ID
			}
		}
		for _, c := range s.ToolCalls {
			args := map[string]any{}
			for k, val := range c.Arguments {
				if val == "{{lastResultId}}" {
					val = resultID
				}
				args[k] = val
			}
			out.calls = append(out.calls, call{c.Name, args})
		}
		return out, nil
	}
}

// aggregateScript answers as the looping guidance tells a model to
// answer a count ("Let trawl count … with `_aggregate`"): the first
// question as the demo asks it (one walk of the open orders with
// `_aggregate`); the second with the properties' ids (all it needs of
// them, projected with `_fields`), then one call walking every booking of
// every property with `_for_each`, `_all_pages` and an `_aggregate` that
// counts the confirmed stays of seven nights or more — no rows sent, so
// none cut and no retrieval step. It answers with the transcript's texts
// once checkAnswer finds their figures in the results.
func aggregateScript(t transcript) script {
	demo := loopingScript(t)
	return func(v turnView) (step, error) {
		if v.turn == 0 {
			return demo(v)
		}
		switch len(v.tools) {
		case 0:
			return step{calls: []call{{"list_properties", map[string]any{"_fields": []any{"id"}}}}}, nil
		case 1:
			ids, err := propertyIDs(v.tools[0])
			if err != nil {
				return step{}, err
			}
			return step{calls: []call{{"list_property_bookings", map[string]any{
				"_for_each":  map[string]any{"key": "property_id", "values": ids},
				"_all_pages": true,
				"_aggregate": map[string]any{
					"filter": []any{
						map[string]any{"field": "status", "op": "eq", "value": "confirmed"},
						map[string]any{"field": "nights", "op": "gte", "value": 7},
					},
					"metrics": []any{map[string]any{"op": "count"}},
				},
			}}}}, nil
		}
		s := t.Turns[1].Steps
		return step{text: s[len(s)-1].Text}, checkAnswer(v)
	}
}

// propertyIDs reads the ids of list_properties' result.
func propertyIDs(m wireMessage) ([]any, error) {
	var props struct {
		Properties []struct {
			ID string `json:"id"`
		} `json:"properties"`
	}
	if err := json.Unmarshal([]byte(m.Content), &props); err != nil || len(props.Properties) == 0 {
		return nil, fmt.Errorf("list_properties: %v (%.200s)", err, m.Content)
	}
	var ids []any
	for _, p := range props.Properties {
		ids = append(ids, p.ID)
	}
	return ids, nil
}

// looped is what checkAnswer reads of a looping result: the walk's
// verdict, an aggregate's numbers, and queryToolResult's match count.
type looped struct {
	Boundary *struct {
		Completion string `json:"completion"`
		Records    int    `json:"records"`
	} `json:"_boundary"`
	Aggregate *struct {
		Completion string           `json:"completion"`
		Rows       int              `json:"rows"`
		Groups     []map[string]any `json:"groups"`
	} `json:"_aggregate"`
	Matched *int `json:"matched"`
}

// checkAnswer checks the figures the transcript's answer to the turn
// states — 278 open orders over 100 (170 EUR, 89 USD, 19 GBP) of 364, and
// 157 long confirmed stays of 2,621 bookings — against the tool results
// the model was sent this turn: a complete walk's record count, and the
// count of an aggregate over it (complete) or of queryToolResult's match
// over the stored walk. Looping on must answer from the same figures as
// the hand-paging model counts from every row.
func checkAnswer(v turnView) error {
	var walked, counted []looped
	for _, m := range v.tools {
		var r looped
		if json.Unmarshal([]byte(m.Content), &r) != nil {
			continue
		}
		if r.Boundary != nil && r.Boundary.Completion == "complete" {
			walked = append(walked, r)
		}
		if r.Aggregate != nil && r.Aggregate.Completion == "complete" || r.Matched != nil {
			counted = append(counted, r)
		}
	}
	if len(walked) == 0 || len(counted) == 0 {
		return fmt.Errorf("turn %d: no complete walk and count among the %d tool results to answer from", v.turn+1, len(v.tools))
	}
	records, last := walked[len(walked)-1].Boundary.Records, counted[len(counted)-1]
	var got, want string
	switch v.turn {
	case 0:
		if last.Aggregate == nil {
			return errors.New("turn 1: no aggregate by currency to answer from")
		}
		by := map[string]float64{}
		for _, g := range last.Aggregate.Groups {
			by[fmt.Sprint(g["currency"])] = num(g["count"])
		}
		got = fmt.Sprintf("%d open: %v EUR, %v USD, %v GBP of %d", last.Aggregate.Rows, by["EUR"], by["USD"], by["GBP"], records)
		want = "278 open: 170 EUR, 89 USD, 19 GBP of 364"
	default:
		n := -1
		switch {
		case last.Matched != nil:
			n = *last.Matched
		case len(last.Aggregate.Groups) == 1:
			n = int(num(last.Aggregate.Groups[0]["count"]))
		}
		got, want = fmt.Sprintf("%d long stays of %d bookings", n, records), "157 long stays of 2621 bookings"
	}
	if got != want {
		return fmt.Errorf("turn %d: the results say %s, the answer says %s", v.turn+1, got, want)
	}
	return nil
}

// page is one page as the hand-paging model reads it.
type page struct {
	Data      []map[string]any `json:"data"`
	Total     *int             `json:"total"`
	Truncated bool             `json:"_truncated"`
}

// last says whether p, page n of size rows each, is the last page, as the
// API's description tells a model to decide: fewer than per_page rows, or
// page × per_page ≥ total.
func (p *page) last(n, size int) bool {
	return len(p.Data) < size || p.Total != nil && n*size >= *p.Total
}

func readPage(m wireMessage) (*page, error) {
	var p page
	if err := json.Unmarshal([]byte(m.Content), &p); err != nil {
		return nil, fmt.Errorf("tool result is not a page: %w (%.200s)", err, m.Content)
	}
	if p.Truncated {
		return nil, errors.New("a page was cut by the size guard: ask for fewer rows a page")
	}
	return &p, nil
}

// argsOf decodes the arguments of the call a tool message answers.
func argsOf(v turnView, id string) map[string]any {
	for _, m := range v.calls {
		for _, c := range m.ToolCalls {
			if c.ID == id {
				var a map[string]any
				_ = json.Unmarshal([]byte(c.Function.Arguments), &a)
				return a
			}
		}
	}
	return nil
}

func num(v any) float64 { f, _ := v.(float64); return f }

// pagingScript answers the same questions with looping off: it pages by
// hand (page 1, 2, … until the last, all 40 properties'
// next pages in one step, as parallel calls), reads every row itself,
// and answers with the transcript's texts once the figures it counted
// agree with them (the bench fails otherwise: both runs must answer the
// same, from every row).
//
// perPage is the per_page it sends, 0 for none.
func pagingScript(t transcript, perPage int) script {
	size := perPage
	if size == 0 {
		size = perPageDefault
	}
	pageArgs := func(args map[string]any, n int) map[string]any {
		args["page"] = n
		if perPage > 0 {
			args["per_page"] = perPage
		}
		return args
	}
	final := func(turn int) string {
		s := t.Turns[turn].Steps
		return s[len(s)-1].Text
	}
	return func(v turnView) (step, error) {
		switch v.turn {
		case 0:
			var rows []map[string]any
			done := false
			for i, m := range v.tools {
				p, err := readPage(m)
				if err != nil {
					return step{}, err
				}
				rows = append(rows, p.Data...)
				done = p.last(i+1, size)
			}
			if !done {
				return step{calls: []call{{"list_orders", pageArgs(map[string]any{"status": "open"}, len(v.tools)+1)}}}, nil
			}
			by := map[string]int{}
			n := 0
			for _, r := range rows {
				if r["status"] == "open" && num(r["total"]) > 100 {
					n++
					by[fmt.Sprint(r["currency"])]++
				}
			}
			got := fmt.Sprintf("%d open: %d EUR, %d USD, %d GBP", n, by["EUR"], by["USD"], by["GBP"])
			if want := "278 open: 170 EUR, 89 USD, 19 GBP"; got != want || len(rows) != 364 {
				return step{}, fmt.Errorf("paging by hand counted %s over %d rows, the transcript says %s over 364", got, len(rows), want)
			}
			return step{text: final(0)}, nil
		default:
			if len(v.tools) == 0 {
				return step{calls: []call{{"list_properties", map[string]any{}}}}, nil
			}
			var props struct {
				Properties []struct {
					ID string `json:"id"`
				} `json:"properties"`
			}
			if err := json.Unmarshal([]byte(v.tools[0].Content), &props); err != nil || len(props.Properties) == 0 {
				return step{}, fmt.Errorf("list_properties: %v (%.200s)", err, v.tools[0].Content)
			}
			// The next page each property needs, 1 for one not asked yet.
			next := map[string]int{}
			for _, p := range props.Properties {
				next[p.ID] = 1
			}
			long, seen := 0, 0
			for _, m := range v.tools[1:] {
				a := argsOf(v, m.ToolCallID)
				id, n := fmt.Sprint(a["property_id"]), int(num(a["page"]))
				p, err := readPage(m)
				if err != nil {
					return step{}, err
				}
				for _, r := range p.Data {
					seen++
					if r["status"] == "confirmed" && num(r["nights"]) >= 7 {
						long++
					}
				}
				next[id] = n + 1
				if p.last(n, size) {
					next[id] = 0
				}
			}
			var calls []call
			for _, p := range props.Properties {
				if n := next[p.ID]; n > 0 {
					calls = append(calls, call{"list_property_bookings", pageArgs(map[string]any{"property_id": p.ID}, n)})
				}
			}
			if len(calls) > 0 {
				return step{calls: calls}, nil
			}
			if long != 157 || seen != 2621 {
				return step{}, fmt.Errorf("paging by hand counted %d long stays over %d bookings, the transcript says 157 over 2,621", long, seen)
			}
			return step{text: final(1)}, nil
		}
	}
}

// tally is what one run sent the model.
type tally struct {
	requests   int
	chars      int
	tokens     int
	bodyBytes  int
	toolChars  int // of it, tool results
	toolTokens int
	specTokens int // of it, the tools offered
	sysTokens  int // of it, system messages
	errs       []error
	results    map[string]bool // every tool result sent, as sent
	perStep    []string
}

// fakeModel is an OpenAI-compatible chat completions server playing a
// script and counting what it is sent.
type fakeModel struct {
	tc     agent.TokenCounter
	script script

	mu    sync.Mutex
	t     tally
	calls int
}

func (f *fakeModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	var wr wireRequest
	if err := json.Unmarshal(body, &wr); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req := wr.model()
	tokens := agent.RequestTokens(f.tc, &req)
	v := viewOf(&wr)
	st, serr := f.script(v)

	f.mu.Lock()
	f.t.requests++
	f.t.chars += chars(&req)
	f.t.tokens += tokens
	f.t.bodyBytes += len(body)
	for i := range req.Messages {
		switch m := &req.Messages[i]; m.Role {
		case agent.RoleTool:
			f.t.toolChars += len(m.Content)
			f.t.toolTokens += agent.MessageTokens(f.tc, m)
		case agent.RoleSystem:
			f.t.sysTokens += agent.MessageTokens(f.tc, m)
		}
	}
	specs := 0
	for i := range req.Tools {
		specs += agent.ToolTokens(f.tc, &req.Tools[i])
	}
	f.t.specTokens += specs
	var results []string
	for i := range req.Messages {
		if m := &req.Messages[i]; m.Role == agent.RoleTool {
			results = append(results, fmt.Sprint(agent.MessageTokens(f.tc, m)))
		}
	}
	f.t.perStep = append(f.t.perStep, fmt.Sprintf("turn %d step %d: %d tokens, %d tools offered (%d tokens), tool results [%s]",
		v.turn+1, v.steps+1, tokens, len(req.Tools), specs, strings.Join(results, " ")))
	for _, m := range v.tools {
		if f.t.results == nil {
			f.t.results = map[string]bool{}
		}
		f.t.results[m.Content] = true
	}
	if serr != nil {
		f.t.errs = append(f.t.errs, serr)
	}
	base := f.calls
	f.calls += len(st.calls)
	f.mu.Unlock()

	w.Header().Set("Content-Type", "text/event-stream")
	bw := bufio.NewWriter(w)
	chunk := func(delta any, finish string) {
		c := map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": wr.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": nil}}}
		if finish != "" {
			c["choices"].([]any)[0].(map[string]any)["finish_reason"] = finish
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(bw, "data: %s\n\n", b)
	}
	out := st.text
	if serr != nil {
		out = "The scripted model failed: " + serr.Error()
	}
	var completion int
	if len(st.calls) > 0 && serr == nil {
		for i, c := range st.calls {
			args, _ := json.Marshal(c.args)
			completion += f.tc.CountTokens(c.name) + f.tc.CountTokens(string(args))
			chunk(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{
				"index": i, "id": fmt.Sprintf("call_%d", base+i), "type": "function",
				"function": map[string]any{"name": c.name, "arguments": string(args)}}}}, "")
		}
		chunk(map[string]any{}, "tool_calls")
	} else {
		completion = f.tc.CountTokens(out)
		chunk(map[string]any{"role": "assistant", "content": out}, "")
		chunk(map[string]any{}, "stop")
	}
	u, _ := json.Marshal(map[string]any{"id": "x", "object": "chat.completion.chunk", "created": 1, "model": wr.Model, "choices": []any{},
		"usage": map[string]int{"prompt_tokens": tokens, "completion_tokens": completion, "total_tokens": tokens + completion}})
	fmt.Fprintf(bw, "data: %s\n\ndata: [DONE]\n\n", u)
	bw.Flush()
}

// run asks the demo's two questions of a fresh demo deployment whose
// model is f, with looping on or off for the three tools the questions
// need, and returns what was sent to the model.
func run(b *testing.B, f *fakeModel, looping bool, rows agent.RowLayout) tally {
	b.Helper()
	fake := httptest.NewServer(f)
	defer fake.Close()
	cfg := deploy.DemoConfig()
	cfg.DataDir = b.TempDir()
	cfg.Model = deploy.ModelConfig{Provider: "openai", BaseURL: fake.URL + "/v1", APIKey: "sk-bench", Name: modelName}
	ctx := context.Background()
	srv, err := web.New(ctx, cfg, web.Options{Logger: slog.New(slog.DiscardHandler), Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	do := func(method, path string, body any) *http.Response {
		buf, _ := json.Marshal(body)
		req, _ := http.NewRequestWithContext(ctx, method, hs.URL+path, bytes.NewReader(buf))
		req.Header.Set("Authorization", "Bearer "+srv.AdminKey())
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(resp.Body)
			b.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, msg)
		}
		return resp
	}
	if rows != "" {
		// The demo's agent is made when the deployment starts.
		resp := do(http.MethodGet, "/v1/agents/demo", nil)
		var def map[string]any
		err := json.NewDecoder(resp.Body).Decode(&def)
		resp.Body.Close()
		if err != nil {
			b.Fatal(err)
		}
		def["rows"] = rows
		do(http.MethodPut, "/v1/agents/demo", def).Body.Close()
	}
	for _, tool := range []string{"acme.list_orders", "acme.list_properties", "acme.list_property_bookings"} {
		do(http.MethodPatch, "/v1/agents/demo/tools/"+tool, map[string]any{"loop_responses": looping}).Body.Close()
	}
	for i, q := range questions {
		resp := do(http.MethodPost, "/v1/agents/demo/chat", map[string]any{"id": "bench", "messages": []any{
			map[string]any{"id": fmt.Sprintf("m%d", i), "role": "user", "parts": []any{map[string]any{"type": "text", "text": q}}}}})
		sse, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for line := range strings.SplitSeq(string(sse), "\n") {
			if strings.HasPrefix(line, `data: {"type":"error"`) || strings.HasPrefix(line, `data: {"type":"tool-output-error"`) {
				b.Fatalf("question %d: %s", i+1, line)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, err := range f.t.errs {
		b.Error(err)
	}
	return f.t
}

// BenchmarkTokens reports what the demo's two questions cost in model
// input, looping on (the demo's rows walk, with objects and with rows:
// compact, and the aggregate answer) against paging by hand, and the
// compact row layout's effect on the projected rows (issue 27, points 6
// and 7).
func BenchmarkTokens(b *testing.B) {
	tc, ok := agent.TokenizerFor(modelName)
	if !ok {
		b.Fatalf("no tokenizer for %s", modelName)
	}
	t := loadTranscript(b)
	var on, onCompact, agg, off, offDefault tally
	for b.Loop() {
		on = run(b, &fakeModel{tc: tc, script: loopingScript(t)}, true, "")
		agg = run(b, &fakeModel{tc: tc, script: aggregateScript(t)}, true, "")
		onCompact = run(b, &fakeModel{tc: tc, script: loopingScript(t)}, true, agent.RowsCompact)
		off = run(b, &fakeModel{tc: tc, script: pagingScript(t, perPageLargest)}, false, "")
		offDefault = run(b, &fakeModel{tc: tc, script: pagingScript(t, 0)}, false, "")
	}
	for _, r := range []struct {
		name string
		t    tally
	}{{"looping", on}, {"looping, rows: compact", onCompact}, {"looping, _aggregate", agg}, {"by hand, per_page 50", off}, {"by hand, default page size", offDefault}} {
		b.Logf("%-27s %3d requests, %9d chars, %8d tokens (tool results %9d chars, %8d tokens; tools offered %d tokens; system %d tokens), %9d request bytes",
			r.name, r.t.requests, r.t.chars, r.t.tokens, r.t.toolChars, r.t.toolTokens, r.t.specTokens, r.t.sysTokens, r.t.bodyBytes)
	}
	for _, s := range on.perStep {
		b.Logf("looping, %s", s)
	}
	for _, s := range agg.perStep {
		b.Logf("aggregate, %s", s)
	}
	b.ReportMetric(float64(on.tokens), "tokens-looping")
	b.ReportMetric(float64(off.tokens), "tokens-by-hand")
	b.ReportMetric(float64(off.tokens)/float64(on.tokens), "x-fewer-tokens")
	b.ReportMetric(float64(off.chars)/float64(on.chars), "x-fewer-chars")
	b.ReportMetric(float64(on.requests), "requests-looping")
	b.ReportMetric(float64(off.requests), "requests-by-hand")
	b.ReportMetric(float64(offDefault.tokens)/float64(on.tokens), "x-fewer-tokens-default-pages")
	b.ReportMetric(float64(onCompact.tokens), "tokens-looping-compact")
	b.ReportMetric(float64(off.tokens)/float64(onCompact.tokens), "x-fewer-tokens-compact")
	b.ReportMetric(float64(agg.tokens), "tokens-aggregate")
	b.ReportMetric(float64(off.tokens)/float64(agg.tokens), "x-fewer-tokens-aggregate")
	b.ReportMetric(float64(agg.requests), "requests-aggregate")

	// The result with the most rows the model read (with looping on).
	var obj, compact float64
	rows := 0
	for content := range on.results {
		o, c, n, err := rowLayouts(tc, content)
		if err == nil && n > rows {
			obj, compact, rows = o, c, n
		}
	}
	if rows == 0 {
		b.Fatal("no tool result held rows the compact layout rewrites")
	}
	b.Logf("projected rows (%d): %.1f tokens a row as objects, %.1f in the compact layout", rows, obj, compact)
	b.ReportMetric(obj, "tokens/row-objects")
	b.ReportMetric(compact, "tokens/row-compact")
	b.ReportMetric(obj/compact, "x-compact")
}

// rowLayouts takes a looping tool result as the model read it and
// returns the tokens each of its rows costs as JSON objects (as sent) and
// in the compact layout of issue 27's point 6 (loop.CompactRows, what an
// agent with rows: compact sends; the header paid once) — each measured
// as the whole result's tokens less those of the same result with an
// empty array, over the rows.
func rowLayouts(tc agent.TokenCounter, content string) (objects, compact float64, rows int, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(content), &top); err != nil {
		return 0, 0, 0, err
	}
	var array json.RawMessage // the largest array of rows, as written
	for _, raw := range top {
		var a []json.RawMessage
		if json.Unmarshal(raw, &a) == nil && len(a) > rows && len(a[0]) > 0 && a[0][0] == '{' {
			array, rows = raw, len(a)
		}
	}
	if rows == 0 {
		return 0, 0, 0, fmt.Errorf("no array of rows in the result: %.200s", content)
	}
	empty := tc.CountTokens(strings.Replace(content, string(array), "[]", 1))
	c, ok := loop.CompactRows([]byte(content))
	if !ok {
		return 0, 0, 0, errors.New("the rows are not uniform: the compact layout leaves them as objects")
	}
	n := float64(rows)
	return float64(tc.CountTokens(content)-empty) / n, float64(tc.CountTokens(string(c))-empty) / n, rows, nil
}
