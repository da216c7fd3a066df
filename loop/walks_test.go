package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// The shapes of issue 21 that the walker and the verdict own, each a
// plain test against a loopback upstream: what a hostile user found false,
// and what the verdict must say instead.

// rowsJSON renders {"id": …} rows.
func rowsJSON(ids []string) string {
	rows := make([]string, len(ids))
	for i, id := range ids {
		rows[i] = fmt.Sprintf(`{"id":%q}`, id)
	}
	return "[" + strings.Join(rows, ",") + "]"
}

func pageTool(origin string, sizeMax float64) *tools.Tool {
	return itemsTool(origin,
		tools.Param{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		tools.Param{Name: "per_page", In: tools.InQuery, Schema: intSchema(sizeMax)})
}

// A page-number API that caps the page size at 50 and computes page n's
// first row from the size asked ((n-1) × per_page): asked for 100, page 2
// starts at row 101, so a walk that kept asking for 100 would skip rows
// 51–100 and call 70 of 120 rows complete. The walk sees 50 rows come back
// for 100 asked on a page that is not the last, and walks on at 50.
func TestPageSizeCappedWithOffsetsFromTheSizeAsked(t *testing.T) {
	all := ids(120)
	serve := func(withTotal bool) *counted {
		return newCounted(t, func(w http.ResponseWriter, r *http.Request) {
			q := r.URL.Query()
			page, _ := strconv.Atoi(q.Get("page"))
			page = max(page, 1)
			asked, _ := strconv.Atoi(q.Get("per_page"))
			start := min((page-1)*asked, len(all))
			end := min(start+min(asked, 50), len(all))
			extra := ""
			if withTotal {
				extra = fmt.Sprintf(`,"total":%d`, len(all))
			}
			fmt.Fprintf(w, `{"data":%s%s}`, rowsJSON(all[start:end]), extra)
		})
	}
	for _, withTotal := range []bool{false, true} {
		t.Run(fmt.Sprintf("total=%v", withTotal), func(t *testing.T) {
			up := serve(withTotal)
			out, v := looping(t, newTestEngine(t, Options{}), pageTool(up.URL, 100), map[string]any{"_all_pages": true})
			b := checkBoundary(t, v)
			if got := len(v["data"].([]any)); got != 120 || b["completion"] != "complete" {
				t.Fatalf("%d rows, completion %v, note %q; want all 120, complete", got, b["completion"], v["_note"])
			}
			if !strings.HasPrefix(v["_note"].(string), "Complete: all 120 rows") {
				t.Errorf("note %q", v["_note"])
			}
			if int(up.n.Load()) != out.Verdict.Requests {
				t.Errorf("boundary requests %d, upstream %d", out.Verdict.Requests, up.n.Load())
			}
		})
	}
	// The re-walk needs requests the budget does not have: partial, with
	// the stop reason that says why, never complete.
	t.Run("budget cannot hold the re-walk", func(t *testing.T) {
		up := serve(true)
		out, v := looping(t, newTestEngine(t, Options{Budget: paginate.Budget{Requests: 2}}), pageTool(up.URL, 100),
			map[string]any{"_all_pages": true})
		b := checkBoundary(t, v)
		if b["completion"] != "partial" || v["_stoppedBy"] != paginate.StopPageSizeNotHonoured || v["_likelyMoreRows"] != true {
			t.Fatalf("completion %v, stopped by %v; want partial, %s", b["completion"], v["_stoppedBy"], paginate.StopPageSizeNotHonoured)
		}
		if out.Verdict.Requests != 1 || !strings.Contains(v["_note"].(string), "fewer rows per page than asked") ||
			!strings.Contains(b["uninspected"].(string), "50 rows for the 100 asked") {
			t.Errorf("requests %d, note %q, uninspected %q", out.Verdict.Requests, v["_note"], b["uninspected"])
		}
	})
}

// cursorServer serves rowsOf(value) rows per value in pages of 10 with
// next_cursor.
func cursorServer(t *testing.T, rowsOf func(value string) int) *counted {
	return newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		v := q.Get("list")
		rowsPer := rowsOf(v)
		at, _ := strconv.Atoi(q.Get("cursor"))
		var page []string
		for i := at; i < min(at+10, rowsPer); i++ {
			page = append(page, fmt.Sprintf("%s-%02d", v, i))
		}
		next := "null"
		if at+10 < rowsPer {
			next = strconv.Quote(strconv.Itoa(at + 10))
		}
		fmt.Fprintf(w, `{"data":%s,"next_cursor":%s}`, rowsJSON(page), next)
	})
}

