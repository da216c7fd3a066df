package paginate

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/tools"
)

func linkHeader(v string) http.Header {
	h := http.Header{}
	h.Set("Link", v)
	return h
}

func TestRefine(t *testing.T) {
	// Plans as Detect makes them for the label styles.
	githubPages := Detect(&tools.Tool{Method: "GET", Path: "/user/repos",
		Params:   []tools.Param{qp("per_page", sInt()), qp("page", sInt())},
		Response: sArr(item("id"))})
	slackHistory := Detect(&tools.Tool{Method: "GET", Path: "/conversations.history",
		Params: []tools.Param{qp("limit", sInt()), qp("cursor", sStr())},
		Response: sObj(map[string]*tools.Schema{
			"ok": sBool(), "has_more": sBool(), "messages": sArr(sObj(map[string]*tools.Schema{"ts": sStr()})),
		})})
	asanaTrap := Detect(&tools.Tool{Method: "GET", Path: "/workspaces/{workspace_gid}/users",
		Params:   []tools.Param{pathParam("workspace_gid"), qp("offset", sStr())},
		Response: sObj(map[string]*tools.Schema{"data": sArr(item("gid"))})})
	berry := Detect(&tools.Tool{Method: "GET", Path: "/api/v2/berry/",
		Params:   []tools.Param{qp("limit", sInt()), qp("offset", sInt())},
		Response: sArr(sObj(map[string]*tools.Schema{"name": sStr(), "url": sStr()}))})
	stripe := Detect(&tools.Tool{Method: "GET", Path: "/v1/customers",
		Params: []tools.Param{qp("limit", sInt()), qp("starting_after", sStr())},
		Response: sObj(map[string]*tools.Schema{
			"data": sArr(item("id")), "has_more": sBool(), "object": sStr(), "url": sStr(),
		})})
	undeclaredCursor := Detect(&tools.Tool{Method: "GET", Path: "/v1/things",
		Params: []tools.Param{qp("cursor", sStr()), qp("limit", sInt())}})
	nothing := Detect(&tools.Tool{Method: "GET", Path: "/v1/things"})
	slackList := Detect(&tools.Tool{Method: "GET", Path: "/conversations.list",
		Params: []tools.Param{qp("limit", sInt()), qp("cursor", sStr())},
		Response: sObj(map[string]*tools.Schema{
			"channels":          sArr(item("id")),
			"response_metadata": sObj(map[string]*tools.Schema{"next_cursor": sStr()}),
		})})
	odata := Plan{Strategy: NextURL, Items: "value", ItemsFound: true, NextURLField: `@odata\.nextLink`,
		Continuation: "@odata.nextLink", Provenance: "schema"}
	fern := Plan{Strategy: Cursor, CursorParam: "cursor", ParamsIn: "query", NextToken: "next",
		Continuation: "next", Provenance: "extension:x-fern-pagination"}

	tests := []struct {
		name   string
		plan   Plan
		body   string
		header http.Header
		want   Plan
	}{
		{
			name: "a Link header with rel=next makes page numbers a link walk",
			plan: githubPages, body: `[{"id":1},{"id":2}]`,
			header: linkHeader(`<https://api.github.com/user/repos?page=2>; rel="next", <https://api.github.com/user/repos?page=9>; rel="last"`),
			want: Plan{Strategy: LinkHeader, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Continuation: "Link header", Provenance: "schema+response"},
		},
		{
			name: "a last page's Link header still shows Link pagination",
			plan: githubPages, body: `[]`,
			header: linkHeader(`<https://api.github.com/user/repos?page=1>; rel="first", <https://api.github.com/user/repos?page=8>; rel="prev"`),
			want: Plan{Strategy: LinkHeader, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Continuation: "Link header", Provenance: "schema+response"},
		},
		{
			name: "page numbers confirmed by a body without signals",
			plan: githubPages, body: `[{"id":1}]`,
			want: Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Provenance: "schema+response"},
		},
		{
			name: "the body's next_cursor replaces continuing from an item",
			plan: slackHistory,
			body: `{"ok":true,"messages":[{"ts":"1.1"}],"has_more":true,"pin_count":0,"response_metadata":{"next_cursor":"bmV4dA=="}}`,
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "messages", ItemsFound: true, Continuation: "response_metadata.next_cursor",
				NextToken: "response_metadata.next_cursor", MoreFlag: "has_more", Provenance: "schema+response"},
		},
		{
			name: "a token the schema did not declare promotes a cursor parameter",
			plan: asanaTrap,
			body: `{"data":[{"gid":"1"}],"next_page":{"offset":"eyJ0","path":"/workspaces/1/users?offset=eyJ0","uri":"https://app.asana.com/api/1.0/workspaces/1/users?offset=eyJ0"}}`,
			want: Plan{Strategy: Cursor, CursorParam: "offset", ParamsIn: "query", Items: "data", ItemsFound: true,
				ItemID: "gid", Continuation: "next_page", NextToken: "next_page.offset", NextURLField: "next_page.uri",
				Provenance: "schema+response"},
		},
		{
			name: "a spec's bare array was an envelope: the offset walk keeps its numbers",
			plan: berry,
			body: `{"count":64,"next":"https://pokeapi.co/api/v2/berry/?offset=20&limit=20","previous":null,"results":[{"name":"cheri","url":"https://pokeapi.co/api/v2/berry/1/"}]}`,
			want: Plan{Strategy: Offset, SizeParam: "limit", OffsetParam: "offset", ParamsIn: "query",
				Items: "results", ItemsFound: true, Continuation: "next", NextURLField: "next", Total: "count",
				Provenance: "schema+response"},
		},
		{
			name: "stripe's list confirms the schema",
			plan: stripe,
			body: `{"object":"list","url":"/v1/customers","has_more":false,"data":[{"id":"cus_1"}]}`,
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "starting_after", ParamsIn: "query",
				Items: "data", ItemsFound: true, ItemID: "id", Continuation: "has_more", MoreFlag: "has_more",
				CursorFromItem: "id", Provenance: "schema+response"},
		},
		{
			name: "no response schema: a next value that is not a URL is a token",
			plan: undeclaredCursor,
			body: `{"items":[{"id":"a"},{"id":"b"}],"next":"b2Zmc2V0PTI="}`,
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "items", ItemsFound: true, ItemID: "id", Continuation: "next", NextToken: "next",
				Provenance: "schema+response"},
		},
		{
			name: "no response schema: has_more alone continues from the last id",
			plan: undeclaredCursor,
			body: `{"results":[{"id":"a"}],"has_more":true}`,
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "results", ItemsFound: true, ItemID: "id", Continuation: "has_more", MoreFlag: "has_more",
				CursorFromItem: "id", Provenance: "schema+response"},
		},
		{
			name: "nothing declared: a next URL in the body",
			plan: nothing,
			body: `{"data":[{"id":1}],"links":{"next":"/v1/things?page[after]=abc"}}`,
			want: Plan{Strategy: NextURL, Items: "data", ItemsFound: true, ItemID: "id", Continuation: "links.next",
				NextURLField: "links.next", Provenance: "response"},
		},
		{
			name: "nothing declared: a bare array is a single page",
			plan: nothing, body: ` [1, 2, 3] `,
			want: Plan{Strategy: None, ItemsFound: true, Provenance: "response"},
		},
		{
			name: "nothing declared: HAL's next href beside _embedded",
			plan: nothing,
			body: `{"_embedded":{"orders":[{"id":7}]},"_links":{"self":{"href":"/orders"},"next":{"href":"/orders?page=2"}},"total":40}`,
			want: Plan{Strategy: NextURL, Items: "_embedded.orders", ItemsFound: true, ItemID: "id",
				Continuation: "_links.next", NextURLField: "_links.next.href", Total: "total", Provenance: "response"},
		},
		{
			name: "a page plan switches to the body's next URL",
			plan: githubPages,
			body: `{"items":[{"id":1}],"next":"https://api.example.com/things?page=2"}`,
			want: Plan{Strategy: NextURL, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				Items: "items", ItemsFound: true, ItemID: "id", Continuation: "next", NextURLField: "next",
				Provenance: "schema+response"},
		},
		{
			name:   "a cursor carried in the body wins over a Link header",
			plan:   slackList,
			body:   `{"channels":[{"id":"C1"}],"response_metadata":{"next_cursor":"dGVhbTpDMDYxRkE1UEI="}}`,
			header: linkHeader(`<https://slack.com/api/conversations.list?cursor=x>; rel="next"`),
			want:   func() Plan { p := slackList; p.Provenance = "schema+response"; return p }(),
		},
		{
			name: "a member whose name holds dots",
			plan: odata,
			body: `{"@odata.context":"x","value":[{"id":"1"}],"@odata.nextLink":"https://graph.example/v1.0/users?$skiptoken=X"}`,
			want: Plan{Strategy: NextURL, Items: "value", ItemsFound: true, ItemID: "id", NextURLField: `@odata\.nextLink`,
				Continuation: "@odata.nextLink", Provenance: "schema+response"},
		},
		{
			name:   "a declared next URL absent from a page with a Link header",
			plan:   odata,
			body:   `{"value":[{"id":"1"}]}`,
			header: linkHeader(`</v1.0/users?page=2>; rel="next"`),
			want: Plan{Strategy: LinkHeader, Items: "value", ItemsFound: true, ItemID: "id", NextURLField: `@odata\.nextLink`,
				Continuation: "Link header", Provenance: "schema+response"},
		},
		{
			name: "a body that is not JSON leaves the plan alone",
			plan: slackList, body: `<html>502 Bad Gateway</html>`,
			want: slackList,
		},
		{
			name: "an extension's plan only gains its items",
			plan: fern, body: `{"entries":[{"id":1}],"next":"abc"}`,
			want: Plan{Strategy: Cursor, CursorParam: "cursor", ParamsIn: "query", NextToken: "next",
				Items: "entries", ItemsFound: true, ItemID: "id", Continuation: "next",
				Provenance: "extension:x-fern-pagination"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Refine(tt.plan, []byte(tt.body), tt.header)
			if diff := cmp.Diff(tt.want, got, ignoreGrade); diff != "" {
				t.Errorf("Refine (-want +got):\n%s", diff)
			}
			// Refining again with the same response learns nothing new.
			if diff := cmp.Diff(got, Refine(got, []byte(tt.body), tt.header), ignoreGrade); diff != "" {
				t.Errorf("Refine is not idempotent (-once +twice):\n%s", diff)
			}
		})
	}
}

