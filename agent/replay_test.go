package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func replayLoad(t testing.TB) *Transcript {
	t.Helper()
	tr, err := LoadTranscript(filepath.Join("testdata", "replay", "orders.json"))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// replayHistory is the conversation as the runner would send it when
// about to play step of turn: every earlier step answered, each call with
// a tool message.
func replayHistory(tr *Transcript, turn, step int) []Message {
	msgs := []Message{{Role: RoleSystem, Content: "You help."}, {Role: RoleSystem, Content: "Loop guidance."}}
	play := func(i int, steps []TranscriptStep) {
		for j, s := range steps {
			m := Message{Role: RoleAssistant, Content: s.Text}
			for k, c := range s.ToolCalls {
				m.ToolCalls = append(m.ToolCalls, ToolCall{ID: fmt.Sprintf("call_%d_%d_%d", i, j, k), Name: c.Name, Arguments: string(c.Arguments)})
			}
			msgs = append(msgs, m)
			for _, c := range m.ToolCalls {
				msgs = append(msgs, Message{Role: RoleTool, ToolCallID: c.ID, Content: `{"ok":true,"_boundary":{"completion":"complete"}}`})
			}
		}
	}
	for i := 0; i <= turn; i++ {
		user, steps := "(live)", []TranscriptStep(nil)
		if i < len(tr.Turns) {
			user, steps = tr.Turns[i].User, tr.Turns[i].Steps
		}
		msgs = append(msgs, Message{Role: RoleUser, Content: user})
		if i < turn {
			play(i, steps)
		} else {
			play(i, steps[:min(step, len(steps))])
			for range step - len(steps) {
				msgs = append(msgs, Message{Role: RoleAssistant, Content: "(extra)"})
			}
		}
	}
	return msgs
}

func replayRun(t testing.TB, r *Replay, ctx context.Context, msgs []Message) ([]ModelEvent, error) {
	t.Helper()
	var evs []ModelEvent
	var err error
	for ev, e := range r.Stream(ctx, ModelRequest{Messages: msgs}) {
		if e != nil {
			err = e
			break
		}
		evs = append(evs, ev)
	}
	if msg := modelShapeError(evs, err); msg != "" {
		t.Errorf("stream shape: %s\nevents: %+v", msg, evs)
	}
	return evs, err
}

func TestLoadTranscript(t *testing.T) {
	want := &Transcript{
		Name: "open orders",
		Turns: []TranscriptTurn{{
			User: "How many open orders over $100 do we have?",
			Steps: []TranscriptStep{
				{
					Reasoning: "Counting needs every page.",
					Text:      "Let me list the open orders.",
					ToolCalls: []TranscriptCall{{Name: "list_orders", Arguments: json.RawMessage(`{"status":"open","_all_pages":true,"_fields":["id","total"]}`)}},
				},
				{ToolCalls: []TranscriptCall{
					{Name: "queryToolResult", Arguments: json.RawMessage(`{"resultId":"r1","filter":"total > 100"}`)},
					{Name: "list_customers", Arguments: json.RawMessage(`{}`)},
				}},
				{Text: "We have 42 open orders over $100 — 3 of them from new customers."},
			},
		}, {
			User:  "Which customer ordered the most?",
			Steps: []TranscriptStep{{Text: "Acme Ltd., with 7 open orders."}},
		}},
	}
	if diff := cmp.Diff(want, replayLoad(t)); diff != "" {
		t.Errorf("transcript (-want +got):\n%s", diff)
	}

	unnamed, err := LoadTranscript(filepath.Join("testdata", "replay", "unnamed.json"))
	if err != nil || unnamed.Name != "unnamed" {
		t.Errorf("unnamed transcript: name %q, error %v; want the file's base name", unnamed.Name, err)
	}
	_, err = LoadTranscript(filepath.Join("testdata", "replay", "absent.json"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: error %v, want os.ErrNotExist", err)
	}
}

func TestParseTranscriptErrors(t *testing.T) {
	answer := `{"text":"Done."}`
	call := `{"tool_calls":[{"name":"f"}]}`
	turn := func(steps ...string) string {
		return `{"turns":[{"user":"hi","steps":[` + strings.Join(steps, ",") + `]}]}`
	}
	tests := []struct {
		name, in, want string
	}{
		{"empty input", ``, "transcript: invalid JSON: unexpected end of input"},
		{"syntax error", "{\"turns\": [\n  {\"user\": \"hi\",, }]}", "transcript: invalid JSON at line 2, column 17"},
		{"trailing data", `{"turns":[{"user":"hi","steps":[{"text":"a"}]}]} {}`, "transcript: data after the transcript object"},
		{"not an object", `[]`, "transcript: the transcript: want a JSON object, not an array"},
		{"unknown top-level field", `{"turns":[],"version":2}`, `transcript: the transcript: unknown field "version" (known: name, turns)`},
		{"no turns field", `{"name":"x"}`, "transcript: turns: missing"},
		{"no turns", `{"turns":[]}`, "transcript: turns: a transcript needs at least one turn"},
		{"turns not an array", `{"turns":{}}`, "transcript: turns: want an array, not an object"},
		{"name not a string", `{"name":7,"turns":[]}`, "transcript: name: want a string, not a number"},
		{"turn not an object", `{"turns":["hi"]}`, "transcript: turns[0]: want a JSON object, not a string"},
		{"unknown turn field", `{"turns":[{"user":"hi","assistant":"x","steps":[]}]}`, `transcript: turns[0]: unknown field "assistant" (known: steps, user)`},
		{"no user", `{"turns":[{"steps":[{"text":"a"}]}]}`, "transcript: turns[0].user: missing"},
		{"blank user", `{"turns":[{"user":"  ","steps":[{"text":"a"}]}]}`, "transcript: turns[0].user: the user message is blank"},
		{"null user", `{"turns":[{"user":null,"steps":[{"text":"a"}]}]}`, "transcript: turns[0].user: want a string, not null"},
		{"no steps", `{"turns":[{"user":"hi","steps":[]}]}`, "transcript: turns[0].steps: a turn needs at least one step"},
		{"empty step", turn(call, `{}`), "transcript: turns[0].steps[1]: a step needs text or tool_calls"},
		{"reasoning alone", turn(`{"reasoning":"hm"}`), "transcript: turns[0].steps[0]: a step needs text or tool_calls"},
		{"unknown step field", turn(`{"text":"a","tool_call":[]}`), `transcript: turns[0].steps[0]: unknown field "tool_call" (known: reasoning, text, tool_calls)`},
		{"text not a string", turn(`{"text":["a"]}`), "transcript: turns[0].steps[0].text: want a string, not an array"},
		{"last step calls", turn(call, call), "transcript: turns[0].steps[1]: the last step of a turn makes no tool calls"},
		{"early step answers", turn(answer, answer), "transcript: turns[0].steps[0]: a step without tool calls ends the turn, so it must be the last; 1 more step(s) follow"},
		{"call without name", turn(`{"tool_calls":[{"arguments":{}}]}`, answer), "transcript: turns[0].steps[0].tool_calls[0].name: missing"},
		{"blank name", turn(`{"tool_calls":[{"name":" f"}]}`, answer), `transcript: turns[0].steps[0].tool_calls[0].name: want a tool name, not " f"`},
		{"arguments as a string", turn(`{"tool_calls":[{"name":"f","arguments":"{\"a\":1}"}]}`, answer), "transcript: turns[0].steps[0].tool_calls[0].arguments: want a JSON object, not a string"},
		{"arguments as an array", `{"turns":[{"user":"a","steps":[{"text":"b"}]},{"user":"c","steps":[{"tool_calls":[{"name":"f"},{"name":"g","arguments":[1]}]},{"text":"d"}]}]}`,
			"transcript: turns[1].steps[0].tool_calls[1].arguments: want a JSON object, not an array"},
		{"unknown call field", turn(`{"tool_calls":[{"name":"f","id":"x"}]}`, answer), `transcript: turns[0].steps[0].tool_calls[0]: unknown field "id" (known: arguments, name, verdict)`},
		{"tool_calls null", turn(`{"text":"a","tool_calls":null}`), "transcript: turns[0].steps[0].tool_calls: want an array, not null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTranscript([]byte(tt.in))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("error %v\nwant prefix %s", err, tt.want)
			}
		})
	}
}