func cursorTool(origin string) *tools.Tool {
	return &tools.Tool{
		ID: "x.list_items", Provider: "x", Name: "list_items", Kind: tools.KindAPI,
		Method: "GET", Path: "/items", Origin: origin, Params: []tools.Param{
			{Name: "list", In: tools.InQuery, Required: true, Schema: &tools.Schema{Type: "string"}},
			{Name: "cursor", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
			{Name: "limit", In: tools.InQuery, Schema: intSchema(10)},
		},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"data":        {Type: "array", Items: &tools.Schema{Type: "object"}},
			"next_cursor": {Type: "string"},
		}},
	}
}

// 50 values of 3 pages each (or of 3 to 6 pages) under a request budget
// that runs out while values are mid-walk: every value ends in exactly one
// of succeeded (all its rows), _forEachPartial (its rows so far, why it
// stopped, where it resumes), _forEachErrors or _forEachSkipped, and the
// note counts each. Values start only where the budget can still finish
// them (with the requests a value has taken set aside), so values of one
// size are never cut short, and values that grow are cut only past what
// the values before them took.
func TestForEachSharedBudgetRunsOutMidValue(t *testing.T) {
	uniform := func(string) int { return 30 }
	growing := func(v string) int { n, _ := strconv.Atoi(strings.TrimPrefix(v, "v")); return 10 * (n + 1) } // v07 has 8 pages
	for _, tc := range []struct {
		name   string
		fanOut int
		rowsOf func(string) int
		budget int
	}{{"one at a time", 1, uniform, 64}, {"four at a time", 4, uniform, 64},
		// 1+2+…+10 pages, then v10 (11 pages) starts with the 10 its
		// largest neighbour took, all that is left.
		{"growing values, one at a time", 1, growing, 65}, {"growing values, four at a time", 4, growing, 65}} {
		t.Run(tc.name, func(t *testing.T) {
			fanOut := tc.fanOut
			up := cursorServer(t, tc.rowsOf)
			values := make([]any, 50)
			for i := range values {
				values[i] = fmt.Sprintf("v%02d", i)
			}
			e := newTestEngine(t, Options{FanOut: fanOut, Budget: paginate.Budget{Requests: tc.budget}})
			out, v := looping(t, e, cursorTool(up.URL), map[string]any{"_all_pages": true,
				"_for_each": map[string]any{"key": "list", "values": values}})
			b := checkBoundary(t, v)
			rows := map[string]int{}
			for _, r := range v["data"].([]any) {
				rows[r.(map[string]any)["list"].(string)]++
			}
			named := map[string]string{}
			for _, list := range []string{"_forEachErrors", "_forEachSkipped", "_forEachPartial"} {
				entries, _ := v[list].([]any)
				for _, e := range entries {
					val := e.(map[string]any)["value"].(string)
					if prev, ok := named[val]; ok {
						t.Errorf("%s is in %s and %s", val, prev, list)
					}
					named[val] = list
				}
			}
			succeeded := 0
			for _, val := range values {
				val := val.(string)
				switch named[val] {
				case "":
					succeeded++
					if rows[val] != tc.rowsOf(val) {
						t.Errorf("%s is named nowhere, so it succeeded, yet it has %d of its %d rows", val, rows[val], tc.rowsOf(val))
					}
				case "_forEachSkipped":
					if rows[val] != 0 {
						t.Errorf("%s was skipped, yet it has %d rows", val, rows[val])
					}
				case "_forEachPartial":
					if rows[val] >= tc.rowsOf(val) {
						t.Errorf("%s is partial with all %d rows", val, rows[val])
					}
				}
			}
			partial, _ := v["_forEachPartial"].([]any)
			for _, p := range partial {
				p := p.(map[string]any)
				if p["rows"] != float64(rows[p["value"].(string)]) || p["stopReason"] != paginate.StopBudgetRequests || p["resume"] == "" {
					t.Errorf("_forEachPartial entry %v; the view holds %d of its rows", p, rows[p["value"].(string)])
				}
			}
			if tc.rowsOf("v00") == tc.rowsOf("v49") && len(partial) > 0 {
				t.Errorf("values of one size: %d values cut short, want none (%v)", len(partial), partial)
			}
			if len(partial) > fanOut {
				t.Errorf("%d values cut short, more than the %d running when the budget ran out", len(partial), fanOut)
			}
			if tc.rowsOf("v00") != tc.rowsOf("v49") && fanOut == 1 && len(partial) != 1 {
				// Each value takes one page more than any before it: the one
				// running when the budget ran out is cut by its last page.
				t.Errorf("growing values one at a time: %d cut short, want 1 (%v)", len(partial), partial)
			}
			note := v["_note"].(string)
			if !strings.HasPrefix(note, fmt.Sprintf("Partial: %d of 50 _for_each values succeeded", succeeded)) {
				t.Errorf("note %q; %d values succeeded", note, succeeded)
			}
			if n := len(partial); n > 0 && !strings.Contains(note, "cut short") {
				t.Errorf("note %q does not count the %d values cut short", note, n)
			}
			if b["completion"] != "partial" || int(up.n.Load()) != out.Verdict.Requests || out.Verdict.Requests > tc.budget {
				t.Errorf("completion %v, requests %d (upstream %d, budget %d)", b["completion"], out.Verdict.Requests, up.n.Load(), tc.budget)
			}
			if out.Verdict.Succeeded() != succeeded {
				t.Errorf("Verdict.Succeeded() = %d, want %d", out.Verdict.Succeeded(), succeeded)
			}
		})
	}
}

