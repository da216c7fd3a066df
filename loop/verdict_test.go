package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// The shapes of issue 9, each a plain test: what real APIs and real
// models produce, and what the verdict must say about them.

// boundaryKeys are the keys _boundary always carries.
var boundaryKeys = []string{"action", "completion", "lastCursor", "pageSize", "pages", "records", "requests", "scope", "stopReason", "uninspected"}

// checkBoundary fails unless every boundary key is present.
func checkBoundary(t *testing.T, view map[string]any) map[string]any {
	t.Helper()
	b, ok := view["_boundary"].(map[string]any)
	if !ok {
		t.Fatalf("no _boundary in %v", view)
	}
	for _, k := range boundaryKeys {
		if _, ok := b[k]; !ok {
			t.Errorf("_boundary lacks %q: %v", k, b)
		}
	}
	return b
}

// counted is an httptest server that counts its requests.
type counted struct {
	*httptest.Server
	n atomic.Int64
}

func newCounted(t *testing.T, h http.HandlerFunc) *counted {
	c := &counted{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		h(w, r)
	}))
	t.Cleanup(c.Close)
	return c
}

func itemsTool(origin string, params ...tools.Param) *tools.Tool {
	return &tools.Tool{
		ID: "x.list_items", Provider: "x", Name: "list_items", Kind: tools.KindAPI,
		Method: "GET", Path: "/items", Origin: origin, Params: params,
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"data":  {Type: "array", Items: &tools.Schema{Type: "object"}},
			"total": {Type: "integer"},
		}},
	}
}

func looping(t *testing.T, e *Engine, tool *tools.Tool, args map[string]any) (*Outcome, map[string]any) {
	t.Helper()
	out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true}, Args: args})
	if err != nil {
		t.Fatal(err)
	}
	return out, decode(t, out.View)
}

// The model chose per_page 20; the server silently serves 7, with no
// total and no continuation, and numbers its pages by the size it serves.
// The walk goes on at 7 a page (the first page is that size's page 1),
// and without a total it reads each full page again after the next one
// (a probe of the boundary), so rows shifting between pages would show.
func TestSilentlyCappedPageSize(t *testing.T) {
	const n = 95
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		var rows []string
		for i := (page-1)*7 + 1; i <= min(page*7, n); i++ {
			rows = append(rows, fmt.Sprintf(`{"id":%d}`, i))
		}
		fmt.Fprintf(w, `{"data":[%s]}`, strings.Join(rows, ","))
	})
	tool := itemsTool(up.URL,
		tools.Param{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		tools.Param{Name: "per_page", In: tools.InQuery, Schema: intSchema(100)})
	out, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true, "per_page": 20})
	b := checkBoundary(t, v)
	if got := len(v["data"].([]any)); got != n || v["_pagingComplete"] != true || b["completion"] != "complete" {
		t.Errorf("rows %d, verdict %v %v; want all %d rows, complete", got, v["_pagingComplete"], b["completion"], n)
	}
	if want := fmt.Sprintf("Complete: all %d rows", n); !strings.HasPrefix(v["_note"].(string), want) {
		t.Errorf("note %q, want it to start %q", v["_note"], want)
	}
	if int(up.n.Load()) != out.Verdict.Requests || out.Verdict.Requests != 27 || out.Verdict.Probes != 13 || out.Verdict.Pages != 14 {
		t.Errorf("requests: boundary %d (%d pages, %d probes), upstream %d; want 27: 14 pages, the last one short at 7, and 13 probes",
			out.Verdict.Requests, out.Verdict.Pages, out.Verdict.Probes, up.n.Load())
	}
}

// offsetServer walks a list by offset and limit (3 per page) with a
// total; change runs before the n-th request.
func offsetServer(t *testing.T, list []string, change func(n int, list []string) []string) *counted {
	var mu sync.Mutex
	var c *counted
	c = newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		list = change(int(c.n.Load()), list)
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		end := min(off+3, len(list))
		var rows []string
		for _, id := range list[min(off, end):end] {
			rows = append(rows, fmt.Sprintf(`{"id":%q}`, id))
		}
		fmt.Fprintf(w, `{"data":[%s],"total":%d}`, strings.Join(rows, ","), len(list))
	})
	return c
}

