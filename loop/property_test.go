package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// TestHostileUpstreams is the property test of issue 9 §3. The engine,
// through the real tools.Invoker and a real HTTP server on 127.0.0.1,
// walks thousands of generated hostile upstreams (hostile_upstream_test.go):
// every pagination style (page, offset in a query or a POST body, cursor
// token, last item id + has_more, next URL, Link header), pages silently
// capped, rows inserted and deleted between pages, repeated rows, empty
// pages that still say more, 429 with Retry-After, 5xx, 404, 401, HTML
// error pages, JSON error objects answered 200 and connections cut
// mid-body at random requests, failing
// fan-out values, next URLs to another origin, cursor cycles, objects with
// nested arrays, text bodies, misspelt filters and missing arguments. Whatever the upstream did, the
// envelope the model reads (Outcome.View, DESIGN.md §5/§6) must keep the
// rules below; the main ones:
//
//   - completion complete ⇒ every row that existed for the whole walk was
//     returned, no row was returned twice, and no returned row is one the
//     upstream never had (collections change mid-walk: rows are added and
//     removed at the head, the middle and the tail of page and offset
//     collections, with or without a total); a repeated row, a moved
//     total or a total that disagrees ⇒ not complete; _likelyMoreRows
//     false ⇒ no row that existed for the whole walk is missing;
//   - every _for_each value ends in exactly one of: succeeded (all its
//     rows, tagged), _forEachPartial (its walk was cut: some rows, why,
//     where it resumes), _forEachErrors or _forEachSkipped — also when a
//     shared budget runs out while values are mid-walk;
//   - _boundary.requests (and the activity log) == the requests the
//     upstream received, probes included; _boundary.pages + probes == the
//     pages it delivered; _boundary has every key;
//   - no request after the server said a collection was done, no retry of
//     a 401/403/404, never a guessed cursor, never a skipped page or offset,
//     never a foreign origin, at most 3 empty pages in a row;
//   - no sentence of _note contradicts the typed verdict, and its counts
//     are true;
//   - an _aggregate (asked on a quarter of the row cases; the rows are
//     read back with queryToolResult) has the walk's completion, words it
//     in its verdict, and counts, sums and groups exactly the rows kept;
//   - a complete walk's call made again on an engine with a dataset cache
//     is served from it: no request, the same completion, rows and
//     aggregate, and a note that says the rows are cached.
//
// The sweep is seeded: case i of a run has seed -hostile.seed*1e6+i, and
// -hostile.only=SEED replays one case with its request transcript. A case
// is deterministic except in the fan-out cases generated with FanOut 4,
// where which value reaches a shared budget first is up to the scheduler
// (the rules must hold whichever does). The first failing case of each
// rule is shrunk (fewer events, rows, values, options) to a small scenario
// printed as a Go literal: add it to hostileRegressions under a name. The
// clock is fake, so Retry-After and backoff never sleep; -short runs a
// sixth of the cases. Explore more with, e.g.:
//
//	go test ./loop -run TestHostileUpstreams/sweep -hostile.cases=30000 -hostile.seed=7 -hostile.shrink=false
var (
	hostileCases = flag.Int("hostile.cases", 2000, "generated upstreams per run of TestHostileUpstreams (-short: a sixth)")
	hostileSeed  = flag.Uint64("hostile.seed", 1, "base seed of TestHostileUpstreams; case i has seed base*1e6+i")
	hostileOnly  = flag.Uint64("hostile.only", 0, "replay this one seed of TestHostileUpstreams, with its transcript")
	hostileCut   = flag.Bool("hostile.shrink", true, "shrink the first failing case of each rule of TestHostileUpstreams")
)

// The rules. The first group is checked by the server on the wire.
const (
	ruleAfterDone      = "no-request-after-done"   // the server said the collection was done
	ruleAfterRefusal   = "no-retry-after-refusal"  // 401/403/404: a retry cannot help
	ruleGuessedCursor  = "never-a-guessed-cursor"  // a cursor the server never issued
	rulePosition       = "walk-position"           // a page, offset or cursor other than the one the last page pointed at
	ruleUnknownRequest = "no-unknown-request"      // a path or value the call does not have
	ruleEmptyPages     = "at-most-3-empty-pages"   // empty pages that still say more: at most 3 in a row
	ruleForeign        = "no-foreign-next-url"     // a next URL on another origin is not followed
	ruleOneAtATime     = "one-request-at-a-time"   // a walk that cannot fetch ahead had two requests in flight
	ruleDetection      = "detection"               // the harness's tool is not detected as its style (a harness or detector bug)
	ruleFailed         = "error-only-without-rows" // the call failed although pages were delivered
	ruleEnvelope       = "envelope"                // the view is not an object with a _boundary
	ruleBoundaryKeys   = "boundary-has-every-key"
	ruleCompletion     = "completion-vocabulary"
	rulePagingComplete = "paging-complete-iff-complete"
	ruleStopReason     = "stop-reason-agrees"
	ruleLastCursor     = "last-cursor-null-without-cursor"
	ruleAction         = "action-read-only"
	ruleRequests       = "requests-equal-upstream"
	ruleActivity       = "activity-log-agrees"
	ruleSingle         = "single-response"
	ruleObject         = "object-is-projected-as-object"
	ruleRows           = "rows-are-delivered-rows"
	ruleTag            = "fan-out-rows-tagged"
	ruleFanOutOnce     = "fan-out-value-accounted-once"
	ruleFanOutError    = "fan-out-error-well-formed"
	ruleFanOutPartial  = "fan-out-failure-is-partial"
	ruleFanOutWhole    = "fan-out-value-named-nowhere-is-whole" // a value in no list holds every row
	ruleExact          = "complete-means-exact"
	ruleChanged        = "changed-is-not-complete"
	ruleLikelyMore     = "no-more-rows-means-none-missing"
	ruleDedup          = "rows-deduplicated"
	ruleNote           = "note-agrees-with-verdict"
	rulePlural         = "note-plurals"
	ruleNoteCount      = "note-counts-are-true"
	ruleFirstPage      = "first-page-only-is-not-a-budget"
	ruleErrorPage      = "error-page-is-not-an-answer"                  // HTML in place of the declared JSON
	ruleArgument       = "argument-error-costs-nothing"                 // no request, no retry, no wait
	ruleUnmatched      = "unmatched-filter-reported"                    // a _filter field no row has is named
	ruleAggregate      = "aggregate-counts-the-rows-and-says-over-what" // _aggregate's numbers are those of the rows kept, its verdict the walk's
	ruleCacheHit       = "cache-hit-is-the-walk-it-reuses"
	ruleHarness        = "harness"
)

// callEngine is the one place the test calls the engine: adjust it, and
// only it, when the entry point changes.
//
// With sc.Cached the engine has a dataset cache, and a call whose walk was
// complete is made once more, as it was: again is that second view (nil
// when there was none), and between runs before it.
func callEngine(ctx context.Context, caller paginate.Caller, clock paginate.Clock, sc scenario, t *tools.Tool, thread string,
	between func()) (view, again []byte, err error) {
	var results *loop.Retrieval
	if sc.Aggregate {
		results = loop.NewRetrieval(loop.RetrievalOptions{Budget: 1 << 22})
	}
	var cache *loop.DatasetCache
	if sc.Cached {
		if cache, err = loop.NewDatasetCache(loop.CacheOptions{}); err != nil {
			return nil, nil, err
		}
	}
	e := loop.New(loop.Options{Caller: caller, Clock: clock, Budget: sc.Budget, FanOut: sc.FanOut, ViewChars: 1 << 22, Results: results, Cache: cache})
	scope := loop.Scope{Org: "o1", Thread: thread}
	call := func() ([]byte, error) {
		out, err := e.Call(ctx, loop.Call{Tool: t, Args: sc.args(), Binding: loop.Binding{LoopResponses: true}, Scope: scope})
		if err != nil {
			return nil, err
		}
		if results == nil {
			return out.View, nil
		}
		return withStoredRows(ctx, results, scope, sc, out.View)
	}
	if view, err = call(); err != nil || !sc.Cached {
		return view, nil, err
	}
	var v struct {
		Boundary struct{ Completion string } `json:"_boundary"`
	}
	if json.Unmarshal(view, &v) != nil || v.Boundary.Completion != "complete" {
		return view, nil, nil
	}
	between()
	again, err = call()
	return view, again, err
}