// An offset walk over a collection losing rows at its head between pages,
// with no total and no duplicate to show it: the overlapping pages see the
// row the walk ended on move, so the verdict is unstable ("rows may be
// missing"), never complete. The collection a page sees has lost one row
// at its head for every page before it (the walk steps 4 rows a page),
// whenever that page is fetched: a walk fetching ahead sees what one
// fetching a page at a time sees.
func TestOffsetWalkLosingRowsAtTheHead(t *testing.T) {
	all := ids(40)
	c := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		list := all[min(off/4, len(all)):]
		end := min(off+5, len(list))
		fmt.Fprintf(w, `{"data":%s}`, rowsJSON(list[min(off, end):end]))
	})
	tool := itemsTool(c.URL,
		tools.Param{Name: "offset", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		tools.Param{Name: "limit", In: tools.InQuery, Schema: intSchema(5)})
	out, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true})
	b := checkBoundary(t, v)
	if b["completion"] != "unstable" || v["_pagingComplete"] != false || v["_likelyMoreRows"] != true || !out.Verdict.Shifted {
		t.Fatalf("completion %v, shifted %v, note %q; want unstable", b["completion"], out.Verdict.Shifted, v["_note"])
	}
	note := v["_note"].(string)
	if !strings.Contains(note, "rows moved across a page boundary") || !strings.Contains(note, "may be missing") ||
		strings.Contains(note, "Complete") {
		t.Errorf("note %q", note)
	}
	if b["duplicates"] != float64(0) {
		t.Errorf("duplicates %v: the shift shows without any repeated row", b["duplicates"])
	}
}