func offsetTool(origin string) *tools.Tool {
	return itemsTool(origin,
		tools.Param{Name: "offset", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		tools.Param{Name: "limit", In: tools.InQuery, Schema: intSchema(3)})
}

func ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("r%02d", i+1)
	}
	return out
}

// Rows inserted or deleted between pages of an offset walk: the walk
// reaches its end, but the set may have gaps or repeats — unstable, never
// complete, rows de-duplicated, the count distinct.
func TestCollectionChangesDuringOffsetWalk(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(n int, list []string) []string
		dups   float64
	}{
		{"insert at the head", func(n int, list []string) []string {
			if n == 2 {
				return append([]string{"new1", "new2"}, list...)
			}
			return list
		}, 3}, // the overlapping second page begins two rows early: all three came back
		{"delete at the head", func(n int, list []string) []string {
			if n == 2 {
				return list[1:]
			}
			return list
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := offsetServer(t, ids(12), tc.change)
			out, v := looping(t, newTestEngine(t, Options{}), offsetTool(up.URL), map[string]any{"_all_pages": true})
			b := checkBoundary(t, v)
			if v["_pagingComplete"] != false || v["_likelyMoreRows"] != true || b["completion"] != "unstable" {
				t.Fatalf("verdict %v %v %v; want unstable, likely more", v["_pagingComplete"], v["_likelyMoreRows"], b["completion"])
			}
			rows := v["data"].([]any)
			seen := map[string]bool{}
			for _, r := range rows {
				id := r.(map[string]any)["id"].(string)
				if seen[id] {
					t.Errorf("row %s shown twice", id)
				}
				seen[id] = true
			}
			if b["duplicates"] != tc.dups || b["distinctRecords"] != float64(len(rows)) || b["records"] != float64(len(rows)) || b["reportedTotal"] == nil {
				t.Errorf("boundary %v; want duplicates %v, distinctRecords = records = %d, reportedTotal", b, tc.dups, len(rows))
			}
			note := v["_note"].(string)
			if !strings.HasPrefix(note, fmt.Sprintf("Unstable: at least %d distinct rows", len(rows))) || !strings.Contains(note, "gaps") ||
				strings.Contains(note, "Complete") {
				t.Errorf("note %q", note)
			}
			if out.Verdict.Completion != Unstable || out.Verdict.PagingComplete() {
				t.Errorf("typed verdict %+v", out.Verdict)
			}
		})
	}
}

// demoEngine is an engine over the demo upstream (Acme) on loopback.
func demoEngine(t *testing.T) (*Engine, *tools.Catalog) {
	t.Helper()
	srv := demo.NewServer(demo.Options{})
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	cat := tools.NewCatalog()
	if err := cat.Add(ts...); err != nil {
		t.Fatal(err)
	}
	return newTestEngine(t, Options{}), cat
}

func mustTool(t *testing.T, cat *tools.Catalog, id string) *tools.Tool {
	t.Helper()
	tool, ok := cat.Get(id)
	if !ok {
		t.Fatalf("no tool %s", id)
	}
	return tool
}

