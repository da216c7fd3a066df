package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tiktoken-go/tokenizer"

	"github.com/trawl-dev/trawl/stream"
)

// randThread builds a random thread: turns of a user message and an
// assistant message of several steps, each with text and tool calls
// whose results are looping envelopes, plain objects, bare arrays,
// errors or calls that never finished; the last turn is the current one,
// its assistant message not yet in the thread.
func randThread(rng *mrand.Rand) (thread []UIMessage, current *UIMessage) {
	text := func(max int) string {
		n := rng.IntN(max + 1)
		words := []string{"orders", "ünïcødé", "open", "refund", "日本語", "total", "customer"}
		var b strings.Builder
		for b.Len() < n {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		return b.String()
	}
	call := 0
	result := func() Part {
		call++
		p := Part{Type: "dynamic-tool", ToolCallID: fmt.Sprintf("call_%d", call), ToolName: "list_orders",
			Input: json.RawMessage(fmt.Sprintf(`{"status":"open","page":%d}`, rng.IntN(9)))}
		if rng.IntN(4) == 0 {
			p.Type, p.ToolName = "tool-get_stats", ""
		}
		rows := make([]string, rng.IntN(400))
		for i := range rows {
			rows[i] = fmt.Sprintf(`{"id":"ord_%d","total":%d}`, i, rng.IntN(1000))
		}
		items := "[" + strings.Join(rows, ",") + "]"
		id := fmt.Sprintf("r_%032x", rng.Uint64())
		switch rng.IntN(6) {
		case 0:
			p.State, p.ErrorText = "output-error", text(200)
		case 1:
			p.State = "input-available"
		case 2:
			p.State, p.Output = "output-available", json.RawMessage(items)
		case 3:
			p.State, p.Output = "output-available", json.RawMessage(`{"data":`+items+`,"total":9}`)
		default:
			p.State, p.Output = "output-available", json.RawMessage(fmt.Sprintf(
				`{"data":%s,"_pagingComplete":%t,"_likelyMoreRows":false,"_stoppedBy":"complete_no_next","_note":"Every page. The full result is kept under _resultId \"%s\": call queryToolResult.","_boundary":{"scope":"list_orders","completion":"complete","records":%d},"_resultId":%q}`,
				items, rng.IntN(2) == 0, id, len(rows), id))
		}
		return p
	}
	assistant := func(id string) UIMessage {
		m := UIMessage{ID: id, Role: RoleAssistant}
		for range rng.IntN(4) {
			m.Parts = append(m.Parts, Part{Type: "step-start"})
			if rng.IntN(2) == 0 {
				m.Parts = append(m.Parts, Part{Type: "text", Text: text(1500), State: "done"})
			}
			for range rng.IntN(3) {
				m.Parts = append(m.Parts, result())
			}
		}
		return m
	}
	turns := rng.IntN(12)
	if rng.IntN(10) == 0 {
		thread = append(thread, UIMessage{ID: "pre", Role: RoleAssistant, Parts: []Part{{Type: "text", Text: "Hello."}}})
	}
	for i := range turns {
		thread = append(thread, UIMessage{ID: fmt.Sprint("u", i), Role: RoleUser, Parts: []Part{{Type: "text", Text: text(2500)}}})
		if i < turns-1 || rng.IntN(5) == 0 {
			thread = append(thread, assistant(fmt.Sprint("a", i)))
		}
	}
	if rng.IntN(3) > 0 {
		c := assistant("current")
		current = &c
	}
	return thread, current
}

// TestFitProperties: for random threads and budgets, what is sent fits,
// keeps the system messages and the current turn whole and in place,
// keeps every older message or a compacted or shortened form of it,
// pairs every tool message with a call of the assistant message before
// it, and is the same when fitted twice; a failure means the minimum
// alone is over the budget.
func TestFitProperties(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var failed, compactedAny, shortenedAny, droppedAny, expiredAny int
	defer func() {
		// Every path is taken by some seeds.
		if failed == 0 || compactedAny == 0 || shortenedAny == 0 || droppedAny == 0 || expiredAny == 0 {
			t.Errorf("paths taken: %d failed, %d compacted, %d shortened, %d dropped, %d marked expired",
				failed, compactedAny, shortenedAny, droppedAny, expiredAny)
		}
	}()
	for seed := range uint64(600) {
		rng := mrand.New(mrand.NewPCG(seed, 15))
		thread, current := randThread(rng)
		system := []Message{{Role: RoleSystem, Content: "You help."}}
		if rng.IntN(2) == 0 {
			system = append(system, Message{Role: RoleSystem, Content: strings.Repeat("Walk every page. ", 60)})
		}
		whole := ModelMessages(thread)
		if current != nil {
			whole = append(whole, ModelMessages([]UIMessage{*current})...)
		}
		size := 0
		for i := range whole {
			size += messageSize(&whole[i])
		}
		keep := rng.IntN(4)
		b := budget{model: "m", keepRecent: keep, cpt: DefaultCharsPerToken, limit: rng.IntN(size*3/2 + 2000)}
		live := map[string]bool{}
		cache := newVerdictCache(64)
		in := fitInput{system: system, toolChars: rng.IntN(3000), thread: thread, current: current, budget: b,
			expiry: func(id string) (time.Time, bool) {
				if _, ok := live[id]; !ok {
					live[id] = rng.IntN(2) == 0
				}
				return now.Add(time.Minute), live[id]
			},
			verdict: cache.get}
		name := fmt.Sprintf("seed %d (limit %d, thread %d chars, keep %d)", seed, b.limit, size, keep)
		f, err := fit(in)
		// The same as the plain implementation, and again through the
		// memo a turn's later steps use.
		ref, refErr := refFit(in)
		in.memo = &olderMemo{}
		tokens := NewTokenMemo(bpeCounter(tokenizer.O200kBase), 0)
		for k := range 3 {
			if k == 2 {
				// A refit at another ratio, as a counted step does: what
				// is sent changes, and the count with it.
				in.budget.limit = in.budget.limit/2 + rng.IntN(in.budget.limit+1)
				ref, refErr = refFit(in)
			}
			got, gotErr := fit(in)
			if (gotErr == nil) != (refErr == nil) || gotErr != nil && gotErr.Error() != refErr.Error() {
				t.Fatalf("%s: fit: %v; the plain implementation: %v", name, gotErr, refErr)
			}
			if gotErr == nil {
				// fixed and history are checked below (the plain
				// implementation does not compute them), olderAt and
				// olderTurns by the count.
				if diff := cmp.Diff(ref, got, cmp.AllowUnexported(fitted{}), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(fitted{}, "fixed", "history", "olderAt", "olderTurns")); diff != "" {
					t.Fatalf("%s: fit differs from the plain implementation (-plain +fit):\n%s", name, diff)
				}
				// The count kept on the older turns between steps is the
				// count of the whole request.
				specs := []ToolSpec{{Name: "list_orders", Description: "List orders", Parameters: []byte(`{"type":"object"}`)}}
				want := RequestTokens(bpeCounter(tokenizer.O200kBase), &ModelRequest{Messages: got.msgs, Tools: specs})
				if n := got.countTokens(tokens, specs); n != want {
					t.Fatalf("%s: the step counted %d tokens, its request %d", name, n, want)
				}
			}
		}
		in.memo, in.budget = nil, b

		protect := 0
		for i := len(thread) - 1; i >= 0; i-- {
			if thread[i].Role == RoleUser {
				protect = i
				break
			}
		}
		tail := ModelMessages(thread[protect:])
		if current != nil {
			tail = append(tail, ModelMessages([]UIMessage{*current})...)
		}
		minimum := in.toolChars
		for _, m := range append(append([]Message(nil), system...), tail...) {
			minimum += messageSize(&m)
		}
		if err != nil {
			var be *ContextBudgetError
			if !errors.As(err, &be) || be.Need <= b.limit || be.Need < minimum || be.Need > minimum+noticeReserve {
				t.Fatalf("%s: error %v (minimum %d)", name, err, minimum)
			}
			failed++
			continue
		}
		if f.fixed != minimum {
			t.Fatalf("%s: fixed %d, want the protected minimum %d", name, f.fixed, minimum)
		}
		if f.history != math.MaxInt && (f.dropped > 0 || minimum+f.history > b.limit && f.shortened == 0 && f.dropped == 0) {
			t.Fatalf("%s: history %d, yet %d turns dropped and %d shortened (minimum %d, limit %d)", name, f.history, f.dropped, f.shortened, minimum, b.limit)
		}
		chars := in.toolChars
		for i := range f.msgs {
			chars += messageSize(&f.msgs[i])
		}
		if chars != f.chars || chars > b.limit {
			t.Fatalf("%s: sent %d characters (reported %d), limit %d", name, chars, f.chars, b.limit)
		}
		if diff := cmp.Diff(system, f.msgs[:len(system)]); diff != "" {
			t.Fatalf("%s: system messages (-want +got):\n%s", name, diff)
		}
		if len(f.msgs) < len(system)+len(tail) {
			t.Fatalf("%s: %d messages sent, fewer than the protected %d", name, len(f.msgs), len(system)+len(tail))
		}
		if diff := cmp.Diff(tail, f.msgs[len(f.msgs)-len(tail):], cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("%s: the current turn is not whole (-want +got):\n%s", name, diff)
		}
		middle := f.msgs[len(system) : len(f.msgs)-len(tail)]
		if len(middle) > 0 && middle[0].Role == RoleSystem && strings.HasPrefix(middle[0].Content, "Earlier parts") {
			if f.dropped == 0 && f.shortened == 0 {
				t.Errorf("%s: a shortening notice, but nothing shortened", name)
			}
			middle = middle[1:]
		} else if f.dropped > 0 || f.shortened > 0 {
			t.Errorf("%s: shortened without telling the model", name)
		}
		// The older messages sent are the newest of the thread's, whole
		// turns left out from the oldest, each the original, its verdict
		// or its shortened text.
		older := whole[:len(whole)-len(tail)]
		k := len(older) - len(middle)
		if k < 0 || k > 0 && k < len(older) && older[k].Role != RoleUser {
			t.Fatalf("%s: %d older messages sent of %d: not whole turns", name, len(middle), len(older))
		}
		compacted := 0
		for i, m := range middle {
			o := older[k+i]
			if !sameMessage(o, m) {
				t.Fatalf("%s: message %d is not the thread's: %+v, want %+v", name, i, m, o)
			}
			if m.Content == o.Content {
				if m.Role == RoleTool {
					var v struct {
						ID string `json:"_resultId"`
					}
					if json.Unmarshal([]byte(m.Content), &v) == nil && v.ID != "" && !live[v.ID] {
						t.Fatalf("%s: a whole older result offers the expired id %s", name, v.ID)
					}
				}
				continue
			}
			switch {
			case m.Role == RoleTool:
				compacted++
				var v map[string]any
				if err := json.Unmarshal([]byte(m.Content), &v); err != nil || v["_compacted"] == nil || v["_tool"] == nil {
					t.Fatalf("%s: a changed tool result is not a verdict: %.300s", name, m.Content)
				}
				if id, ok := v["_resultId"].(string); ok && !live[id] {
					t.Fatalf("%s: expired id %s offered as live", name, id)
				}
				if id, ok := v["_resultExpired"].(string); ok && live[id] {
					t.Fatalf("%s: live id %s marked expired", name, id)
				}
				if note, _ := v["_note"].(string); v["_resultExpired"] != nil && strings.Contains(note, v["_resultExpired"].(string)) {
					t.Fatalf("%s: the note still offers the expired id: %s", name, note)
				}
			case strings.HasSuffix(m.Content, shortenedMark) && strings.HasPrefix(o.Content, strings.TrimSuffix(m.Content, shortenedMark)):
			default:
				t.Fatalf("%s: message changed: %.100q → %.100q", name, o.Content, m.Content)
			}
		}
		if compacted > 0 {
			compactedAny++
		}
		if f.shortened > 0 {
			shortenedAny++
		}
		if f.dropped > 0 {
			droppedAny++
		}
		for _, m := range middle {
			if strings.Contains(m.Content, `"_resultExpired"`) {
				expiredAny++
				break
			}
		}
		if compacted != f.compacted {
			t.Errorf("%s: %d results compacted, reported %d", name, compacted, f.compacted)
		}
		checkModelPairing(t, name, f.msgs)
		again, err := fit(in)
		if err != nil || !cmp.Equal(f.msgs, again.msgs) {
			t.Fatalf("%s: a second fit differs (err %v)", name, err)
		}
	}
}

// sameMessage reports whether got is want, or want with its content
// replaced: the same role, call id and calls.
func sameMessage(want, got Message) bool {
	return want.Role == got.Role && want.ToolCallID == got.ToolCallID && cmp.Equal(want.ToolCalls, got.ToolCalls, cmpopts.EquateEmpty())
}

// checkModelPairing is checkPairing on model messages.
func checkModelPairing(t *testing.T, what string, msgs []Message) {
	t.Helper()
	var body oaiRequestBody
	for _, m := range msgs {
		var bm = struct {
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
		}{Role: string(m.Role), Content: m.Content, ToolCallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			bm.ToolCalls = append(bm.ToolCalls, struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			}{ID: c.ID})
		}
		body.Messages = append(body.Messages, bm)
	}
	checkPairing(t, what, body)
}

