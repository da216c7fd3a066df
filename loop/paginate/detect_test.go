package paginate

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/trawl-dev/trawl/tools"
)

// Schema builders for hand-made fixtures.

func sObj(props map[string]*tools.Schema) *tools.Schema {
	return &tools.Schema{Type: "object", Properties: props}
}
func sArr(items *tools.Schema) *tools.Schema { return &tools.Schema{Type: "array", Items: items} }
func sStr() *tools.Schema                    { return &tools.Schema{Type: "string"} }
func sFmt(format string) *tools.Schema       { return &tools.Schema{Type: "string", Format: format} }
func sInt() *tools.Schema                    { return &tools.Schema{Type: "integer"} }
func sBool() *tools.Schema                   { return &tools.Schema{Type: "boolean"} }
func sAny() *tools.Schema                    { return &tools.Schema{} }
func sNullable(s *tools.Schema) *tools.Schema {
	c := *s
	c.Nullable = true
	return &c
}

// item is a list element with an id member named id.
func item(id string) *tools.Schema {
	return sObj(map[string]*tools.Schema{id: sStr(), "name": sStr()})
}

func qp(name string, s *tools.Schema) tools.Param {
	return tools.Param{Name: name, In: tools.InQuery, Schema: s}
}

func pathParam(name string) tools.Param {
	return tools.Param{Name: name, In: tools.InPath, Required: true, Schema: sStr()}
}

