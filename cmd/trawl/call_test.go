package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools/demo"
)

// trawl call prints an engine error with its code, and the verdict lines
// render from the typed verdict.
func TestCallPrintsErrorCodesAndVerdict(t *testing.T) {
	t.Chdir(t.TempDir()) // no ./trawl.yaml: the demo
	code, _, errOut := runCLI(t, "call", "acme.list_orders", "--args", `{"_for_each": {"key": "nope", "values": [1]}}`)
	if code != 1 || !strings.Contains(errOut, "invalid_for_each_key: _for_each key \"nope\" is not a parameter") {
		t.Errorf("exit %d, stderr %q; want the error with its code invalid_for_each_key", code, errOut)
	}
	code, _, errOut = runCLI(t, "call", "acme.list_orders", "--args", `{"_filter": {"field": "status", "op": "eq", "valu": "paid"}}`)
	if code != 1 || !strings.Contains(errOut, `invalid_filter: _filter clause 0`) || !strings.Contains(errOut, `unknown key "valu"`) {
		t.Errorf("exit %d, stderr %q; want invalid_filter naming the clause and key", code, errOut)
	}
	// A first page only is a partial result: exit status 3.
	code, _, errOut = runCLI(t, "call", "acme.list_orders", "--args", `{"per_page": 5}`)
	if code != 3 || !strings.Contains(errOut, "partial: 5 rows, 1 request, stopped by first_page_only\n") ||
		!strings.Contains(errOut, `"action":"none (read-only)"`) || !strings.Contains(errOut, "note: This is only the first page (5 rows)") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	code, _, errOut = runCLI(t, "call", "acme.get_stats", "--args", `{}`)
	if code != 0 || !strings.Contains(errOut, "single_response: a single response, 1 request, stopped by single_response\n") {
		t.Errorf("get_stats: exit %d, stderr:\n%s", code, errOut)
	}
}

// trawl call prints an aggregate's verdict and groups from the typed
// result: over every row when the walk was complete, and never as totals
// when it was not.
func TestCallPrintsAggregate(t *testing.T) {
	t.Chdir(t.TempDir())
	agg := `"_aggregate": {"group_by": ["currency"], "metrics": [{"op": "count"}, {"op": "sum", "field": "total"}], "order_by": [{"field": "count", "dir": "desc"}]}`
	code, out, errOut := runCLI(t, "call", "acme.list_orders", "--args",
		`{"status": "open", "_all_pages": true, "_filter": [{"field": "total", "op": "gt", "value": 100}], `+agg+`}`)
	if code != 0 || !strings.Contains(errOut, "aggregate: over the 278 of all 364 rows that match the filter (complete)\n") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
	for _, want := range demo.TallyOrders("open", 100) {
		line := fmt.Sprintf(`  currency="%s"  count %d  sum(total) %s`+"\n", want.Currency, want.Count, want.Sum)
		if !strings.Contains(errOut, line) {
			t.Errorf("stderr lacks %q:\n%s", line, errOut)
		}
	}
	if !strings.Contains(out, `"_aggregate": {`) || strings.Contains(out, `"data":`) {
		t.Errorf("stdout holds rows or no _aggregate:\n%.600s", out)
	}
	// The first page only: partial, exit status 3, and the numbers say
	// they are not totals.
	code, _, errOut = runCLI(t, "call", "acme.list_orders", "--args", `{"status": "open", `+agg+`}`)
	if code != 3 || !strings.Contains(errOut, "aggregate: over the 25 rows of the first page of at least 364 (partial): rows are missing, so these are not totals\n") ||
		strings.Contains(errOut, "(complete)") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
}