// TestReplayStepSelection: the step played follows from the messages
// alone.
func TestReplayStepSelection(t *testing.T) {
	tr := replayLoad(t)
	r := NewReplay(tr, ReplayOptions{ChunkSize: 1000})
	tests := []struct {
		turn, step int
		want       string // the step's events, summarised
	}{
		{0, 0, "reason:Counting needs every page. text:Let me list the open orders. call_0_0_0:list_orders finish:tool_calls"},
		{0, 1, "call_0_1_0:queryToolResult call_0_1_1:list_customers finish:tool_calls"},
		{0, 2, "text:We have 42 open orders over $100 — 3 of them from new customers. finish:stop"},
		{1, 0, "text:Acme Ltd., with 7 open orders. finish:stop"},
		{1, 1, `text:The recording "open orders" has no more steps in turn 1. finish:stop`},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("turn %d step %d", tt.turn, tt.step), func(t *testing.T) {
			msgs := replayHistory(tr, tt.turn, tt.step)
			if turn, step := r.Position(msgs); turn != tt.turn || step != tt.step {
				t.Fatalf("Position = %d, %d; want %d, %d", turn, step, tt.turn, tt.step)
			}
			evs, err := replayRun(t, r, context.Background(), msgs)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, replaySummary(evs)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
	_, err := replayRun(t, r, context.Background(), []Message{{Role: RoleSystem, Content: "x"}})
	if !errors.Is(err, ErrReplayNoUserMessage) {
		t.Errorf("no user message: error %v, want ErrReplayNoUserMessage", err)
	}
}

// replaySummary joins the events of one step: deltas of a kind merge.
func replaySummary(evs []ModelEvent) string {
	var parts []string
	var args []string
	for _, ev := range evs {
		switch ev.Kind {
		case EventReasoningDelta:
			parts = append(parts, "reason:"+ev.Text)
		case EventTextDelta:
			parts = append(parts, "text:"+ev.Text)
		case EventToolCallStart:
			parts = append(parts, ev.ToolCallID+":"+ev.ToolName)
			args = append(args, "")
		case EventToolCallDelta:
			args[ev.Index] += ev.ArgsDelta
		case EventFinish:
			parts = append(parts, "finish:"+ev.FinishReason)
		}
	}
	return strings.Join(parts, " ")
}

// TestReplayStreaming checks the exact events of steps.
func TestReplayStreaming(t *testing.T) {
	tr := replayLoad(t)
	tests := []struct {
		name       string
		chunk      int
		turn, step int
		want       []ModelEvent
	}{{
		name: "reasoning, text and a call", chunk: 10, turn: 0, step: 0,
		want: []ModelEvent{
			{Kind: EventReasoningDelta, Text: "Counting n"},
			{Kind: EventReasoningDelta, Text: "eeds every"},
			{Kind: EventReasoningDelta, Text: " page."},
			{Kind: EventTextDelta, Text: "Let me lis"},
			{Kind: EventTextDelta, Text: "t the open"},
			{Kind: EventTextDelta, Text: " orders."},
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_0_0_0", ToolName: "list_orders"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"status":"open","_a`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `ll_pages":true,"_fie`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `lds":["id","total"]}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "two calls, the second without arguments", turn: 0, step: 1,
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_0_1_0", ToolName: "queryToolResult"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"resultId":"r`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `1","filter":"t`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `otal > 100"}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_0_1_1", ToolName: "list_customers"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{`},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "the answer, default chunks, split on characters not bytes", turn: 0, step: 2,
		want: []ModelEvent{
			{Kind: EventTextDelta, Text: "We have 42 o"},
			{Kind: EventTextDelta, Text: "pen orders o"},
			{Kind: EventTextDelta, Text: "ver $100 — 3"},
			{Kind: EventTextDelta, Text: " of them fro"},
			{Kind: EventTextDelta, Text: "m new custom"},
			{Kind: EventTextDelta, Text: "ers."},
			{Kind: EventFinish, FinishReason: "stop"},
		},
	}, {
		name: "a question the recording does not hold", chunk: 1000, turn: 2, step: 0,
		want: []ModelEvent{
			{Kind: EventTextDelta, Text: "This answer would come from a recording \"open orders\", and none of its recorded questions matches \"(live)\", so there is nothing to replay. " +
				"Ask one of the 2 recorded questions:\n\n- How many open orders over $100 do we have?\n- Which customer ordered the most?"},
			{Kind: EventFinish, FinishReason: "stop"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReplay(tr, ReplayOptions{ChunkSize: tt.chunk})
			evs, err := replayRun(t, r, context.Background(), replayHistory(tr, tt.turn, tt.step))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestReplayUnknownTool: a call naming a tool the request lacks is still
// played; Validate is the place to refuse it.
func TestReplayUnknownTool(t *testing.T) {
	tr := replayLoad(t)
	req := ModelRequest{Messages: replayHistory(tr, 0, 0), Tools: []ToolSpec{{Name: "something_else"}}}
	var names []string
	for ev, err := range NewReplay(tr, ReplayOptions{}).Stream(context.Background(), req) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == EventToolCallStart {
			names = append(names, ev.ToolName)
		}
	}
	if diff := cmp.Diff([]string{"list_orders"}, names); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestTranscriptValidate(t *testing.T) {
	tr := replayLoad(t)
	if err := tr.Validate([]string{"list_orders", "list_customers", "queryToolResult", "fetchToolResult"}); err != nil {
		t.Errorf("Validate with every tool: %v", err)
	}
	err := tr.Validate([]string{"list_orders", "fetchToolResult"})
	want := `transcript "open orders" calls tools the agent does not offer: queryToolResult (turns[0].steps[1].tool_calls[0]), list_customers (turns[0].steps[1].tool_calls[1]); offered: fetchToolResult, list_orders`
	if err == nil || err.Error() != want {
		t.Errorf("Validate error:\n got %v\nwant %s", err, want)
	}
}

// TestReplayConcurrent plays different histories from many goroutines:
// each sees its own step, whatever the others do.
func TestReplayConcurrent(t *testing.T) {
	tr := replayLoad(t)
	r := NewReplay(tr, ReplayOptions{ChunkSize: 5})
	histories := [][]Message{replayHistory(tr, 0, 1), replayHistory(tr, 1, 0)}
	want := make([][]ModelEvent, len(histories))
	for i, h := range histories {
		var err error
		if want[i], err = replayRun(t, r, context.Background(), h); err != nil {
			t.Fatal(err)
		}
	}
	if cmp.Equal(want[0], want[1]) {
		t.Fatal("the two histories play the same step")
	}
	var wg sync.WaitGroup
	for g := range 4 {
		i := g % len(histories)
		wg.Go(func() {
			for range 100 {
				got, err := replayRun(t, r, context.Background(), histories[i])
				if err != nil {
					t.Error(err)
					return
				}
				if diff := cmp.Diff(want[i], got); diff != "" {
					t.Errorf("history %d (-want +got):\n%s", i, diff)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestReplayCancel(t *testing.T) {
	tr := replayLoad(t)
	r := NewReplay(tr, ReplayOptions{ChunkSize: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n int
	var err error
	for _, e := range r.Stream(ctx, ModelRequest{Messages: replayHistory(tr, 0, 2)}) {
		if e != nil {
			err = e
			break
		}
		n++
		cancel()
	}
	if n != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("%d events then error %v; want 1 event then context.Canceled", n, err)
	}
}

// TestReplayOwnsItsCopy: changing the transcript after NewReplay changes
// nothing.
func TestReplayOwnsItsCopy(t *testing.T) {
	tr := replayLoad(t)
	r := NewReplay(tr, ReplayOptions{ChunkSize: 1000})
	tr.Turns[1].Steps[0].Text = "changed"
	evs, err := replayRun(t, r, context.Background(), replayHistory(tr, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := replaySummary(evs); got != "text:Acme Ltd., with 7 open orders. finish:stop" {
		t.Errorf("events %s", got)
	}
}

// FuzzParseTranscript: ParseTranscript never panics, and whatever it
// accepts plays every step with the event contract, reassembling the
// recorded text and arguments, and survives a JSON round trip.
func FuzzParseTranscript(f *testing.F) {
	for _, name := range []string{"orders.json", "unnamed.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "replay", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"turns":[{"user":"é","steps":[{"tool_calls":[{"name":"f","arguments":{"a":"\u00e9"}}]},{"text":"ü"}]}]}`))
	f.Add([]byte(`{"turns":[{"user":"x","steps":[{"text":"a","tool_calls":null}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tr, err := ParseTranscript(data)
		if err != nil {
			return
		}
		r := NewReplay(tr, ReplayOptions{ChunkSize: 3})
		for i, turn := range tr.Turns {
			for j, step := range turn.Steps {
				evs, err := replayRun(t, r, context.Background(), replayHistory(tr, i, j))
				if err != nil {
					t.Fatal(err)
				}
				var text, reasoning strings.Builder
				args := make([]string, len(step.ToolCalls))
				for _, ev := range evs {
					switch ev.Kind {
					case EventTextDelta:
						text.WriteString(ev.Text)
					case EventReasoningDelta:
						reasoning.WriteString(ev.Text)
					case EventToolCallDelta:
						args[ev.Index] += ev.ArgsDelta
					}
				}
				if text.String() != step.Text || reasoning.String() != step.Reasoning {
					t.Fatalf("turn %d step %d: text %q reasoning %q", i, j, text.String(), reasoning.String())
				}
				for k, c := range step.ToolCalls {
					if args[k] != string(c.Arguments) {
						t.Fatalf("turn %d step %d call %d: arguments %q, want %q", i, j, k, args[k], c.Arguments)
					}
				}
			}
		}
		var out bytes.Buffer
		enc := json.NewEncoder(&out)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(tr); err != nil {
			t.Fatal(err)
		}
		again, err := ParseTranscript(out.Bytes())
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out.Bytes(), err)
		}
		if diff := cmp.Diff(tr, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}

func ExampleReplay() {
	tr, err := ParseTranscript([]byte(`{
		"name": "demo",
		"turns": [{
			"user": "How many open orders?",
			"steps": [
				{"tool_calls": [{"name": "list_orders", "arguments": {"status": "open", "_all_pages": true}}]},
				{"text": "There are 42 open orders."}
			]
		}]
	}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	model := NewReplay(tr, ReplayOptions{})
	history := []Message{{Role: RoleUser, Content: "How many open orders?"}}
	for ev, err := range model.Stream(context.Background(), ModelRequest{Messages: history}) {
		if err != nil {
			fmt.Println(err)
			return
		}
		switch ev.Kind {
		case EventToolCallStart:
			fmt.Printf("call %s %s\n", ev.ToolCallID, ev.ToolName)
		case EventToolCallDelta:
			fmt.Printf("  args %s\n", ev.ArgsDelta)
		case EventFinish:
			fmt.Println("finish", ev.FinishReason)
		}
	}
	// Output:
	// call call_0_0_0 list_orders
	//   args {"status":"o
	//   args pen","_all_p
	//   args ages":true}
	// finish tool_calls
}

// BenchmarkReplayStep measures placing and playing one step.
func BenchmarkReplayStep(b *testing.B) {
	tr := replayLoad(b)
	r := NewReplay(tr, ReplayOptions{})
	msgs := replayHistory(tr, 0, 2)
	b.ReportAllocs()
	for b.Loop() {
		for _, err := range r.Stream(context.Background(), ModelRequest{Messages: msgs}) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

func TestReplayLastResultID(t *testing.T) {
	tr, err := ParseTranscript([]byte(`{"turns":[{"user":"q","steps":[
		{"tool_calls":[{"name":"list","arguments":{}}]},
		{"tool_calls":[{"name":"queryToolResult","arguments":{"resultId":"{{lastResultId}}"}}]},
		{"text":"done"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{
		{Role: RoleUser, Content: "q"},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "c1", Name: "list", Arguments: "{}"}}},
		{Role: RoleTool, ToolCallID: "c1", Content: `{"data":[],"_resultId":"r_abc"}`},
	}
	var args strings.Builder
	for ev, err := range NewReplay(tr, ReplayOptions{}).Stream(context.Background(), ModelRequest{Messages: msgs}) {
		if err != nil {
			t.Fatal(err)
		}
		args.WriteString(ev.ArgsDelta)
	}
	if args.String() != `{"resultId":"r_abc"}` {
		t.Errorf("arguments = %s", args.String())
	}
}

// TestReplaySaysWhenTheRunDiffers: the answer step is replaced by a
// statement of how the live calls differed — a call without its boundary
// (looping off), a refused call — and played as recorded otherwise.
func TestReplaySaysWhenTheRunDiffers(t *testing.T) {
	tr := replayLoad(t)
	r := NewReplay(tr, ReplayOptions{ChunkSize: 1000})
	answer := func(msgs []Message) string {
		evs, err := replayRun(t, r, context.Background(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		return replaySummary(evs)
	}
	msgs := replayHistory(tr, 0, 2)
	if got := answer(msgs); !strings.Contains(got, "We have 42 open orders") {
		t.Fatalf("the calls did what was recorded, yet: %s", got)
	}
	for i := range msgs {
		if msgs[i].ToolCallID == "call_0_0_0" {
			msgs[i].Content = `{"orders":[{"id":"o1"}]}` // no _boundary: the binding does not loop
		}
		if msgs[i].ToolCallID == "call_0_1_1" {
			msgs[i].Content = `{"error":"there is no tool \"list_customers\" in this step; use one of the tools offered"}`
		}
	}
	got := answer(msgs)
	for _, want := range []string{"`list_orders` ran without looping", "`_all_pages`, `_fields` did not apply", "`list_customers` was refused or failed", "Allow response looping"} {
		if !strings.Contains(got, want) {
			t.Errorf("answer lacks %q: %s", want, got)
		}
	}
	if strings.Contains(got, "42 open orders") {
		t.Errorf("the recorded claim is still made: %s", got)
	}

	// A walk of every page that a limit cut: the recorded counts are not
	// this run's either.
	msgs = replayHistory(tr, 0, 2)
	for i := range msgs {
		if msgs[i].ToolCallID == "call_0_0_0" {
			msgs[i].Content = `{"orders":[{"id":"o1"}],"_pagingComplete":false,"_boundary":{"completion":"partial","stopReason":"budget_pages"},` +
				`"_aggregate":{"completion":"partial","verdict":"over the 1 row fetched (partial): rows are missing, so these are not totals"}}`
		}
	}
	got = answer(msgs)
	if !strings.Contains(got, "`list_orders` came back partial (stopped by budget_pages)") || strings.Contains(got, "42 open orders") {
		t.Errorf("a partial walk's answer: %s", got)
	}
}