func TestDetect(t *testing.T) {
	stripeList := sObj(map[string]*tools.Schema{
		"data": sArr(item("id")), "has_more": sBool(), "object": sStr(), "url": sStr(),
	})
	slackPaging := sObj(map[string]*tools.Schema{
		"count": sInt(), "page": sInt(), "pages": sInt(), "per_page": sInt(), "spill": sInt(), "total": sInt(),
	})
	twilioEnvelope := func(items string) *tools.Schema {
		return sObj(map[string]*tools.Schema{
			items: sArr(item("sid")), "end": sInt(), "first_page_uri": sFmt("uri"),
			"next_page_uri": sNullable(sFmt("uri")), "page": sInt(), "page_size": sInt(),
			"previous_page_uri": sNullable(sFmt("uri")), "start": sInt(), "uri": sFmt("uri"),
		})
	}
	twilioParams := []tools.Param{
		pathParam("AccountSid"), qp("To", sFmt("phone-number")), qp("DateSent<", sFmt("date-time")),
		qp("PageSize", sInt()), qp("Page", sInt()), qp("PageToken", sStr()),
	}
	asanaNextPage := sNullable(sObj(map[string]*tools.Schema{"offset": sStr(), "path": sStr(), "uri": sFmt("uri")}))
	asanaOffset := &tools.Schema{Type: "string", Description: "Offset token. An offset to the next page returned by the API."}

	tests := []struct {
		name string
		tool tools.Tool
		want Plan
	}{
		{
			name: "stripe cursor from the last id with has_more",
			tool: tools.Tool{Method: "GET", Path: "/v1/customers", Params: []tools.Param{
				qp("created", sAny()), qp("ending_before", sStr()), qp("expand", sArr(sStr())),
				qp("limit", sInt()), qp("starting_after", sStr()),
			}, Response: stripeList},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "starting_after", ParamsIn: "query",
				Items: "data", ItemsFound: true, ItemID: "id", Continuation: "has_more", MoreFlag: "has_more",
				CursorFromItem: "id", Provenance: "schema"},
		},
		{
			name: "stripe search: a string page is a cursor fed by next_page",
			tool: tools.Tool{Method: "GET", Path: "/v1/customers/search", Params: []tools.Param{
				qp("expand", sArr(sStr())), qp("limit", sInt()), qp("page", sStr()), qp("query", sStr()),
			}, Response: sObj(map[string]*tools.Schema{
				"data": sArr(item("id")), "has_more": sBool(), "next_page": sNullable(sStr()),
				"object": sStr(), "total_count": sInt(), "url": sStr(),
			})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "page", ParamsIn: "query",
				Items: "data", ItemsFound: true, ItemID: "id", Continuation: "next_page", NextToken: "next_page",
				MoreFlag: "has_more", Total: "total_count", Provenance: "schema"},
		},
		{
			name: "github link header on a bare array; a date-time since is a filter",
			tool: tools.Tool{Method: "GET", Path: "/repos/{owner}/{repo}/issues", Params: []tools.Param{
				pathParam("owner"), pathParam("repo"), qp("since", sFmt("date-time")),
				qp("per_page", sInt()), qp("page", sInt()),
			}, Response: sArr(item("id")), ResponseHeaders: []string{"Link"}},
			want: Plan{Strategy: LinkHeader, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Continuation: "Link header", Provenance: "schema"},
		},
		{
			name: "github users: an integer since is a keyset cursor, pages by Link",
			tool: tools.Tool{Method: "GET", Path: "/users", Params: []tools.Param{
				qp("since", &tools.Schema{Type: "integer", Description: "A user ID. Only return users with an ID greater than this ID."}),
				qp("per_page", sInt()),
			}, Response: sArr(item("id")), ResponseHeaders: []string{"Link"}},
			want: Plan{Strategy: LinkHeader, SizeParam: "per_page", CursorParam: "since", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Continuation: "Link header", Provenance: "schema"},
		},
		{
			name: "link header named only in the description",
			tool: tools.Tool{Method: "GET", Path: "/users",
				Description: "Lists users. Use the Link header to get the URL for the next page.",
				Params:      []tools.Param{qp("since", sInt()), qp("per_page", sInt())},
				Response:    sArr(item("id"))},
			want: Plan{Strategy: LinkHeader, SizeParam: "per_page", CursorParam: "since", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Continuation: "Link header", Provenance: "schema"},
		},
		{
			name: "github search: page numbers bounded by total_count",
			tool: tools.Tool{Method: "GET", Path: "/search/repositories", Params: []tools.Param{
				qp("q", sStr()), qp("sort", sStr()), qp("per_page", sInt()), qp("page", sInt()),
			}, Response: sObj(map[string]*tools.Schema{
				"incomplete_results": sBool(), "items": sArr(item("id")), "total_count": sInt(),
			})},
			want: Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				Items: "items", ItemsFound: true, ItemID: "id", Continuation: "total_count", Total: "total_count",
				Provenance: "schema"},
		},
		{
			name: "github page numbers with no declared signal",
			tool: tools.Tool{Method: "GET", Path: "/user/repos", Params: []tools.Param{
				qp("per_page", sInt()), qp("page", sInt()), qp("since", sFmt("date-time")), qp("before", sFmt("date-time")),
			}, Response: sArr(item("id"))},
			want: Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				ItemsFound: true, ItemID: "id", Provenance: "schema"},
		},
		{
			name: "github installation: object envelope and a declared Link header",
			tool: tools.Tool{Method: "GET", Path: "/installation/repositories", Params: []tools.Param{
				{Name: "accept", In: tools.InHeader, Schema: sStr()}, qp("per_page", sInt()), qp("page", sInt()),
			}, Response: sObj(map[string]*tools.Schema{
				"repositories": sArr(item("id")), "repository_selection": sStr(), "total_count": sInt(),
			}), ResponseHeaders: []string{"X-RateLimit-Limit", "link"}},
			want: Plan{Strategy: LinkHeader, SizeParam: "per_page", PageParam: "page", ParamsIn: "query",
				Items: "repositories", ItemsFound: true, ItemID: "id", Continuation: "Link header",
				Total: "total_count", Provenance: "schema"},
		},
		{
			name: "twilio: PascalCase names, next_page_uri beats the page number",
			tool: tools.Tool{Method: "GET", Path: "/2010-04-01/Accounts/{AccountSid}/Messages.json",
				Params: twilioParams, Response: twilioEnvelope("messages")},
			want: Plan{Strategy: NextURL, SizeParam: "PageSize", PageParam: "Page", CursorParam: "PageToken",
				ParamsIn: "query", Items: "messages", ItemsFound: true, ItemID: "sid", Continuation: "next_page_uri",
				NextURLField: "next_page_uri", Provenance: "schema"},
		},
		{
			name: "twilio: the items are named after the resource path",
			tool: tools.Tool{Method: "GET", Path: "/2010-04-01/Accounts/{AccountSid}/Usage/Records.json",
				Params: twilioParams, Response: twilioEnvelope("usage_records")},
			want: Plan{Strategy: NextURL, SizeParam: "PageSize", PageParam: "Page", CursorParam: "PageToken",
				ParamsIn: "query", Items: "usage_records", ItemsFound: true, ItemID: "sid", Continuation: "next_page_uri",
				NextURLField: "next_page_uri", Provenance: "schema"},
		},
		{
			name: "asana: a string offset is a token copied from next_page.offset",
			tool: tools.Tool{Method: "GET", Path: "/tasks", Params: []tools.Param{
				qp("limit", sInt()), qp("offset", asanaOffset), qp("project", sStr()),
				qp("completed_since", sFmt("date-time")), qp("opt_fields", sArr(sStr())),
			}, Response: sObj(map[string]*tools.Schema{"data": sArr(item("gid")), "next_page": asanaNextPage})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "offset", ParamsIn: "query",
				Items: "data", ItemsFound: true, ItemID: "gid", Continuation: "next_page",
				NextToken: "next_page.offset", NextURLField: "next_page.uri", Provenance: "schema"},
		},
		{
			name: "asana events: a sync token returned on every page, has_more decides",
			tool: tools.Tool{Method: "GET", Path: "/events", Params: []tools.Param{
				qp("opt_fields", sArr(sStr())), qp("resource", sStr()), qp("sync", sStr()),
			}, Response: sObj(map[string]*tools.Schema{"data": sArr(item("gid")), "sync": sStr(), "has_more": sBool()})},
			want: Plan{Strategy: Cursor, CursorParam: "sync", ParamsIn: "query", Items: "data", ItemsFound: true,
				ItemID: "gid", Continuation: "has_more", NextToken: "sync", MoreFlag: "has_more", Provenance: "schema"},
		},
		{
			name: "asana trap: an offset token the response never returns",
			tool: tools.Tool{Method: "GET", Path: "/workspaces/{workspace_gid}/users", Params: []tools.Param{
				pathParam("workspace_gid"), qp("offset", asanaOffset), qp("opt_fields", sArr(sStr())),
			}, Response: sObj(map[string]*tools.Schema{"data": sArr(item("gid"))})},
			want: Plan{Strategy: None, CursorParam: "offset", ParamsIn: "query", Items: "data", ItemsFound: true,
				ItemID: "gid", Provenance: "schema"},
		},
		{
			name: "asana search: a list without paging",
			tool: tools.Tool{Method: "GET", Path: "/workspaces/{workspace_gid}/tasks/search", Params: []tools.Param{
				pathParam("workspace_gid"), qp("text", sStr()), qp("sort_by", sStr()),
			}, Response: sObj(map[string]*tools.Schema{"data": sArr(item("gid"))})},
			want: Plan{Strategy: None, Items: "data", ItemsFound: true, ItemID: "gid", Provenance: "schema"},
		},
		{
			name: "pokeapi: integer offset, next says when it ends",
			tool: tools.Tool{Method: "GET", Path: "/api/v2/pokemon/", Params: []tools.Param{
				qp("limit", sInt()), qp("offset", sInt()),
			}, Response: sObj(map[string]*tools.Schema{
				"count": sInt(), "next": sNullable(sStr()), "previous": sNullable(sStr()),
				"results": sArr(sObj(map[string]*tools.Schema{"name": sStr(), "url": sStr()})),
			})},
			want: Plan{Strategy: Offset, SizeParam: "limit", OffsetParam: "offset", ParamsIn: "query",
				Items: "results", ItemsFound: true, Continuation: "next", NextURLField: "next", Total: "count",
				Provenance: "schema"},
		},
		{
			name: "pokeapi trap: a bare array with offset and limit",
			tool: tools.Tool{Method: "GET", Path: "/api/v2/berry/", Params: []tools.Param{
				qp("limit", sInt()), qp("offset", sInt()),
			}, Response: sArr(sObj(map[string]*tools.Schema{"name": sStr(), "url": sStr()}))},
			want: Plan{Strategy: Offset, SizeParam: "limit", OffsetParam: "offset", ParamsIn: "query",
				ItemsFound: true, Provenance: "schema"},
		},
		{
			name: "slack cursor with response_metadata.next_cursor",
			tool: tools.Tool{Method: "GET", Path: "/conversations.list", Params: []tools.Param{
				qp("token", sStr()), qp("exclude_archived", sBool()), qp("limit", sInt()), qp("cursor", sStr()),
			}, Response: sObj(map[string]*tools.Schema{
				"channels": sArr(item("id")), "ok": sBool(),
				"response_metadata": sObj(map[string]*tools.Schema{"next_cursor": sStr()}),
			})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "channels", ItemsFound: true, ItemID: "id", Continuation: "response_metadata.next_cursor",
				NextToken: "response_metadata.next_cursor", Provenance: "schema"},
		},
		{
			name: "slack trap: response_metadata declared without properties",
			tool: tools.Tool{Method: "GET", Path: "/users.list", Params: []tools.Param{
				qp("token", sStr()), qp("limit", sInt()), qp("cursor", sStr()), qp("include_locale", sBool()),
			}, Response: sObj(map[string]*tools.Schema{
				"cache_ts": sInt(), "members": sArr(item("id")), "ok": sBool(), "response_metadata": sAny(),
			})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "members", ItemsFound: true, ItemID: "id", Continuation: "response_metadata.next_cursor",
				NextToken: "response_metadata.next_cursor", Provenance: "schema"},
		},
		{
			name: "slack history: only has_more declared, items without an id",
			tool: tools.Tool{Method: "GET", Path: "/conversations.history", Params: []tools.Param{
				qp("channel", sStr()), qp("latest", &tools.Schema{Type: "number"}), qp("limit", sInt()), qp("cursor", sStr()),
			}, Response: sObj(map[string]*tools.Schema{
				"has_more": sBool(), "ok": sBool(), "pin_count": sInt(), "channel_actions_ts": sAny(),
				"messages": sArr(sObj(map[string]*tools.Schema{"ts": sStr(), "text": sStr()})),
			})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "messages", ItemsFound: true, Continuation: "has_more", MoreFlag: "has_more", Provenance: "schema"},
		},
		{
			name: "slack reactions: cursor mode wins over the legacy page mode",
			tool: tools.Tool{Method: "GET", Path: "/reactions.list", Params: []tools.Param{
				qp("user", sStr()), qp("count", sInt()), qp("page", sInt()), qp("cursor", sStr()), qp("limit", sInt()),
			}, Response: sObj(map[string]*tools.Schema{
				"items": sArr(sAny()), "ok": sBool(), "paging": slackPaging, "response_metadata": sAny(),
			})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", PageParam: "page", CursorParam: "cursor", ParamsIn: "query",
				Items: "items", ItemsFound: true, Continuation: "response_metadata.next_cursor",
				NextToken: "response_metadata.next_cursor", Total: "paging.total", TotalPages: "paging.pages",
				Provenance: "schema"},
		},
		{
			name: "slack files: string count and page are numbers when the response counts pages",
			tool: tools.Tool{Method: "GET", Path: "/files.list", Params: []tools.Param{
				qp("user", sStr()), qp("ts_from", &tools.Schema{Type: "number"}), qp("count", sStr()), qp("page", sStr()),
			}, Response: sObj(map[string]*tools.Schema{"files": sArr(item("id")), "ok": sBool(), "paging": slackPaging})},
			want: Plan{Strategy: PageNumber, SizeParam: "count", PageParam: "page", ParamsIn: "query",
				Items: "files", ItemsFound: true, ItemID: "id", Continuation: "paging.pages",
				Total: "paging.total", TotalPages: "paging.pages", Provenance: "schema"},
		},
		{
			name: "slack search: page numbers, the list is not declared",
			tool: tools.Tool{Method: "GET", Path: "/search.messages", Params: []tools.Param{
				qp("count", sInt()), qp("highlight", sBool()), qp("page", sInt()), qp("query", sStr()),
			}, Response: sObj(map[string]*tools.Schema{"ok": sBool()})},
			want: Plan{Strategy: PageNumber, SizeParam: "count", PageParam: "page", ParamsIn: "query", Provenance: "schema"},
		},
		{
			name: "stripe balance: arrays that are not pages",
			tool: tools.Tool{Method: "GET", Path: "/v1/balance", Params: []tools.Param{qp("expand", sArr(sStr()))},
				Response: sObj(map[string]*tools.Schema{
					"available": sArr(sAny()), "connect_reserved": sArr(sAny()), "livemode": sBool(),
					"object": sStr(), "pending": sArr(sAny()),
				})},
			want: Plan{Strategy: None, Provenance: "schema"},
		},
		{
			name: "pokeapi single resource with arrays",
			tool: tools.Tool{Method: "GET", Path: "/api/v2/pokemon/{id}/", Params: []tools.Param{pathParam("id")},
				Response: sObj(map[string]*tools.Schema{"id": sInt(), "name": sStr(), "abilities": sArr(sAny()), "moves": sArr(sAny())})},
			want: Plan{Strategy: None, Provenance: "schema"},
		},
		{
			name: "asana single task wrapped in data",
			tool: tools.Tool{Method: "GET", Path: "/tasks/{task_gid}", Params: []tools.Param{pathParam("task_gid")},
				Response: sObj(map[string]*tools.Schema{"data": sObj(map[string]*tools.Schema{
					"gid": sStr(), "followers": sArr(sAny()), "projects": sArr(sAny()),
				})})},
			want: Plan{Strategy: None, Provenance: "schema"},
		},
		{
			name: "a resource's own flags are not signals",
			tool: tools.Tool{Method: "GET", Path: "/todos/{id}", Params: []tools.Param{pathParam("id")},
				Response: sObj(map[string]*tools.Schema{"id": sStr(), "done": sBool(), "total": sInt(), "next": sStr()})},
			want: Plan{Strategy: None, Provenance: "schema"},
		},
		{
			name: "no response schema and no paging parameter",
			tool: tools.Tool{Method: "POST", Path: "/v1/things", Params: []tools.Param{{Name: "name", In: tools.InBody, Schema: sStr()}}},
			want: Plan{Strategy: None, Provenance: "none"},
		},
		{
			name: "paging parameters one level down in a whole-body parameter",
			tool: tools.Tool{Method: "POST", Path: "/v2/search", Params: []tools.Param{{
				Name: "body", In: tools.InBody, Schema: sObj(map[string]*tools.Schema{
					"query": sStr(), "cursor": sStr(), "limit": sInt(),
				}),
			}}, Response: sObj(map[string]*tools.Schema{"results": sArr(item("id")), "next_cursor": sNullable(sStr())})},
			want: Plan{Strategy: Cursor, SizeParam: "body.limit", CursorParam: "body.cursor", ParamsIn: "body",
				Items: "results", ItemsFound: true, ItemID: "id", Continuation: "next_cursor", NextToken: "next_cursor",
				Provenance: "schema"},
		},
		{
			name: "flattened body parameters",
			tool: tools.Tool{Method: "POST", Path: "/v1/records:search", Params: []tools.Param{
				{Name: "filter", In: tools.InBody, Schema: sStr()},
				{Name: "pageToken", In: tools.InBody, Schema: sStr()},
				{Name: "pageSize", In: tools.InBody, Schema: sInt()},
			}, Response: sObj(map[string]*tools.Schema{"records": sArr(item("name")), "nextPageToken": sStr()})},
			want: Plan{Strategy: Cursor, SizeParam: "pageSize", CursorParam: "pageToken", ParamsIn: "body",
				Items: "records", ItemsFound: true, Continuation: "nextPageToken", NextToken: "nextPageToken",
				Provenance: "schema"},
		},
		{
			name: "items one level down, signals beside them",
			tool: tools.Tool{Method: "GET", Path: "/v1/orders", Params: []tools.Param{qp("cursor", sStr()), qp("limit", sInt())},
				Response: sObj(map[string]*tools.Schema{"data": sObj(map[string]*tools.Schema{
					"items": sArr(item("id")), "nextCursor": sNullable(sStr()), "hasMore": sBool(),
				})})},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", ParamsIn: "query",
				Items: "data.items", ItemsFound: true, ItemID: "id", Continuation: "data.nextCursor",
				NextToken: "data.nextCursor", MoreFlag: "data.hasMore", Provenance: "schema"},
		},
		{
			name: "a next token without a cursor parameter is noted, not walked",
			tool: tools.Tool{Method: "GET", Path: "/v1/widgets", Response: sObj(map[string]*tools.Schema{
				"items": sArr(item("id")), "nextPageToken": sStr(),
			})},
			want: Plan{Strategy: None, Items: "items", ItemsFound: true, ItemID: "id", NextToken: "nextPageToken",
				Provenance: "schema"},
		},
		{
			name: "an array named after the collection, no paging at all",
			tool: tools.Tool{Method: "GET", Path: "/v1/widgets", Response: sObj(map[string]*tools.Schema{
				"widgets": sArr(item("id")), "colors": sArr(sStr()),
			})},
			want: Plan{Strategy: None, Items: "widgets", ItemsFound: true, ItemID: "id", Provenance: "schema"},
		},
		{
			name: "odata $top/$skip with @odata.nextLink",
			tool: tools.Tool{Method: "GET", Path: "/users", Params: []tools.Param{
				{Name: "top", Wire: "$top", In: tools.InQuery, Schema: sInt()},
				{Name: "skip", Wire: "$skip", In: tools.InQuery, Schema: sInt()},
			}, Response: sObj(map[string]*tools.Schema{"value": sArr(item("id")), "@odata.nextLink": sStr()})},
			want: Plan{Strategy: Offset, SizeParam: "top", OffsetParam: "skip", ParamsIn: "query",
				Items: "value", ItemsFound: true, ItemID: "id", Continuation: "@odata.nextLink",
				NextURLField: `@odata\.nextLink`, Provenance: "schema"},
		},
		{
			name: "json:api page[size] and page[after] with links.next",
			tool: tools.Tool{Method: "GET", Path: "/2/api-keys", Params: []tools.Param{
				{Name: "page_size", Wire: "page[size]", In: tools.InQuery, Schema: sInt()},
				{Name: "page_after", Wire: "page[after]", In: tools.InQuery, Schema: sStr()},
			}, Response: sObj(map[string]*tools.Schema{
				"data":  sArr(item("id")),
				"links": sObj(map[string]*tools.Schema{"next": sNullable(sStr()), "self": sStr()}),
			})},
			want: Plan{Strategy: NextURL, SizeParam: "page_size", CursorParam: "page_after", ParamsIn: "query",
				Items: "data", ItemsFound: true, ItemID: "id", Continuation: "links.next", NextURLField: "links.next",
				Provenance: "schema"},
		},
		{
			name: "HAL: items in _embedded, the next link in _links beside it",
			tool: tools.Tool{Method: "GET", Path: "/orders", Response: sObj(map[string]*tools.Schema{
				"_embedded": sObj(map[string]*tools.Schema{"orders": sArr(item("id"))}),
				"_links": sObj(map[string]*tools.Schema{
					"self": sObj(map[string]*tools.Schema{"href": sStr()}),
					"next": sObj(map[string]*tools.Schema{"href": sStr()}),
				}),
				"total": sInt(),
			})},
			want: Plan{Strategy: NextURL, Items: "_embedded.orders", ItemsFound: true, ItemID: "id",
				Continuation: "_links.next", NextURLField: "_links.next.href", Total: "total", Provenance: "schema"},
		},
		{
			name: "spring page+size with an inverted last flag",
			tool: tools.Tool{Method: "GET", Path: "/api/owners", Params: []tools.Param{qp("page", sInt()), qp("size", sInt()), qp("sort", sStr())},
				Response: sObj(map[string]*tools.Schema{
					"content": sArr(item("id")), "last": sBool(), "totalElements": sInt(), "totalPages": sInt(),
				})},
			want: Plan{Strategy: PageNumber, SizeParam: "size", PageParam: "page", ParamsIn: "query",
				Items: "content", ItemsFound: true, ItemID: "id", Continuation: "last", MoreFlag: "last",
				MoreInverted: true, Total: "totalElements", TotalPages: "totalPages", Provenance: "schema"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Detect(&tt.tool)
			if diff := cmp.Diff(tt.want, got, ignoreGrade); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectExtensions(t *testing.T) {
	listOf := func(items string) *tools.Schema {
		return sObj(map[string]*tools.Schema{items: sArr(item("id")), "hasMore": sBool()})
	}
	tests := []struct {
		name string
		tool tools.Tool
		want Plan
	}{
		{
			name: "speakeasy offsetLimit with a page input",
			tool: tools.Tool{Method: "GET", Path: "/paginated", Params: []tools.Param{qp("pg", sInt()), qp("n", sInt())},
				Response: sObj(map[string]*tools.Schema{"resultArray": sArr(sInt()), "meta": sObj(map[string]*tools.Schema{"numPages": sInt()})}),
				Extensions: map[string]any{"x-speakeasy-pagination": map[string]any{
					"type": "offsetLimit",
					"inputs": []any{
						map[string]any{"name": "pg", "in": "parameters", "type": "page"},
						map[string]any{"name": "n", "in": "parameters", "type": "limit"},
					},
					"outputs": map[string]any{"results": "$.resultArray", "numPages": "$.meta.numPages"},
				}}},
			want: Plan{Strategy: PageNumber, SizeParam: "n", PageParam: "pg", ParamsIn: "query",
				Items: "resultArray", ItemsFound: true, Continuation: "meta.numPages", TotalPages: "meta.numPages",
				Provenance: "extension:x-speakeasy-pagination"},
		},
		{
			name: "speakeasy cursor taken from the last result",
			tool: tools.Tool{Method: "GET", Path: "/events", Params: []tools.Param{qp("since", sInt()), qp("limit", sInt())},
				Response: listOf("data"),
				Extensions: map[string]any{"x-speakeasy-pagination": map[string]any{
					"type":    "cursor",
					"inputs":  []any{map[string]any{"name": "since", "in": "parameters", "type": "cursor"}},
					"outputs": map[string]any{"nextCursor": "$.data[-1].created_at"},
				}}},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "since", ParamsIn: "query",
				Items: "data", ItemsFound: true, ItemID: "id", Continuation: "hasMore", MoreFlag: "hasMore",
				CursorFromItem: "created_at", Provenance: "extension:x-speakeasy-pagination"},
		},
		{
			name: "speakeasy url",
			tool: tools.Tool{Method: "GET", Path: "/things", Response: sObj(map[string]*tools.Schema{
				"things": sArr(item("id")), "links": sObj(map[string]*tools.Schema{"next": sStr()}),
			}), Extensions: map[string]any{"x-speakeasy-pagination": map[string]any{
				"type": "url", "outputs": map[string]any{"nextUrl": "$.links.next"},
			}}},
			want: Plan{Strategy: NextURL, Items: "things", ItemsFound: true, ItemID: "id", Continuation: "links.next",
				NextURLField: "links.next", Provenance: "extension:x-speakeasy-pagination"},
		},
		{
			name: "x-ms-pageable",
			tool: tools.Tool{Method: "GET", Path: "/vaults", Params: []tools.Param{qp("$top", sInt())},
				Response:   sObj(map[string]*tools.Schema{"value": sArr(item("id")), "nextLink": sStr()}),
				Extensions: map[string]any{"x-ms-pageable": map[string]any{"nextLinkName": "nextLink"}}},
			want: Plan{Strategy: NextURL, SizeParam: "$top", ParamsIn: "query", Items: "value", ItemsFound: true,
				ItemID: "id", Continuation: "nextLink", NextURLField: "nextLink", Provenance: "extension:x-ms-pageable"},
		},
		{
			name: "x-ms-pageable with a null nextLinkName: one page",
			tool: tools.Tool{Method: "GET", Path: "/operations",
				Response:   sObj(map[string]*tools.Schema{"list": sArr(item("id"))}),
				Extensions: map[string]any{"x-ms-pageable": map[string]any{"nextLinkName": nil, "itemName": "list"}}},
			want: Plan{Strategy: None, Items: "list", ItemsFound: true, ItemID: "id", Provenance: "extension:x-ms-pageable"},
		},
		{
			name: "fern cursor",
			tool: tools.Tool{Method: "GET", Path: "/plants", Params: []tools.Param{qp("starting_after", sStr()), qp("limit", sInt())},
				Response: sObj(map[string]*tools.Schema{"plants": sArr(item("id")), "next": sStr()}),
				Extensions: map[string]any{"x-fern-pagination": map[string]any{
					"cursor": "$request.starting_after", "next_cursor": "$response.next", "results": "$response.plants",
				}}},
			want: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "starting_after", ParamsIn: "query",
				Items: "plants", ItemsFound: true, ItemID: "id", Continuation: "next", NextToken: "next",
				Provenance: "extension:x-fern-pagination"},
		},
		{
			name: "fern offset naming a page number",
			tool: tools.Tool{Method: "GET", Path: "/plants", Params: []tools.Param{qp("page_number", sInt()), qp("n", sInt())},
				Response: listOf("results"),
				Extensions: map[string]any{"x-fern-pagination": map[string]any{
					"offset": "$request.page_number", "step": "$request.n", "results": "$response.results",
					"has-next-page": "$response.hasMore",
				}}},
			want: Plan{Strategy: PageNumber, SizeParam: "n", PageParam: "page_number", ParamsIn: "query",
				Items: "results", ItemsFound: true, ItemID: "id", Continuation: "hasMore", MoreFlag: "hasMore",
				Provenance: "extension:x-fern-pagination"},
		},
		{
			name: "a malformed extension falls back to the schema",
			tool: tools.Tool{Method: "GET", Path: "/v1/items", Params: []tools.Param{qp("cursor", sStr())},
				Response:   sObj(map[string]*tools.Schema{"items": sArr(item("id")), "next_cursor": sStr()}),
				Extensions: map[string]any{"x-speakeasy-pagination": "yes", "x-fern-pagination": true}},
			want: Plan{Strategy: Cursor, CursorParam: "cursor", ParamsIn: "query", Items: "items", ItemsFound: true,
				ItemID: "id", Continuation: "next_cursor", NextToken: "next_cursor", Provenance: "schema"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Detect(&tt.tool)
			if diff := cmp.Diff(tt.want, got, ignoreGrade); diff != "" {
				t.Errorf("Detect (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDetectNil(t *testing.T) {
	if diff := cmp.Diff(Plan{Strategy: None, Provenance: "none"}, Detect(nil), ignoreGrade); diff != "" {
		t.Errorf("Detect(nil) (-want +got):\n%s", diff)
	}
}

func TestExtPath(t *testing.T) {
	tests := []struct {
		ref, path, fromItem string
		ok                  bool
	}{
		{"$.data", "data", "", true},
		{"$response.meta.next", "meta.next", "", true},
		{"$['data']['items']", "data.items", "", true},
		{"$.data[-1].id", "data", "id", true},
		{"$.resultArray[-1].created_at", "resultArray", "created_at", true},
		{"$", "", "", false},
		{"", "", "", false},
		{"$.data[-1]", "", "", false},
		{"$.data[", "", "", false},
	}
	for _, tt := range tests {
		path, fromItem, ok := extPath(tt.ref)
		if path != tt.path || fromItem != tt.fromItem || ok != tt.ok {
			t.Errorf("extPath(%q) = %q, %q, %v; want %q, %q, %v", tt.ref, path, fromItem, ok, tt.path, tt.fromItem, tt.ok)
		}
	}
}

func TestFoldName(t *testing.T) {
	for in, want := range map[string]string{
		"page_size": "pagesize", "pageSize": "pagesize", "PageSize": "pagesize", "page[size]": "pagesize",
		"$top": "top", "@odata.nextLink": "odatanextlink", "starting-after": "startingafter",
	} {
		if got := foldName(in); got != want {
			t.Errorf("foldName(%q) = %q, want %q", in, got, want)
		}
	}
}

func ExampleDetect() {
	t := &tools.Tool{
		Name: "list_customers", Method: "GET", Path: "/v1/customers",
		Params: []tools.Param{
			{Name: "limit", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
			{Name: "starting_after", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
		},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"data":     {Type: "array", Items: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{"id": {Type: "string"}}}},
			"has_more": {Type: "boolean"},
		}},
	}
	p := Detect(t)
	fmt.Printf("%s: send %s (the last item's %s) while %s, page size in %s, items in %s\n",
		p.Strategy, p.CursorParam, p.CursorFromItem, p.Continuation, p.SizeParam, p.Items)
	// Output:
	// cursor: send starting_after (the last item's id) while has_more, page size in limit, items in data
}

// ignoreGrade leaves a plan's confidence and evidence out of comparisons
// of what was detected; TestConfidence checks them.
var ignoreGrade = cmpopts.IgnoreFields(Plan{}, "Confidence", "Evidence")
