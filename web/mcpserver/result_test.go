package mcpserver

import (
	"context"
	"encoding/json"
	"github.com/trawl-dev/trawl/web/deploy"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outputSchema is the resolved outputSchema tools/list gives the tool.
func outputSchema(t *testing.T, cs *mcp.ClientSession, name string) *jsonschema.Resolved {
	t.Helper()
	for _, tool := range listAll(t, cs) {
		if tool.Name != name {
			continue
		}
		b, err := json.Marshal(tool.OutputSchema)
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s's outputSchema: %v", name, err)
		}
		r, err := s.Resolve(nil)
		if err != nil {
			t.Fatalf("%s's outputSchema: %v", name, err)
		}
		return r
	}
	t.Fatalf("no tool %s", name)
	return nil
}

// verdictKeys are the envelope members a cut must keep whole and equal.
var verdictKeys = []string{"_pagingComplete", "_likelyMoreRows", "_stoppedBy", "_boundary", "_resultId"}

// TestSmallBudgetKeepsTheVerdict holds the size guard's cut to what a
// client may rely on, over every budget from the smallest _max_chars up:
// the verdict and boundary are there and equal to those of the call at a
// large budget, its note still begins with the verdict's own words, every
// row shown is a whole row of the result, none is cut, and the
// structuredContent validates against the tool's advertised outputSchema
// (the check both official TypeScript clients make).
func TestSmallBudgetKeepsTheVerdict(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cs := f.connect(t, "", nil)
	schema := outputSchema(t, cs, "list_orders")
	call := func(budget int) map[string]any {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders",
			Arguments: map[string]any{"_all_pages": true, "_max_chars": budget}})
		if err != nil {
			t.Fatalf("_max_chars %d: %v", budget, err)
		}
		m := structured(t, res)
		if err := schema.Validate(m); err != nil {
			t.Fatalf("_max_chars %d: the result does not match the outputSchema: %v\n%s", budget, err, text(res))
		}
		return m
	}
	ref := call(1_000_000)
	refRows, _ := ref["data"].([]any)
	refNote, _ := ref["_note"].(string)
	verdictNote, _, _ := strings.Cut(refNote, " Showing the first")
	if len(refRows) < 20 || ref["_pagingComplete"] != false {
		t.Fatalf("reference call: %d rows, _pagingComplete %v", len(refRows), ref["_pagingComplete"])
	}
	shownAny := false
	for budget := 1000; budget <= 4000; budget += 100 {
		m := call(budget)
		for _, k := range verdictKeys {
			if k == "_resultId" {
				if id, _ := m[k].(string); id == "" {
					t.Errorf("_max_chars %d: no _resultId", budget)
				}
				continue
			}
			if diff := cmp.Diff(ref[k], m[k]); diff != "" {
				t.Errorf("_max_chars %d: %s differs from the uncut verdict's (-want +got):\n%s", budget, k, diff)
			}
		}
		note, _ := m["_note"].(string)
		if !strings.HasPrefix(note, verdictNote) || !strings.HasPrefix(note, "Partial") {
			t.Errorf("_max_chars %d: the note lost the verdict's words: %q", budget, note)
		}
		rows, ok := m["data"].([]any)
		if !ok {
			t.Fatalf("_max_chars %d: no data list: %v", budget, m)
		}
		for i, r := range rows {
			if diff := cmp.Diff(refRows[i], r); diff != "" {
				t.Fatalf("_max_chars %d: row %d is not the result's row (-want +got):\n%s", budget, i, diff)
			}
		}
		if shown, _ := m["_shownItems"].(float64); int(shown) != len(rows) || m["_totalItems"] != float64(2000) {
			t.Errorf("_max_chars %d: _shownItems %v, _totalItems %v, %d rows shown", budget, m["_shownItems"], m["_totalItems"], len(rows))
		}
		if len(rows) == 0 && !strings.Contains(note, "Showing none of the 2000 items") {
			t.Errorf("_max_chars %d: no row shown and the note does not say so: %q", budget, note)
		}
		shownAny = shownAny || len(rows) > 0
	}
	if !shownAny {
		t.Error("no budget up to 4,000 showed a row")
	}
}