// withStoredRows puts into an _aggregate call's view, which lists no rows,
// the rows it kept under its _resultId (those that match the call's
// _filter), read back with queryToolResult, where the rules look for
// them: what the aggregate counted is checked against them, and they
// against the upstream.
func withStoredRows(ctx context.Context, res *loop.Retrieval, scope loop.Scope, sc scenario, view []byte) ([]byte, error) {
	var v map[string]any
	if err := json.Unmarshal(view, &v); err != nil {
		return view, nil // the envelope rule says so
	}
	id, _ := v["_resultId"].(string)
	rows := []any{} // none kept: the aggregate rule checks it counted none
	for offset := 0; id != ""; {
		args := map[string]any{"resultId": id, "offset": offset, "limit": loop.MaxQueryLimit}
		if f := sc.filter(); f != nil {
			args["filter"] = f
		}
		raw, _ := json.Marshal(args)
		out, err := res.Call(ctx, scope, loop.QueryToolResult, raw)
		if err != nil {
			return nil, fmt.Errorf("harness: queryToolResult %s: %w", raw, err)
		}
		var page struct {
			Items      []any `json:"items"`
			NextOffset *int  `json:"nextOffset"`
		}
		if err := json.Unmarshal(out, &page); err != nil {
			return nil, fmt.Errorf("harness: queryToolResult answered %s: %w", clip(string(out), 200), err)
		}
		rows = append(rows, page.Items...)
		if page.NextOffset == nil || *page.NextOffset <= offset {
			break
		}
		offset = *page.NextOffset
	}
	v[sc.itemsKey()] = rows
	return json.Marshal(v)
}

// hostileRig is the server every case of a run shares (one path prefix
// per case) and the invoker that reaches it.
type hostileRig struct {
	srv      *httptest.Server
	foreign  *httptest.Server // another origin: a walk must never go there
	invoker  *tools.Invoker
	activity *threadActivity
	cases    sync.Map // prefix → *hostile
	next     int64
	mu       sync.Mutex
}

func newHostileRig(t *testing.T) *hostileRig {
	rig := &hostileRig{activity: &threadActivity{byThread: map[string]int{}}}
	rig.invoker = tools.NewInvoker(tools.InvokerOptions{Timeout: 10 * time.Second, Log: tools.NewActivityLog(rig.activity, 1)})
	rig.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		h, ok := rig.cases.Load("/" + prefix)
		if !ok {
			http.Error(w, "no such case", http.StatusNotFound)
			return
		}
		h.(*hostile).ServeHTTP(w, r)
	}))
	t.Cleanup(rig.srv.Close)
	rig.foreign = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		prefix, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		if h, ok := rig.cases.Load("/" + prefix); ok {
			h.(*hostile).ServeForeign(w, r)
			return
		}
		http.Error(w, "no such case", http.StatusNotFound)
	}))
	t.Cleanup(rig.foreign.Close)
	return rig
}

// caseResult is one case run: the model, the view and the rules broken.
type caseResult struct {
	sc         scenario
	h          *hostile
	view       []byte
	err        error
	violations []violation
	// cachedAgain: the call was made a second time, to be served from the
	// dataset cache (checkCacheHit).
	cachedAgain bool
}

type violation struct{ rule, detail string }

