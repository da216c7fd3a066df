package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/tools"
)

// The tests below drive the real go-openai client against oaiFake, a
// scripted OpenAI-compatible server speaking SSE.

const oaiTestKey = "test-key-0123456789abcdef"

// oaiFake is a scripted OpenAI-compatible server: request i (from 0) is
// answered by answers[min(i, len(answers)-1)]. It records every request.
type oaiFake struct {
	srv     *httptest.Server
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	paths   []string
}

func newOAIFake(t *testing.T, answers ...http.HandlerFunc) *oaiFake {
	t.Helper()
	f := &oaiFake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		n := len(f.bodies)
		f.bodies = append(f.bodies, body)
		f.headers = append(f.headers, r.Header.Clone())
		f.paths = append(f.paths, r.URL.RequestURI())
		f.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		answers[min(n, len(answers)-1)](w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *oaiFake) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

// oaiStream answers 200 with one SSE event per chunk, then [DONE].
func oaiStream(chunks ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		oaiWriteSSE(w, chunks...)
		fmt.Fprint(w, "data: [DONE]\n\n")
	}
}

func oaiWriteSSE(w http.ResponseWriter, chunks ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	for _, c := range chunks {
		fmt.Fprintf(w, "data: %s\n\n", c)
		w.(http.Flusher).Flush()
	}
}

// oaiStatus answers an error status with a JSON body.
func oaiStatus(code int, header http.Header, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for k, v := range header {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

// oaiDelta is a chunk whose only choice carries delta.
func oaiDelta(delta string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}`
}

// oaiFinish is a chunk ending the choice with reason.
func oaiFinish(reason string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"` + reason + `"}]}`
}

// oaiSleeps records the waits of an OpenAI model without waiting.
type oaiSleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *oaiSleeps) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	return nil
}

func (s *oaiSleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func oaiTestModel(f *oaiFake, sl *oaiSleeps) *OpenAI {
	return NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL + "/v1", APIKey: oaiTestKey, Model: "test-model", Sleep: sl.sleep})
}

var oaiTestRequest = ModelRequest{Messages: []Message{{Role: RoleUser, Content: "hi"}}}

