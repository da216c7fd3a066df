package paginate

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

func strSchema() *tools.Schema { return &tools.Schema{Type: "string"} }

func obj(props map[string]*tools.Schema) *tools.Schema {
	return &tools.Schema{Type: "object", Properties: props}
}

func arrOf(item *tools.Schema) *tools.Schema { return &tools.Schema{Type: "array", Items: item} }

var idItem = obj(map[string]*tools.Schema{"id": strSchema(), "name": strSchema()})

func qparam(name string, s *tools.Schema, desc string) tools.Param {
	return tools.Param{Name: name, In: tools.InQuery, Schema: s, Description: desc}
}

// TestConfidence: every plan says how sure it is and why, and the grade
// follows what the document declares.
func TestConfidence(t *testing.T) {
	intS := &tools.Schema{Type: "integer"}
	cases := []struct {
		name     string
		tool     *tools.Tool
		strategy Strategy
		conf     Confidence
		stream   bool
		evidence string // a word of the evidence
	}{
		{"declared next cursor",
			&tools.Tool{Method: "GET", Path: "/items", Params: []tools.Param{qparam("cursor", strSchema(), ""), qparam("limit", intS, "")},
				Response: obj(map[string]*tools.Schema{"data": arrOf(idItem), "next_cursor": strSchema()})},
			Cursor, High, false, "next_cursor"},
		{"cursor with a bare array and nothing else: an undeclared Link header",
			&tools.Tool{Method: "GET", Path: "/items", Params: []tools.Param{qparam("cursor", strSchema(), "A pointer to the last object fetched."), qparam("per_page", intS, "")},
				Response: arrOf(idItem)},
			LinkHeader, Low, false, "does not declare"},
		{"the Link header named in prose",
			&tools.Tool{Method: "GET", Path: "/users", Params: []tools.Param{qparam("after", strSchema(), "The cursor, obtained from the Link response header."), qparam("limit", intS, "")},
				Response: arrOf(idItem)},
			LinkHeader, Medium, false, "Link header"},
		{"a keyset over ids",
			&tools.Tool{Method: "GET", Path: "/guilds/{id}/members", Params: []tools.Param{qparam("after", intS, ""), qparam("limit", intS, "")},
				Response: arrOf(idItem)},
			Cursor, Medium, false, "keyset"},
		{"an event stream",
			&tools.Tool{Method: "GET", Path: "/events", Params: []tools.Param{qparam("stream_position", strSchema(), "")},
				Response: obj(map[string]*tools.Schema{"entries": arrOf(idItem), "next_stream_position": strSchema()})},
			Cursor, Low, true, "stream"},
		{"a write reusing the list envelope",
			&tools.Tool{Method: "PUT", Path: "/Invoices", Params: []tools.Param{{Name: "Invoices", In: tools.InBody, Schema: arrOf(idItem)},
				{Name: "pagination", In: tools.InBody, Schema: obj(map[string]*tools.Schema{"page": intS, "pageSize": intS})}},
				Response: obj(map[string]*tools.Schema{"Invoices": arrOf(idItem), "pagination": obj(map[string]*tools.Schema{"pageCount": intS})})},
			None, High, false, "changes data"},
		{"a POST whose body carries the response's items",
			&tools.Tool{Method: "POST", Path: "/Invoices", OperationID: "updateOrCreateInvoices", Params: []tools.Param{{Name: "Invoices", In: tools.InBody, Schema: arrOf(idItem)},
				{Name: "pagination", In: tools.InBody, Schema: obj(map[string]*tools.Schema{"page": intS, "pageSize": intS})}},
				Response: obj(map[string]*tools.Schema{"Invoices": arrOf(idItem), "pagination": obj(map[string]*tools.Schema{"pageCount": intS})})},
			None, High, false, "echo the list envelope"},
		{"a POST search with the same envelope still reads",
			&tools.Tool{Method: "POST", Path: "/invoices/search", Params: []tools.Param{{Name: "cursor", In: tools.InBody, Schema: strSchema()}, {Name: "limit", In: tools.InBody, Schema: intS}},
				Response: obj(map[string]*tools.Schema{"invoices": arrOf(idItem), "errors": arrOf(idItem), "cursor": strSchema()})},
			Cursor, High, false, "sent back from cursor"},
		{"page without any end signal",
			&tools.Tool{Method: "GET", Path: "/rows", Params: []tools.Param{qparam("page", intS, ""), qparam("pageSize", intS, "")},
				Response: obj(map[string]*tools.Schema{"data": arrOf(idItem)})},
			PageNumber, Medium, false, "short page"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Detect(tc.tool)
			if p.Strategy != tc.strategy || p.Confidence != tc.conf || p.Stream != tc.stream {
				t.Errorf("plan %+v: want %s, %s, stream=%v", p, tc.strategy, tc.conf, tc.stream)
			}
			if !strings.Contains(strings.Join(p.Evidence, " | "), tc.evidence) {
				t.Errorf("evidence %q does not mention %q", p.Evidence, tc.evidence)
			}
			in := NewInspection(tc.tool, p)
			if in.Pagination.Confidence != tc.conf || len(in.Pagination.Evidence) == 0 {
				t.Errorf("inspection %+v does not carry the grade", in.Pagination)
			}
		})
	}
}