func TestContextWindow(t *testing.T) {
	tests := []struct {
		model string
		want  int // prompt tokens
		known bool
	}{
		{"gpt-4o-mini", 128_000 - 16_384, true},
		{"gpt-4o-2024-08-06", 128_000 - 16_384, true},
		{"openai/gpt-4.1-mini", 1_047_576 - 32_768, true},
		{"gpt-4", 8_192 - 2_048, true},
		{"gpt-4-turbo-preview", 128_000 - 4_096, true},
		{"gpt-5-nano", 400_000 - 128_000, true},
		{"o3-mini", 100_000, true},
		{"o1-mini-2024-09-12", 128_000 - 65_536, true},
		{"llama3.1:8b", 131_072 - 8_192, true},
		{"meta-llama/Meta-Llama-3.1-70B-Instruct", 131_072 - 8_192, true},
		{"llama3:8b", 8_192 - 2_048, true},
		{"qwen2.5:14b", 32_768 - 4_096, true},
		{"mistral-nemo", 131_072 - 8_192, true},
		{"claude-3-5-sonnet-latest", 200_000 - 16_384, true},
		{"my-azure-deployment", UnknownWindow.Prompt(), false},
		{"", UnknownWindow.Prompt(), false},
		{"foo1", UnknownWindow.Prompt(), false}, // "o1" counts only as a prefix
	}
	for _, tt := range tests {
		w, known := ContextWindow(tt.model)
		if w.Prompt() != tt.want || known != tt.known {
			t.Errorf("ContextWindow(%q) = %+v (prompt %d), %v; want prompt %d, %v", tt.model, w, w.Prompt(), known, tt.want, tt.known)
		}
	}
}