// oaiCollect drains a stream, checking the shape every consumer relies
// on: a start before the deltas of its call, dense call indices in start
// order, and either exactly one EventFinish, last, or an error and no
// EventFinish.
func oaiCollect(t *testing.T, seq iter.Seq2[ModelEvent, error]) ([]ModelEvent, error) {
	t.Helper()
	var evs []ModelEvent
	var err error
	for ev, e := range seq {
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

// modelShapeError checks the event contract of Model.Stream.
func modelShapeError(evs []ModelEvent, err error) string {
	started := map[int]bool{}
	finishes := 0
	for i, ev := range evs {
		if finishes > 0 {
			return fmt.Sprintf("event %d after EventFinish", i)
		}
		switch ev.Kind {
		case EventToolCallStart:
			if started[ev.Index] {
				return fmt.Sprintf("call %d started twice", ev.Index)
			}
			if ev.Index != len(started) {
				return fmt.Sprintf("call index %d started after %d calls", ev.Index, len(started))
			}
			if ev.ToolCallID == "" {
				return fmt.Sprintf("call %d started without an id", ev.Index)
			}
			started[ev.Index] = true
		case EventToolCallDelta:
			if !started[ev.Index] {
				return fmt.Sprintf("delta of call %d before its start", ev.Index)
			}
		case EventFinish:
			finishes++
		case EventTextDelta, EventReasoningDelta:
		default:
			return fmt.Sprintf("event %d: unknown kind %d", i, ev.Kind)
		}
	}
	switch {
	case err == nil && finishes != 1:
		return fmt.Sprintf("%d EventFinish in a stream without error", finishes)
	case err != nil && finishes != 0:
		return "an EventFinish and an error"
	}
	return ""
}

func TestOpenAIText(t *testing.T) {
	f := newOAIFake(t, oaiStream(
		oaiDelta(`{"role":"assistant","content":""}`),
		oaiDelta(`{"content":"Hel"}`),
		oaiDelta(`{"content":"lo!"}`),
		oaiFinish("stop"),
	))
	evs, err := oaiCollect(t, oaiTestModel(f, &oaiSleeps{}).Stream(context.Background(), oaiTestRequest))
	if err != nil {
		t.Fatal(err)
	}
	want := []ModelEvent{
		{Kind: EventTextDelta, Text: "Hel"},
		{Kind: EventTextDelta, Text: "lo!"},
		{Kind: EventFinish, FinishReason: "stop"},
	}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestOpenAIToolCalls covers the tool call dialects of compatible servers.
func TestOpenAIToolCalls(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   []ModelEvent
	}{{
		name: "arguments split across many deltas",
		chunks: []string{
			oaiDelta(`{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"list_orders","arguments":""}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\""}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"status"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"\":\"op"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"en\"}"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "list_orders"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `status`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `":"op`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `en"}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "two parallel calls interleaved",
		chunks: []string{
			oaiDelta(`{"content":"Checking both."}`),
			oaiDelta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"get_order","arguments":""}}]}`),
			oaiDelta(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"get_customer","arguments":""}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"id\":"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":1,"function":{"arguments":"{\"id\":"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":1,"function":{"arguments":"\"c9\"}"}},{"index":0,"function":{"arguments":"7}"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventTextDelta, Text: "Checking both."},
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "get_order"},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "get_customer"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"id":`},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{"id":`},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `"c9"}`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `7}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "server indices need not start at zero",
		chunks: []string{
			oaiDelta(`{"tool_calls":[{"index":3,"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":7,"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "f"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "g"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "no index, id only on the first delta",
		chunks: []string{
			oaiDelta(`{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"list_orders","arguments":"{\"status\":"}}]}`),
			oaiDelta(`{"tool_calls":[{"function":{"arguments":"\"open\"}"}}]}`),
			oaiDelta(`{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"list_customers"}}]}`),
			oaiDelta(`{"tool_calls":[{"function":{"arguments":"{}"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "list_orders"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"status":`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `"open"}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "list_customers"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "no index, ids on every delta",
		chunks: []string{
			oaiDelta(`{"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}`),
			oaiDelta(`{"tool_calls":[{"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"b\""}}]}`),
			oaiDelta(`{"tool_calls":[{"id":"call_a","function":{"arguments":":1}"}}]}`),
			oaiDelta(`{"tool_calls":[{"id":"call_b","function":{"arguments":":2}"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "f"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"a"`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "g"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{"b"`},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `:1}`},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `:2}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "whole calls in one chunk, no index, arguments as an object, stop after calls",
		chunks: []string{
			oaiDelta(`{"role":"assistant","tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":{"x":1}}},{"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"y\":2}"}}]}`),
			oaiFinish("stop"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "f"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"x":1}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "g"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{"y":2}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "index 0 reused with a new id for each call",
		chunks: []string{
			oaiDelta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"n\":1}"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"id":"call_b","type":"function","function":{"name":"f","arguments":"{\"n\":2}"}}]}`),
			oaiFinish("stop"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "f"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"n":1}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "f"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{"n":2}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "arguments before the name are held; empty arguments become {}",
		chunks: []string{
			oaiDelta(`{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":"{\"q\":"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"name":"search","arguments":"\"x\"}"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"ping"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_a", ToolName: "search"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"q":"x"}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_b", ToolName: "ping"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "event indices follow the order calls start, not the server's",
		chunks: []string{
			oaiDelta(`{"tool_calls":[{"index":0,"id":"call_a","function":{"arguments":"{\"n\":0}"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"g","arguments":"{\"n\":1}"}}]}`),
			oaiDelta(`{"tool_calls":[{"index":0,"function":{"name":"f"}}]}`),
			oaiFinish("tool_calls"),
		},
		want: []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "call_b", ToolName: "g"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"n":1}`},
			{Kind: EventToolCallStart, Index: 1, ToolCallID: "call_a", ToolName: "f"},
			{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{"n":0}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		},
	}, {
		name: "reasoning_content and reasoning, then usage in a chunk without choices",
		chunks: []string{
			oaiDelta(`{"role":"assistant","reasoning_content":"Think"}`),
			oaiDelta(`{"reasoning":"ing."}`),
			oaiDelta(`{"content":"Done."}`),
			oaiFinish("stop"),
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":[],"usage":{"prompt_tokens":31,"completion_tokens":7,"total_tokens":38}}`,
		},
		want: []ModelEvent{
			{Kind: EventReasoningDelta, Text: "Think"},
			{Kind: EventReasoningDelta, Text: "ing."},
			{Kind: EventTextDelta, Text: "Done."},
			{Kind: EventFinish, FinishReason: "stop", Usage: Usage{PromptTokens: 31, CompletionTokens: 7}},
		},
	}, {
		name: "length and refusal pass through",
		chunks: []string{
			oaiDelta(`{"refusal":"I can't help with that."}`),
			oaiFinish("length"),
		},
		want: []ModelEvent{
			{Kind: EventTextDelta, Text: "I can't help with that."},
			{Kind: EventFinish, FinishReason: "length"},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newOAIFake(t, oaiStream(tt.chunks...))
			evs, err := oaiCollect(t, oaiTestModel(f, &oaiSleeps{}).Stream(context.Background(), oaiTestRequest))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenAIGeneratesMissingIDs(t *testing.T) {
	f := newOAIFake(t, oaiStream(
		oaiDelta(`{"tool_calls":[{"index":0,"type":"function","function":{"name":"f","arguments":"{}"}}]}`),
		oaiDelta(`{"tool_calls":[{"index":1,"type":"function","function":{"name":"g","arguments":"{}"}}]}`),
		oaiFinish("tool_calls"),
	))
	evs, err := oaiCollect(t, oaiTestModel(f, &oaiSleeps{}).Stream(context.Background(), oaiTestRequest))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		if ev.Kind == EventToolCallStart {
			ids = append(ids, ev.ToolCallID)
		}
	}
	if len(ids) != 2 || ids[0] == ids[1] || !strings.HasPrefix(ids[0], "call_") || !strings.HasPrefix(ids[1], "call_") {
		t.Errorf("generated ids = %q, want two distinct call_… ids", ids)
	}
}

// TestOpenAIRequestBody checks what the server receives.
func TestOpenAIRequestBody(t *testing.T) {
	f := newOAIFake(t, oaiStream(oaiDelta(`{"content":"ok"}`), oaiFinish("stop")))
	m := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL + "/v1/", APIKey: oaiTestKey, Model: "default-model", StreamUsage: StreamUsageOn})
	req := ModelRequest{
		Model: "gpt-test",
		Messages: []Message{
			{Role: RoleSystem, Content: "You help the support team."},
			{Role: RoleSystem, Content: "Loop guidance."},
			{Role: RoleUser, Content: "How many open orders?"},
			{Role: RoleAssistant, Content: "Let me look.", ToolCalls: []ToolCall{
				{ID: "call_1", Name: "list_orders", Arguments: `{"status":"open","_all_pages":true}`},
				{ID: "call_2", Name: "ping", Arguments: ""},
			}},
			{Role: RoleTool, ToolCallID: "call_1", Content: `{"items":[{"id":1}]}`},
			{Role: RoleTool, ToolCallID: "call_2", Content: `{"ok":true}`},
		},
		Tools: []ToolSpec{
			{Name: "list_orders", Description: "Lists orders.", Parameters: json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`)},
			{Name: "ping"},
		},
	}
	if _, err := oaiCollect(t, m.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(f.bodies[0], &got); err != nil {
		t.Fatal(err)
	}
	var want any
	if err := json.Unmarshal([]byte(`{
		"model": "gpt-test",
		"stream": true,
		"stream_options": {"include_usage": true},
		"messages": [
			{"role": "system", "content": "You help the support team."},
			{"role": "system", "content": "Loop guidance."},
			{"role": "user", "content": "How many open orders?"},
			{"role": "assistant", "content": "Let me look.", "tool_calls": [
				{"id": "call_1", "type": "function", "function": {"name": "list_orders", "arguments": "{\"status\":\"open\",\"_all_pages\":true}"}},
				{"id": "call_2", "type": "function", "function": {"name": "ping", "arguments": "{}"}}
			]},
			{"role": "tool", "tool_call_id": "call_1", "content": "{\"items\":[{\"id\":1}]}"},
			{"role": "tool", "tool_call_id": "call_2", "content": "{\"ok\":true}"}
		],
		"tools": [
			{"type": "function", "function": {"name": "list_orders", "description": "Lists orders.", "parameters": {"type": "object", "properties": {"status": {"type": "string"}}}}},
			{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}
		]
	}`), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request body (-want +got):\n%s", diff)
	}
	h := f.headers[0]
	gotHeaders := map[string]string{"path": f.paths[0], "Authorization": h.Get("Authorization"), "Accept": h.Get("Accept"), "Content-Type": h.Get("Content-Type")}
	wantHeaders := map[string]string{"path": "/v1/chat/completions", "Authorization": "Bearer " + oaiTestKey, "Accept": "text/event-stream", "Content-Type": "application/json"}
	if diff := cmp.Diff(wantHeaders, gotHeaders); diff != "" {
		t.Errorf("request line and headers (-want +got):\n%s", diff)
	}

	// The default model, and usage asked of any server.
	m = NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL + "/v1", Model: "default-model"})
	if _, err := oaiCollect(t, m.Stream(context.Background(), oaiTestRequest)); err != nil {
		t.Fatal(err)
	}
	var second map[string]any
	if err := json.Unmarshal(f.bodies[1], &second); err != nil {
		t.Fatal(err)
	}
	if second["model"] != "default-model" || second["stream_options"] == nil || second["tools"] != nil {
		t.Errorf("second request = %s; want model default-model, stream_options, no tools", f.bodies[1])
	}
	if h := f.headers[1].Get("Authorization"); h != "" {
		t.Errorf("Authorization without a key = %q, want none", h)
	}
}

// TestOpenAIEndpoints checks the URL, credential header and usage request
// for each kind of base URL, through a transport that sends every request
// to the fake server.
func TestOpenAIEndpoints(t *testing.T) {
	tests := []struct {
		base        string
		wantURL     string
		wantAuth    string // header: value
		wantOptions bool
	}{
		{"", "https://api.openai.com/v1/chat/completions", "Authorization: Bearer " + oaiTestKey, true},
		{"https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions", "Authorization: Bearer " + oaiTestKey, true},
		{"http://localhost:11434/v1", "http://localhost:11434/v1/chat/completions", "Authorization: Bearer " + oaiTestKey, true},
		{"https://acme.openai.azure.com/openai/v1/", "https://acme.openai.azure.com/openai/v1/chat/completions", "Authorization: Bearer " + oaiTestKey, true},
		{"https://acme.openai.azure.com", "https://acme.openai.azure.com/openai/deployments/gpt-4.1-mini/chat/completions?api-version=2024-10-21", "Api-Key: " + oaiTestKey, true},
		{"https://acme.openai.azure.com/?api-version=2024-06-01", "https://acme.openai.azure.com/openai/deployments/gpt-4.1-mini/chat/completions?api-version=2024-06-01", "Api-Key: " + oaiTestKey, false},
	}
	f := newOAIFake(t, oaiStream(oaiDelta(`{"content":"ok"}`), oaiFinish("stop")))
	for _, tt := range tests {
		t.Run(tt.base, func(t *testing.T) {
			var seen string
			client := &http.Client{Transport: oaiRoundTripper(func(r *http.Request) (*http.Response, error) {
				seen = r.URL.String()
				r = r.Clone(r.Context())
				r.URL.Scheme, r.URL.Host = "http", f.srv.Listener.Addr().String()
				return http.DefaultTransport.RoundTrip(r)
			})}
			n := f.requests()
			m := NewOpenAI(OpenAIOptions{BaseURL: tt.base, APIKey: oaiTestKey, Model: "gpt-4.1-mini", HTTPClient: client})
			if _, err := oaiCollect(t, m.Stream(context.Background(), oaiTestRequest)); err != nil {
				t.Fatal(err)
			}
			header, value, _ := strings.Cut(tt.wantAuth, ": ")
			var body map[string]any
			_ = json.Unmarshal(f.bodies[n], &body)
			got := []any{seen, f.headers[n].Get(header), body["stream_options"] != nil}
			want := []any{tt.wantURL, value, tt.wantOptions}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("URL, %s, stream_options (-want +got):\n%s", header, diff)
			}
		})
	}
	if err := oaiFirstError(NewOpenAI(OpenAIOptions{BaseURL: "localhost:8080"})); err == nil || !strings.Contains(err.Error(), "base URL") {
		t.Errorf("base URL without scheme: error %v, want one naming the base URL", err)
	}
}

type oaiRoundTripper func(*http.Request) (*http.Response, error)

// TestOpenAIUsageFallback: a server that rejects stream_options is asked
// again at once without it, and never with it again; usage it reports
// arrives on the finish event.
func TestOpenAIUsageFallback(t *testing.T) {
	reject := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("stream_options")) {
			oaiStatus(400, nil, `{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error"}}`)(w, r)
			return
		}
		oaiStream(oaiDelta(`{"content":"ok"}`), oaiFinish("stop"))(w, r)
	}
	f := newOAIFake(t, reject)
	sl := &oaiSleeps{}
	m := oaiTestModel(f, sl)
	for range 2 {
		if _, err := oaiCollect(t, m.Stream(context.Background(), oaiTestRequest)); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.requests(); n != 3 {
		t.Errorf("%d requests; want 3 (one rejected, then two without stream_options)", n)
	}
	if len(sl.got()) != 0 {
		t.Errorf("waited %v before asking without stream_options", sl.got())
	}
	if !bytes.Contains(f.bodies[0], []byte("include_usage")) || bytes.Contains(f.bodies[2], []byte("stream_options")) {
		t.Errorf("bodies: %s … %s", f.bodies[0], f.bodies[2])
	}

	// Usage in the final chunk reaches the finish event.
	g := newOAIFake(t, oaiStream(oaiDelta(`{"content":"ok"}`), oaiFinish("stop"),
		`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":5,"total_tokens":1239}}`))
	evs, err := oaiCollect(t, oaiTestModel(g, sl).Stream(context.Background(), oaiTestRequest))
	if err != nil {
		t.Fatal(err)
	}
	if u := evs[len(evs)-1].Usage; u.PromptTokens != 1234 || u.CompletionTokens != 5 {
		t.Errorf("usage = %+v", u)
	}
}

func (f oaiRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func oaiFirstError(m *OpenAI) error {
	for _, err := range m.Stream(context.Background(), oaiTestRequest) {
		if err != nil {
			return err
		}
	}
	return nil
}

func TestOpenAIRetries(t *testing.T) {
	ok := oaiStream(oaiDelta(`{"content":"ok"}`), oaiFinish("stop"))
	rateLimited := `{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}`
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	dropBeforeOutput := func(w http.ResponseWriter, r *http.Request) {
		oaiWriteSSE(w, oaiDelta(`{"role":"assistant","content":""}`))
		panic(http.ErrAbortHandler) // the connection drops before any token
	}
	tests := []struct {
		name      string
		answers   []http.HandlerFunc
		wantSleep []time.Duration // exact waits; nil with wantRange
		wantRange [][2]time.Duration
	}{
		{"429 with Retry-After seconds", []http.HandlerFunc{oaiStatus(429, http.Header{"Retry-After": {"2"}}, rateLimited), ok}, []time.Duration{2 * time.Second}, nil},
		{"429 with retry-after-ms", []http.HandlerFunc{oaiStatus(429, http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}}, rateLimited), ok}, []time.Duration{1500 * time.Millisecond}, nil},
		{"503 with an HTTP-date Retry-After", []http.HandlerFunc{oaiStatus(503, http.Header{"Retry-After": {now.Add(7 * time.Second).Format(http.TimeFormat)}}, `upstream busy`), ok}, []time.Duration{7 * time.Second}, nil},
		{"Retry-After zero", []http.HandlerFunc{oaiStatus(429, http.Header{"Retry-After": {"0"}}, rateLimited), ok}, []time.Duration{0}, nil},
		{"5xx twice, exponential backoff", []http.HandlerFunc{oaiStatus(502, nil, `<html>bad gateway</html>`), oaiStatus(500, nil, `{"error":{"message":"oops","type":"server_error"}}`), ok}, nil,
			[][2]time.Duration{{500 * time.Millisecond, 625 * time.Millisecond}, {time.Second, 1250 * time.Millisecond}}},
		{"connection dropped before output", []http.HandlerFunc{dropBeforeOutput, ok}, nil, [][2]time.Duration{{500 * time.Millisecond, 625 * time.Millisecond}}},
		{"in-stream server_error before output", []http.HandlerFunc{oaiStream(`{"error":{"message":"overloaded","type":"server_error"}}`), ok}, nil, [][2]time.Duration{{500 * time.Millisecond, 625 * time.Millisecond}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newOAIFake(t, tt.answers...)
			sl := &oaiSleeps{}
			m := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, APIKey: oaiTestKey, Sleep: sl.sleep, Now: func() time.Time { return now }})
			evs, err := oaiCollect(t, m.Stream(context.Background(), oaiTestRequest))
			if err != nil {
				t.Fatal(err)
			}
			want := []ModelEvent{{Kind: EventTextDelta, Text: "ok"}, {Kind: EventFinish, FinishReason: "stop"}}
			if diff := cmp.Diff(want, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got, want := f.requests(), len(tt.answers); got != want {
				t.Errorf("requests = %d, want %d", got, want)
			}
			got := sl.got()
			if tt.wantRange == nil {
				if diff := cmp.Diff(tt.wantSleep, got); diff != "" {
					t.Errorf("waits (-want +got):\n%s", diff)
				}
				return
			}
			if len(got) != len(tt.wantRange) {
				t.Fatalf("waits = %v, want %d within %v", got, len(tt.wantRange), tt.wantRange)
			}
			for i, r := range tt.wantRange {
				if got[i] < r[0] || got[i] > r[1] {
					t.Errorf("wait %d = %v, want within %v", i, got[i], r)
				}
			}
		})
	}
}

func TestOpenAIErrors(t *testing.T) {
	token := oaiDelta(`{"content":"Par"}`)
	tests := []struct {
		name     string
		answer   http.HandlerFunc
		opt      OpenAIOptions
		want     []ModelEvent // before the error
		requests int
		status   int
		is       error
		contains string
	}{{
		name:     "retries exhausted",
		answer:   oaiStatus(503, nil, `{"error":{"message":"The engine is currently overloaded","type":"server_error"}}`),
		requests: 4, status: 503, contains: "503 Service Unavailable: The engine is currently overloaded [after 4 attempts]",
	}, {
		name:     "MaxRetries negative: no retry",
		answer:   oaiStatus(503, nil, `{"error":{"message":"overloaded","type":"server_error"}}`),
		opt:      OpenAIOptions{MaxRetries: -1},
		requests: 1, status: 503, contains: "overloaded",
	}, {
		name:     "400 is not retried",
		answer:   oaiStatus(400, nil, `{"error":{"message":"Invalid schema for function 'f'","type":"invalid_request_error","code":"invalid_function_parameters"}}`),
		requests: 1, status: 400, contains: "400 Bad Request: Invalid schema for function 'f' (invalid_function_parameters)",
	}, {
		name:     "insufficient_quota 429 is not retried",
		answer:   oaiStatus(429, nil, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}`),
		requests: 1, status: 429, contains: "current quota",
	}, {
		name:     "x-should-retry false",
		answer:   oaiStatus(500, http.Header{"X-Should-Retry": {"false"}}, `{"error":{"message":"no","type":"server_error"}}`),
		requests: 1, status: 500,
	}, {
		name:     "Retry-After longer than MaxRetryWait",
		answer:   oaiStatus(429, http.Header{"Retry-After": {"3600"}}, `{"error":{"message":"Rate limit reached","code":"rate_limit_exceeded"}}`),
		requests: 1, status: 429, contains: "Rate limit reached",
	}, {
		name:     "Retry-After: Inf",
		answer:   oaiStatus(503, http.Header{"Retry-After": {"Inf"}}, `{"error":{"message":"down"}}`),
		requests: 1, status: 503, contains: "down",
	}, {
		name:     "the key echoed in an error body never shows",
		answer:   oaiStatus(401, nil, `{"error":{"message":"Incorrect API key provided: `+oaiTestKey+`.","type":"invalid_request_error","code":"invalid_api_key"}}`),
		requests: 1, status: 401, contains: "Incorrect API key provided: [redacted].",
	}, {
		name:     "the key in a non-JSON error body never shows",
		answer:   oaiStatus(403, nil, `forbidden for key `+oaiTestKey),
		requests: 1, status: 403, contains: "forbidden for key [redacted]",
	}, {
		name: "an error event after the first token is not retried",
		answer: func(w http.ResponseWriter, r *http.Request) {
			oaiWriteSSE(w, token, `{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}`)
		},
		want:     []ModelEvent{{Kind: EventTextDelta, Text: "Par"}},
		requests: 1, contains: "The server had an error",
	}, {
		name: "a 500 after the first token (connection dropped) is not retried",
		answer: func(w http.ResponseWriter, r *http.Request) {
			oaiWriteSSE(w, token)
			panic(http.ErrAbortHandler)
		},
		want:     []ModelEvent{{Kind: EventTextDelta, Text: "Par"}},
		requests: 1, contains: "reading the stream",
	}, {
		name:     "a stream cut cleanly after the first token is incomplete",
		answer:   func(w http.ResponseWriter, r *http.Request) { oaiWriteSSE(w, token) },
		want:     []ModelEvent{{Kind: EventTextDelta, Text: "Par"}},
		requests: 1, is: ErrStreamIncomplete,
	}, {
		name:     "a malformed chunk",
		answer:   oaiStream(`{"choices":[{"index":0,"delta":{"content":7}}]}`),
		requests: 1, contains: "malformed stream chunk",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newOAIFake(t, tt.answer)
			sl := &oaiSleeps{}
			opt := tt.opt
			opt.BaseURL, opt.APIKey, opt.Sleep = f.srv.URL, oaiTestKey, sl.sleep
			evs, err := oaiCollect(t, NewOpenAI(opt).Stream(context.Background(), oaiTestRequest))
			if err == nil {
				t.Fatalf("no error; events %+v", evs)
			}
			if diff := cmp.Diff(tt.want, evs); diff != "" {
				t.Errorf("events before the error (-want +got):\n%s", diff)
			}
			if got := f.requests(); got != tt.requests {
				t.Errorf("requests = %d, want %d (waits %v)", got, tt.requests, sl.got())
			}
			var oe *OpenAIError
			if !errors.As(err, &oe) {
				t.Fatalf("error %T %v, want an *OpenAIError", err, err)
			}
			if oe.StatusCode != tt.status || oe.Attempts != tt.requests {
				t.Errorf("status %d attempts %d, want %d and %d", oe.StatusCode, oe.Attempts, tt.status, tt.requests)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v, want errors.Is %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.contains) {
				t.Errorf("error %q, want it to contain %q", err, tt.contains)
			}
			if strings.Contains(err.Error(), oaiTestKey) || strings.Contains(fmt.Sprintf("%+v", oe), oaiTestKey) {
				t.Errorf("error reveals the key: %v", err)
			}
			if u := errors.Unwrap(err); u != nil && strings.Contains(u.Error(), oaiTestKey) {
				t.Errorf("the wrapped error reveals the key: %v", u)
			}
		})
	}
}

func TestOpenAIConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	sl := &oaiSleeps{}
	m := NewOpenAI(OpenAIOptions{BaseURL: "http://" + addr + "/v1", APIKey: oaiTestKey, Sleep: sl.sleep})
	_, err = oaiCollect(t, m.Stream(context.Background(), oaiTestRequest))
	var oe *OpenAIError
	if !errors.As(err, &oe) || oe.Attempts != 4 || oe.StatusCode != 0 {
		t.Fatalf("error %v, want an *OpenAIError after 4 attempts without status", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("error %v does not unwrap to the *net.OpError", err)
	}
	if len(sl.got()) != 3 {
		t.Errorf("waits = %v, want 3", sl.got())
	}
}

// TestOpenAICancel cancels mid-stream: the sequence ends with the
// context's error and the server sees the request go away.
func TestOpenAICancel(t *testing.T) {
	for _, how := range []string{"cancel", "break"} {
		t.Run(how, func(t *testing.T) {
			gone := make(chan struct{})
			f := newOAIFake(t, func(w http.ResponseWriter, r *http.Request) {
				oaiWriteSSE(w, oaiDelta(`{"content":"one"}`))
				<-r.Context().Done()
				close(gone)
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var evs []ModelEvent
			var err error
			for ev, e := range oaiTestModel(f, &oaiSleeps{}).Stream(ctx, oaiTestRequest) {
				if e != nil {
					err = e
					break
				}
				evs = append(evs, ev)
				if how == "break" {
					break
				}
				cancel()
			}
			want := []ModelEvent{{Kind: EventTextDelta, Text: "one"}}
			if diff := cmp.Diff(want, evs); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if how == "cancel" && !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			if how == "break" && err != nil {
				t.Errorf("error %v after the consumer stopped", err)
			}
			select {
			case <-gone:
			case <-time.After(10 * time.Second):
				t.Fatal("the server never saw the request end: the response was not closed")
			}
			if f.requests() != 1 {
				t.Errorf("requests = %d, want 1", f.requests())
			}
		})
	}
}

// TestOpenAICancelDuringBackoff: cancelling while waiting to retry ends
// the stream with the context's error.
func TestOpenAICancelDuringBackoff(t *testing.T) {
	f := newOAIFake(t, oaiStatus(503, nil, `{"error":{"message":"busy"}}`))
	ctx, cancel := context.WithCancel(context.Background())
	m := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}})
	_, err := oaiCollect(t, m.Stream(ctx, oaiTestRequest))
	if !errors.Is(err, context.Canceled) || f.requests() != 1 {
		t.Errorf("error %v after %d requests, want context.Canceled after 1", err, f.requests())
	}
}

func TestOpenAIBadRequests(t *testing.T) {
	f := newOAIFake(t, oaiStream(oaiFinish("stop")))
	m := oaiTestModel(f, &oaiSleeps{})
	tests := []struct {
		name string
		req  ModelRequest
		want string
	}{
		{"unknown role", ModelRequest{Messages: []Message{{Role: "robot", Content: "x"}}}, `message 0: unknown role "robot"`},
		{"tool message without id", ModelRequest{Messages: []Message{{Role: RoleUser, Content: "x"}, {Role: RoleTool, Content: "{}"}}}, "message 1: a tool message needs the id"},
		{"invalid parameters", ModelRequest{Messages: []Message{{Role: RoleUser, Content: "x"}}, Tools: []ToolSpec{{Name: "f", Parameters: json.RawMessage(`{"type":`)}}}, `tool "f": parameters are not valid JSON`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := oaiCollect(t, m.Stream(context.Background(), tt.req))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want %q", err, tt.want)
			}
		})
	}
	if f.requests() != 0 {
		t.Errorf("requests = %d, want none for bad requests", f.requests())
	}
}

// TestOpenAIConcurrent runs steps of different turns at once.
func TestOpenAIConcurrent(t *testing.T) {
	f := newOAIFake(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		oaiStream(oaiDelta(`{"content":"echo `+body.Messages[0].Content+`"}`), oaiFinish("stop"))(w, r)
	})
	m := oaiTestModel(f, &oaiSleeps{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			msg := fmt.Sprint("m", i)
			evs, err := oaiCollect(t, m.Stream(context.Background(), ModelRequest{Messages: []Message{{Role: RoleUser, Content: msg}}}))
			if err != nil || len(evs) != 2 || evs[0].Text != "echo "+msg {
				t.Errorf("turn %d: events %+v, error %v", i, evs, err)
			}
		})
	}
	wg.Wait()
}

// FuzzOpenAIToolDeltas feeds arbitrary sequences of tool call deltas, in
// every dialect, and checks the event contract holds.
func FuzzOpenAIToolDeltas(f *testing.F) {
	f.Add([]byte{0x00, 0x10, 0x21, 0x32, 0x43})
	f.Add([]byte{0x80, 0x81, 0x90, 0x11, 0x22, 0xff})
	f.Add([]byte{0x44, 0x44, 0x05, 0xc7, 0x3b})
	f.Add([]byte("0X")) // a call opened without a name, then another started
	f.Fuzz(func(t *testing.T, script []byte) {
		d := oaiDecoder{}
		var evs []ModelEvent
		ids := []string{"", "call_a", "call_b"}
		names := []string{"", "f", "g"}
		// No piece is "{}", so a "{}" delta is one the decoder added for
		// a call without arguments.
		args := []string{"", `{"a"`, `:1}`, `[`}
		for _, b := range script {
			tc := oaiToolCallDelta{ID: ids[int(b>>4&3)%3]}
			if b&0x80 == 0 {
				idx := int(b >> 6 & 1)
				tc.Index = &idx
			}
			tc.Function.Name = names[int(b>>2&3)%3]
			tc.Function.Arguments = oaiArguments(args[b&3])
			c := oaiChunk{Choices: []oaiChoice{{Delta: oaiChoiceDelta{ToolCalls: []oaiToolCallDelta{tc}}}}}
			evs = append(evs, d.feed(&c)...)
		}
		d.reason = "tool_calls"
		end, err := d.end()
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, end...)
		if msg := modelShapeError(evs, nil); msg != "" {
			t.Fatalf("%s\nevents: %+v", msg, evs)
		}
		var sent, got int
		for _, b := range script {
			sent += len(args[b&3])
		}
		for _, ev := range evs {
			if ev.Kind == EventToolCallDelta && ev.ArgsDelta != "{}" {
				got += len(ev.ArgsDelta)
			}
		}
		if got != sent {
			t.Fatalf("%d argument bytes out of %d sent\nevents: %+v", got, sent, evs)
		}
	})
}

// BenchmarkOpenAIChunks measures decoding one streamed chunk (JSON and
// events), the per-token cost the runtime adds to a model's stream.
func BenchmarkOpenAIChunks(b *testing.B) {
	text := []byte(oaiDelta(`{"content":"the next few words"}`))
	args := []byte(oaiDelta(`{"tool_calls":[{"index":0,"function":{"arguments":"\"status\":\"open\","}}]}`))
	start := oaiDelta(`{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"list_orders","arguments":""}}]}`)
	for _, bc := range []struct {
		name  string
		chunk []byte
	}{{"text", text}, {"tool arguments", args}} {
		b.Run(bc.name, func(b *testing.B) {
			var d oaiDecoder
			var c oaiChunk
			_ = json.Unmarshal([]byte(start), &c)
			d.feed(&c)
			b.ReportAllocs()
			for b.Loop() {
				var c oaiChunk
				if err := json.Unmarshal(bc.chunk, &c); err != nil {
					b.Fatal(err)
				}
				if len(d.feed(&c)) != 1 {
					b.Fatal("no event")
				}
			}
		})
	}
}

// BenchmarkOpenAIStream measures a whole step of 500 text chunks through
// go-openai and a local server.
func BenchmarkOpenAIStream(b *testing.B) {
	chunks := make([]string, 0, 501)
	for range 500 {
		chunks = append(chunks, oaiDelta(`{"content":"word "}`))
	}
	chunks = append(chunks, oaiFinish("stop"))
	srv := httptest.NewServer(oaiStream(chunks...))
	defer srv.Close()
	m := NewOpenAI(OpenAIOptions{BaseURL: srv.URL})
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		for _, err := range m.Stream(context.Background(), oaiTestRequest) {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != 501 {
			b.Fatalf("%d events", n)
		}
	}
}

// TestOpenAIBackoffCap: the backoff doubles up to MaxRetryWait and stays
// there.
func TestOpenAIBackoffCap(t *testing.T) {
	f := newOAIFake(t, oaiStatus(502, nil, `bad gateway`))
	sl := &oaiSleeps{}
	m := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, MaxRetries: 6, Backoff: 400 * time.Millisecond, MaxRetryWait: 2 * time.Second, Sleep: sl.sleep})
	if _, err := oaiCollect(t, m.Stream(context.Background(), oaiTestRequest)); err == nil {
		t.Fatal("no error")
	}
	floors := []time.Duration{400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	got := sl.got()
	if len(got) != len(floors) || f.requests() != 7 {
		t.Fatalf("waits %v after %d requests, want %d waits and 7 requests", got, f.requests(), len(floors))
	}
	for i, floor := range floors {
		if got[i] < floor || got[i] > min(floor*5/4, 2*time.Second) {
			t.Errorf("wait %d = %v, want %v plus at most a quarter, capped at 2s", i, got[i], floor)
		}
	}
}

// TestOpenAIErrorsMaskEncodedKeys: a model server that echoes the key —
// or another secret of the deployment's scrubber — URL-escaped, with
// some characters escaped and others not, or base64-encoded inside the
// whole header it received, gets none of it into the error or its chain.
func TestOpenAIErrorsMaskEncodedKeys(t *testing.T) {
	const key, admin = "sk-proj/Key+0123456789abc", "admin-key-of-the-deployment-42"
	header := base64.StdEncoding.EncodeToString([]byte("Bearer " + key))
	for _, tt := range []struct {
		name, body string
		scrub      *tools.Scrubber
		gone       []string
	}{
		{"url-escaped", `{"error":{"message":"bad key ` + url.QueryEscape(key) + `"}}`, nil, []string{url.QueryEscape(key)}},
		{"mixed escapes", `{"error":{"message":"bad key sk-proj/Key%2B0123456789abc"}}`, nil, []string{"Key%2B0123456789abc"}},
		{"base64 header", `{"error":{"message":"got ` + header + `"}}`, nil, []string{header[10:30]}},
		{"not JSON", "bad key " + strings.ReplaceAll(url.PathEscape(key), "%2F", "/"), nil, []string{"0123456789abc"}},
		{"another secret of the deployment", `{"error":{"message":"admin ` + url.QueryEscape(admin) + `"}}`,
			tools.NewScrubber(key, admin), []string{admin}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newOAIFake(t, oaiStatus(401, nil, tt.body))
			_, err := oaiCollect(t, NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL, APIKey: key, Scrub: tt.scrub, MaxRetries: -1}).Stream(context.Background(), oaiTestRequest))
			if err == nil || !strings.Contains(err.Error(), tools.Mask) {
				t.Fatalf("error %v, want one with %s", err, tools.Mask)
			}
			for e := error(err); e != nil; e = errors.Unwrap(e) {
				for _, g := range append(tt.gone, key) {
					if strings.Contains(e.Error(), g) {
						t.Errorf("%T %q holds %q", e, e, g)
					}
				}
			}
		})
	}
}

// TestOpenAIToolPictures: the pictures of a step's tool results follow
// the last of its tool messages (which hold text only) in one user
// message of image_url parts — data URLs, each after the call it came
// from — and the next message comes after it.
func TestOpenAIToolPictures(t *testing.T) {
	f := newOAIFake(t, oaiStream(oaiDelta(`{"content":"ok"}`), oaiFinish("stop")))
	m := NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL + "/v1/", APIKey: oaiTestKey, Model: "m"})
	png := tools.Media{Type: "image", MIMEType: "image/png", Data: []byte("PNG!")}
	req := ModelRequest{Messages: []Message{
		{Role: RoleUser, Content: "Show me the logo."},
		{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "get_tiny_image", Arguments: "{}"}, {ID: "call_2", Name: "ping", Arguments: "{}"}}},
		{Role: RoleTool, ToolCallID: "call_1", Content: `{"content":[{"type":"image","attached":true}]}`, Images: []tools.Media{png}},
		{Role: RoleTool, ToolCallID: "call_2", Content: `{"ok":true}`},
		{Role: RoleAssistant, Content: "Here it is."},
	}}
	if _, err := oaiCollect(t, m.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(f.bodies[0], &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Messages) != 6 {
		t.Fatalf("%d messages, want 6: %s", len(got.Messages), f.bodies[0])
	}
	var pics, after any
	_ = json.Unmarshal(got.Messages[4], &pics)
	_ = json.Unmarshal(got.Messages[5], &after)
	var want any
	_ = json.Unmarshal([]byte(`{"role":"user","content":[
		{"type":"text","text":"`+picturesIntro+`"},
		{"type":"text","text":"From call call_1 (image/png):"},
		{"type":"image_url","image_url":{"url":"data:image/png;base64,UE5HIQ=="}}]}`), &want)
	if diff := cmp.Diff(want, pics); diff != "" {
		t.Errorf("pictures message (-want +got):\n%s", diff)
	}
	if a, _ := after.(map[string]any); a["role"] != "assistant" {
		t.Errorf("after the pictures: %s", got.Messages[5])
	}

	// A model that takes text only (model: {pictures: false}) gets the
	// results alone.
	m = NewOpenAI(OpenAIOptions{BaseURL: f.srv.URL + "/v1/", APIKey: oaiTestKey, Model: "m", NoPictures: true})
	if _, err := oaiCollect(t, m.Stream(context.Background(), req)); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(f.bodies[1], &got); err != nil || len(got.Messages) != 5 || bytes.Contains(f.bodies[1], []byte("image_url")) {
		t.Errorf("without pictures: %s", f.bodies[1])
	}
}