func FuzzRefine(f *testing.F) {
	plans := []Plan{
		{Strategy: None, Provenance: "none"},
		{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query", Items: "data", ItemsFound: true,
			NextToken: "response_metadata.next_cursor", Continuation: "response_metadata.next_cursor", Provenance: "schema"},
		{Strategy: PageNumber, PageParam: "page", ItemsFound: true, Provenance: "schema"},
		{Strategy: Offset, OffsetParam: "offset", Items: `a\.b.c`, ItemsFound: true, Provenance: "schema"},
		{Strategy: None, CursorParam: "offset", Items: "data", ItemsFound: true, Provenance: "schema"},
		{Strategy: NextURL, Items: "value", ItemsFound: true, NextURLField: `@odata\.nextLink`, Provenance: "extension:x-ms-pageable"},
	}
	f.Add([]byte(`{"data":[{"id":1}],"next_cursor":"x","has_more":true}`), `<https://a/b?c=1>; rel="next"`, uint8(0))
	f.Add([]byte(`[{"id":1},{"id":2}]`), `<https://a/b?page=2>; rel="next last"`, uint8(2))
	f.Add([]byte(`{"value":[],"@odata.nextLink":null}`), "", uint8(5))
	f.Add([]byte(`{"data":{"items":[{"id":"a"}],"next":"/x?y=1"}}`), `<>; rel=`, uint8(1))
	f.Add([]byte(`{"a.b":{"c":[1]},"next_page":{"offset":"o","uri":"https://x"}}`), `<x>;rel="prev"`, uint8(3))
	f.Add([]byte(`{"data":[1],"data":{"x":[2]},"next":5,"total":"7"}`), "", uint8(4))
	f.Add([]byte(`{"k":[[[[[[[[[[]]]]]]]]]]`), "", uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, link string, which uint8) {
		p := plans[int(which)%len(plans)]
		h := http.Header{}
		if link != "" {
			h.Set("Link", link)
		}
		got := Refine(p, body, h)
		switch got.Strategy {
		case None, PageNumber, Offset, Cursor, NextURL, LinkHeader:
		default:
			t.Fatalf("Refine produced strategy %q", got.Strategy)
		}
		if got.Provenance == "" {
			t.Fatalf("Refine lost the provenance of %+v", p)
		}
		if got.Strategy == Cursor && got.CursorParam == "" {
			t.Fatalf("cursor plan without a cursor parameter: %+v", got)
		}
		if got.Strategy == NextURL && got.NextURLField == "" {
			t.Fatalf("next_url plan without a next URL field: %+v", got)
		}
		if again := Refine(got, body, h); !cmp.Equal(got, again) {
			t.Fatalf("Refine is not idempotent (-once +twice):\n%s", cmp.Diff(got, again))
		}
	})
}

