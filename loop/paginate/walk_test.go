package paginate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/tools"
)

// fakeCaller is a Caller with a function field, for tests that need no
// HTTP server.
type fakeCaller struct {
	call func(ctx context.Context, req tools.Request) (*tools.Response, error)
}

func (f fakeCaller) Call(ctx context.Context, req tools.Request) (*tools.Response, error) {
	return f.call(ctx, req)
}

// jsonResponse is a 200 with body.
func jsonResponse(body string) *tools.Response {
	return &tools.Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
}

// endlessCaller answers every request with two items and a fresh cursor.
func endlessCaller(calls *[]string) Caller {
	return fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		n := len(*calls) + 1
		c, _ := req.Args["cursor"].(string)
		*calls = append(*calls, fmt.Sprintf("%v/cursor=%s", req.Args["value"], c))
		return jsonResponse(page(seq("i", 2*n-1, 2), fmt.Sprintf(`"next_cursor":"c%d"`, n))), nil
	}}
}

// `_for_each` × `_all_pages`: every walk of one call shares the Meter's
// requests, items, bytes and clock.
func TestSharedMeter(t *testing.T) {
	clock := NewFakeClock(epoch)
	meter := NewMeter(clock.Now())
	var calls []string
	tool := listTool("https://api.example", cursorPlan, 100)
	budget := Budget{Requests: 5}
	walk := func(value string) *Result {
		t.Helper()
		res, err := Walk(context.Background(), WalkOptions{
			Caller: endlessCaller(&calls), Clock: clock, Tool: tool, Plan: cursorPlan, AllPages: true,
			Args: map[string]any{"value": value}, Meter: meter, Budget: budget,
		})
		if err != nil {
			t.Fatalf("walk %s: %v", value, err)
		}
		return res
	}
	a, b, c := walk("a"), walk("b"), walk("c")

	if diff := cmp.Diff([]string{"a/cursor=", "a/cursor=c1", "a/cursor=c2", "a/cursor=c3", "a/cursor=c4"}, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if got := verdictOf(a); got.StoppedBy != StopBudgetRequests || got.Pages != 5 || got.Items != 10 {
		t.Errorf("first walk = %+v, want 5 pages, 10 items, budget_requests", got)
	}
	for name, r := range map[string]*Result{"second": b, "third": c} {
		want := verdict{StoppedBy: StopBudgetRequests, LikelyMore: true}
		if diff := cmp.Diff(want, verdictOf(r)); diff != "" {
			t.Errorf("%s walk, after the budget was spent (-want +got):\n%s", name, diff)
		}
		if r.Uninspected != "the whole collection: the request budget (5 per call, retries included) was spent" {
			t.Errorf("%s walk Uninspected = %q", name, r.Uninspected)
		}
	}
	u := meter.Usage()
	if u.Requests != 5 || u.Items != 10 || u.Bytes != a.Bytes {
		t.Errorf("meter = %+v, want 5 requests, 10 items, %d bytes", u, a.Bytes)
	}
}

// The item budget is shared too: a second walk stops where the first left
// the call's budget.
func TestSharedMeterItems(t *testing.T) {
	clock := NewFakeClock(epoch)
	meter := NewMeter(clock.Now())
	var calls []string
	tool := listTool("https://api.example", cursorPlan, 100)
	opts := WalkOptions{Caller: endlessCaller(&calls), Clock: clock, Tool: tool, Plan: cursorPlan,
		AllPages: true, Meter: meter, Budget: Budget{Items: 7, Pages: 3}}
	first, err := Walk(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	second, err := Walk(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	// First: 3 pages of 2 (budget_pages, 6 items). Second: one page
	// reaches 8 ≥ 7 before its own page budget.
	if first.StoppedBy != StopBudgetPages || len(first.Items) != 6 {
		t.Errorf("first = %+v", verdictOf(first))
	}
	if second.StoppedBy != StopBudgetItems || len(second.Items) != 2 || second.Pages != 1 {
		t.Errorf("second = %+v", verdictOf(second))
	}
}

func TestProgress(t *testing.T) {
	clock := NewFakeClock(epoch)
	var got []Progress
	var calls []string
	caller := endlessCaller(&calls)
	slow := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		clock.Advance(2 * time.Second)
		return caller.Call(ctx, req)
	}}
	_, err := Walk(context.Background(), WalkOptions{
		Caller: slow, Clock: clock, Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan,
		AllPages: true, Budget: Budget{Pages: 3}, Progress: func(p Progress) { got = append(got, p) },
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Progress{
		{Page: 1, PagesMax: 3, Items: 2, Requests: 1, RequestsMax: 60, Elapsed: 2 * time.Second},
		{Page: 2, PagesMax: 3, Items: 4, Requests: 2, RequestsMax: 60, Elapsed: 4 * time.Second},
		{Page: 3, PagesMax: 3, Items: 6, Requests: 3, RequestsMax: 60, Elapsed: 6 * time.Second},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
}

// A tool that does not page may still take a size-like argument (a
// search's count): it is the caller's, sent as given, and no page size.
func TestSizeArgumentOfAToolThatDoesNotPage(t *testing.T) {
	tool := &tools.Tool{ID: "m.search", Provider: "m", Name: "search", Kind: tools.KindMCP,
		Params: []tools.Param{{Name: "query", Schema: &tools.Schema{Type: "string"}}, {Name: "count", Schema: &tools.Schema{Type: "integer"}}}}
	plan := Detect(tool)
	if plan.Paginated() {
		t.Fatalf("plan %+v pages", plan)
	}
	var sent map[string]any
	caller := fakeCaller{call: func(_ context.Context, req tools.Request) (*tools.Response, error) {
		sent = req.Args
		return jsonResponse(`{"hits":[{"id":"a"}]}`), nil
	}}
	res, err := Walk(context.Background(), WalkOptions{Caller: caller, Clock: NewFakeClock(epoch), Tool: tool, Plan: plan, AllPages: true,
		Args: map[string]any{"query": "q", "count": 5.0}})
	if err != nil || res.PageSize != 0 || sent["count"] != 5.0 {
		t.Errorf("page size %d, count sent %v, err %v", res.PageSize, sent["count"], err)
	}
}

func TestWalkCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	caller := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		n++
		if n == 2 {
			cancel()
			return nil, ctx.Err()
		}
		return jsonResponse(page(seq("i", 1, 2), `"next_cursor":"c1"`)), nil
	}}
	res, err := Walk(ctx, WalkOptions{Caller: caller, Clock: NewFakeClock(epoch),
		Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan, AllPages: true})
	// Cancelled after a page: that page is a partial result, stopped by
	// cancelled, and no further request is sent.
	if err != nil || res == nil || res.StoppedBy != StopCancelled || res.Complete || !res.LikelyMore ||
		res.Pages != 1 || len(res.Items) != 2 || res.Requests != 2 || res.LastCursor != "c1" {
		t.Fatalf("Walk = %+v, %v; want a partial page stopped by cancelled", res, err)
	}
	if n != 2 {
		t.Errorf("%d calls, want 2 (no retry after cancellation)", n)
	}
	// Cancelled before any page came back: nothing to show, an error.
	ctx, cancel = context.WithCancel(context.Background())
	n = 0
	first := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		n++
		cancel()
		return nil, ctx.Err()
	}}
	res, err = Walk(ctx, WalkOptions{Caller: first, Clock: NewFakeClock(epoch),
		Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan, AllPages: true})
	if !errors.Is(err, context.Canceled) || res != nil || n != 1 {
		t.Fatalf("cancelled on the first page: Walk = %v, %v after %d calls; want nil, context.Canceled after 1", res, err, n)
	}
}

