package web

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools/demo"
)

// TestDemoFirstQuestionFromAggregate: the recorded first question is
// answered from _aggregate — the tool output holds the groups, not the
// rows — and every number of the recorded answer equals a count the test
// makes itself over the demo upstream's data.
func TestDemoFirstQuestionFromAggregate(t *testing.T) {
	ts := startDemo(t, nil)
	tr, err := agent.ParseTranscript(demoScript())
	if err != nil {
		t.Fatal(err)
	}
	var outputs []json.RawMessage
	thread, err := ts.Deployment().Replay(context.Background(), tr, "", func(c stream.Chunk) {
		if o, ok := c.(stream.ToolOutputAvailable); ok {
			b, _ := json.Marshal(o.Output)
			outputs = append(outputs, b)
		}
	})
	if err != nil || len(outputs) == 0 {
		t.Fatalf("replay: %v, %d outputs", err, len(outputs))
	}
	want := demo.TallyOrders("open", 100)
	open := 0
	for _, c := range demo.TallyOrders("open", math.Inf(-1)) {
		open += c.Count
	}
	over := 0
	for _, c := range want {
		over += c.Count
	}

	// The tool's answer: the numbers over every row, no rows.
	rep, ok, err := loop.ReadAggregate(outputs[0])
	if err != nil || !ok {
		t.Fatalf("the first call's output has no _aggregate (%v): %.300s", err, outputs[0])
	}
	if strings.Contains(string(outputs[0]), `"data":[`) {
		t.Errorf("the output lists the rows: %.300s", outputs[0])
	}
	if rep.Completion != loop.Complete || rep.Verdict != "over the "+strconv.Itoa(over)+" of all "+strconv.Itoa(open)+" rows that match the filter (complete)" {
		t.Errorf("aggregate verdict %q %q", rep.Completion, rep.Verdict)
	}
	var got []demo.OrderTally
	for _, g := range rep.Groups {
		var cur string
		json.Unmarshal(g.Key["currency"], &cur)
		n, _ := strconv.Atoi(g.Values["count"])
		got = append(got, demo.OrderTally{Currency: cur, Count: n, Sum: g.Values["sum(total)"]})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("aggregate groups (-the test's own count, +_aggregate):\n%s", diff)
	}

	// The recorded answer quotes those numbers.
	var answer string
	for _, m := range thread.Msgs {
		if text := m.Text(); m.Role == "assistant" && answer == "" && strings.Contains(text, "open orders worth") {
			answer = text
		}
	}
	if answer == "" {
		b, _ := json.Marshal(thread.Msgs)
		t.Fatalf("no recorded answer in the thread: %.600s", b)
	}
	if !strings.Contains(answer, "**"+strconv.Itoa(over)+" open orders worth more than 100**") || !strings.Contains(answer, "out of "+strconv.Itoa(open)+" open orders in total") {
		t.Errorf("answer's totals differ from the count (%d of %d):\n%s", over, open, answer)
	}
	row := regexp.MustCompile(`\| ([A-Z]{3}) \| (\d+) \| [^0-9]*([0-9,]+\.[0-9]{2}) \|`)
	var quoted []demo.OrderTally
	for _, m := range row.FindAllStringSubmatch(answer, -1) {
		n, _ := strconv.Atoi(m[2])
		quoted = append(quoted, demo.OrderTally{Currency: m[1], Count: n, Sum: strings.ReplaceAll(m[3], ",", "")})
	}
	if diff := cmp.Diff(want, quoted); diff != "" {
		t.Errorf("answer's table (-the test's own count, +the answer):\n%s", diff)
	}
}

// TestPartialAggregateSaysSoEverywhere: with a deployment limit that cuts
// the walk, the aggregate says partial — and never reads as totals — in
// the JSON invoke, the streamed invoke, and the chat, whose recorded
// answer (counted over every row) is not played.
func TestPartialAggregateSaysSoEverywhere(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.Limits.Pages, c.Cache.Mode = 2, "off" })
	args := map[string]any{"status": "open", "_all_pages": true,
		"_aggregate": map[string]any{"group_by": []string{"currency"}, "metrics": []any{map[string]any{"op": "count"}}}}
	const verdict = "over the 200 rows fetched of at least 364 (partial): rows are missing, so these are not totals"
	check := func(where string, out []byte) {
		t.Helper()
		rep, ok, err := loop.ReadAggregate(out)
		if err != nil || !ok || rep.Completion != loop.Partial || rep.Verdict != verdict || strings.Contains(string(out), "(complete)") {
			t.Errorf("%s: %+v %v %v\n%.400s", where, rep, ok, err, out)
		}
	}
	st, body := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{"args": args})
	if st != 200 {
		t.Fatalf("invoke: %d %s", st, body)
	}
	check("invoke", body)

	resp, err := ts.invokeSSE(t, context.Background(), "acme.list_orders", map[string]any{"args": args})
	if err != nil {
		t.Fatal(err)
	}
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	found := false
	for _, e := range events {
		var c struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal([]byte(e.Data), &c) == nil && c.Type == "tool-output-available" {
			check("stream", c.Output)
			found = true
		}
	}
	if !found {
		t.Error("the stream has no tool output")
	}

	q := "How many open orders worth more than 100 do we have, and how do they split by currency?"
	resp = ts.post(t, "/v1/agents/demo/chat", "", chatBody("partial", "u1", q))
	events = readSSE(t, resp.Body)
	resp.Body.Close()
	for _, e := range events {
		var c struct {
			Type   string          `json:"type"`
			Output json.RawMessage `json:"output"`
		}
		if json.Unmarshal([]byte(e.Data), &c) == nil && c.Type == "tool-output-available" {
			if rep, ok, _ := loop.ReadAggregate(c.Output); !ok || rep.Completion != loop.Partial || !strings.HasSuffix(rep.Verdict, "these are not totals") {
				t.Errorf("chat: the model's envelope says %+v", rep)
			}
		}
	}
	text := turnText(t, events)
	if strings.Contains(text, "278") || !strings.Contains(text, "`list_orders` came back partial (stopped by budget_pages)") {
		t.Errorf("chat answer over a partial walk:\n%s", text)
	}
}