// A _for_each call's progress keeps progress and total of one thing: the
// items of every value so far, with no total (the whole fan-out's is not
// known; the server's count is one value's, and 135 of 61 items is what
// mixing them said), and a message naming the value k of n with its own
// page and count.
func TestFanOutProgress(t *testing.T) {
	f := newFixture(t, Options{}, func(c *deploy.Config) { c.SetDemoLatency(700) })
	var mu sync.Mutex
	var got []*mcp.ProgressNotificationParams
	cs := f.connect(t, "", &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		got = append(got, r.Params)
		mu.Unlock()
	}})
	values := []any{"p_1", "p_2", "p_3", "p_4", "p_5", "p_6", "p_7", "p_8"}
	p := &mcp.CallToolParams{Name: "list_property_bookings", Arguments: map[string]any{"_all_pages": true, "_refresh": true, "_fields": []any{"id"},
		"_for_each": map[string]any{"key": "property_id", "values": values}}}
	p.SetProgressToken("fan-out")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || res.IsError {
		t.Fatalf("call: %v %s", err, text(res))
	}
	rows := structured(t, res)["_boundary"].(map[string]any)["records"].(float64)
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatalf("%d progress notifications", len(got))
	}
	for _, n := range got {
		if n.Total != 0 || n.Progress > rows || !fanOutRE.MatchString(n.Message) {
			t.Errorf("progress %v total %v of %v rows in all: %q", n.Progress, n.Total, rows, n.Message)
		}
	}
}

var fanOutRE = regexp.MustCompile(`^property_id [1-8] of 8 · page \d+( of [\d,]+ items?)? · [\d,]+ items? in all · \d+ requests?$`)

// Bad input to search_tools and load_tool over MCP is an isError result
// with the code and the words the REST search endpoint gives, not "the
// tool call failed".
func TestMetaToolErrors(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cs := f.connect(t, "", nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"search_tools", map[string]any{}, `invalid_argument: "query" is required: a few words`},
		{"search_tools", map[string]any{"query": 5}, `invalid_argument: "query" must be a string`},
		{"search_tools", map[string]any{"query": "send an email", "colour": "red"}, `invalid_argument: `},
		{"search_tools", map[string]any{"query": "email", "toolkit": "nope"}, `invalid_argument: unknown toolkit "nope"`},
		{"load_tool", map[string]any{"toolName": "NOPE_TOOL"}, `invalid_argument: no tool named "NOPE_TOOL" to load`},
		{"load_tool", map[string]any{"toolName": 5}, `invalid_argument: "toolName" must be a string`},
		{"load_tool", map[string]any{"toolNames": []any{"MAIL_SEND_EMAIL", "NOPE_TOOL"}}, `invalid_argument: no tool named "NOPE_TOOL" to load`},
	} {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Errorf("%s %v: %v", tc.tool, tc.args, err)
			continue
		}
		if got := text(res); !res.IsError || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s %v: isError %v, %q, want %q…", tc.tool, tc.args, res.IsError, got, tc.want)
		}
	}
}

// The text content the client's model reads opens with the verdict, its
// note and boundary (a client that truncates a long text keeps them);
// it is the same JSON as structuredContent, which keeps the envelope's
// own order.
func TestTextOpensWithTheVerdict(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cs := f.connect(t, "", nil)
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders", Arguments: map[string]any{"_all_pages": true, "_fields": []any{"id"}}})
	if err != nil {
		t.Fatal(err)
	}
	m := structured(t, res)
	txt := text(res)
	var fromText map[string]any
	if err := json.Unmarshal([]byte(txt), &fromText); err != nil {
		t.Fatalf("text is not JSON: %v", err)
	}
	if diff := cmp.Diff(m, fromText); diff != "" {
		t.Errorf("text and structuredContent differ (-structured +text):\n%s", diff)
	}
	data := strings.Index(txt, `"data":`)
	for _, k := range []string{"_pagingComplete", "_stoppedBy", "_note", "_boundary", "_resultId"} {
		if i := strings.Index(txt, `"`+k+`":`); i < 0 || i > data {
			t.Errorf("%s is not before the rows in the text (at %d, rows at %d)", k, i, data)
		}
	}
	if !strings.HasPrefix(txt, `{"_pagingComplete":`) {
		t.Errorf("text opens with %.80s", txt)
	}
}

