package loop

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/tools"
)

// expectedOrders counts, by status, the orders the test upstream serves
// (order(i) for i in 1..n), as the test itself computes them.
func expectedOrders(n int) map[string][2]int {
	out := map[string][2]int{}
	for i := 1; i <= n; i++ {
		status := []string{"open", "paid", "refunded"}[i%3]
		c := out[status]
		c[0]++
		c[1] += (i * 37) % 500
		out[status] = c
	}
	return out
}

var statusAggregate = map[string]any{
	"group_by": []any{"status"},
	"metrics":  []any{map[string]any{"op": "count"}, map[string]any{"op": "sum", "field": "total"}, map[string]any{"op": "avg", "field": "total"}},
}

type aggView struct {
	Completion string                       `json:"completion"`
	Verdict    string                       `json:"verdict"`
	Rows       int                          `json:"rows"`
	GroupCount int                          `json:"groupCount"`
	Groups     []map[string]json.RawMessage `json:"groups"`
}

func aggregateOf(t *testing.T, view []byte) aggView {
	t.Helper()
	var v struct {
		Aggregate *aggView `json:"_aggregate"`
	}
	if err := json.Unmarshal(view, &v); err != nil || v.Aggregate == nil {
		t.Fatalf("no _aggregate (%v) in %s", err, view)
	}
	return *v.Aggregate
}

// statusGroups reads {status: [count, sum]} from an aggregate's groups.
func statusGroups(t *testing.T, a aggView) map[string][2]int {
	t.Helper()
	out := map[string][2]int{}
	for _, g := range a.Groups {
		var status, sum string
		var count int
		if json.Unmarshal(g["status"], &status) != nil || json.Unmarshal(g["count"], &count) != nil || json.Unmarshal(g["sum(total)"], &sum) != nil {
			t.Fatalf("group %v", g)
		}
		var s int
		fmt.Sscan(sum, &s)
		out[status] = [2]int{count, s}
	}
	return out
}

// TestAggregateCompleteWalk: _aggregate after a complete walk gives the
// numbers instead of the rows, exact, with the verdict of the set; the
// rows stay stored, and queryToolResult's aggregate over them says the
// same.
func TestAggregateCompleteWalk(t *testing.T) {
	up := newUpstream(t, 1900)
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	out, v := looping(t, e, ordersTool(up.URL), map[string]any{"_all_pages": true, "_aggregate": statusAggregate})
	if _, has := v["data"]; has {
		t.Errorf("the view still lists the rows: %.300s", out.View)
	}
	a := aggregateOf(t, out.View)
	if a.Completion != "complete" || a.Verdict != "over all 1900 rows (complete)" || a.Rows != 1900 || a.GroupCount != 3 {
		t.Errorf("aggregate %q %q rows %d groups %d", a.Completion, a.Verdict, a.Rows, a.GroupCount)
	}
	want := expectedOrders(1900)
	if diff := cmp.Diff(want, statusGroups(t, a)); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if note := v["_note"].(string); !strings.HasPrefix(note, "Complete: all 1900 rows") || !strings.Contains(note, "_aggregate holds their numbers") {
		t.Errorf("note %q", note)
	}
	if out.Aggregate == nil || !out.Aggregate.Complete() || out.Aggregate.Verdict != a.Verdict {
		t.Fatalf("typed aggregate %+v", out.Aggregate)
	}
	res := out.Aggregate.Result
	open := res.Groups[0] // ordered by key: open, paid, refunded
	if string(open.Key[0]) != `"open"` || open.Values[res.Metric("count")].Text != fmt.Sprint(want["open"][0]) {
		t.Errorf("typed open group %+v", open)
	}
	exact := big.NewRat(int64(want["open"][1]), int64(want["open"][0]))
	if r := open.Values[res.Metric("avg(total)")].Rat(); r == nil || r.FloatString(15) != exact.FloatString(15) {
		t.Errorf("typed avg %v, want %s", r, exact.FloatString(15))
	}
	rep, ok, err := ReadAggregate(out.View)
	if err != nil || !ok || rep.Verdict != a.Verdict || rep.Groups[0].Values["sum(total)"] != fmt.Sprint(want["open"][1]) || string(rep.Groups[0].Key["status"]) != `"open"` {
		t.Errorf("ReadAggregate: %+v %v %v", rep, ok, err)
	}

	// The same numbers from the stored rows.
	args, _ := json.Marshal(map[string]any{"resultId": v["_resultId"], "aggregate": statusAggregate})
	q, err := e.opt.Results.Call(context.Background(), scope, QueryToolResult, args)
	if err != nil {
		t.Fatal(err)
	}
	qa := aggregateOf(t, q)
	if qa.Verdict != a.Verdict || qa.Completion != "complete" {
		t.Errorf("queryToolResult aggregate says %q %q", qa.Completion, qa.Verdict)
	}
	if diff := cmp.Diff(want, statusGroups(t, qa)); diff != "" {
		t.Errorf("queryToolResult groups (-want +got):\n%s", diff)
	}
	// Its filter chooses rows, and the verdict says so.
	args, _ = json.Marshal(map[string]any{"resultId": v["_resultId"], "filter": []any{map[string]any{"field": "status", "op": "eq", "value": "open"}},
		"aggregate": map[string]any{"metrics": []any{map[string]any{"op": "count"}}}})
	if q, err = e.opt.Results.Call(context.Background(), scope, QueryToolResult, args); err != nil {
		t.Fatal(err)
	}
	if fa := aggregateOf(t, q); fa.Verdict != fmt.Sprintf("over the %d of all 1900 rows that match the filter (complete)", want["open"][0]) {
		t.Errorf("filtered verdict %q", fa.Verdict)
	}
}