// run runs sc against a fresh model and checks every rule.
func (rig *hostileRig) run(sc scenario) caseResult {
	rig.mu.Lock()
	rig.next++
	prefix := "/c" + strconv.FormatInt(rig.next, 10)
	rig.mu.Unlock()
	h := newHostile(sc, rig.srv.URL, rig.foreign.URL, prefix)
	rig.cases.Store(prefix, h)
	defer rig.cases.Delete(prefix)
	tool := sc.tool(h.origin)
	res := caseResult{sc: sc, h: h}
	if got, want := paginate.Detect(tool).Strategy, sc.Style.strategy(); got != want {
		res.violations = append(res.violations, violation{ruleDetection, fmt.Sprintf("the %s tool is detected as %q, not %q", sc.Style, got, want)})
	}
	clock := paginate.NewFakeClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	thread := "thread" + prefix
	firstRequests := -1 // upstream requests of the first call, when there is a second
	var again []byte
	res.view, again, res.err = callEngine(ctx, rig.invoker, clock, sc, tool, thread, func() {
		h.mu.Lock()
		firstRequests = h.requests
		h.mu.Unlock()
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if again != nil {
		res.cachedAgain = true
		res.violations = append(res.violations, checkCacheHit(res.view, again, h.requests-firstRequests)...)
		h.requests = firstRequests // the rules below are the first call's
		rig.activity.takeLast(thread, h.requests)
	}
	if sc.MissingArg {
		var te *loop.ToolError
		if !errors.As(res.err, &te) || h.requests > 0 || len(clock.Sleeps()) > 0 {
			res.violations = append(res.violations, violation{ruleArgument, fmt.Sprintf(
				"the required list_id was left out: error %v, %d requests, waits %v (want a tool error, no request, no wait)",
				res.err, h.requests, clock.Sleeps())})
		}
		return res
	}
	res.violations = append(res.violations, checkCase(sc, h, res.view, res.err)...)
	if why := h.overlapped(); why != "" && !sc.fetchesAhead() {
		res.violations = append(res.violations, violation{ruleOneAtATime, fmt.Sprintf("a %s walk that must wait for each answer: %s", sc.Style, why)})
	}
	if n := rig.activity.take(thread); n != h.requests {
		res.violations = append(res.violations, violation{ruleActivity, fmt.Sprintf("the activity log has %d requests of the call's thread; the upstream received %d", n, h.requests)})
	}
	return res
}

// threadActivity is an activity store that counts the records of each
// thread.
type threadActivity struct {
	mu       sync.Mutex
	byThread map[string]int
}

func (s *threadActivity) AppendActivity(_ context.Context, a tools.Activity) error {
	s.mu.Lock()
	s.byThread[a.ThreadID]++
	s.mu.Unlock()
	return nil
}

func (s *threadActivity) ListActivity(context.Context, string, int) ([]tools.Activity, error) {
	return nil, nil
}

// takeLast forgets thread's records after the first keep: those of a
// second call, checked by checkCacheHit.
func (s *threadActivity) takeLast(thread string, keep int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byThread[thread] = min(s.byThread[thread], keep)
}

// take returns the count of thread's records and forgets them.
func (s *threadActivity) take(thread string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.byThread[thread]
	delete(s.byThread, thread)
	return n
}

var (
	reCompleteWord = regexp.MustCompile(`\bComplete\b`)
	reAllRows      = regexp.MustCompile(`(?i)\ball (\d+) rows?\b`)
	reSucceeded    = regexp.MustCompile(`(\d+) of (\d+) _for_each values? succeeded`)
	rePages        = regexp.MustCompile(`fetched in (\d+) pages?`)
	reRowCount     = regexp.MustCompile(`\b\d+ rows?\b`)
	reNoMore       = regexp.MustCompile(`(?i)reported no more`)
	rePartial      = regexp.MustCompile(`(?i)^partial\b|\band more (rows )?exist`)
	reOne          = regexp.MustCompile(`\b1 (rows|requests|pages|values|items)\b`)
	reUnstableNote = regexp.MustCompile(`(?i)gap|repeat|duplicat|changed|exhaustive`)
)

var boundaryKeys = []string{"scope", "pageSize", "pages", "requests", "records", "completion", "stopReason", "lastCursor", "uninspected", "action"}

// checkCase checks the rules of one case; h is locked.
func checkCase(sc scenario, h *hostile, raw []byte, callErr error) []violation {
	var vs []violation
	add := func(rule, format string, args ...any) {
		vs = append(vs, violation{rule, fmt.Sprintf(format, args...)})
	}
	for _, w := range h.violations {
		add(w.rule, "%s", w.detail)
	}
	cols := make([]*hcol, 0, len(sc.Cols))
	for _, c := range sc.Cols {
		cols = append(cols, h.cols[c.Value])
	}
	if callErr != nil {
		// A call that fails outright is fair only when nothing came back.
		var te *loop.ToolError
		if !errors.As(callErr, &te) {
			add(ruleFailed, "the call failed with an engine error, not a tool error: %v", callErr)
		}
		for _, c := range cols {
			if c.pages > 0 {
				add(ruleFailed, "the call failed (%v) although %s delivered %d pages", callErr, c.spec.Value, c.pages)
			}
		}
		return vs
	}

	var v map[string]any
	if err := json.Unmarshal(raw, &v); err != nil {
		add(ruleEnvelope, "the view is not a JSON object: %v", err)
		return vs
	}
	b, _ := v["_boundary"].(map[string]any)
	if b == nil {
		add(ruleEnvelope, "the view has no _boundary object")
		return vs
	}
	for _, k := range boundaryKeys {
		if _, ok := b[k]; !ok {
			add(ruleBoundaryKeys, "_boundary has no %q", k)
		}
	}
	completion, _ := b["completion"].(string)
	switch completion {
	case "complete", "partial", "unstable", "single_response":
	default:
		add(ruleCompletion, "_boundary.completion is %v", b["completion"])
	}
	complete := completion == "complete"
	if pc, _ := v["_pagingComplete"].(bool); pc != complete {
		add(rulePagingComplete, "_pagingComplete is %v with completion %q", v["_pagingComplete"], completion)
	}
	stoppedBy, _ := v["_stoppedBy"].(string)
	if b["stopReason"] != v["_stoppedBy"] {
		add(ruleStopReason, "_boundary.stopReason %v, _stoppedBy %v", b["stopReason"], v["_stoppedBy"])
	}
	if complete && !paginate.IsComplete(stoppedBy) {
		add(ruleStopReason, "completion complete with _stoppedBy %q", stoppedBy)
	}
	if complete && b["uninspected"] != "none" {
		add(ruleBoundaryKeys, "completion complete with uninspected %v (want \"none\")", b["uninspected"])
	}
	likely, hasLikely := v["_likelyMoreRows"].(bool)
	if complete && likely {
		add(rulePagingComplete, "completion complete with _likelyMoreRows true")
	}
	if lc, ok := b["lastCursor"]; ok && lc != nil && (sc.Style.numeric() || !sc.Style.paged()) {
		add(ruleLastCursor, "a %s walk sent no cursor, yet lastCursor is %v", sc.Style, lc)
	}
	if a, ok := b["action"]; ok && a != "none (read-only)" {
		add(ruleAction, "a GET says action %v", a)
	}
	if n, _ := b["requests"].(float64); int(n) != h.requests {
		add(ruleRequests, "_boundary.requests is %v; the upstream received %d", b["requests"], h.requests)
	}
	if v["_truncated"] == true {
		add(ruleHarness, "the view was cut by the size guard; the harness sets a budget that should fit")
	}
	delivered := 0
	for _, c := range cols {
		delivered += c.pages
	}
	switch {
	case (sc.Style == styleList || sc.Style == styleObject) && sc.ForEach:
		// Several whole responses merged: §2 does not say whether that is
		// complete or a single response (complete must then be exact, and
		// a failed value makes it partial).
	case sc.Style == styleList && sc.capped() && completion == "partial":
		// A list that counts more rows than it sent says more exist.
	case !sc.Style.paged() && completion != "single_response":
		add(ruleSingle, "a %s response has completion %q, not single_response", sc.Style, completion)
	}
	if sc.Style.paged() && completion == "single_response" && delivered > 0 {
		add(ruleSingle, "a paginated collection that delivered %d pages has completion single_response", delivered)
	}
	if c := cols[0]; !sc.ForEach && c.pages == 0 && c.garbage > 0 && completion != "partial" {
		add(ruleErrorPage, "the tool declares JSON, the server answered only HTML (%d times), and completion is %q", c.garbage, completion)
	}
	if sc.Style == styleObject && !sc.ForEach && cols[0].pages > 0 { // the order was sent, not an error page
		c := sc.Cols[0]
		total, _ := strconv.ParseFloat(orderTotal(c), 64)
		if v["id"] != orderID(c.Value) || v["status"] != "paid" || v["total"] != total {
			add(ruleObject, "the order's own fields are not in the view: id %v, status %v, total %v (want %s, paid, %v)",
				v["id"], v["status"], v["total"], orderID(c.Value), total)
		}
		if sc.Fields && v["_unmatchedFields"] != nil {
			add(ruleObject, "_fields id,total,status reported unmatched on an order that has them: %v", v["_unmatchedFields"])
		}
	}

	// The rows, by value.
	got := map[string][]string{} // value → ids in the view
	if sc.Style.rows() {
		arr, ok := v[sc.itemsKey()].([]any)
		if !ok && delivered > 0 {
			add(ruleRows, "the view has no %q array of rows", sc.itemsKey())
		}
		for i, el := range arr {
			row, _ := el.(map[string]any)
			id, _ := row["id"].(string)
			value, _, _ := strings.Cut(id, "-")
			c := h.cols[value]
			if c == nil || c.delivered[id] == 0 {
				add(ruleRows, "row %d (%v) was never sent by the upstream", i, el)
				continue
			}
			got[value] = append(got[value], id)
			if sc.ForEach && row["list_id"] != value {
				add(ruleTag, "row %s is tagged list_id=%v, want %q", id, row["list_id"], value)
			}
		}
	}

	if sc.Style == styleObject && sc.ForEach {
		// One row per value: the order itself, tagged with its value.
		arr, _ := v["items"].([]any)
		if arr == nil && delivered > 0 {
			add(ruleObject, "a fan-out over orders has no items array: %s", clip(string(raw), 300))
		}
		for i, el := range arr {
			row, _ := el.(map[string]any)
			val, _ := row["list_id"].(string)
			c := h.cols[val]
			if c == nil || c.pages == 0 {
				add(ruleRows, "row %d of a fan-out over orders (list_id=%v) is no order the upstream sent: %v", i, row["list_id"], clip(fmt.Sprint(row), 200))
				continue
			}
			total, _ := strconv.ParseFloat(orderTotal(c.spec), 64)
			if row["id"] != orderID(val) || row["status"] != "paid" || row["total"] != total {
				add(ruleObject, "the row of %s is not its order: id %v, status %v, total %v", val, row["id"], row["status"], row["total"])
			}
			got[val] = append(got[val], orderID(val))
		}
		for _, c := range cols {
			if n := len(got[c.spec.Value]); n > 1 {
				add(ruleObject, "%s's order appears %d times", c.spec.Value, n)
			}
		}
	}

	// Fan-out accounting.
	failed := map[string]bool{}
	cut := map[string]bool{} // values in _forEachPartial
	if sc.ForEach {
		errs := fanOutEntries(v["_forEachErrors"])
		skipped := fanOutEntries(v["_forEachSkipped"])
		partial := fanOutEntries(v["_forEachPartial"])
		for _, e := range partial {
			if e.value == "" || h.cols[e.value] == nil {
				add(ruleFanOutOnce, "_forEachPartial names %v, not a value of the call", e.raw)
				continue
			}
			obj, _ := e.raw.(map[string]any)
			stop, _ := obj["stopReason"].(string)
			rows, hasRows := obj["rows"].(float64)
			if stop == "" || paginate.IsComplete(stop) || !hasRows {
				add(ruleFanOutError, "_forEachPartial entry %v has no stopReason that is not complete, or no rows", e.raw)
			}
			if n := len(got[e.value]); !sc.Filter && hasRows && int(rows) != n {
				add(ruleFanOutError, "_forEachPartial says %s has %v rows; the view holds %d", e.value, rows, n)
			}
			cut[e.value] = true
		}
		for _, e := range errs {
			if e.value == "" || h.cols[e.value] == nil {
				add(ruleFanOutOnce, "_forEachErrors names %v, not a value of the call", e.raw)
				continue
			}
			failed[e.value] = true
			obj, _ := e.raw.(map[string]any)
			r, ok := obj["retryable"].(bool)
			if !ok {
				add(ruleFanOutError, "_forEachErrors entry %v has no boolean retryable", e.raw)
				continue
			}
			if st, ok := obj["status"].(float64); ok {
				switch s := int(st); {
				case s >= 500 && !r:
					add(ruleFanOutError, "%s failed with %d and says no retry can help", e.value, s)
				case s >= 400 && s < 500 && s != 429 && r:
					add(ruleFanOutError, "%s failed with %d and says a retry could help", e.value, s)
				}
				if c := h.cols[e.value]; c != nil && int(st) != c.lastStatus {
					add(ruleFanOutError, "%s: _forEachErrors says status %d; the upstream's last HTTP status was %d", e.value, int(st), c.lastStatus)
				}
			}
		}
		for _, e := range skipped {
			if e.value == "" || h.cols[e.value] == nil {
				add(ruleFanOutOnce, "_forEachSkipped names %v, not a value of the call", e.raw)
				continue
			}
			failed[e.value] = true
		}
		for _, c := range cols {
			val := c.spec.Value
			nE, nS, nRows := countValue(errs, val), countValue(skipped, val), len(got[val])
			nP := countValue(partial, val)
			if sc.DupValue && val == sc.Cols[0].Value && nS > 0 && (nRows > 0 || nE > 0 || nP > 0 || c.reqs > 0) {
				nS-- // the repeat of a value may be recorded as skipped
			}
			switch {
			case nE+nS+nP > 1:
				add(ruleFanOutOnce, "%s is named %d times in _forEachErrors, %d in _forEachSkipped and %d in _forEachPartial", val, nE, nS, nP)
			case nP == 1 && c.reqs == 0:
				add(ruleFanOutOnce, "%s is in _forEachPartial but was never requested", val)
			case nE+nS == 1 && nRows > 0:
				add(ruleFanOutOnce, "%s has %d rows and is also in _forEach%s", val, nRows, map[bool]string{true: "Errors", false: "Skipped"}[nE == 1])
			case nS == 1 && c.reqs > 0:
				add(ruleFanOutOnce, "%s is in _forEachSkipped (never requested) but was requested %d times", val, c.reqs)
			case nE == 1 && c.reqs == 0:
				add(ruleFanOutOnce, "%s is in _forEachErrors but was never requested", val)
			case nE+nS == 0 && c.reqs == 0:
				add(ruleFanOutOnce, "%s was never requested and is named nowhere (not in _forEachSkipped)", val)
			case nE+nS == 0 && c.pages == 0:
				add(ruleFanOutOnce, "%s failed (%d requests, last status %d, no page) and is not in _forEachErrors", val, c.reqs, c.lastStatus)
			}
			if nE+nS+nP > 0 && completion != "partial" {
				add(ruleFanOutPartial, "%s failed, was skipped or was cut short, yet completion is %q", val, completion)
			}
			if nE+nS+nP == 0 && c.reqs > 0 && c.mutations == 0 && c.dups == 0 && sc.Total != totalUnder && sc.Style.rows() && !sc.Filter {
				// Named nowhere, so it succeeded: every row is there (a
				// total below the truth, like a change, may leave its value
				// short; the verdict then says unstable).
				if missing, _, _ := diffIDs(c.throughout(false, false), got[val]); len(missing) > 0 {
					add(ruleFanOutWhole, "%s is in no _forEach list, yet its rows %v are missing (%d of %d there)", val, missing, nRows, len(c.rows))
				}
			}
		}
	}

	// The truth.
	if sc.Style.rows() {
		var want, have []string
		for _, c := range cols {
			want = append(want, c.finalIDs(sc.Filter, sc.FilterTypo)...)
			have = append(have, got[c.spec.Value]...)
		}
		_ = want
		if complete {
			for _, c := range cols {
				val := c.spec.Value
				missing, _, repeated := diffIDs(c.throughout(sc.Filter, sc.FilterTypo), got[val])
				var never []string
				for _, id := range got[val] {
					if !c.everHad(id, sc.Filter, sc.FilterTypo) {
						never = append(never, id)
					}
				}
				if len(missing)+len(repeated)+len(never) > 0 {
					add(ruleExact, "completion complete, but of %s rows that existed for the whole walk %v are missing, %v came back twice, and %v are rows the upstream never had (or that do not match the filter)", val, missing, repeated, never)
				}
				if why := c.changed(); why != "" && sc.Style.paged() {
					add(ruleChanged, "completion complete although %s", why)
				}
			}
		}
		if completion == "complete" || completion == "unstable" {
			if _, _, repeated := diffIDs(nil, have); len(repeated) > 0 {
				add(ruleDedup, "completion %s with rows repeated in the view: %v", completion, repeated)
			}
		}
		if hasLikely && !likely {
			for _, c := range cols {
				if failed[c.spec.Value] && c.reqs > 0 {
					continue // its rows are not known (an error); a skipped value is checked
				}
				missing, _, _ := diffIDs(c.throughout(sc.Filter, sc.FilterTypo), got[c.spec.Value])
				if len(missing) > 0 {
					add(ruleLikelyMore, "_likelyMoreRows is false, yet %s's rows %v, which existed for the whole walk, are missing", c.spec.Value, missing)
				}
			}
		}
	}

	if sc.FilterTypo && len(got) == 0 && delivered > 0 && completion != "single_response" {
		rows := 0
		for _, c := range cols {
			rows += len(c.delivered)
		}
		um, _ := v["_unmatchedFilter"].(map[string]any)
		if f, _ := um["fields"].([]any); rows > 0 && !slices.Contains(f, any("statsu")) {
			add(ruleUnmatched, "_filter on statsu, which none of the %d rows has, matched nothing and _unmatchedFilter is %v", rows, v["_unmatchedFilter"])
		}
	}

	if sc.Aggregate {
		vs = append(vs, checkAggregate(sc, v, completion)...)
	}

	// The note.
	note, _ := v["_note"].(string)
	if !complete && reCompleteWord.MatchString(note) {
		add(ruleNote, "completion %q, note says Complete: %q", completion, note)
	}
	if !complete && reAllRows.MatchString(note) {
		add(ruleNote, "completion %q, note claims all rows: %q", completion, note)
	}
	if complete && rePartial.MatchString(note) {
		add(ruleNote, "completion complete, note says partial: %q", note)
	}
	if completion == "single_response" && (reRowCount.MatchString(note) || reNoMore.MatchString(note)) {
		add(ruleNote, "a single response, note claims a row count or the end of a collection: %q", note)
	}
	if completion == "unstable" && !reUnstableNote.MatchString(note) {
		add(ruleNote, "completion unstable, note does not say the set may have gaps or repeats: %q", note)
	}
	if m := reAllRows.FindStringSubmatch(note); m != nil && complete && sc.Style.rows() {
		// All the rows: at least those that existed for the whole walk, at
		// most those the collection ever held during it.
		least, most := 0, 0
		for _, c := range cols {
			least += len(c.throughout(false, false))
			most += len(c.keys)
		}
		if n, _ := strconv.Atoi(m[1]); n < least || n > most {
			add(ruleNoteCount, "note claims all %d rows; %d existed for the whole walk and %d at some time of it: %q", n, least, most, note)
		}
	}
	if m := reSucceeded.FindStringSubmatch(note); m != nil && sc.ForEach {
		ok, all := 0, len(cols)
		for _, c := range cols {
			if !failed[c.spec.Value] && !cut[c.spec.Value] {
				ok++
			}
		}
		if a, _ := strconv.Atoi(m[1]); a != ok {
			add(ruleNoteCount, "note says %s of %s values succeeded; %d of %d did: %q", m[1], m[2], ok, all, note)
		} else if b, _ := strconv.Atoi(m[2]); b != all {
			add(ruleNoteCount, "note says %s of %s values succeeded; %d of %d did: %q", m[1], m[2], ok, all, note)
		}
	}
	garbage := 0
	for _, c := range cols {
		garbage += c.garbage
	}
	if sc.Style.paged() && garbage == 0 { // an HTML page counts as a page or not: §2 does not say
		probes, _ := b["probes"].(float64)
		unused, _ := b["unused"].(float64) // pages fetched ahead and never read
		if unused > 0 && !sc.fetchesAhead() {
			add(ruleNoteCount, "_boundary.unused is %v for a walk that cannot fetch ahead", unused)
		}
		if m := rePages.FindStringSubmatch(note); m != nil {
			if n, _ := strconv.Atoi(m[1]); n+int(probes)+int(unused) < delivered || n+int(probes) > delivered {
				add(ruleNoteCount, "note says %s pages (and %v probes, %v unused); the upstream delivered %d: %q", m[1], probes, unused, delivered, note)
			}
		}
		// A request fetched ahead and never read may have been answered
		// with a page or with an error.
		if p, ok := b["pages"].(float64); ok && (int(p)+int(probes) > delivered || int(p)+int(probes)+int(unused) < delivered) {
			add(ruleNoteCount, "_boundary.pages is %v (and probes %v, unused %v); the upstream delivered %d pages", p, probes, unused, delivered)
		}
	}
	if m := reOne.FindString(note); m != "" {
		add(rulePlural, "note says %q: %q", m, note)
	}
	if sc.Style.paged() && !sc.AllPages && stoppedBy == paginate.StopBudgetPages {
		add(ruleFirstPage, "a call without _all_pages stopped by budget_pages")
	}
	return collapse(vs)
}

// collapse keeps the first violation of each rule, saying how many more
// there were.
func collapse(vs []violation) []violation {
	var out []violation
	count := map[string]int{}
	for _, v := range vs {
		if count[v.rule]++; count[v.rule] == 1 {
			out = append(out, v)
		}
	}
	for i, v := range out {
		if n := count[v.rule]; n > 1 {
			out[i].detail += fmt.Sprintf(" (and %d more)", n-1)
		}
	}
	return out
}

// fanOutEntry is one element of _forEachErrors or _forEachSkipped: an
// object with "value", or the value itself.
type fanOutEntry struct {
	value string
	raw   any
}

func fanOutEntries(x any) []fanOutEntry {
	arr, _ := x.([]any)
	out := make([]fanOutEntry, 0, len(arr))
	for _, el := range arr {
		e := fanOutEntry{raw: el}
		switch y := el.(type) {
		case string:
			e.value = y
		case map[string]any:
			e.value, _ = y["value"].(string)
		}
		out = append(out, e)
	}
	return out
}

func countValue(es []fanOutEntry, v string) int {
	n := 0
	for _, e := range es {
		if e.value == v {
			n++
		}
	}
	return n
}

// diffIDs compares id multisets: want's ids missing from have, have's ids
// not in want, and have's ids present more than once.
func diffIDs(want, have []string) (missing, extra, repeated []string) {
	w := map[string]int{}
	for _, id := range want {
		w[id]++
	}
	h := map[string]int{}
	for _, id := range have {
		h[id]++
		if h[id] == 2 {
			repeated = append(repeated, id)
		}
	}
	for id := range w {
		if h[id] == 0 {
			missing = append(missing, id)
		}
	}
	for id := range h {
		if w[id] == 0 && want != nil {
			extra = append(extra, id)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	sort.Strings(repeated)
	return missing, extra, repeated
}

// hostileRegressions are named cases: the shapes issue 9 lists, and
// cases the sweep found, shrunk. They run first, each as its own subtest,
// under every rule.
var hostileRegressions = []struct {
	name string
	sc   scenario
}{
	// Issue 21: per_page 100 answered with 50, page n starting at row
	// (n-1)×100 — "Complete: all 70 rows" of 120.
	{"page-size-capped-offsets-from-the-size-asked", scenario{Seed: 21, Style: stylePage, AllPages: true, SizeMax: 100, Cap: 50, Default: 20, AskedOffsets: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 120}}}},
	// Issue 21: the same with the model's own size and a total.
	{"model-page-size-capped-offsets-from-the-size-asked", scenario{Seed: 22, Style: stylePage, AllPages: true, ModelSize: 20, Cap: 7, Default: 7, AskedOffsets: true, Total: totalExact, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 40}}}},
	// Issue 21: an offset walk losing rows at its head between pages, no
	// total, no duplicates — "Complete: all 172 rows".
	{"offset-rows-deleted-at-the-head-without-a-total", scenario{Seed: 23, Style: styleOffset, AllPages: true, SizeMax: 10, Cap: 10, Default: 10, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 45, Events: []event{{At: 2, Kind: evMutate, Ops: 1, Dir: -1, Where: whereHead}, {At: 3, Kind: evMutate, Ops: 2, Dir: -1, Where: whereHead}}}}}},
	// Issue 21: the same for a page-number walk, rows added in the middle
	// and removed at the tail.
	{"page-rows-changed-without-a-total", scenario{Seed: 24, Style: stylePage, AllPages: true, SizeMax: 10, Cap: 10, Default: 10, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 35, Events: []event{{At: 2, Kind: evMutate, Ops: 1, Dir: 1, Where: whereMiddle}, {At: 4, Kind: evMutate, Ops: 1, Dir: -1, Where: whereHead}, {At: 5, Kind: evMutate, Ops: 1, Dir: -1, Where: whereTail}}}}}},
	// Issue 21: a fan-out whose shared request budget runs out while values
	// are mid-walk — "21 of 50 values succeeded", two of them cut short.
	{"fan-out-budget-runs-out-mid-value", scenario{Seed: 25, Style: styleCursor, AllPages: true, Cap: 3, Default: 3, ForEach: true, FanOut: 4, Budget: paginate.Budget{Requests: 10},
		Cols: []collection{{Value: "L0", Rows: 9}, {Value: "L1", Rows: 9}, {Value: "L2", Rows: 12}, {Value: "L3", Rows: 9}, {Value: "L4", Rows: 9}}}},
	// Found by the sweep while overlapping pages were built, shrunk: a page
	// walk with a more flag whose second page repeats a row (short, more
	// said) was taken for a page size not honoured.
	{"page-walk-with-more-flag-repeats-a-row", scenario{Seed: 5002261, Style: stylePage, AllPages: true, SizeMax: 5, Cap: 5, Default: 1, MoreFlag: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 6, Events: []event{{At: 2, Kind: evDup}}}}}},
	// Found by the sweep, shrunk: rows removed before page 2 and one added
	// before the probe of page 1, so that page's last row was back in
	// place; the probe compares the whole page.
	{"page-probe-after-a-change-back", scenario{Seed: 8002506, Style: stylePage, AllPages: true, SizeMax: 10, Cap: 10, Default: 6, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 18, Events: []event{{At: 2, Kind: evMutate, Ops: 3, Dir: -1}, {At: 3, Kind: evMutate, Ops: 1, Dir: 1}, {At: 3, Kind: evStatus, Status: 429, RetryAfter: 3}}}}}},
	// Found by the sweep, shrunk: the probe of a page boundary answered 404;
	// the walk must not ask for the next page after it.
	{"boundary-probe-refused", scenario{Seed: 5002338, Style: stylePage, AllPages: true, Cap: 4, Default: 3, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 8, FailFrom: 3, FailStatus: 404}}}},
	// Issue 9: per_page 20 asked by the model, 7 served, no total, no
	// continuation — "Complete: all 7 rows" of 95.
	{"model-page-size-silently-capped", scenario{Seed: 1, Style: stylePage, AllPages: true, ModelSize: 20, Cap: 7, Default: 7, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 95}}}},
	// Found by the sweep, shrunk: trawl asked for the declared maximum (100), the
	// server served 1; no page was ever full, so a short one is no end.
	{"trawl-size-capped-below-declared-maximum", scenario{Seed: 1000004, Style: stylePage, AllPages: true, SizeMax: 100, Cap: 1, Default: 8, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 2}}}},
	// Issue 9: rows inserted and deleted between the pages of an offset
	// walk with a total.
	{"offset-walk-rows-inserted-and-deleted", scenario{Seed: 3, Style: styleOffset, AllPages: true, SizeMax: 10, Cap: 10, Default: 10, Total: totalExact, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 45, Events: []event{{At: 2, Kind: evMutate, Ops: 2, Dir: 1, Behind: true}, {At: 3, Kind: evMutate, Ops: 2, Dir: -1, Behind: true}, {At: 4, Kind: evMutate, Ops: 1}}}}}},
	// A keyset cursor with a total: rows inserted behind the cursor are
	// missed, and only the total shows it.
	{"keyset-cursor-rows-inserted-behind", scenario{Seed: 4, Style: styleCursor, Keyset: true, AllPages: true, Cap: 4, Default: 4, Total: totalExact, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 12, Events: []event{{At: 3, Kind: evMutate, Ops: 2, Dir: 1, Behind: true}}}}}},
	// Found by the sweep, shrunk: page 2 repeats page 1's last row.
	{"page-overlaps-the-last-one", scenario{Seed: 1000050, Style: stylePage, AllPages: true, Cap: 10, Default: 4, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 11, Events: []event{{At: 2, Kind: evDup}}}}}},
	// Found by the sweep, shrunk: an approximate total (2) over an empty
	// collection, first page only.
	{"approximate-total-over-an-empty-collection", scenario{Seed: 1000007, Style: stylePage, Cap: 5, Default: 3, Total: totalOver, Over: 2, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 0}}}},
	// Issue 9: acme.get_order — _fields id,total,status projects the
	// order, not its line items, and its money total is no row count.
	{"order-with-line-items", scenario{Seed: 5, Style: styleObject, Schema: true, Fields: true, FanOut: 1, Cols: []collection{{Value: "L0", Rows: 3}}}},
	{"order-without-a-response-schema", scenario{Seed: 6, Style: styleObject, FanOut: 1, Cols: []collection{{Value: "L0", Rows: 3}}}},
	// One order per value, tagged; a 404 value is an error, not a row.
	{"fan-out-over-orders", scenario{Seed: 20, Style: styleObject, Schema: true, Fields: true, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 1}, {Value: "L1", Rows: 2, FailFrom: 1, FailStatus: 404}, {Value: "L2", Rows: 0}}}},
	// Issue 9: an MCP server's directory listing of 30 lines.
	{"text-directory-listing", scenario{Seed: 7, Style: styleText, FanOut: 1, Cols: []collection{{Value: "L0", Rows: 27}}}},
	{"list-without-pagination", scenario{Seed: 8, Style: styleList, Schema: true, FanOut: 1, Cols: []collection{{Value: "L0", Rows: 5}}}},
	// Issue 9: one value answering 404 — no retry can help, and the
	// boundary counts every request.
	{"fan-out-one-value-404", scenario{Seed: 9, Style: stylePage, AllPages: true, SizeMax: 10, Cap: 10, Default: 10, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 3}, {Value: "L1", Rows: 30, FailFrom: 1, FailStatus: 404}, {Value: "L2", Rows: 0}}}},
	// Issue 9: values the request budget never reached are named in
	// _forEachSkipped.
	{"fan-out-budget-skips-values", scenario{Seed: 10, Style: styleCursor, AllPages: true, Cap: 2, Default: 2, ForEach: true, FanOut: 1, Budget: paginate.Budget{Requests: 4},
		Cols: []collection{{Value: "L0", Rows: 3}, {Value: "L1", Rows: 3}, {Value: "L2", Rows: 3}, {Value: "L3", Rows: 3}}}},
	// Issue 9: the _for_each tag survives a _fields that does not list it.
	{"fan-out-tag-survives-fields", scenario{Seed: 11, Style: styleOffset, AllPages: true, Cap: 5, Default: 5, Fields: true, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 4}, {Value: "L1", Rows: 2}}}},
	// Found by the sweep, shrunk: a fan-out value whose first page is HTML.
	{"fan-out-value-answers-html", scenario{Seed: 1000090, Style: stylePage, AllPages: true, Cap: 8, Default: 5, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L3", Rows: 0, Events: []event{{At: 1, Kind: evGarbage}}}}}},
	// Hostile round 3, found by the sweep once it made them, shrunk: a
	// fan-out value of a list answered 200 with a JSON error object — the
	// object became a row ("Complete: all 3 rows" of 2), or, with the
	// object read as an empty page, "Complete: all 0 rows" of 1.
	{"fan-out-value-answers-an-error-object", scenario{Seed: 1000193, Style: styleCursor, AllPages: true, Cap: 6, Default: 9, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 2}, {Value: "L1", Rows: 1, Events: []event{{At: 1, Kind: evErrorObject}}}}}},
	// The same without a fan-out: a "single response, the whole answer".
	{"paginated-tool-answers-an-error-object", scenario{Seed: 1000180, Style: styleOffset, AllPages: true, Cap: 9, Default: 8, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 1, Events: []event{{At: 1, Kind: evErrorObject}}}}}},
	// And on a later page of a value: partial, its rows kept.
	{"fan-out-later-page-answers-an-error-object", scenario{Seed: 26, Style: stylePage, AllPages: true, SizeMax: 3, Cap: 3, Default: 3, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 7, Events: []event{{At: 2, Kind: evErrorObject}}}, {Value: "L1", Rows: 2}}}},
	// Hostile round 3, found by the sweep once it made them, shrunk: a list
	// without pagination sends 1 row and counts 2, and its schema declares a
	// next token it never sends — "Single response", _likelyMoreRows false;
	// in a fan-out "Complete: all 9 rows" of 10.
	{"unpaged-list-counts-more-than-it-sent", scenario{Seed: 1000832, Style: styleList, Cap: 1, MoreFlag: true, Schema: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 2}}}},
	{"fan-out-unpaged-list-counts-more-than-it-sent", scenario{Seed: 1005175, Style: styleList, Cap: 9, MoreFlag: true, Schema: true, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L1", Rows: 10}, {Value: "L2", Rows: 3}}}},
	// Against the verdict branch: a paginated tool whose first page is an
	// HTML error page with status 200.
	{"paginated-tool-answers-html", scenario{Seed: 17, Style: stylePage, AllPages: true, Cap: 5, Default: 5, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 7, Events: []event{{At: 1, Kind: evGarbage}}}}}},
	// Against the verdict branch: a list tool that declares JSON answers
	// one fan-out value with an HTML page; "Complete: all 1 row" of 14.
	{"fan-out-list-value-answers-html", scenario{Seed: 1001248, Style: styleList, Schema: true, ForEach: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 14, Events: []event{{At: 1, Kind: evGarbage}}}}}},
	// Against the verdict branch: first page only, the model asked for 23,
	// the server served 10 of 11 with no signal — nobody can vouch for
	// that short page, so more rows may exist.
	{"first-page-short-page-nobody-vouches-for", scenario{Seed: 1000015, Style: stylePage, ModelSize: 23, Cap: 10, Default: 4, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 11}}}},
	// Issue 9: a _filter on a field no row has (statsu) is reported.
	{"filter-on-a-field-no-row-has", scenario{Seed: 18, Style: styleOffset, AllPages: true, Cap: 5, Default: 5, Filter: true, FilterTypo: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 8}}}},
	// Issue 9: a missing required argument is no network error to retry.
	{"missing-required-argument", scenario{Seed: 19, Style: styleCursor, AllPages: true, Cap: 5, Default: 5, MissingArg: true, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 8}}}},
	// Issue 9: has_more true with empty pages forever.
	{"has-more-with-empty-pages-forever", scenario{Seed: 12, Style: styleCursor, AllPages: true, Cap: 2, Default: 2, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 3, Events: emptyPagesFrom(2, 30)}}}},
	// Issue 9: a plain call of a paginated tool is the first page only,
	// not a page budget.
	{"first-page-only", scenario{Seed: 1000009, Style: styleCursor, ModelSize: 2, Cap: 12, Default: 3, FanOut: 1, Cols: []collection{{Value: "L0", Rows: 3}}}},
	{"retry-after-then-rows", scenario{Seed: 13, Style: styleCursor, AllPages: true, Cap: 2, Default: 2, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 5, Events: []event{{At: 2, Kind: evStatus, Status: 429, RetryAfter: 2}}}}}},
	{"retry-after-beyond-the-time-budget", scenario{Seed: 14, Style: styleNextURL, AllPages: true, Cap: 2, Default: 2, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 5, Events: []event{{At: 2, Kind: evStatus, Status: 429, RetryAfter: 3600}}}}}},
	{"unauthorized-mid-walk", scenario{Seed: 15, Style: styleLink, AllPages: true, Cap: 3, Default: 3, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 10, Events: []event{{At: 3, Kind: evStatus, Status: 401}}}}}},
	{"server-errors-then-rows", scenario{Seed: 16, Style: styleOffset, AllPages: true, Cap: 4, Default: 4, Total: totalExact, FanOut: 1,
		Cols: []collection{{Value: "L0", Rows: 9, Events: []event{{At: 2, Kind: evStatus, Status: 503}, {At: 3, Kind: evStatus, Status: 500}}}}}},
}

