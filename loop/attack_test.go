package loop

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// Shapes found by attacking the engine as a hostile user would: each
// note must say what happened, not what usually happens.

func pagedTool(origin string) *tools.Tool {
	return itemsTool(origin,
		tools.Param{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
		tools.Param{Name: "per_page", In: tools.InQuery, Schema: intSchema(5)})
}

// An inconsistent stop is worded by what was wrong, not by one cause
// that may not apply, and does not claim that more rows exist.
func TestInconsistentNoteSaysWhy(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":1}],"has_more":"maybe"}`)
	})
	tool := pagedTool(up.URL)
	tool.Response.Properties["has_more"] = &tools.Schema{Type: "boolean"}
	_, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true})
	b := checkBoundary(t, v)
	note := v["_note"].(string)
	if b["stopReason"] != "inconsistent_pagination" || b["completion"] != "partial" {
		t.Fatalf("boundary %v, want partial, inconsistent_pagination", b)
	}
	if strings.Contains(note, "sending nothing new") || strings.Contains(note, "more exist.") {
		t.Errorf("note %q words a cause that did not happen or claims more rows exist", note)
	}
	if !strings.Contains(note, `"has_more" is not a boolean`) {
		t.Errorf("note %q does not say what was wrong", note)
	}
}

// A 204 (no body) is an empty response, not "one object".
func TestNoContentIsAnEmptyResponse(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	_, v := looping(t, newTestEngine(t, Options{}), pagedTool(up.URL), map[string]any{"_all_pages": true})
	b := checkBoundary(t, v)
	note := v["_note"].(string)
	if _, paged := v["_pagingComplete"]; b["completion"] != "single_response" || paged {
		t.Errorf("boundary %v, want a single response", b)
	}
	if strings.Contains(note, "object") || !strings.Contains(note, "empty response") {
		t.Errorf("note %q, want it to say the response was empty", note)
	}
}

// A walk the caller started past the first row (offset=4 of 9) reaches
// the end: it is complete from where it began, but "all 5 rows" would be
// counted as the whole collection. The note says the server's total and
// that earlier rows were not asked for.
func TestCompleteFromAStartingPointSaysSo(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		var rows []string
		for i := off; i < min(off+3, 9); i++ {
			rows = append(rows, fmt.Sprintf(`{"id":"r%d"}`, i))
		}
		fmt.Fprintf(w, `{"data":[%s],"total":9}`, strings.Join(rows, ","))
	})
	_, v := looping(t, newTestEngine(t, Options{}), offsetTool(up.URL), map[string]any{"_all_pages": true, "offset": 4})
	checkBoundary(t, v)
	note := v["_note"].(string)
	if strings.Contains(note, "all 5 rows") || !strings.Contains(note, "9") {
		t.Errorf("note %q: want no \"all 5 rows\" claim, and the server's total of 9", note)
	}
}

// "1 of them matches", not "1 of them match".
func TestFilterCountPlural(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"data":[{"id":1},{"id":2}]}`) })
	_, v := looping(t, newTestEngine(t, Options{}), pagedTool(up.URL),
		map[string]any{"_filter": []any{map[string]any{"field": "id", "op": "eq", "value": 2}}})
	if note := v["_note"].(string); !strings.Contains(note, "1 of them matches the filter") {
		t.Errorf("note %q", note)
	}
}

// A _for_each value of the wrong type is shown as the JSON the model
// sent, not as a Go value (map[x:1]).
func TestForEachWrongTypeShowsJSON(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"data":[]}`) })
	tool := itemsTool(up.URL, tools.Param{Name: "q", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}},
		tools.Param{Name: "n", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}})
	for key, tc := range map[string]struct {
		value any
		want  string
	}{
		"q": {map[string]any{"x": 1.0}, `values[0]: {"x":1} is not a string`},
		"n": {[]any{"a", "b"}, `values[0]: ["a","b"] is not an integer`},
	} {
		_, err := newTestEngine(t, Options{}).Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true},
			Args: map[string]any{"_for_each": map[string]any{"key": key, "values": []any{tc.value}}}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %s", key, err, tc.want)
		}
	}
	if up.n.Load() != 0 {
		t.Errorf("%d upstream requests for an argument error", up.n.Load())
	}
}

