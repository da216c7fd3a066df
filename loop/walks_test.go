package loop

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

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
// missing"), never complete.
func TestOffsetWalkLosingRowsAtTheHead(t *testing.T) {
	var mu sync.Mutex
	list := ids(40)
	var c *counted
	c = newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if n := c.n.Load(); n > 1 && len(list) > 0 {
			list = list[1:] // a row leaves the head before every later page
		}
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
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
// probe, counted in the boundary and the activity log.
func TestOffsetWalkOverlapAndClosingProbe(t *testing.T) {
	all := ids(23)
	var mu sync.Mutex
	var offsets []int
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		mu.Lock()
		offsets = append(offsets, off)
		mu.Unlock()
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
	// at the size trawl chose: the end; the probe at 22 finds only r23.
	if want := []int{0, 9, 18, 22}; !slices.Equal(offsets, want) {
		t.Errorf("offsets %v, want %v", offsets, want)
	}
	if b["completion"] != "complete" || len(v["data"].([]any)) != 23 || b["pages"] != float64(3) || b["probes"] != float64(1) || b["requests"] != float64(4) {
		t.Errorf("boundary %v", b)
	}
	if n := log.count(); n != 4 {
		t.Errorf("activity log has %d requests, want 4 (the probe among them)", n)
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