// The demo's get_order is one object whose line_items is an array:
// _fields projects the order, its money total is not a row count, and the
// verdict is a single response.
func TestObjectWithNestedArray(t *testing.T) {
	e, cat := demoEngine(t)
	list, lv := looping(t, e, mustTool(t, cat, "acme.list_orders"), map[string]any{"per_page": 1})
	if list.Verdict.Rows != 1 {
		t.Fatalf("list_orders: %s", list.View)
	}
	id := lv["data"].([]any)[0].(map[string]any)["id"].(string)
	out, v := looping(t, e, mustTool(t, cat, "acme.get_order"), map[string]any{"order_id": id, "_fields": []any{"id", "total", "status"}})
	b := checkBoundary(t, v)
	keys := []string{}
	for k := range v {
		if !strings.HasPrefix(k, "_") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if diff := cmp.Diff([]string{"id", "status", "total"}, keys); diff != "" {
		t.Errorf("projected order keys (-want +got):\n%s\n%s", diff, out.View)
	}
	if v["id"] != id || b["completion"] != "single_response" || b["records"] != nil || v["_pagingComplete"] != nil || v["_likelyMoreRows"] != false {
		t.Errorf("order view %s", out.View)
	}
	note := v["_note"].(string)
	if !strings.HasPrefix(note, "Single response: the tool returned one object") || strings.Contains(note, "Partial") || strings.Contains(note, "rows;") {
		t.Errorf("note %q", note)
	}
}

// A text result (an MCP server's directory listing) and a plain object
// (the demo's get_stats) are single responses: no row count, nothing
// about the server reporting no more.
func TestResultsThatAreNotCollections(t *testing.T) {
	var listing strings.Builder
	for i := range 30 {
		fmt.Fprintf(&listing, "file_%02d.txt\n", i)
	}
	mcp := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		return &tools.Response{Status: 200, Body: []byte(listing.String())}, nil
	})
	mcpTool := &tools.Tool{ID: "fs.list_directory", Provider: "fs", Name: "list_directory", Kind: tools.KindMCP}
	_, text := looping(t, newTestEngine(t, Options{Caller: mcp}), mcpTool, nil)

	e, cat := demoEngine(t)
	_, stats := looping(t, e, mustTool(t, cat, "acme.get_stats"), nil)

	for name, v := range map[string]map[string]any{"text": text, "get_stats": stats} {
		b := checkBoundary(t, v)
		note := v["_note"].(string)
		if b["completion"] != "single_response" || b["records"] != nil || v["_pagingComplete"] != nil ||
			strings.Contains(note, "0 rows") || strings.Contains(note, "reported no more") || !strings.HasPrefix(note, "Single response") {
			t.Errorf("%s: completion %v records %v note %q", name, b["completion"], b["records"], note)
		}
	}
	if !strings.Contains(text["text"].(string), "file_29.txt") || !strings.Contains(text["_note"].(string), "returned text") {
		t.Errorf("text view %v", text)
	}
}

