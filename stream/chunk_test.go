package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// raw is a free JSON value as ParseChunk returns it.
func raw(s string) json.RawMessage { return json.RawMessage(s) }

// chunkCases holds every chunk type, minimal and with every field, in the
// form ParseChunk returns (free values as json.RawMessage). Each has a
// golden file testdata/chunks/<name>.json.
var chunkCases = []struct {
	name  string
	chunk Chunk
}{
	{"start", Start{}},
	{"start-full", Start{MessageID: "msg_1", MessageMetadata: raw(`{"agent":"demo"}`)}},
	{"start-step", StartStep{}},
	{"text-start", TextStart{ID: "t1"}},
	{"text-delta", TextDelta{ID: "t1", Delta: "Hello, \"world\" <3\n"}},
	{"text-delta-empty", TextDelta{ID: "t1"}},
	{"text-end", TextEnd{ID: "t1"}},
	{"reasoning-start", ReasoningStart{ID: "r1"}},
	{"reasoning-delta", ReasoningDelta{ID: "r1", Delta: "Let me page through."}},
	{"reasoning-end", ReasoningEnd{ID: "r1"}},
	{"tool-input-start", ToolInputStart{ToolCallID: "call_1", ToolName: "list_orders"}},
	{"tool-input-start-dynamic", ToolInputStart{ToolCallID: "call_1", ToolName: "list_orders", Dynamic: true}},
	{"tool-input-delta", ToolInputDelta{ToolCallID: "call_1", InputTextDelta: `{"status":`}},
	{"tool-input-available", ToolInputAvailable{ToolCallID: "call_1", ToolName: "list_orders", Input: raw(`{"status":"open","_all_pages":true}`)}},
	{"tool-input-available-dynamic", ToolInputAvailable{ToolCallID: "call_1", ToolName: "list_orders", Input: raw(`{}`), Dynamic: true}},
	{"tool-input-error", ToolInputError{ToolCallID: "call_1", ToolName: "list_orders", Input: raw(`"{\"status\":"`), ErrorText: "arguments are not valid JSON"}},
	{"tool-output-available", ToolOutputAvailable{ToolCallID: "call_1", Output: raw(`{"items":[{"id":1}],"_pagingComplete":true}`)}},
	{"tool-output-available-full", ToolOutputAvailable{ToolCallID: "call_1", Output: raw(`null`), Dynamic: true, Preliminary: true}},
	{"tool-output-error", ToolOutputError{ToolCallID: "call_1", ErrorText: "upstream answered 403"}},
	{"source-url", SourceURL{SourceID: "s1", URL: "https://example.com/a"}},
	{"source-url-full", SourceURL{SourceID: "s1", URL: "https://example.com/a", Title: "A"}},
	{"source-document", SourceDocument{SourceID: "s2", MediaType: "application/pdf", Title: "Report"}},
	{"source-document-full", SourceDocument{SourceID: "s2", MediaType: "application/pdf", Title: "Report", Filename: "report.pdf"}},
	{"file", File{URL: "data:text/plain;base64,aGk=", MediaType: "text/plain"}},
	{"data", Data{Name: "notice", Data: raw(`"hi"`)}},
	{"data-full", Data{Name: "notice", ID: "n1", Data: raw(`{"level":"info"}`), Transient: true}},
	{"data-progress", Progress{
		ToolCallID: "call_1", ToolName: "list_orders", Page: 3, PagesMax: 20, Items: 150,
		Requests: 4, RequestsMax: 60, ElapsedMs: 2250,
	}.Chunk()},
	{"data-progress-foreach", Progress{
		ToolCallID: "call_2", ToolName: "get_customer_orders", Page: 1, PagesMax: 20, Items: 40,
		Requests: 7, RequestsMax: 60, ElapsedMs: 900,
		ForEach: &ForEachProgress{Key: "customer_id", Value: "cus_7", Index: 6, Total: 12},
	}.Chunk()},
	{"data-progress-rate-limit", Progress{
		ToolCallID: "call_3", ToolName: "list_orders", Page: 4, PagesMax: 20, Items: 400,
		Requests: 6, RequestsMax: 60, ElapsedMs: 1200, InFlight: 2,
		RateLimit: &RateLimitWait{Provider: "acme", Cause: "rate", WaitMs: 2000},
	}.Chunk()},
	{"data-context", ContextReport{
		Step: 1, Model: "gpt-4o-mini", Chars: 48210, Tokens: 14603, CharsPerToken: 3.3, Calibrated: true,
		BudgetTokens: 111616, BudgetChars: 368332, Messages: 63, Compacted: 12, CompactedChars: 301544,
		CompactedCalls: []string{"call_1", "call_2"}, Shortened: 0, DroppedTurns: 0, ReportedPromptTokens: 14020,
	}.Chunk()},
	{"finish-step", FinishStep{}},
	{"finish", Finish{}},
	{"finish-full", Finish{MessageMetadata: raw(`{"steps":2}`)}},
	{"abort", Abort{}},
	{"error", Error{ErrorText: "the model provider is unavailable"}},
	{"message-metadata", MessageMetadata{MessageMetadata: raw(`{"usage":{"inputTokens":10}}`)}},
}

