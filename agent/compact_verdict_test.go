package agent

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A compacted verdict never loses the completion of a result that was
// not complete: a boundary whose scope and uninspected texts are long
// (a call with many arguments, a walk stopped by a long cause) still
// says partial or unstable once compacted, and never offers the cache
// promise of a complete walk.
func TestCompactedVerdictKeepsCompletionOfLongBoundary(t *testing.T) {
	long := strings.Repeat("status=open, ", 28) // under half a value's cap each, over it together
	for _, completion := range []string{"partial", "unstable"} {
		out := fmt.Sprintf(`{"data":[{"id":1},{"id":2}],"_pagingComplete":false,"_likelyMoreRows":true,"_stoppedBy":"budget_pages",`+
			`"_note":"Partial: 2 rows fetched.","_boundary":{"scope":%q,"pageSize":5,"pages":20,"requests":20,"records":2,`+
			`"completion":%q,"stopReason":"budget_pages","lastCursor":null,"uninspected":%q,"action":"none (read-only)"}}`,
			"list_orders with "+long, completion, "everything after page 20: "+long)
		if !json.Valid([]byte(out)) {
			t.Fatal("fixture is not JSON")
		}
		p := &Part{Type: "dynamic-tool", ToolName: "list_orders", ToolCallID: "c1", State: "output-available",
			Input: json.RawMessage(`{"status":"open"}`), Output: json.RawMessage(out)}
		got := newVerdict(p).render(time.Time{})
		if !strings.Contains(got, `"completion":"`+completion+`"`) {
			t.Errorf("%s: the compacted verdict lost its completion:\n%s", completion, got)
		}
		if !strings.Contains(got, `"stopReason":"budget_pages"`) || !strings.Contains(got, `"records":2`) {
			t.Errorf("%s: the compacted verdict lost its stop reason or count:\n%s", completion, got)
		}
		if strings.Contains(got, "served from the cache") {
			t.Errorf("%s: a partial result promised as a cached complete walk:\n%s", completion, got)
		}
	}
}

// A compacted aggregate keeps its numbers when they are small, and over
// what rows they were (its completion and verdict sentence) when they
// are not.
func TestCompactedVerdictKeepsAggregate(t *testing.T) {
	verdict := "over the 2000 rows fetched of at least 3000 (partial): rows are missing, so these are not totals"
	small := `{"completion":"partial","verdict":"` + verdict + `","rows":2000,"groupBy":["status"],"groupCount":1,"groups":[{"status":"open","count":667}]}`
	var groups []string
	for i := range 40 {
		groups = append(groups, fmt.Sprintf(`{"status":"s%d","count":%d}`, i, i))
	}
	large := `{"completion":"partial","verdict":"` + verdict + `","rows":2000,"groupBy":["status"],"groupCount":40,"groups":[` + strings.Join(groups, ",") + `]}`
	for name, agg := range map[string]string{"small": small, "large": large} {
		out := `{"_aggregate":` + agg + `,"_pagingComplete":false,"_stoppedBy":"budget_pages","_note":"Partial: 2000 rows fetched."}`
		p := &Part{Type: "dynamic-tool", ToolName: "list_orders", ToolCallID: "c1", State: "output-available",
			Input: json.RawMessage(`{"status":"open"}`), Output: json.RawMessage(out)}
		got := newVerdict(p).render(time.Time{})
		if !strings.Contains(got, `"verdict":"`+verdict+`"`) || !strings.Contains(got, `"completion":"partial"`) {
			t.Errorf("%s: the compacted result lost the aggregate's verdict:\n%s", name, got)
		}
		if keeps := strings.Contains(got, `"count":667`); keeps != (name == "small") {
			t.Errorf("%s: groups kept %v:\n%s", name, keeps, got)
		}
	}
}