// A _filter clause on a field no row has is reported beside the rows; a
// misspelt clause key is an invalid_filter error, the same from
// queryToolResult.
func TestFilterMistakes(t *testing.T) {
	up := newUpstream(t, 30)
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	out, v := looping(t, e, ordersTool(up.URL), map[string]any{"_all_pages": true,
		"_filter": []any{map[string]any{"field": "statsu", "op": "eq", "value": "paid"}}})
	rep, ok := v["_unmatchedFilter"].(map[string]any)
	if !ok || fmt.Sprint(rep["fields"]) != "[statsu]" || !strings.Contains(fmt.Sprint(rep["availableKeys"]), "status") {
		t.Errorf("_unmatchedFilter = %v", v["_unmatchedFilter"])
	}
	if !strings.Contains(out.Verdict.Note, "matched nothing on statsu because no row has that field") {
		t.Errorf("note %q", out.Verdict.Note)
	}

	clause := map[string]any{"field": "status", "op": "eq", "valu": "paid"}
	_, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_filter": []any{clause}}})
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeInvalidFilter || !strings.Contains(te.Message, `clause 0`) || !strings.Contains(te.Message, `unknown key "valu"`) {
		t.Fatalf("misspelt clause key: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "invalid_filter: ") {
		t.Errorf("the error the model reads lacks its code: %q", err.Error())
	}
	if n := len(up.requests()); n != 1 { // the first call only
		t.Errorf("%d upstream requests; the bad filter must cost none", n)
	}

	raw, _ := json.Marshal(map[string]any{"resultId": out.ResultID, "filter": []any{clause}})
	_, qerr := e.opt.Results.Call(context.Background(), scope, QueryToolResult, raw)
	var ae *RetrievalArgError
	if !errors.As(qerr, &ae) || ae.Code != CodeInvalidFilter || !strings.HasSuffix(te.Message, ae.Msg) {
		t.Errorf("queryToolResult: %v; want the same error as _filter (%v)", qerr, te)
	}
}

// A fan-out value answering 404 fails alone and is not retryable; the
// note says how many values succeeded, never "call again to retry".
func TestFanOutNotFoundIsNotRetryable(t *testing.T) {
	up := newUpstream(t, 0)
	out, v := looping(t, newTestEngine(t, Options{}), bookingsTool(up.URL), map[string]any{
		"_all_pages": true, "_fields": []any{"id"},
		"_for_each": map[string]any{"key": "property_id", "values": []any{"p_1", "p_bad"}}})
	b := checkBoundary(t, v)
	errs, _ := v["_forEachErrors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["value"] != "p_bad" || errs[0].(map[string]any)["status"] != 404.0 ||
		errs[0].(map[string]any)["retryable"] != false {
		t.Fatalf("_forEachErrors = %v", v["_forEachErrors"])
	}
	note := v["_note"].(string)
	if b["completion"] != "partial" || !strings.Contains(note, "1 of 2 _for_each values succeeded") || strings.Contains(note, "call again to retry") ||
		!strings.Contains(note, "a retry cannot help") {
		t.Errorf("completion %v, note %q", b["completion"], note)
	}
	// The tag stays though _fields does not list it.
	for _, r := range v["data"].([]any) {
		if r.(map[string]any)["property_id"] != "p_1" {
			t.Errorf("row %v lost its _for_each tag", r)
		}
	}
	if got := len(up.requests()); got != out.Verdict.Requests || b["requests"] != float64(got) {
		t.Errorf("requests: boundary %v, upstream %d", b["requests"], got)
	}
}

// 49 of 50 fan-out values fail with 503 (retried) until the request
// budget runs out: the boundary counts every upstream request, each value
// ends in exactly one of rows, _forEachErrors, _forEachSkipped, and the
// skipped ones are named.
func TestFanOutAccounting(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/p_ok/bookings") {
			fmt.Fprint(w, `{"data":[{"id":"b1"},{"id":"b2"}],"total":2}`)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"error":"down"}`)
	})
	values := []any{"p_ok"}
	for i := range 49 {
		values = append(values, fmt.Sprintf("p_%02d", i))
	}
	activity := tools.NewActivityLog(nil, 10000)
	e := newTestEngine(t, Options{FanOut: 1, Caller: tools.NewInvoker(tools.InvokerOptions{Log: activity})})
	out, v := looping(t, e, bookingsTool(up.URL), map[string]any{
		"_all_pages": true, "_for_each": map[string]any{"key": "property_id", "values": values}})
	b := checkBoundary(t, v)
	vd := out.Verdict
	logged, err := activity.List(context.Background(), scope.Thread, 10000)
	if err != nil {
		t.Fatal(err)
	}
	if int(up.n.Load()) != vd.Requests || b["requests"] != float64(up.n.Load()) || len(logged) != vd.Requests {
		t.Errorf("boundary requests %v, upstream %d, activity log %d", b["requests"], up.n.Load(), len(logged))
	}
	accounted := map[any]string{}
	mark := func(val any, where string) {
		if prev, dup := accounted[val]; dup {
			t.Errorf("value %v in both %s and %s", val, prev, where)
		}
		accounted[val] = where
	}
	for _, r := range v["data"].([]any) {
		if val := r.(map[string]any)["property_id"]; accounted[val] == "" {
			mark(val, "rows")
		}
	}
	for _, x := range v["_forEachErrors"].([]any) {
		m := x.(map[string]any)
		if m["status"] != 503.0 || m["retryable"] != true {
			t.Errorf("error %v: want status 503, retryable", m)
		}
		mark(m["value"], "_forEachErrors")
	}
	skipped, _ := v["_forEachSkipped"].([]any)
	for _, x := range skipped {
		m := x.(map[string]any)
		if !strings.Contains(m["reason"].(string), "request budget") {
			t.Errorf("skip reason %q", m["reason"])
		}
		mark(m["value"], "_forEachSkipped")
	}
	if len(accounted) != len(values) || len(skipped) == 0 {
		t.Errorf("%d of %d values accounted for (%d skipped)", len(accounted), len(values), len(skipped))
	}
	note := v["_note"].(string)
	if b["completion"] != "partial" || !strings.HasPrefix(note, "Partial: 1 of 50 _for_each values succeeded") || !strings.Contains(note, "never requested") {
		t.Errorf("completion %v note %q", b["completion"], note)
	}
}

// has_more: true with empty pages forever stops after three empty pages.
func TestEmptyPagesThatSayMore(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"data":[],"has_more":true,"next_cursor":"c%d"}`, time.Now().UnixNano())
	})
	tool := itemsTool(up.URL, tools.Param{Name: "cursor", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}})
	tool.Response.Properties["has_more"] = &tools.Schema{Type: "boolean"}
	tool.Response.Properties["next_cursor"] = &tools.Schema{Type: "string"}
	out, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true})
	checkBoundary(t, v)
	if v["_stoppedBy"] != paginate.StopInconsistent || up.n.Load() != 3 || out.Verdict.Requests != 3 {
		t.Errorf("stopped by %v after %d requests; want inconsistent_pagination after 3", v["_stoppedBy"], up.n.Load())
	}
}