func TestResolveBudget(t *testing.T) {
	tests := []struct {
		name      string
		ctx       *ContextConfig
		model     string
		cpt       float64
		wantLimit int
		wantKeep  int
	}{
		{"the model's window", nil, "gpt-4o-mini", 0, 111_616 * 3, DefaultKeepRecentSteps},
		{"calibrated, with a margin", nil, "gpt-4o-mini", 4, 424_140, DefaultKeepRecentSteps},
		{"tokens set", &ContextConfig{MaxTokens: 1000}, "gpt-4o-mini", 0, 3000, DefaultKeepRecentSteps},
		{"characters only", &ContextConfig{MaxChars: 5000, KeepRecentSteps: intp(0)}, "gpt-4o-mini", 0, 5000, 0},
		{"both: the smaller", &ContextConfig{MaxChars: 5000, MaxTokens: 1000}, "x", 0, 3000, DefaultKeepRecentSteps},
		{"characters over the window: the window", &ContextConfig{MaxChars: 10_000_000}, "gpt-4o-mini", 0, 111_616 * 3, DefaultKeepRecentSteps},
		{"unknown model", &ContextConfig{KeepRecentSteps: intp(5)}, "x", 0, UnknownWindow.Prompt() * 3, 5},
	}
	for _, tt := range tests {
		b := resolveBudget(Definition{Context: tt.ctx}, tt.model, tt.cpt)
		if b.limit != tt.wantLimit || b.keepRecent != tt.wantKeep || b.calibrated != (tt.cpt > 0) {
			t.Errorf("%s: limit %d keep %d calibrated %v; want %d, %d", tt.name, b.limit, b.keepRecent, b.calibrated, tt.wantLimit, tt.wantKeep)
		}
	}
	for _, bad := range []ContextConfig{{MaxTokens: -1}, {MaxChars: -1}, {KeepRecentSteps: intp(-1)}} {
		d := Definition{ID: "a", Context: &bad}
		if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "context.") {
			t.Errorf("Validate(%+v) = %v, want an error naming the context key", bad, err)
		}
	}
}

