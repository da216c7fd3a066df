package web

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/agent/eval"
)

// TestEvalAPI runs the demo's dataset over POST /v1/evals: a detached
// run whose stream carries a progress part per case and the report's
// summary; GET /v1/evals lists it with its totals, GET /v1/evals/{id}
// returns the report. A second run with looping off for list_orders,
// compared with the first, names the newly failing cases; bad requests
// are refused with what is wrong.
func TestEvalAPI(t *testing.T) {
	ts := startDemo(t, nil)
	resp := ts.post(t, "/v1/evals", "", map[string]any{"dataset": "demo"})
	id := resp.Header.Get("X-Trawl-Run-Id")
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(id, "eval_") {
		t.Fatalf("POST: %d, run id %q", resp.StatusCode, id)
	}
	var progress []map[string]any
	var summary map[string]any
	for _, e := range events {
		var c struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(e.Data), &c) != nil {
			continue
		}
		switch c.Type {
		case "data-eval-progress":
			progress = append(progress, c.Data)
		case "data-eval-report":
			summary = c.Data
		}
	}
	if len(progress) != 4 || progress[3]["done"] != 4.0 || progress[3]["total"] != 4.0 {
		t.Errorf("progress parts: %v", progress)
	}
	if summary == nil || summary["exitCode"] != 0.0 {
		t.Errorf("report part: %v", summary)
	}
	st, b := ts.do(t, "GET", "/v1/evals/"+id, "", nil)
	var run evalRun
	if st != 200 || json.Unmarshal(b, &run) != nil || run.Status != evalDone || run.Report == nil || run.Report.Totals.Passed != 4 {
		t.Fatalf("GET: %d %.300s", st, b)
	}
	// Looping off for list_orders, compared with the first run.
	if st, b := ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false}); st != 200 {
		t.Fatalf("PATCH: %d %s", st, b)
	}
	resp = ts.post(t, "/v1/evals", "", map[string]any{"dataset": "demo", "baseline": id})
	second := resp.Header.Get("X-Trawl-Run-Id")
	readSSE(t, resp.Body)
	resp.Body.Close()
	_, b = ts.do(t, "GET", "/v1/evals/"+second, "", nil)
	run = evalRun{}
	if json.Unmarshal(b, &run) != nil || run.Report == nil || run.Report.Comparison == nil || len(run.Report.Comparison.NewlyFailing) != 3 {
		t.Fatalf("second run: %.500s", b)
	}
	for _, c := range run.Report.Cases {
		if c.ID == "open-orders-total" && (!strings.Contains(strings.Join(c.Failed, ","), eval.CheckUnsupported) || !strings.Contains(strings.Join(c.Failed, ","), eval.CheckVerdictChanged)) {
			t.Errorf("open-orders-total failed %v", c.Failed)
		}
	}
	st, b = ts.do(t, "GET", "/v1/evals", "", nil)
	var list struct{ Evals []evalSummary }
	if st != 200 || json.Unmarshal(b, &list) != nil || len(list.Evals) != 2 || list.Evals[0].ID != second || list.Evals[1].Totals.Passed != 4 || *list.Evals[0].ExitCode != 1 {
		t.Errorf("list: %d %.400s", st, b)
	}
	// Inline cases, and what is refused.
	resp = ts.post(t, "/v1/evals", "", map[string]any{"cases": []any{map[string]any{"id": "one", "messages": []string{"How many open orders worth more than 100 do we have, and how do they split by currency?"}}}})
	readSSE(t, resp.Body)
	resp.Body.Close()
	if _, b := ts.do(t, "GET", "/v1/evals/"+resp.Header.Get("X-Trawl-Run-Id"), "", nil); !strings.Contains(string(b), `"dataset":"inline"`) || !strings.Contains(string(b), `"status":"done"`) {
		t.Errorf("inline run: %.300s", b)
	}
	for _, tc := range []struct {
		body any
		want string
	}{
		{map[string]any{}, "name a dataset"},
		{map[string]any{"dataset": "nope"}, `no dataset \"nope\"`},
		{map[string]any{"jsonl": `{"id":"a"}`}, "a case needs messages or a transcript"},
		{map[string]any{"jsonl": `{"id":"a","transcript":"x.json"}`}, "holds its transcripts inline"},
		{map[string]any{"dataset": "demo", "baseline": "eval_none"}, "no finished eval run"},
		{map[string]any{"dataset": "demo", "model": "gpt"}, "model must be replay or live"},
		{map[string]any{"dataset": "demo", "datset": 1}, "unknown field"},
	} {
		if st, b := ts.do(t, "POST", "/v1/evals", "", tc.body); st < 400 || !strings.Contains(string(b), tc.want) {
			t.Errorf("%v: %d %s", tc.body, st, b)
		}
	}
	if st, _ := ts.do(t, "GET", "/v1/evals/eval_none", "", nil); st != 404 {
		t.Errorf("unknown run: %d", st)
	}
}