// A missing required argument is refused before any request: no retry,
// no request, no wait.
func TestMissingRequiredArgument(t *testing.T) {
	up := newUpstream(t, 0)
	clock := paginate.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	e := newTestEngine(t, Options{Clock: clock})
	start := clock.Now()
	for _, looping := range []bool{true, false} {
		_, err := e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: looping}})
		var te *ToolError
		if !errors.As(err, &te) || te.Code != CodeInvalidArgument || !strings.Contains(te.Message, `"property_id" is required`) {
			t.Errorf("looping=%v: err = %v", looping, err)
		}
	}
	_, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"per_page": map[string]any{"n": 1}}})
	if err == nil || !strings.Contains(err.Error(), `"per_page" must be an integer`) {
		t.Errorf("wrong type: err = %v", err)
	}
	enumTool := ordersTool(up.URL)
	enumTool.Params[2].Schema = &tools.Schema{Type: "string", Enum: []any{"open", "paid", "refunded"}}
	_, err = e.Call(context.Background(), Call{Tool: enumTool, Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"status": "opne"}})
	if err == nil || !strings.Contains(err.Error(), `invalid_argument: argument "status" is opne, not one of its values: open, paid, refunded`) {
		t.Errorf("enum: err = %v", err)
	}
	if n := len(up.requests()); n != 0 || clock.Now() != start {
		t.Errorf("%d requests, %s waited; want none", n, clock.Now().Sub(start))
	}
	// An invoker that refuses a request itself is not retried either.
	calls := 0
	refuse := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		calls++
		return nil, &tools.ArgError{Arg: "x", Msg: "is required"}
	})
	_, err = newTestEngine(t, Options{Caller: refuse, Clock: clock}).Call(context.Background(),
		Call{Tool: statsTool("http://127.0.0.1:1"), Scope: scope, Binding: Binding{LoopResponses: true}})
	if err == nil || calls != 1 || clock.Now() != start {
		t.Errorf("refused request: err %v, %d calls, waited %s", err, calls, clock.Now().Sub(start))
	}
}