// A _for_each key on a tool without parameters says so, instead of
// listing nothing.
func TestForEachKeyOnToolWithoutParameters(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{}`) })
	_, err := newTestEngine(t, Options{}).Call(context.Background(), Call{Tool: statsTool(up.URL), Scope: scope,
		Binding: Binding{LoopResponses: true}, Args: map[string]any{"_for_each": map[string]any{"key": "x", "values": []any{1}}}})
	if err == nil || !strings.Contains(err.Error(), "get_stats has no parameters") || strings.HasSuffix(err.Error(), ": ") {
		t.Errorf("error %v, want it to say get_stats has no parameters", err)
	}
}

// A walk resumed from a cursor the caller passed (or a page past the
// first) that reaches the end, with no total to compare: complete from
// where it began, never "all N rows" of the collection.
func TestCompleteFromAResumedCursorSaysSo(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("cursor") {
		case "c2":
			fmt.Fprint(w, `{"data":[{"id":3},{"id":4}],"next_cursor":"c3"}`)
		case "c3":
			fmt.Fprint(w, `{"data":[{"id":5}],"next_cursor":null}`)
		default:
			fmt.Fprint(w, `{"data":[{"id":1},{"id":2}],"next_cursor":"c2"}`)
		}
	})
	tool := itemsTool(up.URL, tools.Param{Name: "cursor", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}})
	tool.Response.Properties["next_cursor"] = &tools.Schema{Type: "string"}
	delete(tool.Response.Properties, "total")
	_, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true, "cursor": "c2"})
	b := checkBoundary(t, v)
	if b["completion"] != "complete" || b["records"] != 3.0 {
		t.Fatalf("boundary %v, want complete with 3 records", b)
	}
	if note := v["_note"].(string); strings.Contains(note, "all 3 rows") || !strings.Contains(note, "from the requested start") {
		t.Errorf("note %q: a resumed walk is complete from its start, not \"all 3 rows\"", note)
	}
}

// The first page of a paginated tool, no page size asked, two rows and
// no signal: nothing says more rows exist (a short page of an unknown
// size proves nothing either way), so the note says they may.
func TestFirstPageOfUnknownSizeClaimsNoMore(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"data":[{"id":1},{"id":2}]}`) })
	tool := pagedTool(up.URL)
	delete(tool.Response.Properties, "total")
	_, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{})
	b := checkBoundary(t, v)
	note := v["_note"].(string)
	if b["stopReason"] != "first_page_only" || strings.Contains(note, "more rows exist") || !strings.Contains(note, "may exist") {
		t.Errorf("stop %v, note %q: want first_page_only saying more rows may exist", b["stopReason"], note)
	}
}

// A next URL on the provider's own host but another scheme (an API
// behind a TLS proxy that links to http://) is not followed, and the
// note does not call it "another host".
func TestNextURLOnAnotherSchemeIsNamedRight(t *testing.T) {
	var up *counted
	up = newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		next := strings.Replace(up.URL, "http://", "https://", 1) + "/items?page=2"
		fmt.Fprintf(w, `{"data":[{"id":1}],"next":%q}`, next)
	})
	tool := itemsTool(up.URL, tools.Param{Name: "limit", In: tools.InQuery, Schema: intSchema(100)})
	tool.Response.Properties["next"] = &tools.Schema{Type: "string", Format: "uri"}
	delete(tool.Response.Properties, "total")
	_, v := looping(t, newTestEngine(t, Options{}), tool, map[string]any{"_all_pages": true})
	b := checkBoundary(t, v)
	note := v["_note"].(string)
	if b["stopReason"] != "foreign_next_url" || up.n.Load() != 1 {
		t.Fatalf("stop %v after %d requests, want foreign_next_url after 1", b["stopReason"], up.n.Load())
	}
	if strings.Contains(note, "another host") || !strings.Contains(note, "origin") {
		t.Errorf("note %q: the host is the same; the origin (scheme, host, port) is not", note)
	}
}

// A _fields path no row has is named in the note, as a _filter field no
// row has is: the rows hold null there, and a model that reads only the
// note must not take the nulls for data.
func TestUnmatchedFieldsAreInTheNote(t *testing.T) {
	up := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"id":1,"tags":[{"k":"a"}]},{"id":2,"tags":[]}]}`)
	})
	_, v := looping(t, newTestEngine(t, Options{}), pagedTool(up.URL), map[string]any{"_fields": []any{"id", "tags.kk", "amount"}})
	if _, ok := v["_unmatchedFields"]; !ok {
		t.Fatalf("no _unmatchedFields in %v", v)
	}
	if note := v["_note"].(string); !strings.Contains(note, "tags.kk, amount") || !strings.Contains(note, "_unmatchedFields") {
		t.Errorf("note %q does not name the _fields paths no row has", note)
	}
}