// The errors a client meets using a conversation's tools wrongly say
// what to do, with a code and no Go internals: arguments that are not an
// object, a pooled tool never loaded, a tool loaded under another
// _thread, a result kept under another _thread.
func TestConversationErrorsSayWhatToDo(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cs := f.connect(t, "", nil)
	call := func(name string, args any) string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: a JSON-RPC error, not a tool error: %v", name, err)
		}
		if !res.IsError {
			t.Fatalf("%s %v: not an error: %s", name, args, text(res))
		}
		return text(res)
	}
	if got := call("list_orders", []any{"open"}); !strings.HasPrefix(got, "invalid_argument: the arguments must be one JSON object") ||
		!strings.Contains(got, "not an array") || strings.Contains(got, "json:") || strings.Contains(got, "Go value") {
		t.Errorf("array arguments: %q", got)
	}
	if got := call("MAIL_SEND_EMAIL", map[string]any{"to": []any{"a@example.com"}, "subject": "s", "messageBody": "b"}); !strings.HasPrefix(got,
		`invalid_argument: tool "MAIL_SEND_EMAIL" is not loaded in this conversation: call load_tool {"toolName": "MAIL_SEND_EMAIL"} first`) {
		t.Errorf("a pooled tool never loaded: %q", got)
	}
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_tool", Arguments: map[string]any{"toolName": "MAIL_SEND_EMAIL", "_thread": "a"}}); err != nil || res.IsError {
		t.Fatalf("load_tool: %v", err)
	}
	if got := call("MAIL_SEND_EMAIL", map[string]any{"to": []any{"a@example.com"}, "subject": "s", "messageBody": "b", "_thread": "b"}); !strings.Contains(got, "load_tool") ||
		!strings.Contains(got, `_thread is "b"`) {
		t.Errorf("a tool loaded under another _thread: %q", got)
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders", Arguments: map[string]any{"_all_pages": true, "_fields": []any{"id"}, "_thread": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := structured(t, res)["_resultId"].(string)
	if got := call("queryToolResult", map[string]any{"resultId": id, "_thread": "b"}); !strings.Contains(got, "not found in this conversation") ||
		!strings.Contains(got, "Stored results are kept per conversation") || !strings.Contains(got, `_thread is "b"`) {
		t.Errorf("a result of another _thread: %q", got)
	}
}

// envelopeFirst writes each member as it was (its key's spelling, its
// value's bytes), the "_" members first in their order, then the rest in
// theirs; what it cannot read as an object it leaves as it is.
func TestEnvelopeFirstMovesOnlyTheOrder(t *testing.T) {
	for in, want := range map[string]string{
		`{"data":[1,2],"total":2,"_note":"all","_boundary":{"pages":1}}`: `{"_note":"all","_boundary":{"pages":1},"data":[1,2],"total":2}`,
		`{ "data" : [ 1 ] , "_stoppedBy" : "complete" }`:                 `{"_stoppedBy":"complete","data":[ 1 ]}`,
		`{"\u005fnote":"escaped key","a":"<&>"}`:                         `{"\u005fnote":"escaped key","a":"<&>"}`,
		`{"a":1,"b":{"_inner":2}}`:                                       `{"a":1,"b":{"_inner":2}}`,
		`{"_only":true}`:                                                 `{"_only":true}`,
		`{"a":1,`:                                                        `{"a":1,`,
		`{}`:                                                             `{}`,
	} {
		if got := envelopeFirst([]byte(in)); got != want {
			t.Errorf("envelopeFirst(%s) = %s, want %s", in, got, want)
		}
	}
}