// A paginated tool called without _all_pages stops as first_page_only,
// not budget_pages; plurals are right; the action line says a read
// changed nothing and a write what it may have changed.
func TestFirstPageOnlyPluralsAndAction(t *testing.T) {
	up := newUpstream(t, 40)
	e := newTestEngine(t, Options{})
	out, v := looping(t, e, ordersTool(up.URL), nil)
	b := checkBoundary(t, v)
	if v["_stoppedBy"] != paginate.StopFirstPage || b["completion"] != "partial" || v["_likelyMoreRows"] != true ||
		!strings.HasPrefix(v["_note"].(string), "This is only the first page (25 rows)") || b["action"] != "none (read-only)" {
		t.Errorf("first page: %v %v %v %q %v", v["_stoppedBy"], b["completion"], v["_likelyMoreRows"], v["_note"], b["action"])
	}
	if out.Verdict.Summary() != "partial: 25 rows, 1 request, stopped by first_page_only" {
		t.Errorf("summary %q", out.Verdict.Summary())
	}

	one := newUpstream(t, 1)
	out, v = looping(t, e, ordersTool(one.URL), map[string]any{"_all_pages": true})
	if out.Verdict.Summary() != "complete: 1 row, 1 request, stopped by complete_total_reached" ||
		v["_note"] != "Complete: all 1 row; the server reported no more." {
		t.Errorf("one row: %q, note %q", out.Verdict.Summary(), v["_note"])
	}
	b = checkBoundary(t, v)
	if b["lastCursor"] != nil || b["uninspected"] != "none" || b["pageSize"] != 100.0 {
		t.Errorf("complete boundary %v", b)
	}

	caller := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		return &tools.Response{Status: 200, Body: []byte(`{"id":"t_1","state":"sent"}`)}, nil
	})
	send := &tools.Tool{ID: "m.send", Provider: "m", Name: "send_message", Method: "POST", Path: "/messages", Origin: "http://127.0.0.1:1"}
	_, v = looping(t, newTestEngine(t, Options{Caller: caller}), send, nil)
	if b := checkBoundary(t, v); b["action"] != "may have changed data: POST /messages (1 request)" {
		t.Errorf("write action %v", b["action"])
	}
}

// The boundary carries every key whatever the verdict, and the typed
// verdict agrees with what the envelope says.
func TestBoundaryAlwaysComplete(t *testing.T) {
	up := newUpstream(t, 130)
	e := newTestEngine(t, Options{Budget: paginate.Budget{Pages: 1}})
	for name, args := range map[string]map[string]any{
		"budget":     {"_all_pages": true},
		"first page": {},
		"fan-out":    {"_for_each": map[string]any{"key": "property_id", "values": []any{"p_1", "p_3"}}},
	} {
		tool := ordersTool(up.URL)
		if name == "fan-out" {
			tool = bookingsTool(up.URL)
		}
		out, v := looping(t, e, tool, args)
		b := checkBoundary(t, v)
		if b["completion"] != string(out.Verdict.Completion) || v["_pagingComplete"] != out.Verdict.PagingComplete() ||
			v["_note"] != out.Verdict.Note || v["_stoppedBy"] != out.Verdict.StopReason {
			t.Errorf("%s: envelope %v disagrees with the verdict %+v", name, v, out.Verdict)
		}
		if out.Verdict.Completion != Complete && b["uninspected"] == "none" {
			t.Errorf("%s: %s but nothing uninspected", name, out.Verdict.Completion)
		}
	}
}

// Fanning out over a tool that answers one object per value (get_order
// for several ids) gives one row per value, tagged, projected by _fields.
func TestFanOutOverObjects(t *testing.T) {
	e, cat := demoEngine(t)
	_, lv := looping(t, e, mustTool(t, cat, "acme.list_orders"), map[string]any{"per_page": 2})
	var orderIDs []any
	for _, r := range lv["data"].([]any) {
		orderIDs = append(orderIDs, r.(map[string]any)["id"])
	}
	out, v := looping(t, e, mustTool(t, cat, "acme.get_order"), map[string]any{
		"_fields": []any{"id", "total"}, "_for_each": map[string]any{"key": "order_id", "values": orderIDs}})
	b := checkBoundary(t, v)
	items, _ := v["items"].([]any)
	if len(items) != 2 || b["completion"] != "complete" || b["records"] != 2.0 || out.Verdict.Requests != 2 {
		t.Fatalf("view %s", out.View)
	}
	for i, it := range items {
		m := it.(map[string]any)
		if m["id"] != orderIDs[i] || m["order_id"] != orderIDs[i] || m["total"] == nil || m["line_items"] != nil {
			t.Errorf("row %d = %v; want the order projected to id and total, tagged", i, m)
		}
	}
}
