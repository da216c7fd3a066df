package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// upstream is a small paged API: /orders (page + per_page, {data,total}),
// /bookings (per property, page + per_page), /search (POST body with
// page), and /stats (not paged). It records every request.
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // method, path, query and body of every request
}

func order(i int) string {
	status := []string{"open", "paid", "refunded"}[i%3]
	return fmt.Sprintf(`{"id":"ord_%04d","status":%q,"total":%d,"customer":{"id":"c_%d","name":"Customer %d"}}`, i, status, (i*37)%500, i%40, i%40)
}

func newUpstream(t *testing.T, nOrders int) *upstream {
	u := &upstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.seen = append(u.seen, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		u.mu.Unlock()
		q := r.URL.Query()
		page, _ := strconv.Atoi(q.Get("page"))
		per, _ := strconv.Atoi(q.Get("per_page"))
		if page < 1 {
			page = 1
		}
		if per < 1 {
			per = 25
		}
		per = min(per, 100)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/orders":
			var items []string
			for i := (page-1)*per + 1; i <= min(page*per, nOrders); i++ {
				items = append(items, order(i))
			}
			fmt.Fprintf(w, `{"data":[%s],"total":%d}`, strings.Join(items, ","), nOrders)
		case strings.HasPrefix(r.URL.Path, "/properties/"):
			pid := strings.Split(r.URL.Path, "/")[2]
			if pid == "p_bad" {
				w.WriteHeader(http.StatusNotFound)
				io.WriteString(w, `{"error":"no such property"}`)
				return
			}
			n := map[string]int{"p_1": 3, "p_2": 130, "p_3": 0}[pid]
			var items []string
			for i := (page-1)*per + 1; i <= min(page*per, n); i++ {
				items = append(items, fmt.Sprintf(`{"id":"b_%s_%d","nights":%d}`, pid, i, i%7+1))
			}
			fmt.Fprintf(w, `{"data":[%s],"total":%d}`, strings.Join(items, ","), n)
		case r.URL.Path == "/stats":
			io.WriteString(w, `{"orders":2400,"customers":1337,"region":"eu","nested":{"a":1}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.seen...)
}

func intSchema(max float64) *tools.Schema { return &tools.Schema{Type: "integer", Maximum: &max} }

func ordersTool(origin string) *tools.Tool {
	return &tools.Tool{
		ID: "acme.list_orders", Provider: "acme", Name: "list_orders", Kind: tools.KindAPI,
		Method: "GET", Path: "/orders", Origin: origin,
		Params: []tools.Param{
			{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
			{Name: "per_page", In: tools.InQuery, Schema: intSchema(100)},
			{Name: "status", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
		},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"data":  {Type: "array", Items: &tools.Schema{Type: "object"}},
			"total": {Type: "integer"},
		}},
	}
}

func bookingsTool(origin string) *tools.Tool {
	t := ordersTool(origin)
	t.ID, t.Name, t.Path = "acme.list_bookings", "list_bookings", "/properties/{property_id}/bookings"
	t.Params = append([]tools.Param{{Name: "property_id", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}}}, t.Params[:2]...)
	return t
}

func statsTool(origin string) *tools.Tool {
	return &tools.Tool{ID: "acme.get_stats", Provider: "acme", Name: "get_stats", Method: "GET", Path: "/stats", Origin: origin}
}

func newTestEngine(t *testing.T, opt Options) *Engine {
	t.Helper()
	if opt.Caller == nil {
		opt.Caller = tools.NewInvoker(tools.InvokerOptions{})
	}
	if opt.Clock == nil {
		opt.Clock = paginate.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	}
	return New(opt)
}

func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("view is not a JSON object: %v\n%s", err, b)
	}
	return m
}

var scope = Scope{Org: "o1", Thread: "t1"}

func TestAllPagesComplete(t *testing.T) {
	up := newUpstream(t, 1900) // 19 pages of 100: inside the 20-page budget
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	var reports []Progress
	out, err := e.Call(context.Background(), Call{
		Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args:     map[string]any{"_all_pages": true, "_fields": []any{"id", "total"}, "_filter": []any{map[string]any{"field": "status", "op": "eq", "value": "open"}}},
		Progress: func(p Progress) { reports = append(reports, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	if v["_pagingComplete"] != true || v["_likelyMoreRows"] != false || v["_stoppedBy"] != "complete_total_reached" && v["_stoppedBy"] != "complete_short_page" {
		t.Errorf("verdict: %v %v %v", v["_pagingComplete"], v["_likelyMoreRows"], v["_stoppedBy"])
	}
	// 19 pages and the closing probe of page 20: the total was reached on
	// a full page.
	if vd := out.Verdict; vd.Completion != Complete || vd.Requests != 20 || vd.Rows != 633 || out.Truncated {
		t.Errorf("outcome: completion=%v requests=%d rows=%d truncated=%v; want complete 20 633 false", vd.Completion, vd.Requests, vd.Rows, out.Truncated)
	}
	if len(reports) != 19 || reports[18].Items != 1900 || reports[18].Page != 19 {
		t.Errorf("progress: %d reports, last %+v", len(reports), reports[len(reports)-1])
	}
	b := v["_boundary"].(map[string]any)
	if b["records"] != 1900.0 || b["pages"] != 19.0 || b["completion"] != "complete" || b["pageSize"] != 100.0 {
		t.Errorf("boundary = %v", b)
	}
	if id, _ := v["_resultId"].(string); !strings.HasPrefix(id, "r_") {
		t.Errorf("_resultId = %v", v["_resultId"])
	}
	// The stored result is the full, unprojected set: a query can filter
	// on a field the view dropped.
	args, _ := json.Marshal(map[string]any{"resultId": v["_resultId"], "filter": []any{map[string]any{"field": "customer.name", "op": "eq", "value": "Customer 7"}}, "limit": 500})
	q, err := e.opt.Results.Call(context.Background(), scope, QueryToolResult, args)
	if err != nil {
		t.Fatal(err)
	}
	if m := decode(t, q); m["matched"] != 48.0 {
		t.Errorf("query matched %v; want 48", m["matched"])
	}
}

func TestReservedArgumentsNeverReachUpstream(t *testing.T) {
	up := newUpstream(t, 120)
	e := newTestEngine(t, Options{})
	reserved := map[string]any{"_all_pages": true, "_fields": []any{"id"}, "_refresh": true,
		"_filter": []any{map[string]any{"field": "id", "op": "exists"}}, "status": "open"}
	for _, looping := range []bool{true, false} {
		if _, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Args: reserved,
			Binding: Binding{LoopResponses: looping}}); err != nil {
			t.Fatal(err)
		}
	}
	fe := map[string]any{"_for_each": map[string]any{"key": "property_id", "values": []any{"p_1", "p_3"}}}
	if _, err := e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Args: fe, Binding: Binding{LoopResponses: true}}); err != nil {
		t.Fatal(err)
	}
	reqs := up.requests()
	if len(reqs) < 4 {
		t.Fatalf("only %d requests recorded", len(reqs))
	}
	for _, r := range reqs {
		for _, name := range reservedArgs {
			if strings.Contains(r, name) {
				t.Errorf("request carries %s: %s", name, r)
			}
		}
	}
}

func TestForEach(t *testing.T) {
	up := newUpstream(t, 0)
	e := newTestEngine(t, Options{})
	var fanout []ForEachProgress
	out, err := e.Call(context.Background(), Call{
		Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_all_pages": true, "_for_each": map[string]any{"key": "property_id",
			"values": []any{"p_1", "p_2", "p_1", "p_3", "p_bad"}}},
		Progress: func(p Progress) {
			if p.ForEach != nil {
				fanout = append(fanout, *p.ForEach)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	rows := v["data"].([]any)
	if len(rows) != 133 {
		t.Fatalf("rows = %d; want 133 (3 + 130 + 0)", len(rows))
	}
	if got := rows[0].(map[string]any)["property_id"]; got != "p_1" {
		t.Errorf("first row not tagged: %v", rows[0])
	}
	errs := v["_forEachErrors"].([]any)
	if len(errs) != 1 || errs[0].(map[string]any)["value"] != "p_bad" || !strings.Contains(errs[0].(map[string]any)["error"].(string), "404") {
		t.Errorf("_forEachErrors = %v", errs)
	}
	if v["_pagingComplete"] != false {
		t.Errorf("a failed value must make the result partial")
	}
	if len(fanout) == 0 || fanout[0].Total != 4 {
		t.Errorf("fan-out progress = %+v", fanout)
	}
}

func TestForEachErrors(t *testing.T) {
	up := newUpstream(t, 0)
	e := newTestEngine(t, Options{})
	_, err := e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_for_each": map[string]any{"key": "property", "values": []any{"p_1"}}}})
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeInvalidForEachKey || !strings.Contains(te.Message, "page, per_page, property_id") {
		t.Errorf("err = %v; want invalid_for_each_key listing the parameters", err)
	}
	_, err = e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_for_each": map[string]any{"key": "property_id", "values": []any{"p_bad"}}}})
	if !errors.As(err, &te) || te.Code != CodeUpstream {
		t.Errorf("every value failing: err = %v", err)
	}
	_, err = e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_for_each": map[string]any{"key": "page", "values": []any{"one"}}}})
	if !errors.As(err, &te) || te.Code != CodeInvalidForEach || !strings.Contains(te.Message, "integer") {
		t.Errorf("uncoercible value: err = %v", err)
	}
}

func TestCoerceForEachValues(t *testing.T) {
	tool := ordersTool("http://x")
	got, err := forEachValues(tool, &ForEach{Key: "page", Values: []any{"1", 1.0, "2", json.Number("3")}}, 50)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]any{1.0, 2.0, 3.0}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := forEachValues(tool, &ForEach{Key: "status", Values: make([]any, 0)}, 50); err != nil {
		t.Errorf("empty values are caught by the parser, not here: %v", err)
	}
	many := make([]any, 51)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	if _, err := forEachValues(tool, &ForEach{Key: "status", Values: many}, 50); err == nil {
		t.Errorf("51 values accepted")
	}
}

func TestFirstPageOnlySaysMore(t *testing.T) {
	up := newUpstream(t, 300)
	e := newTestEngine(t, Options{})
	out, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"per_page": 50.0}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	if v["_pagingComplete"] != false || v["_likelyMoreRows"] != true || !strings.Contains(v["_note"].(string), "_all_pages") {
		t.Errorf("single page verdict: %v %v %q", v["_pagingComplete"], v["_likelyMoreRows"], v["_note"])
	}
	if len(up.requests()) != 1 {
		t.Errorf("requests = %v", up.requests())
	}
}

func TestUnmatchedFields(t *testing.T) {
	up := newUpstream(t, 10)
	e := newTestEngine(t, Options{})
	out, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_all_pages": true, "_fields": []any{"id", "customer_name", "amount"}}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	um := v["_unmatchedFields"].(map[string]any)
	if diff := cmp.Diff([]any{"customer_name", "amount"}, um["paths"]); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{"customer", "id", "status", "total"}, um["availableKeys"]); diff != "" {
		t.Errorf("availableKeys (-want +got):\n%s", diff)
	}
	if um["sample"].(map[string]any)["id"] != "ord_0001" {
		t.Errorf("sample = %v", um["sample"])
	}
	row := v["data"].([]any)[0].(map[string]any)
	if row["customer_name"] != nil || row["id"] != "ord_0001" {
		t.Errorf("projected row = %v", row)
	}
}

func TestBudgetSaysPartial(t *testing.T) {
	up := newUpstream(t, 2400)
	e := newTestEngine(t, Options{Budget: paginate.Budget{Pages: 3}})
	out, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_all_pages": true, "_fields": []any{"id"}}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	if v["_pagingComplete"] != false || v["_likelyMoreRows"] != true || v["_stoppedBy"] != "budget_pages" {
		t.Errorf("verdict: %v %v %v", v["_pagingComplete"], v["_likelyMoreRows"], v["_stoppedBy"])
	}
	if note := v["_note"].(string); !strings.Contains(note, "3 pages") || !strings.Contains(note, "Narrow") {
		t.Errorf("note = %q", note)
	}
	if b := v["_boundary"].(map[string]any); b["completion"] != "partial" || b["uninspected"] == nil {
		t.Errorf("boundary = %v", b)
	}
}

func TestNotPaginatedAndPlainBinding(t *testing.T) {
	up := newUpstream(t, 0)
	e := newTestEngine(t, Options{})
	out, err := e.Call(context.Background(), Call{Tool: statsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_fields": []any{"orders", "nested.a"}}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	if v["orders"] != 2400.0 || v["customers"] != nil || v["nested"].(map[string]any)["a"] != 1.0 || v["_pagingComplete"] != nil || v["_boundary"].(map[string]any)["completion"] != "single_response" {
		t.Errorf("projected object = %s", out.View)
	}
	plain, err := e.Call(context.Background(), Call{Tool: statsTool(up.URL), Scope: scope, Args: map[string]any{"_fields": []any{"orders"}}})
	if err != nil {
		t.Fatal(err)
	}
	// The payload as it is, no verdict, and a note that _fields was not
	// honoured (issue 21: it was dropped without a word).
	pv := decode(t, plain.View)
	note, _ := pv["_note"].(string)
	delete(pv, "_note")
	if want := map[string]any{"orders": 2400.0, "customers": 1337.0, "region": "eu", "nested": map[string]any{"a": 1.0}}; !reflect.DeepEqual(pv, want) || plain.Verdict != nil {
		t.Errorf("plain binding view = %s", plain.View)
	}
	if !strings.Contains(note, "_fields was ignored") || !strings.Contains(note, "looping is off") {
		t.Errorf("plain binding note %q", note)
	}
}

func TestPlainCallIsSizeGuarded(t *testing.T) {
	up := newUpstream(t, 2400)
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{}), ViewChars: 2000})
	out, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Args: map[string]any{"per_page": 100.0}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	if !out.Truncated || v["_truncated"] != true || v["_totalItems"] != 100.0 || out.ResultID == "" {
		t.Errorf("guarded view: truncated=%v keys=%v", out.Truncated, v)
	}
	if len(out.View) > 2000 {
		t.Errorf("view of %d bytes over a 2000-character budget", len(out.View))
	}
}

// _max_chars is the caller's budget for one result: it replaces the
// engine's view budget for that call, looping or not, and is never sent
// upstream.
func TestMaxCharsCutsOneResult(t *testing.T) {
	up := newUpstream(t, 2400)
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	for _, b := range []Binding{{}, {LoopResponses: true}} {
		out, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: b,
			Args: map[string]any{"per_page": 100.0, "_max_chars": 1500.0}})
		if err != nil {
			t.Fatal(err)
		}
		if !out.Truncated || out.ResultID == "" || len([]rune(string(out.View))) > 1500 {
			t.Errorf("looping=%v: truncated=%v, %d characters for a budget of 1500", b.LoopResponses, out.Truncated, len([]rune(string(out.View))))
		}
		wide, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: b, Args: map[string]any{"per_page": 100.0}})
		if err != nil || wide.Truncated {
			t.Errorf("looping=%v: without _max_chars the default budget holds 100 orders: truncated=%v err=%v", b.LoopResponses, wide.Truncated, err)
		}
	}
	for _, r := range up.requests() {
		if strings.Contains(r, "max_chars") {
			t.Errorf("_max_chars went upstream: %s", r)
		}
	}
}

// A call cancelled mid-walk (an MCP client's notifications/cancelled)
// sends no further request, and what it fetched is a partial result with
// its verdict, stored under a _resultId — through the dataset cache's
// collapsed walks too — and never cached as a dataset.
func TestCancelledWalkIsAPartialResult(t *testing.T) {
	up := newUpstream(t, 2400)
	cache, err := NewDatasetCache(CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	results := NewRetrieval(RetrievalOptions{})
	e := newTestEngine(t, Options{Results: results, Cache: cache})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// One request at a time: the pages a walk fetches ahead are sent
	// before the cancellation, and the count below is of the requests
	// after it.
	out, err := e.Call(ctx, Call{Tool: ordersTool(up.URL), Scope: scope,
		Binding: Binding{LoopResponses: true, Budget: paginate.Budget{Concurrency: 1}},
		Args:    map[string]any{"_all_pages": true, "_fields": []any{"id"}},
		Progress: func(p Progress) {
			if p.Page == 2 {
				cancel()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	// The cancellation reaches a walk the cache collapses for its callers
	// as the last of them leaves, so the page requested meanwhile may
	// still come back (and is kept); nothing is requested after it.
	v := out.Verdict
	if v.Completion != Partial || v.StopReason != paginate.StopCancelled || v.Pages < 2 || v.Pages > 3 || v.Records != 100*v.Pages || !v.LikelyMore {
		t.Errorf("verdict = %s (%d pages, %d records)", v.Summary(), v.Pages, v.Records)
	}
	if n := len(up.requests()); n > v.Pages+1 {
		t.Errorf("%d upstream requests for %d pages: requests went on after the cancellation", n, v.Pages)
	}
	if !strings.Contains(v.Note, "cancelled") || out.ResultID == "" {
		t.Errorf("note %q, result id %q", v.Note, out.ResultID)
	}
	q, _ := json.Marshal(map[string]any{"resultId": out.ResultID, "limit": 1})
	if _, err := results.Call(context.Background(), scope, QueryToolResult, q); err != nil {
		t.Errorf("the partial rows are not readable: %v", err)
	}
	if st := cache.Stats(); st.Stores != 0 {
		t.Errorf("a cancelled walk was cached: %+v", st)
	}
}

func TestCacheThroughEngine(t *testing.T) {
	up := newUpstream(t, 250)
	clock := paginate.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cache, err := NewDatasetCache(CacheOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, Options{Cache: cache, Clock: clock})
	call := func(args map[string]any) map[string]any {
		out, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true}, Args: args})
		if err != nil {
			t.Fatal(err)
		}
		return decode(t, out.View)
	}
	first := call(map[string]any{"_all_pages": true, "_fields": []any{"id"}})
	n := len(up.requests())
	second := call(map[string]any{"_all_pages": true, "_fields": []any{"total"}, "_filter": []any{map[string]any{"field": "total", "op": "gt", "value": 100}}})
	if len(up.requests()) != n || first["_cache"] != nil || second["_cache"] == nil {
		t.Errorf("second call: %d new requests, _cache=%v", len(up.requests())-n, second["_cache"])
	}
	if !strings.Contains(second["_note"].(string), "_refresh") {
		t.Errorf("hit note = %q", second["_note"])
	}
	call(map[string]any{"_all_pages": true, "_refresh": true})
	if len(up.requests()) == n {
		t.Errorf("_refresh did not walk again")
	}
}

func TestForEachDropsFirstValueTotals(t *testing.T) {
	up := newUpstream(t, 0)
	e := newTestEngine(t, Options{})
	out, err := e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_all_pages": true, "_for_each": map[string]any{"key": "property_id", "values": []any{"p_1", "p_2"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if v := decode(t, out.View); v["total"] != nil {
		t.Errorf("merged fan-out keeps the first value's total %v", v["total"])
	}
}

// A tool with no response schema and an array under an unusual name keeps
// its rows (detection cannot vouch for the array; the engine still finds it).
func TestUndeclaredArrayKeepsRows(t *testing.T) {
	body := `{"files":[{"path":"a","size":1},{"path":"b","size":2}],"count":2}`
	caller := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		return &tools.Response{Status: 200, Body: []byte(body)}, nil
	})
	e := newTestEngine(t, Options{Caller: caller})
	tool := &tools.Tool{ID: "f.list", Provider: "f", Name: "list", Kind: tools.KindMCP, Effect: tools.EffectRead} // readOnlyHint
	out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"_fields": []any{"path"}, "_filter": []any{map[string]any{"field": "size", "op": "gt", "value": 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	if diff := cmp.Diff([]any{map[string]any{"path": "b"}}, v["files"]); diff != "" || v["count"] != 2.0 {
		t.Errorf("files (-want +got):\n%s\nview %s", diff, out.View)
	}
}

func TestScalarPayloadGetsAnEnvelope(t *testing.T) {
	for _, body := range []string{`"queued"`, `42`, `not json at all`, ``} {
		caller := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
			return &tools.Response{Status: 200, Body: []byte(body)}, nil
		})
		e := newTestEngine(t, Options{Caller: caller})
		tool := &tools.Tool{ID: "s.go", Provider: "s", Name: "go", Method: "POST", Path: "/go", Origin: "http://127.0.0.1:1"}
		out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true}})
		if err != nil {
			t.Errorf("%q: %v", body, err)
			continue
		}
		v := decode(t, out.View)
		b, _ := v["_boundary"].(map[string]any)
		if v["_pagingComplete"] != nil || b["completion"] != "single_response" || b["records"] != nil ||
			strings.Contains(v["_note"].(string), "0 rows") || strings.Contains(v["_note"].(string), "reported no more") {
			t.Errorf("%q: view %s", body, out.View)
		}
	}
}