// An offset walk over a collection that does not change: the overlapping
// pages cost one row a page, and the end the walk counted (a short page
// of the size it chose and saw honoured) is confirmed by one closing
// probe, counted in the boundary and the activity log. Without a total
// the walk knows no end, so it fetches one page ahead at most: the page
// after the short one (27) was asked for while it came back, is never
// read, and counts as a request (unused). The upstream holds the short
// page back until that request has arrived, so that it is always sent.
func TestOffsetWalkOverlapAndClosingProbe(t *testing.T) {
	all := ids(23)
	var mu sync.Mutex
	var offsets []int
	past := make(chan struct{}) // the request past the end arrived
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		mu.Lock()
		offsets = append(offsets, off)
		mu.Unlock()
		switch off {
		case 27:
			close(past)
		case 18:
			select {
			case <-past:
			case <-time.After(10 * time.Second): // not sent: the offsets below say so
			}
		}
		end := min(off+10, len(all))
		fmt.Fprintf(w, `{"data":%s}`, rowsJSON(all[min(off, end):end]))
	})
	tool := itemsTool(up.URL,
		tools.Param{Name: "offset", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		tools.Param{Name: "limit", In: tools.InQuery, Schema: intSchema(10)})
	log := &countingActivity{}
	inv := tools.NewInvoker(tools.InvokerOptions{Log: tools.NewActivityLog(log, 1)})
	e := New(Options{Caller: inv})
	out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true}, Args: map[string]any{"_all_pages": true}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	b := checkBoundary(t, v)
	// Pages at 0, 9 and 18 (each re-reads the row before), the third short
	// at the size trawl chose: the end; the probe at 22 finds only r23; 27
	// was fetched ahead.
	mu.Lock()
	slices.Sort(offsets)
	mu.Unlock()
	if want := []int{0, 9, 18, 22, 27}; !slices.Equal(offsets, want) {
		t.Errorf("offsets %v, want %v", offsets, want)
	}
	if b["completion"] != "complete" || len(v["data"].([]any)) != 23 || b["pages"] != float64(3) || b["probes"] != float64(1) ||
		b["unused"] != float64(1) || b["requests"] != float64(5) {
		t.Errorf("boundary %v", b)
	}
	if n := log.count(); n != 5 {
		t.Errorf("activity log has %d requests, want 5 (the probe and the page fetched ahead among them)", n)
	}
}

// countingActivity counts activity records.
type countingActivity struct {
	mu sync.Mutex
	n  int
}

func (a *countingActivity) AppendActivity(context.Context, tools.Activity) error {
	a.mu.Lock()
	a.n++
	a.mu.Unlock()
	return nil
}

func (a *countingActivity) ListActivity(context.Context, string, int) ([]tools.Activity, error) {
	return nil, nil
}

func (a *countingActivity) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// Issue 21's smaller false statements, each made true.

// A total that ignores the filter the call sends (the server reports every
// row, the filter keeps 20): the walk saw nothing change, so its note must
// not say the collection changed — only that the total disagrees, and why
// it may.
func TestTotalThatIgnoresTheFilterIsNotAChange(t *testing.T) {
	var open []string
	for i := range 100 {
		if i%5 == 0 {
			open = append(open, fmt.Sprintf("r%03d", i))
		}
	}
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		page, _ := strconv.Atoi(q.Get("page"))
		page = max(page, 1)
		start := min((page-1)*10, len(open))
		end := min(start+10, len(open))
		fmt.Fprintf(w, `{"data":%s,"total":100}`, rowsJSON(open[start:end])) // every row, not the filtered ones
	})
	tool := pageTool(up.URL, 10)
	tool.Params = append(tool.Params, tools.Param{Name: "status", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}})
	out, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true, "status": "open"})
	b := checkBoundary(t, v)
	note := v["_note"].(string)
	if b["completion"] != "unstable" || len(v["data"].([]any)) != 20 || b["reportedTotal"] != float64(100) {
		t.Fatalf("completion %v, %d rows, reported %v", b["completion"], len(v["data"].([]any)), b["reportedTotal"])
	}
	if strings.Contains(note, "but the collection changed during the walk") || !strings.Contains(note, "does not count what this call returns") ||
		!strings.Contains(note, "ignores a filter") || out.Verdict.Shifted {
		t.Errorf("note %q", note)
	}
	if u := b["uninspected"].(string); strings.Contains(u, "moved across a page boundary") {
		t.Errorf("uninspected %q blames a change the walk never saw", u)
	}
}