func ExampleRefine() {
	// A spec that declares the parameters but no response schema.
	p := Detect(&tools.Tool{Method: "GET", Path: "/v1/events", Params: []tools.Param{
		{Name: "cursor", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
	}})
	fmt.Println(p.Strategy, p.Provenance)

	body := []byte(`{"events":[{"id":"ev_1"}],"meta":{"next_cursor":"ZXZfMQ=="}}`)
	p = Refine(p, body, nil)
	fmt.Println(p.Strategy, p.Items, p.NextToken, p.Provenance)
	// Output:
	// none schema
	// cursor events meta.next_cursor schema+response
}

// BenchmarkRefine refines a plan with a first page of 5,000 items
// (about 1 MB): the raw scanner passes over the items without decoding
// them.
func BenchmarkRefine(b *testing.B) {
	var body bytes.Buffer
	body.WriteString(`{"object":"list","data":[`)
	for i := range 5000 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"id":"cus_%06d","email":"user%d@example.com","metadata":{"tier":"gold","tags":["a","b"]},"balance":%d}`, i, i, i*7)
	}
	body.WriteString(`],"has_more":true,"url":"/v1/customers","response_metadata":{"next_cursor":"Y3VzXzAwNDk5OQ=="}}`)
	p := Detect(&tools.Tool{Method: "GET", Path: "/v1/customers",
		Params: []tools.Param{qp("limit", sInt()), qp("cursor", sStr())}})
	b.SetBytes(int64(body.Len()))
	b.ReportAllocs()
	for b.Loop() {
		got := Refine(p, body.Bytes(), nil)
		if got.Strategy != Cursor {
			b.Fatalf("strategy %s", got.Strategy)
		}
	}
}