// A deadline on ctx ends the walk as budget_time, like the time budget.
func TestWalkContextDeadline(t *testing.T) {
	var n int
	caller := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		n++
		if n == 2 {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return jsonResponse(page(seq("i", 1, 2), `"next_cursor":"c1"`)), nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	res, err := Walk(ctx, WalkOptions{Caller: caller, Clock: NewFakeClock(epoch),
		Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan, AllPages: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedBy != StopBudgetTime || res.Complete || len(res.Items) != 2 {
		t.Errorf("Walk = %+v, want a partial budget_time with the first page", verdictOf(res))
	}
}

func TestWalkBadOptions(t *testing.T) {
	tool := listTool("https://api.example", cursorPlan, 100)
	caller := fakeCaller{call: func(context.Context, tools.Request) (*tools.Response, error) {
		t.Fatal("no request expected")
		return nil, nil
	}}
	for name, o := range map[string]WalkOptions{
		"no caller":       {Tool: tool},
		"no tool":         {Caller: caller},
		"negative budget": {Caller: caller, Tool: tool, Budget: Budget{Pages: -1}},
	} {
		if _, err := Walk(context.Background(), o); err == nil {
			t.Errorf("%s: Walk succeeded, want an error", name)
		}
	}
}

// A Caller that answers neither a response nor an error is a failure of
// the page, not a crash.
func TestWalkNilResponse(t *testing.T) {
	caller := fakeCaller{call: func(context.Context, tools.Request) (*tools.Response, error) { return nil, nil }}
	_, err := Walk(context.Background(), WalkOptions{Caller: caller, Clock: NewFakeClock(epoch),
		Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan, AllPages: true})
	var pe *PageError
	if !errors.As(err, &pe) || pe.StoppedBy != StopHTTPError {
		t.Fatalf("Walk error = %v, want a *PageError http_error", err)
	}
}

// Walk never changes the caller's arguments.
func TestWalkLeavesArgsAlone(t *testing.T) {
	var calls []string
	args := map[string]any{"value": "x", "nested": map[string]any{"k": "v"}}
	_, err := Walk(context.Background(), WalkOptions{Caller: endlessCaller(&calls), Clock: NewFakeClock(epoch),
		Tool: listTool("https://api.example", cursorPlan, 100), Plan: cursorPlan, AllPages: true,
		Args: args, Budget: Budget{Pages: 3}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"value": "x", "nested": map[string]any{"k": "v"}}
	if diff := cmp.Diff(want, args); diff != "" {
		t.Errorf("args changed (-want +got):\n%s", diff)
	}
}

func TestChooseSize(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		name        string
		schema      *tools.Schema
		items       int
		want        int
		wantGuessed bool
	}{
		{"schema maximum", &tools.Schema{Type: "integer", Maximum: f(250)}, 5000, 250, false},
		{"no maximum", &tools.Schema{Type: "integer"}, 5000, 100, true},
		{"no schema", nil, 5000, 100, true},
		{"item budget below", &tools.Schema{Type: "integer", Maximum: f(1000)}, 300, 300, false},
		{"minimum above", &tools.Schema{Type: "integer", Minimum: f(200)}, 5000, 200, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tool := &tools.Tool{Params: []tools.Param{{Name: "limit", In: tools.InQuery, Schema: c.schema}}}
			got, guessed := chooseSize(tool, "limit", c.items)
			if got != c.want || guessed != c.wantGuessed {
				t.Errorf("chooseSize = %d, %v; want %d, %v", got, guessed, c.want, c.wantGuessed)
			}
		})
	}
}

func TestPageBase(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		schema *tools.Schema
		want   int
	}{
		{nil, 1},
		{&tools.Schema{Type: "integer"}, 1},
		{&tools.Schema{Type: "integer", Default: float64(0)}, 0},
		{&tools.Schema{Type: "integer", Minimum: f(0)}, 0},
		{&tools.Schema{Type: "integer", Minimum: f(1), Default: float64(1)}, 1},
	}
	for i, c := range cases {
		tool := &tools.Tool{Params: []tools.Param{{Name: "page", In: tools.InQuery, Schema: c.schema}}}
		if got := pageBase(tool, "page"); got != c.want {
			t.Errorf("case %d: pageBase = %d, want %d", i, got, c.want)
		}
	}
}

// A zero-based page walk sends 1 after the server's default first page
// (and probes the boundary of each full page with the page itself: 0
// after page 1, 1 after page 2).
func TestZeroBasedPages(t *testing.T) {
	var sent []string
	caller := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		sent = append(sent, fmt.Sprint(req.Args["page"]))
		n, _ := argInt(req.Args, "page")
		if n >= 2 {
			return jsonResponse(page(nil, "")), nil
		}
		return jsonResponse(page(seq("i", n*2+1, 2), "")), nil
	}}
	tool := listTool("https://api.example", pagePlan, 2)
	tool.Params[1].Schema = &tools.Schema{Type: "integer", Default: float64(0)}
	res, err := Walk(context.Background(), WalkOptions{Caller: caller, Clock: NewFakeClock(epoch), Tool: tool,
		Plan: pagePlan, AllPages: true})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"<nil>", "1", "0", "2", "1"}, sent); diff != "" {
		t.Errorf("page arguments (-want +got):\n%s", diff)
	}
	if res.StoppedBy != StopCompleteEmptyPage || len(res.Items) != 4 {
		t.Errorf("result = %+v", verdictOf(res))
	}
}