// A 403 on a later page: the boundary says authorization errors are not
// retried, and the note no longer tells the model to call again.
func TestLaterPageRefusedIsNotCalledAgain(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") != "" {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, `{"message":"missing scope"}`)
			return
		}
		fmt.Fprintf(w, `{"data":%s,"next_cursor":"10"}`, rowsJSON(ids(10)))
	})
	out, v := looping(t, newTestEngine(t, Options{}), cursorTool(up.URL), map[string]any{"_all_pages": true, "list": "a"})
	b := checkBoundary(t, v)
	note := v["_note"].(string)
	if b["completion"] != "partial" || v["_stoppedBy"] != paginate.StopHTTPError || out.Verdict.Status != 403 {
		t.Fatalf("completion %v, stopped by %v, status %d", b["completion"], v["_stoppedBy"], out.Verdict.Status)
	}
	if strings.Contains(note, "call again to retry") || strings.Contains(note, "may succeed") ||
		!strings.Contains(note, "authorization errors are not retried") || !strings.Contains(b["uninspected"].(string), "not retried") {
		t.Errorf("note %q, uninspected %q", note, b["uninspected"])
	}
	if up.n.Load() != 2 {
		t.Errorf("%d requests: the 403 was retried", up.n.Load())
	}
}

// A text result cut by the size guard: _shownChars and _totalChars count
// the text's own characters, and fetchToolResult reads the kept text (not
// its JSON wrapper, escapes and all), so reading on at _shownChars gives
// exactly the rest.
func TestTextResultOffsetsMatchShownChars(t *testing.T) {
	text := strings.Repeat("line \"quoted\"\ttab é 😀\n", 300)
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprint(w, text)
	})
	tool := &tools.Tool{ID: "x.dir", Provider: "x", Name: "dir", Kind: tools.KindAPI, Method: "GET", Path: "/d", Origin: up.URL}
	ret := NewRetrieval(RetrievalOptions{})
	e := newTestEngine(t, Options{Results: ret, ViewChars: 1500})
	for _, looped := range []bool{false, true} {
		t.Run(fmt.Sprintf("loop_responses=%v", looped), func(t *testing.T) {
			out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: looped}, Args: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			v := decode(t, out.View)
			shownText, _ := v["text"].(string)
			shown, total := int(v["_shownChars"].(float64)), int(v["_totalChars"].(float64))
			if total != len([]rune(text)) || shown != len([]rune(shownText)) || !strings.HasPrefix(text, shownText) || out.ResultID == "" {
				t.Fatalf("shown %d (the view holds %d), total %d (the text has %d), id %q", shown, len([]rune(shownText)), total, len([]rune(text)), out.ResultID)
			}
			got := shownText
			for offset := shown; offset < total; {
				raw, err := ret.Call(context.Background(), scope, FetchToolResult, []byte(fmt.Sprintf(`{"resultId":%q,"offset":%d}`, out.ResultID, offset)))
				if err != nil {
					t.Fatal(err)
				}
				var slice struct {
					Text        string `json:"text"`
					NextOffset  *int   `json:"nextOffset"`
					TotalLength int    `json:"totalLength"`
				}
				if err := json.Unmarshal(raw, &slice); err != nil || slice.TotalLength != total {
					t.Fatalf("fetch: %s %v", raw, err)
				}
				got += slice.Text
				if slice.NextOffset == nil {
					break
				}
				offset = *slice.NextOffset
			}
			if got != text {
				t.Errorf("the view and the slices read on from _shownChars do not make the text (%d of %d characters)", len([]rune(got)), total)
			}
		})
	}
}