// TestVerdict: what a result compacts to, from outputs with and without
// the envelope's keys (outputs before _boundary.completion existed
// included).
func TestVerdict(t *testing.T) {
	exp := time.Date(2026, 12, 1, 9, 15, 0, 0, time.UTC)
	rows := strings.Repeat(`{"id":"ord_1","total":3},`, 200) + `{"id":"ord_2"}`
	tests := []struct {
		name    string
		output  string
		expires time.Time
		want    []string // substrings
		not     []string
	}{
		{"complete walk, live id",
			`{"data":[` + rows + `],"_pagingComplete":true,"_likelyMoreRows":false,"_stoppedBy":"complete_no_next","_note":"Every page. The full result is kept under _resultId \"r_1\": call queryToolResult.","_boundary":{"scope":"list_orders, every page","completion":"complete","records":201},"_resultId":"r_1"}`,
			exp,
			[]string{`"_tool":"list_orders"`, `"_arguments":{"status":"open"}`, `served from the cache`, `"_boundary":{"scope":"list_orders, every page","completion":"complete","records":201}`,
				`"_resultId":"r_1"`, `"_resultExpires":"2026-12-01T09:15:00Z"`, `"_rowsLeftOut":{"data":201}`, `"_stoppedBy":"complete_no_next"`, `kept under _resultId \"r_1\"`},
			[]string{`ord_1`, `_resultExpired`}},
		{"expired id: not offered, the note's sentence about it gone",
			`{"data":[` + rows + `],"_pagingComplete":true,"_note":"Every page. The full result is kept under _resultId \"r_1\": call queryToolResult.","_resultId":"r_1"}`,
			time.Time{},
			[]string{`"_resultExpired":"r_1"`, `has expired (_resultExpired): do not call queryToolResult`, `"_note":"Every page."`, `served from the cache`},
			[]string{`"_resultId"`, `kept under`}},
		{"partial walk, no completion key: no cache promise",
			`{"data":[` + rows + `],"_pagingComplete":false,"_stoppedBy":"budget_pages"}`,
			time.Time{},
			[]string{`"_pagingComplete":false`, `"_stoppedBy":"budget_pages"`, `again with the same arguments.`},
			[]string{`served from the cache`}},
		{"unstable walk", `{"data":[` + rows + `],"_pagingComplete":false,"_boundary":{"completion":"unstable"}}`,
			time.Time{}, []string{`"completion":"unstable"`}, []string{`served from the cache`}},
		{"bare array", `[` + rows + `]`, time.Time{}, []string{`"_rowsLeftOut":{"items":201}`}, nil},
		{"not JSON", strings.Repeat("plain text ", 300), time.Time{}, []string{`"_tool":"list_orders"`}, []string{"plain text"}},
	}
	for _, tt := range tests {
		p := &Part{Type: "dynamic-tool", ToolName: "list_orders", ToolCallID: "c1", State: "output-available",
			Input: json.RawMessage(`{"status":"open"}`), Output: json.RawMessage(tt.output)}
		got := newVerdict(p).render(tt.expires)
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: not JSON: %s", tt.name, got)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: lacks %s:\n%s", tt.name, w, got)
			}
		}
		for _, w := range tt.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: holds %s:\n%s", tt.name, w, got)
			}
		}
	}
	// Long arguments are cut, still valid JSON.
	p := &Part{Type: "dynamic-tool", ToolName: "t", State: "output-available", Input: json.RawMessage(`{"ids":"` + strings.Repeat("x", 5000) + `"}`), Output: json.RawMessage(`{}`)}
	if got := newVerdict(p).render(time.Time{}); !json.Valid([]byte(got)) || len(got) > 1500 {
		t.Errorf("long arguments: %d characters, valid %v", len(got), json.Valid([]byte(got)))
	}
}