func TestChunkGolden(t *testing.T) {
	for _, tc := range chunkCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode(tc.chunk)
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "chunks", tc.name+".json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			want = bytes.TrimSuffix(want, []byte("\n"))
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("JSON (-want +got):\n%s", diff)
			}
			if tc.chunk.Type() != typeOf(t, got) {
				t.Errorf("Type() = %q, JSON type %q", tc.chunk.Type(), typeOf(t, got))
			}

			// ParseChunk takes the golden JSON back to the same value,
			// except the progress payload, which comes back as raw JSON.
			parsed, err := ParseChunk(want)
			if err != nil {
				t.Fatalf("ParseChunk: %v", err)
			}
			again, err := Encode(parsed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(again)); diff != "" {
				t.Errorf("JSON after ParseChunk (-want +got):\n%s", diff)
			}
			if d, ok := tc.chunk.(Data); !ok || !isProgress(d) {
				if diff := cmp.Diff(tc.chunk, parsed); diff != "" {
					t.Errorf("ParseChunk (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// isProgress reports a typed payload, which ParseChunk gives back as raw
// JSON.
func isProgress(d Data) bool {
	switch d.Data.(type) {
	case Progress, ContextReport:
		return true
	}
	return false
}

func typeOf(t *testing.T, data []byte) string {
	t.Helper()
	var v struct{ Type string }
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Type
}

// TestChunkNeverNull checks the rule on optional fields across every
// chunk: none is null (only free JSON values may be).
func TestChunkNeverNull(t *testing.T) {
	for _, tc := range chunkCases {
		data, err := Encode(tc.chunk)
		if err != nil {
			t.Fatal(err)
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			t.Fatal(err)
		}
		for k, v := range fields {
			free := map[string]bool{"input": true, "output": true, "data": true, "messageMetadata": true}[k]
			if string(v) == "null" && !free {
				t.Errorf("%s: field %q is null", tc.name, k)
			}
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	for name, c := range map[string]Chunk{
		"nil":               nil,
		"data without name": Data{Data: 1},
		"unencodable input": ToolInputAvailable{ToolCallID: "c", ToolName: "t", Input: make(chan int)},
	} {
		if data, err := Encode(c); err == nil {
			t.Errorf("%s: Encode = %s, want an error", name, data)
		}
	}
}

func TestParseChunkRejects(t *testing.T) {
	for _, tc := range []struct{ name, json string }{
		{"not JSON", `{"type":`},
		{"not an object", `["start"]`},
		{"null", `null`},
		{"no type", `{"id":"t1"}`},
		{"type not a string", `{"type":1}`},
		{"unknown type", `{"type":"text"}`},
		{"bare data prefix", `{"type":"data-","data":1}`},
		{"unknown field", `{"type":"text-start","id":"t1","extra":true}`},
		{"finishReason (newer than ai@5.0.60)", `{"type":"finish","finishReason":"stop"}`},
		{"abort reason (newer than ai@5.0.60)", `{"type":"abort","reason":"user"}`},
		{"missing required", `{"type":"text-delta","id":"t1"}`},
		{"missing free required", `{"type":"tool-output-available","toolCallId":"c"}`},
		{"null optional", `{"type":"start","messageId":null}`},
		{"null required string", `{"type":"error","errorText":null}`},
		{"null bool", `{"type":"tool-input-start","toolCallId":"c","toolName":"t","dynamic":null}`},
		{"wrong field type", `{"type":"text-delta","id":"t1","delta":5}`},
		{"wrong bool type", `{"type":"data-x","data":1,"transient":"yes"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseChunk([]byte(tc.json))
			if !errors.Is(err, ErrBadChunk) {
				t.Errorf("ParseChunk = %#v, %v; want ErrBadChunk", c, err)
			}
		})
	}
}

func TestParseChunkFreeNull(t *testing.T) {
	// Free JSON values may be null, as the AI SDK's z.unknown() allows.
	got, err := ParseChunk([]byte(`{"type":"data-x","data":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Chunk(Data{Name: "x", Data: raw("null")}), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzParseChunk(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "chunks", "*.json"))
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"type":"data-x","data":{"a":[1,2,{"b":null}]},"id":"\u00e9"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseChunk(data)
		if err != nil {
			return
		}
		enc, err := Encode(c)
		if err != nil {
			t.Fatalf("Encode(ParseChunk(%q)): %v", data, err)
		}
		c2, err := ParseChunk(enc)
		if err != nil {
			t.Fatalf("ParseChunk(%s) of an encoded chunk: %v", enc, err)
		}
		enc2, err := Encode(c2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable:\n%s\n%s", enc, enc2)
		}
		if c.Type() != typeOf(t, enc) {
			t.Fatalf("Type() %q, JSON type %q", c.Type(), typeOf(t, enc))
		}
	})
}
