package main

import (
	"strings"
	"testing"
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