// TestRunnerCalibrates: the prompt tokens a step reports calibrate the
// next step's estimate, in the turn and in the next turn; without a
// context key the budget is the model's window.
func TestRunnerCalibrates(t *testing.T) {
	finish := func(evs []ModelEvent, tokens int) []ModelEvent {
		evs[len(evs)-1].Usage = Usage{PromptTokens: tokens}
		return evs
	}
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent { return finish(call("c1", "list_items", `{"_all_pages":true}`), 2000) },
		func(ModelRequest) []ModelEvent {
			return finish([]ModelEvent{{Kind: EventTextDelta, Text: "50."}, {Kind: EventFinish, FinishReason: "stop"}}, 2500)
		},
	}}
	r, _ := newTestRunner(t, m, nil)
	r.opt.ModelName = "gpt-4o-mini"
	def := Definition{ID: "a", System: "Be brief.", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	var reports []stream.ContextReport
	for range 2 {
		rec := &recorder{}
		if err := r.Run(context.Background(), turn(def, rec)); err != nil {
			t.Fatal(err)
		}
		for _, c := range rec.chunks {
			if d, ok := c.(stream.Data); ok && d.Name == stream.ContextName {
				reports = append(reports, d.Data.(stream.ContextReport))
			}
		}
	}
	if len(reports) != 3 {
		t.Fatalf("%d reports, want 3 (two steps, then one)", len(reports))
	}
	first, second, third := reports[0], reports[1], reports[2]
	if first.Calibrated || first.CharsPerToken != DefaultCharsPerToken || first.BudgetTokens != 128_000-16_384 || first.Model != "gpt-4o-mini" {
		t.Errorf("first step: %+v", first)
	}
	want := float64(first.Chars) / 2000
	if !second.Calibrated || second.ReportedPromptTokens != 2000 || second.CharsPerToken < want-0.01 || second.CharsPerToken > want+0.01 {
		t.Errorf("second step: %+v; want calibrated at %.2f", second, want)
	}
	want = float64(second.Chars) / 2500
	if !third.Calibrated || third.CharsPerToken < want-0.01 || third.CharsPerToken > want+0.01 {
		t.Errorf("next turn: %+v; want calibrated at %.2f", third, want)
	}
}