// TestAggregatePartialSaysSo: an aggregate over a walk a budget cut is
// never worded as a total — in the view, the typed result, the stored
// result's aggregate and a workflow's _loop.
func TestAggregatePartialSaysSo(t *testing.T) {
	up := newUpstream(t, 3000) // 30 pages of 100: the 20-page budget cuts it
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	args := map[string]any{"_all_pages": true, "_aggregate": statusAggregate}
	out, v := looping(t, e, ordersTool(up.URL), args)
	a := aggregateOf(t, out.View)
	const verdict = "over the 2000 rows fetched of at least 3000 (partial): rows are missing, so these are not totals"
	if a.Completion != "partial" || a.Verdict != verdict || a.Rows != 2000 {
		t.Errorf("aggregate %q %q rows %d", a.Completion, a.Verdict, a.Rows)
	}
	if out.Aggregate.Complete() {
		t.Error("the typed aggregate says complete")
	}
	if diff := cmp.Diff(expectedOrders(2000), statusGroups(t, a)); diff != "" {
		t.Errorf("groups over the rows fetched (-want +got):\n%s", diff)
	}
	q, err := e.opt.Results.Call(context.Background(), scope, QueryToolResult, mustJSON(t, map[string]any{"resultId": v["_resultId"], "aggregate": statusAggregate}))
	if err != nil {
		t.Fatal(err)
	}
	if qa := aggregateOf(t, q); qa.Verdict != verdict || qa.Completion != "partial" {
		t.Errorf("stored aggregate %q %q", qa.Completion, qa.Verdict)
	}

	// A workflow step: the numbers under the step, the verdict in _loop.
	wf, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true}, Args: args, Workflow: true})
	if err != nil {
		t.Fatal(err)
	}
	var step struct {
		Loop      LoopBlock `json:"_loop"`
		Aggregate aggView   `json:"_aggregate"`
	}
	if err := json.Unmarshal(wf.View, &step); err != nil {
		t.Fatal(err)
	}
	if step.Loop.Complete || step.Loop.Aggregate != verdict || step.Aggregate.Verdict != verdict || len(step.Aggregate.Groups) != 3 {
		t.Errorf("workflow step: _loop %+v, aggregate %q with %d groups", step.Loop, step.Aggregate.Verdict, len(step.Aggregate.Groups))
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAggregateVerdicts: the first page only, an unstable walk, a failed
// fan-out value and a single response each say what they are.
func TestAggregateVerdicts(t *testing.T) {
	up := newUpstream(t, 300)
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	count := map[string]any{"metrics": []any{map[string]any{"op": "count"}}}

	_, v := looping(t, e, ordersTool(up.URL), map[string]any{"_aggregate": count})
	if a := aggregateOf(t, mustJSON(t, v)); a.Completion != "partial" || a.Verdict != "over the 25 rows of the first page of at least 300 (partial): rows are missing, so these are not totals" {
		t.Errorf("first page: %q %q", a.Completion, a.Verdict)
	}

	fe := map[string]any{"_for_each": map[string]any{"key": "property_id", "values": []any{"p_1", "p_bad"}}, "_all_pages": true, "_aggregate": count}
	_, v = looping(t, e, bookingsTool(up.URL), fe)
	if a := aggregateOf(t, mustJSON(t, v)); a.Completion != "partial" || !strings.HasPrefix(a.Verdict, "over the 3 rows fetched") || !strings.HasSuffix(a.Verdict, "(partial): rows are missing, so these are not totals") {
		t.Errorf("failed fan-out value: %q %q", a.Completion, a.Verdict)
	}

	changing := offsetServer(t, ids(12), func(n int, list []string) []string {
		if n == 2 {
			return append([]string{"new1", "new2"}, list...)
		}
		return list
	})
	_, v = looping(t, e, offsetTool(changing.URL), map[string]any{"_all_pages": true, "_aggregate": count})
	if a := aggregateOf(t, mustJSON(t, v)); a.Completion != "unstable" || !strings.HasPrefix(a.Verdict, "over at least 12 rows (unstable)") || !strings.Contains(a.Verdict, "not exact totals") {
		t.Errorf("unstable: %q %q", a.Completion, a.Verdict)
	}

	_, v = looping(t, e, statsTool(up.URL), map[string]any{"_aggregate": count})
	if _, has := v["_aggregate"]; has || !strings.Contains(v["_note"].(string), "_aggregate applies to lists of rows") {
		t.Errorf("an object response: %v", v)
	}
}

// TestSetVerdictSentences: every completion's wording, filtered or not.
func TestSetVerdictSentences(t *testing.T) {
	total := 2000
	tests := []struct {
		set      SetVerdict
		rows     int
		filtered bool
		want     string
	}{
		{SetVerdict{Completion: Complete, Records: 364}, 364, false, "over all 364 rows (complete)"},
		{SetVerdict{Completion: Complete, Records: 364}, 278, true, "over the 278 of all 364 rows that match the filter (complete)"},
		{SetVerdict{Completion: Complete, Records: 50, Resumed: true}, 50, false, "over the 50 rows from the requested start (complete from there): the rows before the start were not requested, so these are not totals of the whole collection"},
		{SetVerdict{Completion: Partial, Records: 188, ReportedTotal: &total}, 188, false, "over the 188 rows fetched of at least 2000 (partial): rows are missing, so these are not totals"},
		{SetVerdict{Completion: Partial, Records: 188}, 20, true, "over the 20 of the 188 rows fetched that match the filter (partial): rows are missing, so these are not totals"},
		{SetVerdict{Completion: Unstable, Records: 364}, 364, false, "over at least 364 rows (unstable): the collection changed during the walk, so rows may be missing or repeated and these are not exact totals"},
		{SetVerdict{Completion: SingleResponse, Records: 1}, 1, false, "over the 1 row one call returned (single response): the tool does not page, and nothing says these are every row"},
		{SetVerdict{Records: 50}, 50, false, "over the 50 rows of one response (the call did not loop): nothing says whether more rows exist, so these are not totals"},
	}
	for _, tt := range tests {
		if got := tt.set.Over(tt.rows, tt.filtered); got != tt.want {
			t.Errorf("%+v, %d, %v:\n got %q\nwant %q", tt.set, tt.rows, tt.filtered, got, tt.want)
		}
	}
}

// TestAggregateArgumentErrors: the one parser names the member at fault,
// with its code, whichever door the aggregate came through.
func TestAggregateArgumentErrors(t *testing.T) {
	bad := map[string]any{"group_by": []any{"status"}, "metrics": []any{map[string]any{"op": "sum", "feild": "total"}}}
	_, _, err := ParseRequest(map[string]any{"_aggregate": bad})
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeInvalidAggregate || te.Message != `_aggregate metrics[0].feild: unknown key; a metric has op, field, as (ops: count, count_distinct, sum, avg, min, max)` {
		t.Errorf("ParseRequest: %v", err)
	}
	if _, err := AggregateArg("loop.aggregate", map[string]any{"metrics": []any{map[string]any{"op": "median", "field": "x"}}}); err == nil || !strings.Contains(err.Error(), `invalid_aggregate: loop.aggregate metrics[0].op: unknown op "median"`) {
		t.Errorf("AggregateArg: %v", err)
	}
	r := NewRetrieval(RetrievalOptions{})
	id, err := r.Keep(context.Background(), scope, mustStored(t, `{"data":[{"a":1}]}`, "data"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.Call(context.Background(), scope, QueryToolResult, mustJSON(t, map[string]any{"resultId": id, "aggregate": bad}))
	var re *RetrievalArgError
	if !errors.As(err, &re) || re.Arg != "aggregate" || re.ErrorCode() != CodeInvalidAggregate || !strings.Contains(re.Msg, "metrics[0].feild: unknown key") {
		t.Errorf("queryToolResult: %v", err)
	}
	_, err = r.Call(context.Background(), scope, QueryToolResult, mustJSON(t, map[string]any{"resultId": id, "limit": 5, "aggregate": statusAggregate}))
	if !errors.As(err, &re) || re.Arg != "limit" {
		t.Errorf("queryToolResult with limit and aggregate: %v", err)
	}

	// A write takes no _aggregate.
	e := newTestEngine(t, Options{})
	w := &tools.Tool{ID: "x.create", Name: "create", Method: "POST", Path: "/orders", Origin: "http://127.0.0.1:1"}
	_, err = e.Call(context.Background(), Call{Tool: w, Scope: scope, Binding: Binding{LoopResponses: true}, Args: map[string]any{"_aggregate": statusAggregate}})
	if !errors.As(err, &te) || te.Code != CodeWriteArgument || !strings.Contains(te.Message, "_aggregate") {
		t.Errorf("write: %v", err)
	}
}

func mustStored(t *testing.T, doc, path string) *StoredResult {
	t.Helper()
	rec, err := NewStoredResult("x.t", []byte(doc), path)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// TestAggregateAdvertised: reads offer _aggregate, writes do not.
func TestAggregateAdvertised(t *testing.T) {
	e := newTestEngine(t, Options{})
	read := e.Schema(ordersTool("http://x"), Binding{LoopResponses: true})["properties"].(map[string]any)
	if _, ok := read[ArgAggregate]; !ok {
		t.Error("a looping read does not offer _aggregate")
	}
	w := &tools.Tool{ID: "x.create", Name: "create", Method: "POST", Path: "/orders"}
	write := e.Schema(w, Binding{LoopResponses: true})["properties"].(map[string]any)
	if _, ok := write[ArgAggregate]; ok {
		t.Error("a write offers _aggregate")
	}
}

// TestForEachNeedsAParameter: _for_each is offered to a looping read or
// a bulk write with parameters, never to a tool without any — where the
// engine refuses every _for_each, since there is no parameter to vary.
func TestForEachNeedsAParameter(t *testing.T) {
	e := newTestEngine(t, Options{})
	bulk := Binding{LoopResponses: true, Bulk: true}
	create := &tools.Tool{ID: "x.create", Name: "create", Method: "POST", Path: "/orders/{id}/notes",
		Params: []tools.Param{{Name: "id", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}}}}
	bare := &tools.Tool{ID: "x.ping", Name: "ping", Method: "POST", Path: "/ping"}
	for _, c := range []struct {
		tool *tools.Tool
		b    Binding
		want bool
	}{
		{ordersTool("http://x"), Binding{LoopResponses: true}, true},
		{statsTool("http://x"), Binding{LoopResponses: true}, false},
		{create, bulk, true},
		{bare, bulk, false},
	} {
		props := e.Schema(c.tool, c.b)["properties"].(map[string]any)
		if _, ok := props[ArgForEach]; ok != c.want {
			t.Errorf("%s offers _for_each: %v, want %v", c.tool.Name, ok, c.want)
		}
		if _, ok := props[ArgFields]; !ok {
			t.Errorf("%s: no _fields", c.tool.Name)
		}
	}
	// What the schema no longer offers the engine would refuse.
	_, err := forEachValues(statsTool("http://x"), &ForEach{Key: "id", Values: []any{"a"}}, 10)
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeInvalidForEachKey {
		t.Errorf("_for_each on a tool without parameters: %v", err)
	}
}

// TestStoredResultKeepsSetVerdict: a record carries its set's verdict
// through a store outside the process, and an older record still reads.
func TestStoredResultKeepsSetVerdict(t *testing.T) {
	total := 3000
	rec := mustStored(t, `{"data":[{"a":1},{"a":2}]}`, "data")
	rec.Set = SetVerdict{Completion: Partial, Records: 2000, ReportedTotal: &total, FirstPageOnly: true}
	b, err := rec.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back StoredResult
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rec.Set, back.Set); diff != "" || back.NumItems() != 2 {
		t.Errorf("set (-want +got):\n%s", diff)
	}
	// Version 1: the same record without the verdict section.
	v1 := append([]byte(nil), recordMagicV1...)
	rest := b[len(recordMagic):]
	i := strings.Index(string(rest), "data") + len("data") + 1 // past the items path and its flag
	v1 = append(v1, rest[:i]...)
	var scratch [binary.MaxVarintLen64]byte
	skip := 2 + binary.PutUvarint(scratch[:], 2000) + binary.PutVarint(scratch[:], 3000) // completion, flags, records, total
	v1 = append(v1, rest[i+skip:]...)
	var old StoredResult
	if err := old.UnmarshalBinary(v1); err != nil {
		t.Fatalf("version 1 record: %v", err)
	}
	if old.Set != (SetVerdict{}) || old.NumItems() != 2 {
		t.Errorf("version 1 record: %+v", old.Set)
	}
}

// TestQueryOfAPartialWalkSaysSo: queryToolResult's matched and total
// over the rows of a walk a budget cut carry the set's verdict — partial,
// not a count of all rows — as its aggregate form does; over a complete
// walk they say complete.
func TestQueryOfAPartialWalkSaysSo(t *testing.T) {
	for _, tc := range []struct {
		rows     int
		complete bool
		verdict  string
	}{
		{3000, false, "matched and total are counted over the %d of the 2000 rows fetched of at least 3000 that match the filter (partial): rows are missing, so these are not totals"},
		{1900, true, "matched and total are counted over the %d of all 1900 rows that match the filter (complete)"},
	} {
		up := newUpstream(t, tc.rows)
		e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
		_, v := looping(t, e, ordersTool(up.URL), map[string]any{"_all_pages": true, "_fields": []any{"id", "status"}})
		q, err := e.opt.Results.Call(context.Background(), scope, QueryToolResult, mustJSON(t, map[string]any{"resultId": v["_resultId"],
			"filter": []any{map[string]any{"field": "status", "op": "eq", "value": "open"}}, "limit": 1}))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			PagingComplete *bool  `json:"_pagingComplete"`
			Completion     string `json:"completion"`
			Verdict        string `json:"verdict"`
			Matched        int    `json:"matched"`
		}
		if err := json.Unmarshal(q, &got); err != nil {
			t.Fatal(err)
		}
		want := map[bool]string{true: "complete", false: "partial"}[tc.complete]
		if got.PagingComplete == nil || *got.PagingComplete != tc.complete || got.Completion != want ||
			got.Matched == 0 || got.Verdict != fmt.Sprintf(tc.verdict, got.Matched) {
			t.Errorf("%d rows: query %s", tc.rows, q)
		}
		if !strings.HasPrefix(string(q), `{"_pagingComplete":`) {
			t.Errorf("the verdict is not first: %.120s", q)
		}
	}
}