// An unsure plan (a Link header guessed, not declared) walks while the
// server sends Link headers and completes on one without rel="next"; a
// page with no Link header at all is not taken as the end.
func TestUnsureWalkNeedsTheServersEndSignal(t *testing.T) {
	tool := &tools.Tool{ID: "p.list", Provider: "p", Name: "list", Kind: tools.KindAPI, Method: "GET", Path: "/items",
		Origin: "https://api.example", Params: []tools.Param{qparam("cursor", strSchema(), ""), qparam("per_page", &tools.Schema{Type: "integer"}, "")},
		Response: arrOf(idItem)}
	plan := Detect(tool)
	if plan.Strategy != LinkHeader || !plan.Unsure() {
		t.Fatalf("plan %+v: want an unsure link_header plan", plan)
	}
	run := func(lastHeader http.Header) *Result {
		calls := 0
		caller := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
			calls++
			r := jsonResponse(fmt.Sprintf(`[{"id":"a%d"},{"id":"b%d"}]`, calls, calls))
			if calls == 1 {
				r.Header.Set("Link", `<https://api.example/items?cursor=c2>; rel="next"`)
			} else {
				for k, v := range lastHeader {
					r.Header[k] = v
				}
			}
			return r, nil
		}}
		res, err := Walk(context.Background(), WalkOptions{Caller: caller, Clock: NewFakeClock(epoch), Tool: tool, Plan: plan, AllPages: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(http.Header{"Link": {`<https://api.example/items?cursor=c1>; rel="prev"`}}); !IsComplete(res.StoppedBy) || res.Pages != 2 {
		t.Errorf("a Link header without next: %s after %d pages, want complete after 2", res.StoppedBy, res.Pages)
	}
	res := run(nil)
	if IsComplete(res.StoppedBy) || res.Complete {
		t.Errorf("no Link header on the last page: %s, complete=%v; an unsure plan must not claim completeness", res.StoppedBy, res.Complete)
	}
	if res.Pages != 2 || len(res.Items) != 4 {
		t.Errorf("pages %d, items %d; want the 2 pages and 4 items fetched kept", res.Pages, len(res.Items))
	}
}

// Walk parameters deeper than one level in a body (Datadog's
// data.attributes.page.cursor) are set in copies, never through the
// caller's maps, and read back.
func TestDeepBodyArgs(t *testing.T) {
	tool := &tools.Tool{Params: []tools.Param{{Name: "data", In: tools.InBody, Schema: obj(map[string]*tools.Schema{
		"attributes": obj(map[string]*tools.Schema{"page": obj(map[string]*tools.Schema{"cursor": strSchema(), "limit": {Type: "integer"}})})})}}}
	orig := map[string]any{"data": map[string]any{"attributes": map[string]any{"query": "x", "page": map[string]any{"limit": 5}}}}
	args := cloneArgs(orig)
	setArg(tool, args, "data.attributes.page.cursor", "c2")
	if v, ok := argString(args, "data.attributes.page.cursor"); !ok || v != "c2" {
		t.Errorf("cursor = %q, %v", v, ok)
	}
	if n, ok := argInt(args, "data.attributes.page.limit"); !ok || n != 5 {
		t.Errorf("limit = %d, %v; the sibling must survive", n, ok)
	}
	if q := args["data"].(map[string]any)["attributes"].(map[string]any)["query"]; q != "x" {
		t.Errorf("query = %v", q)
	}
	if _, ok := orig["data"].(map[string]any)["attributes"].(map[string]any)["page"].(map[string]any)["cursor"]; ok {
		t.Error("setArg wrote through the caller's arguments")
	}
	if s := paramSchema(tool, "data.attributes.page.limit"); s == nil || s.Type != "integer" {
		t.Errorf("paramSchema = %+v", s)
	}
}

// An event stream hands a position back on every page: the walk goes on
// until its budget, and a page without a position is not taken as the
// end of a stream that never ends.
func TestStreamWalkNeedsAnExplicitStop(t *testing.T) {
	tool := &tools.Tool{ID: "p.events", Provider: "p", Name: "events", Kind: tools.KindAPI, Method: "GET", Path: "/events",
		Origin: "https://api.example", Params: []tools.Param{qparam("stream_position", strSchema(), ""), qparam("limit", &tools.Schema{Type: "integer"}, "")},
		Response: obj(map[string]*tools.Schema{"entries": arrOf(idItem), "next_stream_position": strSchema()})}
	plan := Detect(tool)
	if !plan.Stream || plan.Strategy != Cursor || plan.CursorParam != "stream_position" {
		t.Fatalf("plan %+v: want a stream walked by stream_position", plan)
	}
	walk := func(last int) *Result {
		calls := 0
		caller := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
			calls++
			if calls == last {
				return jsonResponse(fmt.Sprintf(`{"entries":[{"id":"e%d"}]}`, calls)), nil
			}
			return jsonResponse(fmt.Sprintf(`{"entries":[{"id":"e%d"}],"next_stream_position":"p%d"}`, calls, calls)), nil
		}}
		res, err := Walk(context.Background(), WalkOptions{Caller: caller, Clock: NewFakeClock(epoch), Tool: tool, Plan: plan,
			AllPages: true, Budget: Budget{Pages: 5}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := walk(-1); res.StoppedBy != StopBudgetPages || res.Complete {
		t.Errorf("endless stream: %s, complete=%v; want budget_pages, not complete", res.StoppedBy, res.Complete)
	}
	if res := walk(3); res.Complete || res.Pages != 3 {
		t.Errorf("a page without a position: %s after %d pages, complete=%v; want 3 pages, not complete", res.StoppedBy, res.Pages, res.Complete)
	}
}