// _fields on a single object: the projected object, no _pagingComplete
// (nothing was paged; false would read as incomplete), and a _resultId
// for the unprojected payload.
func TestFieldsOnASingleObjectKeepsTheWholeObject(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"id":"ord_1","total":825,"status":"paid","lines":[{"sku":"a"}],"notes":"fragile"}`)
	})
	tool := &tools.Tool{ID: "x.get_order", Provider: "x", Name: "get_order", Kind: tools.KindAPI, Method: "GET", Path: "/orders/1", Origin: up.URL}
	ret := NewRetrieval(RetrievalOptions{})
	out, v := looping(t, newTestEngine(t, Options{Results: ret}), tool, map[string]any{"_fields": []any{"id", "status"}})
	if _, has := v["_pagingComplete"]; has || v["_boundary"].(map[string]any)["completion"] != "single_response" {
		t.Errorf("single object view %s", out.View)
	}
	if v["notes"] != nil || v["status"] != "paid" {
		t.Errorf("not projected: %s", out.View)
	}
	id, _ := v["_resultId"].(string)
	if id == "" || out.Verdict.ResultID != id {
		t.Fatalf("no _resultId for the unprojected object: %s", out.View)
	}
	raw, err := ret.Call(context.Background(), scope, FetchToolResult, []byte(fmt.Sprintf(`{"resultId":%q}`, id)))
	if err != nil || !strings.Contains(string(raw), `fragile`) {
		t.Errorf("fetchToolResult: %s %v", raw, err)
	}
}

// A workflow step's output holds only _loop: its note points at
// _loop.forEachErrors, which holds the failed values; a step served from
// the cache reports no request of its own.
func TestWorkflowStepNoteAndCache(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("list") == "bad" {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"message":"no such list"}`)
			return
		}
		fmt.Fprintf(w, `{"data":%s,"next_cursor":null}`, rowsJSON(ids(3)))
	})
	cache, err := NewDatasetCache(CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := newTestEngine(t, Options{Cache: cache})
	step := func(values ...any) (*Outcome, map[string]any) {
		t.Helper()
		out, err := e.Call(context.Background(), Call{Tool: cursorTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
			Workflow: true, CacheTTL: time.Hour,
			Args: map[string]any{"_all_pages": true, "_for_each": map[string]any{"key": "list", "values": values}}})
		if err != nil {
			t.Fatal(err)
		}
		v := decode(t, out.View)
		return out, v["_loop"].(map[string]any)
	}
	_, l := step("a", "bad")
	errs, _ := l["forEachErrors"].([]any)
	if note := l["note"].(string); !strings.Contains(note, "see _loop.forEachErrors") || strings.Contains(note, "see _forEachErrors") || len(errs) != 1 {
		t.Errorf("_loop %v", l)
	}
	first, l1 := step("a", "b")
	second, l2 := step("a", "b")
	if l1["requests"] != float64(2) || l2["requests"] != float64(0) || first.Verdict.Cache != nil || second.Verdict.Cache == nil {
		t.Errorf("first _loop %v, cached _loop %v; want 2 requests, then none", l1, l2)
	}
	if note := l2["note"].(string); !strings.Contains(note, "sent no request") {
		t.Errorf("cached note %q", note)
	}
}

// With looping off, a model's _all_pages is not dropped without a word.
func TestPlainCallSaysAllPagesWasIgnored(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"data":%s,"next_cursor":"10"}`, rowsJSON(ids(10)))
	})
	out, err := newTestEngine(t, Options{}).Call(context.Background(), Call{Tool: cursorTool(up.URL), Scope: scope,
		Args: map[string]any{"_all_pages": true, "list": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	v := decode(t, out.View)
	note, _ := v["_note"].(string)
	if out.Verdict != nil || len(v["data"].([]any)) != 10 || !strings.Contains(note, "_all_pages was ignored") ||
		!strings.Contains(note, "first page only") || up.n.Load() != 1 {
		t.Errorf("plain call: %s", out.View)
	}
}
