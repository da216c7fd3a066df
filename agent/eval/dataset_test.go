package eval

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/agent"
)

// TestParseDatasetErrors: every bad line is refused with its line number
// and the field at fault.
func TestParseDatasetErrors(t *testing.T) {
	ok := `{"id":"a","messages":["hi"]}`
	for _, tc := range []struct{ data, want string }{
		{ok + "\n" + `{"id":"b","mesages":["x"]}`, `2: unknown field "mesages"`},
		{`{"id":"a","messages":"hi"}`, "1: messages: want []string, not a JSON string"},
		{`{"messages":["hi"]}`, "1: id: missing"},
		{`{"id":"a b","messages":["hi"]}`, `1: id: want letters`},
		{ok + "\n\n" + ok, `3: id "a" repeats the case of line 1`},
		{`{"id":"a"}`, "1: a case needs messages or a transcript"},
		{`{"id":"a","messages":[]}`, "1: messages: empty"},
		{`{"id":"a","messages":[" "]}`, "1: messages[0]: the message is blank"},
		{`["a"]`, "1: want a JSON object per line"},
		{`{"id":"a","messages":["hi"]`, "1: unexpected EOF"},
		{`{"id":"a","messages":["hi"]} {}`, "1: data after the JSON object"},
		{`{"id":"a","transcript":{"turns":[]}}`, "1: transcript: turns: a transcript needs at least one turn"},
		{`{"id":"a","transcript":"missing.json"}`, "1: transcript: open"},
		{`{"id":"a","transcript":7}`, "1: transcript: want a path or an inline transcript object"},
		{`{"id":"a","messages":["hi"],"expect":{"tool":["x"]}}`, `1: expect: unknown field "tool"`},
		{`{"id":"a","messages":["hi"],"expect":{"tools":[]}}`, "1: expect.tools: name at least one tool"},
		{`{"id":"a","messages":["hi"],"expect":{"tools":{"names":["x"],"anyorder":true}}}`, `unknown field "anyorder"`},
		{`{"id":"a","messages":["hi"],"expect":{"answer_matches":"("}}`, "1: expect.answer_matches: error parsing regexp"},
		{`{"id":"a","messages":["hi"],"expect":{"answer_number":{"tolerance":1}}}`, "1: value: missing"},
		{`{"id":"a","messages":["hi"],"expect":{"answer_number":{"value":1,"tolerance":-1}}}`, "1: expect.answer_number.tolerance: want 0 or more"},
		{`{"id":"a","messages":["hi"],"expect":{"max_tool_calls":-2}}`, "1: expect.max_tool_calls: want 0 or more, not -2"},
		{`{"id":"a","messages":["hi"],"expect":{"completion":false}}`, "want true or an array of tool names"},
		{`{"id":"a","messages":["hi"],"expect":{"args":{"list_orders":null}}}`, "1: expect.args.list_orders: want a JSON object"},
		{`# only a comment`, "the dataset holds no case"},
		// encoding/json matches names case-insensitively and lets a repeated
		// key win: both would silently change the case.
		{`{"id":"a","messages":["hi"],"ID":"b"}`, `1: unknown field "ID" (names are case-sensitive: "id")`},
		{`{"id":"a","Messages":["hi"]}`, `1: unknown field "Messages"`},
		{`{"id":"a","id":"b","messages":["hi"]}`, `1: field "id" repeats`},
		{`{"id":"a","messages":["hi"],"expect":{"Max_Tool_Calls":1}}`, `1: expect: unknown field "Max_Tool_Calls" (names are case-sensitive: "max_tool_calls")`},
		{`{"id":"a","messages":["hi"],"expect":{"rubric":"x","rubric":"y"}}`, `1: expect: field "rubric" repeats`},
	} {
		_, err := ParseDataset([]byte(tc.data), t.TempDir(), true)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s:\n got %v\nwant …%s…", tc.data, err, tc.want)
		}
	}
	if _, err := ParseDataset([]byte(`{"id":"a","transcript":"x.json"}`), "", false); err == nil || !strings.Contains(err.Error(), "holds its transcripts inline") {
		t.Errorf("a path in an inline dataset: %v", err)
	}
}