// emptyPagesFrom is a run of empty pages that say more, from request
// from to request to.
func emptyPagesFrom(from, to int) []event {
	var evs []event
	for at := from; at <= to; at++ {
		evs = append(evs, event{At: at, Kind: evEmptyMore})
	}
	return evs
}

func TestHostileUpstreams(t *testing.T) {
	rig := newHostileRig(t)
	if *hostileOnly != 0 {
		res := rig.run(generate(*hostileOnly))
		t.Logf("scenario: %s", res.sc.goString())
		t.Logf("transcript:\n  %s", strings.Join(res.h.transcript, "\n  "))
		t.Logf("view: %s (err %v)", res.view, res.err)
		for _, v := range res.violations {
			t.Errorf("%s: %s", v.rule, v.detail)
		}
		return
	}
	t.Run("regressions", func(t *testing.T) {
		for _, rc := range hostileRegressions {
			t.Run(rc.name, func(t *testing.T) {
				res := rig.run(rc.sc)
				for _, v := range res.violations {
					t.Errorf("%s: %s\n  view: %s\n  transcript: %s", v.rule, v.detail, clip(string(res.view), 1500), clip(strings.Join(res.h.transcript, " | "), 1500))
				}
			})
		}
	})
	t.Run("sweep", func(t *testing.T) {
		n := *hostileCases
		if testing.Short() {
			n = max(n/6, 1)
		}
		type group struct {
			count int
			first caseResult
			seeds []uint64
		}
		groups := map[string]*group{}
		styles := map[style]int{}
		var adversary struct{ mutations, dups, faults, empty, foreign, cycles, failed, requests int }
		// The shapes of issue 21 the generator must keep making.
		var shapes struct {
			askedOffsets, head, middle, tail, cutMidValue, probes, shifted int
			aggregatesPartial, aggregatesUnstable, aggregatesFiltered      int // issue 24: _aggregate over sets that are not complete, or filtered
			cacheHits                                                      int // a complete walk's call made again, from the cache
			ahead                                                          int // issue 27: walks with requests in flight at once
		}
		for i := range n {
			seed := *hostileSeed*1_000_000 + uint64(i)
			res := rig.run(generate(seed))
			styles[res.sc.Style]++
			for _, c := range res.h.cols {
				adversary.mutations += c.mutations
				adversary.dups += c.dups
				adversary.faults += c.faults
				adversary.empty += c.emptyPages
				adversary.foreign += b2i(c.foreignSent)
				adversary.cycles += b2i(c.cycled)
			}
			adversary.requests += res.h.requests
			if res.err != nil {
				adversary.failed++
			}
			if sc := res.sc; sc.Style == stylePage && sc.AskedOffsets && sc.AllPages {
				for _, c := range res.h.cols {
					if c.pages > 1 && c.capped {
						shapes.askedOffsets++
					}
				}
			}
			if res.sc.fetchesAhead() && res.h.overlapped() != "" {
				shapes.ahead++
			}
			for _, c := range res.h.cols {
				shapes.head += c.changedAt[whereHead]
				shapes.middle += c.changedAt[whereMiddle]
				shapes.tail += c.changedAt[whereTail]
			}
			var view map[string]any
			if json.Unmarshal(res.view, &view) == nil {
				for _, p := range fanOutEntries(view["_forEachPartial"]) {
					if obj, _ := p.raw.(map[string]any); strings.HasPrefix(fmt.Sprint(obj["stopReason"]), "budget_") {
						shapes.cutMidValue++
						break
					}
				}
				b, _ := view["_boundary"].(map[string]any)
				if n, _ := b["probes"].(float64); n > 0 {
					shapes.probes++
				}
				if note, _ := view["_note"].(string); strings.Contains(note, "moved across a page boundary") {
					shapes.shifted++
				}
				if res.cachedAgain {
					shapes.cacheHits++
				}
				if agg, _ := view["_aggregate"].(map[string]any); agg != nil {
					switch agg["completion"] {
					case "partial":
						shapes.aggregatesPartial++
					case "unstable":
						shapes.aggregatesUnstable++
					}
					if res.sc.Filter {
						shapes.aggregatesFiltered++
					}
				}
			}
			seen := map[string]bool{}
			for _, v := range res.violations {
				if seen[v.rule] {
					continue
				}
				seen[v.rule] = true
				g := groups[v.rule]
				if g == nil {
					g = &group{first: res}
					groups[v.rule] = g
				}
				g.count++
				if len(g.seeds) < 5 {
					g.seeds = append(g.seeds, seed)
				}
			}
		}
		t.Logf("%d upstreams %v: %d requests; %d rows changed mid-walk, %d pages repeating a row, %d empty pages, %d error or garbage answers, %d next URLs to another origin, %d cursor cycles; %d calls failed outright",
			n, styles, adversary.requests, adversary.mutations, adversary.dups, adversary.empty, adversary.faults, adversary.foreign, adversary.cycles, adversary.failed)
		if n >= 1000 {
			// The adversary must stay an adversary: a generator change that
			// stops producing a style or a trick fails here, not silently.
			for st := stylePage; st <= styleText; st++ {
				if styles[st] == 0 {
					t.Errorf("no %s upstream in %d cases", st, n)
				}
			}
			for what, k := range map[string]int{"changed rows": adversary.mutations, "repeated rows": adversary.dups,
				"empty pages": adversary.empty, "error answers": adversary.faults, "foreign next URLs": adversary.foreign,
				"cursor cycles": adversary.cycles,
				"capped page-number walks numbered by the size asked": shapes.askedOffsets,
				"changes at the head": shapes.head, "changes in the middle": shapes.middle, "changes at the tail": shapes.tail,
				"fan-out values cut mid-walk by the shared budget": shapes.cutMidValue,
				"walks checked by a probe":                         shapes.probes, "shifts seen across a page boundary": shapes.shifted,
				"aggregates over partial sets": shapes.aggregatesPartial, "aggregates over unstable sets": shapes.aggregatesUnstable,
				"aggregates over filtered rows": shapes.aggregatesFiltered, "calls served again from the cache": shapes.cacheHits,
				"walks with requests in flight at once": shapes.ahead} {
				if k == 0 {
					t.Errorf("no %s in %d cases", what, n)
				}
			}
			t.Logf("issue 21 and 24 shapes: %+v", shapes)
		}
		shrinkRuns := 400
		rules := make([]string, 0, len(groups))
		for r := range groups {
			rules = append(rules, r)
		}
		sort.Strings(rules)
		for _, rule := range rules {
			g := groups[rule]
			small := g.first
			if *hostileCut {
				small = rig.shrink(g.first, rule, &shrinkRuns)
			}
			detail := ""
			for _, v := range small.violations {
				if v.rule == rule {
					detail = v.detail
					break
				}
			}
			t.Errorf("%s: %d of %d upstreams, seeds %v (replay: -hostile.only=SEED)\n  shrunk: %s\n  %s\n  view: %s\n  transcript: %s",
				rule, g.count, n, g.seeds, small.sc.goString(), detail, clip(string(small.view), 1500), clip(strings.Join(small.h.transcript, " | "), 1500))
		}
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + fmt.Sprintf("… (%d bytes more)", len(s)-n)
}

// shrink makes res's scenario smaller while it still breaks rule.
// It spends at most *budget runs (shared by every rule of a sweep, so that
// a failing sweep stays quick too).
func (rig *hostileRig) shrink(res caseResult, rule string, budget *int) caseResult {
	breaks := func(r caseResult) bool {
		return slices.ContainsFunc(r.violations, func(v violation) bool { return v.rule == rule })
	}
	best := res
	for improved := true; improved && *budget > 0; {
		improved = false
		for _, cand := range smaller(best.sc) {
			if *budget--; *budget < 0 {
				break
			}
			if r := rig.run(cand); breaks(r) {
				best, improved = r, true
				break
			}
		}
	}
	return best
}

// smaller lists one-step simplifications of sc.
func smaller(sc scenario) []scenario {
	var out []scenario
	try := func(f func(*scenario) bool) {
		c := sc
		c.Cols = slices.Clone(sc.Cols)
		for i := range c.Cols {
			c.Cols[i].Events = slices.Clone(sc.Cols[i].Events)
		}
		if f(&c) {
			out = append(out, c)
		}
	}
	if len(sc.Cols) > 1 {
		for i := range sc.Cols {
			try(func(c *scenario) bool { c.Cols = slices.Delete(c.Cols, i, i+1); return true })
		}
	}
	for i, col := range sc.Cols {
		for j := range col.Events {
			try(func(c *scenario) bool { c.Cols[i].Events = slices.Delete(c.Cols[i].Events, j, j+1); return true })
		}
		try(func(c *scenario) bool { c.Cols[i].FailFrom, c.Cols[i].FailStatus = 0, 0; return col.FailFrom != 0 })
		try(func(c *scenario) bool { c.Cols[i].Rows /= 2; return col.Rows > 0 })
		try(func(c *scenario) bool { c.Cols[i].Rows--; return col.Rows > 0 })
	}
	try(func(c *scenario) bool { c.DupValue = false; return sc.DupValue })
	try(func(c *scenario) bool { c.ForEach = false; return sc.ForEach && len(sc.Cols) == 1 && !sc.DupValue })
	try(func(c *scenario) bool { c.Fields = false; return sc.Fields })
	try(func(c *scenario) bool { c.Filter, c.FilterTypo = false, false; return sc.Filter })
	try(func(c *scenario) bool { c.ModelSize = 0; return sc.ModelSize != 0 })
	try(func(c *scenario) bool { c.Budget = paginate.Budget{}; return sc.Budget != paginate.Budget{} })
	try(func(c *scenario) bool { c.FanOut = 1; return sc.FanOut > 1 })
	try(func(c *scenario) bool { c.Latency = 0; return sc.Latency > 0 })
	try(func(c *scenario) bool { c.Budget.Concurrency = 1; return sc.Budget.Concurrency != 1 })
	try(func(c *scenario) bool { c.Relative = false; return sc.Relative })
	try(func(c *scenario) bool { c.Total, c.Over, c.WholePages = totalNone, 0, 0; return sc.Total != totalNone })
	try(func(c *scenario) bool { c.MoreFlag = false; return sc.MoreFlag && sc.Style != styleLastID })
	try(func(c *scenario) bool { c.End = endAbsent; return sc.End != endAbsent })
	try(func(c *scenario) bool { c.SizeMax = 0; return sc.SizeMax != 0 })
	try(func(c *scenario) bool { c.Schema = false; return sc.Schema })
	try(func(c *scenario) bool { c.Body = false; return sc.Body })
	return out
}

// TestHostileGeneratorIsSeeded: a seed is a case, run after run.
func TestHostileGeneratorIsSeeded(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		if a, b := generate(seed), generate(seed); a.goString() != b.goString() {
			t.Fatalf("seed %d gives two scenarios:\n%s\n%s", seed, a.goString(), b.goString())
		}
	}
}

// TestHostileModelCatchesBadWalker tests the test: a walker that guesses
// a cursor, skips a page, asks again after the end or retries a 404 is
// caught by the model on the wire.
func TestHostileModelCatchesBadWalker(t *testing.T) {
	rig := newHostileRig(t)
	get := func(h *hostile, query string) {
		t.Helper()
		resp, err := http.Get(h.origin + "/lists/L0/items?" + query)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	model := func(sc scenario) *hostile {
		rig.mu.Lock()
		rig.next++
		prefix := "/m" + strconv.FormatInt(rig.next, 10)
		rig.mu.Unlock()
		h := newHostile(sc, rig.srv.URL, rig.foreign.URL, prefix)
		rig.cases.Store(prefix, h)
		t.Cleanup(func() { rig.cases.Delete(prefix) })
		return h
	}
	rules := func(h *hostile) []string {
		h.mu.Lock()
		defer h.mu.Unlock()
		var out []string
		for _, v := range h.violations {
			out = append(out, v.rule)
		}
		return out
	}
	base := scenario{Seed: 7, AllPages: true, Cap: 2, Default: 2, FanOut: 1, Cols: []collection{{Value: "L0", Rows: 3}}}

	cursor := base
	cursor.Style = styleCursor
	h := model(cursor)
	get(h, "limit=2")
	get(h, "limit=2&cursor=made-up")
	if got := rules(h); !slices.Equal(got, []string{ruleGuessedCursor}) {
		t.Errorf("guessed cursor: rules %v", got)
	}

	page := base
	page.Style = stylePage
	h = model(page)
	get(h, "per_page=2")
	get(h, "per_page=2&page=3") // skips page 2
	get(h, "per_page=2&page=4") // after the short page 3… and skips again
	if got := rules(h); !slices.Contains(got, rulePosition) {
		t.Errorf("skipped page: rules %v", got)
	}

	done := base
	done.Style, done.MoreFlag = styleOffset, true
	done.Budget.Concurrency = 1 // one request at a time
	h = model(done)
	get(h, "limit=2")
	get(h, "limit=2&offset=2") // has_more: false
	get(h, "limit=2&offset=3")
	if got := rules(h); !slices.Contains(got, ruleAfterDone) {
		t.Errorf("request after has_more false: rules %v", got)
	}
	// A walk fetching ahead may have sent its window's requests before it
	// read that answer, never more.
	done.Budget.Concurrency = 2
	h = model(done)
	get(h, "limit=2")
	get(h, "limit=2&offset=2") // has_more: false
	for i := range done.late() {
		get(h, "limit=2&offset="+strconv.Itoa(3+i))
	}
	if got := rules(h); len(got) != 0 {
		t.Errorf("the window's requests after has_more false: rules %v", got)
	}
	get(h, "limit=2&offset="+strconv.Itoa(3+done.late()))
	if got := rules(h); !slices.Contains(got, ruleAfterDone) {
		t.Errorf("more than the window's requests after has_more false: rules %v", got)
	}

	refused := base
	refused.Style = styleLastID
	refused.Cols = []collection{{Value: "L0", Rows: 3, FailFrom: 1, FailStatus: 404}}
	h = model(refused)
	get(h, "limit=2")
	get(h, "limit=2")
	if got := rules(h); !slices.Equal(got, []string{ruleAfterRefusal}) {
		t.Errorf("404 retried: rules %v", got)
	}

	empty := base
	empty.Style = styleNextURL
	empty.Cols = []collection{{Value: "L0", Rows: 3, Events: []event{{At: 1, Kind: evEmptyMore}, {At: 2, Kind: evEmptyMore}, {At: 3, Kind: evEmptyMore}}}}
	h = model(empty)
	get(h, "limit=2")
	for range 3 {
		h.mu.Lock()
		tok := h.cols["L0"].lastToken
		h.mu.Unlock()
		get(h, "limit=2&after="+tok)
	}
	if got := rules(h); !slices.Equal(got, []string{ruleEmptyPages}) {
		t.Errorf("a fourth empty page: rules %v", got)
	}

	foreign := base
	foreign.Style = styleLink
	foreign.Cols = []collection{{Value: "L0", Rows: 3, Events: []event{{At: 1, Kind: evForeign}}}}
	h = model(foreign)
	resp, err := http.Get(h.origin + "/lists/L0/items?per_page=2")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	next, _, _ := strings.Cut(strings.TrimPrefix(resp.Header.Get("Link"), "<"), ">")
	if !strings.HasPrefix(next, rig.foreign.URL) {
		t.Fatalf("Link %q does not point at the other origin", resp.Header.Get("Link"))
	}
	if resp, err = http.Get(next); err == nil {
		resp.Body.Close()
	}
	if got := rules(h); !slices.Equal(got, []string{ruleForeign}) {
		t.Errorf("followed a foreign next URL: rules %v", got)
	}
}

// checkAggregate checks an _aggregate call's aggregate against the rows it
// kept (read back into the view by withStoredRows): its completion is the
// walk's, its verdict words it, and its rows, groups, counts, sums and
// distinct counts are those of the rows.
func checkAggregate(sc scenario, v map[string]any, completion string) []violation {
	var vs []violation
	add := func(format string, args ...any) {
		vs = append(vs, violation{ruleAggregate, fmt.Sprintf(format, args...)})
	}
	agg, _ := v["_aggregate"].(map[string]any)
	if agg == nil {
		add("the call asked _aggregate and the view has none (or no _resultId to read its rows): %v", clip(fmt.Sprint(v), 300))
		return vs
	}
	if agg["completion"] != completion {
		add("_aggregate.completion is %v; the walk's is %q", agg["completion"], completion)
	}
	verdict, _ := agg["verdict"].(string)
	words := map[string]string{"complete": "all ", "partial": "not totals", "unstable": "at least", "single_response": "single response"}[completion]
	if !strings.Contains(verdict, words) {
		add("completion %q, and the aggregate's verdict does not say %q: %q", completion, words, verdict)
	}
	if completion != "complete" && strings.HasPrefix(verdict, "over all") {
		add("completion %q, and the aggregate's verdict claims all rows: %q", completion, verdict)
	}
	rows, _ := v[sc.itemsKey()].([]any)
	if n, _ := agg["rows"].(float64); int(n) != len(rows) {
		add("_aggregate.rows is %v; %d rows were kept (matching the filter)", agg["rows"], len(rows))
	}
	type tally struct {
		count int
		sum   int64
		ids   map[string]bool
	}
	want := map[string]*tally{}
	for _, el := range rows {
		row, _ := el.(map[string]any)
		key := ""
		if sc.ForEach {
			key, _ = row["list_id"].(string)
		}
		t := want[key]
		if t == nil {
			t = &tally{ids: map[string]bool{}}
			want[key] = t
		}
		t.count++
		n, _ := row["n"].(float64)
		t.sum += int64(n)
		id, _ := row["id"].(string)
		t.ids[id] = true
	}
	groups, _ := agg["groups"].([]any)
	if n, _ := agg["groupCount"].(float64); len(rows) > 0 && int(n) != len(want) {
		add("_aggregate.groupCount is %v; the rows kept have %d groups", agg["groupCount"], len(want))
	}
	seen := map[string]bool{}
	for _, el := range groups {
		g, _ := el.(map[string]any)
		key := ""
		if sc.ForEach {
			key, _ = g["list_id"].(string)
		}
		count, _ := g["count"].(float64)
		t := want[key]
		if t == nil {
			if count != 0 {
				add("_aggregate has a group %v that no row kept is in", clip(fmt.Sprint(g), 200))
			}
			continue
		}
		seen[key] = true
		if int(count) != t.count {
			add("group %q: count %v; %d rows kept", key, g["count"], t.count)
		}
		if sum, _ := g["sum(n)"].(string); sum != strconv.FormatInt(t.sum, 10) {
			add("group %q: sum(n) %v; the rows kept sum to %d", key, g["sum(n)"], t.sum)
		}
		if d, _ := g["count_distinct(id)"].(float64); int(d) != len(t.ids) {
			add("group %q: count_distinct(id) %v; the rows kept have %d ids", key, g["count_distinct(id)"], len(t.ids))
		}
	}
	for key := range want {
		if !seen[key] {
			add("group %q of %d rows kept is not in _aggregate.groups", key, want[key].count)
		}
	}
	return vs
}

// checkCacheHit checks the second of two identical calls whose first walk
// was complete (sent made upstream requests): it is served from the
// dataset cache — no request, _cache.hit, a note that says so — with the
// first call's completion, rows and aggregate.
func checkCacheHit(first, second []byte, sent int) []violation {
	var vs []violation
	add := func(format string, args ...any) {
		vs = append(vs, violation{ruleCacheHit, fmt.Sprintf(format, args...)})
	}
	var a, b map[string]any
	if json.Unmarshal(first, &a) != nil || json.Unmarshal(second, &b) != nil {
		add("a view is not a JSON object: %s", clip(string(second), 200))
		return vs
	}
	if sent != 0 {
		add("the second call of a complete walk sent %d upstream requests instead of reading the cache", sent)
	}
	c, _ := b["_cache"].(map[string]any)
	if c["hit"] != true {
		add("the second call of a complete walk has _cache %v", b["_cache"])
	}
	ba, _ := a["_boundary"].(map[string]any)
	bb, _ := b["_boundary"].(map[string]any)
	if ba["completion"] != bb["completion"] || a["_stoppedBy"] != b["_stoppedBy"] {
		add("a cache hit says %v (%v); the walk it reuses was %v (%v)", bb["completion"], b["_stoppedBy"], ba["completion"], a["_stoppedBy"])
	}
	if n, _ := bb["requests"].(float64); n != 0 {
		add("a cache hit's _boundary.requests is %v", bb["requests"])
	}
	if note, _ := b["_note"].(string); !strings.Contains(note, "cached") {
		add("a cache hit's note does not say the rows are cached: %q", note)
	}
	ids := func(v map[string]any) []string {
		var out []string
		for _, key := range []string{"data", "items"} {
			rows, _ := v[key].([]any)
			for _, el := range rows {
				row, _ := el.(map[string]any)
				out = append(out, fmt.Sprint(row["id"], "/", row["list_id"]))
			}
		}
		sort.Strings(out)
		return out
	}
	if x, y := ids(a), ids(b); !slices.Equal(x, y) {
		add("a cache hit holds rows %v; the walk it reuses returned %v", clip(fmt.Sprint(y), 200), clip(fmt.Sprint(x), 200))
	}
	aa, _ := a["_aggregate"].(map[string]any)
	ab, _ := b["_aggregate"].(map[string]any)
	ga, _ := json.Marshal(aa["groups"])
	gb, _ := json.Marshal(ab["groups"])
	if !bytes.Equal(ga, gb) {
		add("a cache hit's aggregate groups are %s; the walk's were %s", clip(string(gb), 200), clip(string(ga), 200))
	}
	return vs
}