func TestSetArg(t *testing.T) {
	tool := &tools.Tool{Params: []tools.Param{
		{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
		{Name: "limit", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		{Name: "body", In: tools.InBody, Schema: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"cursor": {Type: "string"}, "offset": {Type: "integer"},
		}}},
	}}
	inner := map[string]any{"filter": "x"}
	args := map[string]any{"body": inner}
	setArg(tool, args, "page", 2)
	setArg(tool, args, "limit", 50)
	setArg(tool, args, "body.offset", 100)
	setArg(tool, args, "body.cursor", "abc")
	want := map[string]any{
		"page": "2", "limit": json.Number("50"),
		"body": map[string]any{"filter": "x", "offset": json.Number("100"), "cursor": "abc"},
	}
	if diff := cmp.Diff(want, args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"filter": "x"}, inner); diff != "" {
		t.Errorf("the caller's nested map was modified (-want +got):\n%s", diff)
	}
	if n, ok := argInt(args, "body.offset"); !ok || n != 100 {
		t.Errorf("argInt(body.offset) = %d, %v", n, ok)
	}
}

func TestOriginOf(t *testing.T) {
	cases := map[string]string{
		"https://API.example.com/v1":     "https://api.example.com:443",
		"https://api.example.com:443/x":  "https://api.example.com:443",
		"http://api.example.com/x":       "http://api.example.com:80",
		"http://127.0.0.1:8080/items?a=": "http://127.0.0.1:8080",
		"/relative/path":                 "",
		"":                               "",
	}
	for in, want := range cases {
		if got := originOf(in); got != want {
			t.Errorf("originOf(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRetryable(t *testing.T) {
	cases := []struct {
		method, name string
		plan         Plan
		want         bool
	}{
		{"GET", "get_order", Plan{Strategy: None}, true},
		{"POST", "search_contacts", Plan{Strategy: None}, true},
		{"POST", "create_order", Plan{Strategy: None}, false},
		{"POST", "run_report", Plan{Strategy: Cursor, Items: "data", ItemsFound: true}, true},
		{"POST", "run_report", Plan{Strategy: Cursor}, false}, // no response array known: a write
		{"DELETE", "delete_order", Plan{Strategy: None}, false},
		{"", "mcp_tool", Plan{Strategy: None}, false},
	}
	for _, c := range cases {
		tool := &tools.Tool{Method: c.method, Name: c.name}
		if got := retryable(tool, c.plan); got != c.want {
			t.Errorf("retryable(%s %s) = %v, want %v", c.method, c.name, got, c.want)
		}
	}
}

// Example: walk a cursor-paginated endpoint to the end.
func ExampleWalk() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "":
			fmt.Fprint(w, `{"data":[{"id":"a"},{"id":"b"}],"next_cursor":"c2"}`)
		case "c2":
			fmt.Fprint(w, `{"data":[{"id":"c"}],"next_cursor":null}`)
		}
	}))
	defer srv.Close()

	tool := &tools.Tool{ID: "acme.list_items", Provider: "acme", Name: "list_items", Method: "GET",
		Origin: srv.URL, Path: "/items", Params: []tools.Param{
			{Name: "cursor", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
		}}
	plan := Plan{Strategy: Cursor, CursorParam: "cursor", Items: "data", ItemsFound: true, NextToken: "next_cursor"}
	res, err := Walk(context.Background(), WalkOptions{
		Caller:   tools.NewInvoker(tools.InvokerOptions{}),
		Tool:     tool,
		Plan:     plan,
		AllPages: true,
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	var ids []string
	for _, it := range res.Items {
		ids = append(ids, string(it))
	}
	fmt.Println(strings.Join(ids, " "))
	fmt.Println(res.Complete, res.StoppedBy, res.Pages, "pages")
	// Output:
	// {"id":"a"} {"id":"b"} {"id":"c"}
	// true complete_no_next 2 pages
}

func TestIDSet(t *testing.T) {
	s := newIDSet(0)
	var dups int
	for i := uint64(0); i < 1000; i++ {
		for _, h := range []uint64{i + 2, (i + 2) << 40, i%7 + 2} {
			if !s.add(h) {
				dups++
			}
		}
	}
	// 1000 + 1000 distinct values; i%7+2 repeats the first ones.
	if dups != 1000 || s.n != 2000 {
		t.Errorf("%d duplicates, %d stored; want 1000, 2000", dups, s.n)
	}
	if !s.add(0) || s.add(0) || !s.add(1<<63) || s.add(1<<63) {
		t.Error("a new value must be added once")
	}
}