// TestLoadDataset reads the demo's dataset: its transcripts inline, its
// expectations, comments skipped; the file's path leads each error.
func TestLoadDataset(t *testing.T) {
	ds, err := LoadDataset("../../tools/demo/eval.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if ds.Name != "eval" || len(ds.Cases) != 4 || ds.Cases[0].Line != 2 {
		t.Fatalf("dataset %s: %d cases, first at line %d", ds.Name, len(ds.Cases), ds.Cases[0].Line)
	}
	c := ds.Cases[0]
	if c.Expect.AnswerNumber.Value != 278 || !c.Expect.Completion.All || c.Questions()[0] != c.Transcript.Turns[0].User {
		t.Errorf("case %+v", c)
	}
	// A transcript by path, relative to the dataset's folder.
	dir := t.TempDir()
	tr := `{"turns":[{"user":"q?","steps":[{"text":"a."}]}]}`
	if err := os.WriteFile(filepath.Join(dir, "t.json"), []byte(tr), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "ds.jsonl")
	if err := os.WriteFile(path, []byte(`{"id":"x","transcript":"t.json"}`+"\n"+`{"id":"y"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadDataset(path); err == nil || err.Error() != path+":2: a case needs messages or a transcript" {
		t.Errorf("error %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"id":"x","transcript":"t.json"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err = LoadDataset(path)
	if err != nil || ds.Cases[0].Questions()[0] != "q?" {
		t.Fatalf("%v %+v", err, ds)
	}
	// A case written back reads the same.
	b, _ := json.Marshal(ds.Cases[0])
	back, err := ParseDataset(b, dir, true)
	if err != nil || back.Cases[0].Transcript.Turns[0].Steps[0].Text != "a." {
		t.Errorf("round trip %s: %v", b, err)
	}
}

func part(typ, text string) agent.Part { return agent.Part{Type: typ, Text: text} }

func toolPart(id, name, effect string, input, output string) agent.Part {
	return agent.Part{Type: "tool-" + name, ToolCallID: id, State: "output-available", Effect: effect, Input: json.RawMessage(input), Output: json.RawMessage(output)}
}

// TestExpectations checks each expectation on a made thread, holding
// and failing.
func TestExpectations(t *testing.T) {
	complete := `{"items":[{"id":1}],"_pagingComplete":true,"_boundary":{"completion":"complete","requests":3,"records":364}}`
	firstPage := `{"items":[{"id":1}],"_boundary":{"completion":"partial","stopReason":"first_page_only","requests":1,"records":20}}`
	msgs := []agent.UIMessage{
		{Role: agent.RoleUser, Parts: []agent.Part{part("text", "How many?")}},
		{Role: agent.RoleAssistant, Parts: []agent.Part{part("step-start", ""),
			toolPart("c1", "list_orders", "read", `{"status":"open","_all_pages":true,"_filter":[{"field":"total"}]}`, complete),
			toolPart("c2", "list_customers", "read", `{"per_page":20}`, firstPage),
			toolPart("c3", "send_mail", "write", `{"to":"x"}`, `{"ok":true}`),
			part("step-start", ""), part("text", "There are **2,621** bookings, and 364 open orders.")}},
	}
	parse := func(expect string) *Case {
		ds, err := ParseDataset([]byte(`{"id":"c","messages":["How many?"],"expect":`+expect+`}`), "", false)
		if err != nil {
			t.Fatal(err)
		}
		return ds.Cases[0]
	}
	for _, tc := range []struct {
		expect string
		status string
		detail string
	}{
		{`{"tools":["list_orders","send_mail"]}`, Pass, ""},
		{`{"tools":["send_mail","list_orders"]}`, Fail, "missing list_orders"},
		{`{"tools":{"names":["send_mail","acme.list_orders"],"any_order":true}}`, Pass, ""},
		{`{"tools":{"names":["search_tools"],"any_order":true}}`, Fail, "missing search_tools"},
		{`{"args":{"list_orders":{"status":"open","_filter":[{"field":"total"}]}}}`, Pass, ""},
		{`{"args":{"list_orders":{"status":"closed"}}}`, Fail, `no list_orders call holds {"status":"closed"}`},
		{`{"completion":["list_orders"]}`, Pass, ""},
		{`{"completion":true}`, Fail, "list_customers (c2) was first_page_only"},
		{`{"completion":["list_tickets"]}`, Fail, "list_tickets was not called"},
		{`{"no_writes":true}`, Fail, "send_mail (c3, output-available)"},
		{`{"max_tool_calls":3}`, Pass, ""},
		{`{"max_tool_calls":2}`, Fail, "3 tool calls, more than 2"},
		{`{"max_upstream_requests":5}`, Pass, ""},
		{`{"max_upstream_requests":4}`, Fail, "5 upstream requests, more than 4"},
		{`{"answer_contains":["364 OPEN  orders"]}`, Pass, ""},
		{`{"answer_contains":"365"}`, Fail, `the answer lacks "365"`},
		{`{"answer_matches":"\\d+ open orders"}`, Pass, ""},
		{`{"answer_matches":"^none$"}`, Fail, "does not match"},
		{`{"answer_number":{"value":2621}}`, Pass, ""},
		{`{"answer_number":{"value":360,"tolerance":5,"near":"and"}}`, Pass, ""},
		{`{"answer_number":{"value":360,"tolerance":3,"near":"and"}}`, Fail, `the first number after "and" is 364, want 360 ± 3`},
		{`{"answer_number":{"value":1,"near":"tickets"}}`, Fail, "none in the answer"},
		{`{"max_tokens":0}`, Pass, ""},
	} {
		c := parse(tc.expect)
		calls := toolCalls(msgs)
		reqs := 0
		for _, x := range calls {
			reqs += x.Requests
		}
		got := expectations(sampleView{c: c, msgs: msgs, calls: calls, answer: msgs[1].Answer(), reqs: reqs})
		if len(got) != 1 || got[0].Status != tc.status || !strings.Contains(got[0].Detail, tc.detail) {
			t.Errorf("%s: %+v; want %s …%s…", tc.expect, got, tc.status, tc.detail)
		}
	}
	// The honesty checks: "every customer" over a first page fails,
	// naming the call; without recorded verdicts there is nothing to
	// compare.
	lie := []agent.UIMessage{msgs[0], {Role: agent.RoleAssistant, Parts: []agent.Part{
		toolPart("c2", "list_customers", "read", `{"per_page":20}`, firstPage), part("text", "All 20 customers are listed; that is every customer.")}}}
	c := parse(`{}`)
	got := honesty(sampleView{c: c, msgs: lie})
	if got[0].Name != CheckUnsupported || got[0].Status != Fail || !strings.Contains(got[0].Detail, "list_customers (c2) was first_page_only") {
		t.Errorf("unsupported_claim: %+v", got[0])
	}
	if got[1].Name != CheckVerdictChanged || got[1].Status != Skip {
		t.Errorf("verdict_changed without recorded verdicts: %+v", got[1])
	}
}

// TestFailedCallRequests: a failed call counts the request it sent, and
// none when it was refused before anything was sent (a bad argument, a
// reserved argument on a write, a write refused by the evaluation).
func TestFailedCallRequests(t *testing.T) {
	for errText, want := range map[string]int{
		"upstream_error: list_orders: upstream answered 500":                                      1,
		`invalid_argument: argument "nested" is not a parameter of list_orders; Nothing was sent`: 0,
		"invalid_filter: _filter clause 0: unknown op":                                            0,
		"not_for_writes: _all_pages is not for a write":                                           0,
		CodeWriteRefused + ": CHAT_SEND_MESSAGE: the write was not sent":                          0,
	} {
		msgs := []agent.UIMessage{{Role: agent.RoleUser, Parts: []agent.Part{part("text", "How many?")}},
			{Role: agent.RoleAssistant, Parts: []agent.Part{{Type: "tool-list_orders", ToolCallID: "c1", State: "output-error", Effect: "read", Input: json.RawMessage(`{}`), ErrorText: errText}}}}
		if got := toolCalls(msgs)[0].Requests; got != want {
			t.Errorf("%s: %d requests, want %d", errText, got, want)
		}
	}
}
