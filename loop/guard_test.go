package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop/query"
)

// unevenItems returns n JSON objects of very different sizes, some with
// multibyte text, as raw items.
func unevenItems(n int, seed uint64) [][]byte { return unevenItemsUpTo(n, seed, 400) }

func unevenItemsUpTo(n int, seed uint64, maxWords int) [][]byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := []string{"order", "café", "日本語", "naïve", "plain", "😀", `quote"d`, "line\nbreak"}
	items := make([][]byte, n)
	for i := range items {
		var sb strings.Builder
		for range r.IntN(maxWords) {
			sb.WriteString(words[r.IntN(len(words))])
			sb.WriteByte(' ')
		}
		b, _ := json.Marshal(map[string]any{
			"id": fmt.Sprintf("o_%d", i), "status": []string{"open", "closed"}[i%2],
			"total": r.IntN(500), "notes": sb.String(),
		})
		items[i] = b
	}
	return items
}

func decodeObject(t *testing.T, b []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, b)
	}
	return m
}

func TestGuardLeavesAFittingViewAlone(t *testing.T) {
	view := []byte(`{"data":[{"id":1}],"_pagingComplete":true}`)
	cut, err := Guard{}.Cut(view, "data", "r_x")
	if err != nil {
		t.Fatal(err)
	}
	if cut.Truncated || !bytes.Equal(cut.View, view) {
		t.Errorf("fitting view changed: %+v", cut)
	}
}

func TestGuardCutsAtItemBoundaries(t *testing.T) {
	items := unevenItems(300, 7)
	envelope := []byte(`{"data":[],"has_more":false,"_pagingComplete":true,"_note":"Every page was fetched."}`)
	view, err := query.Replace(envelope, "data", query.AppendArray(nil, items))
	if err != nil {
		t.Fatal(err)
	}
	bare := query.AppendArray(nil, items)
	small := unevenItemsUpTo(300, 7, 60)
	smallView, _ := query.Replace(envelope, "data", query.AppendArray(nil, small))
	for _, tc := range []struct {
		name   string
		view   []byte
		path   string
		budget int
		arrKey string
	}{
		{"envelope, path given", view, "data", 5000, "data"},
		{"envelope, path detected", view, "", 12000, "data"},
		{"envelope, default budget", view, "data", 0, "data"},
		{"bare array", bare, "", 3000, "items"},
		{"smallest budget", smallView, "data", 1000, "data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Guard{Budget: tc.budget}
			cut, err := g.Cut(tc.view, tc.path, "r_0123")
			if err != nil {
				t.Fatal(err)
			}
			if !cut.Truncated || !cut.ByItems {
				t.Fatalf("not cut by items: %+v", cut)
			}
			if n := utf8.RuneCount(cut.View); n > g.budget() {
				t.Errorf("view is %d characters, budget %d", n, g.budget())
			}
			m := decodeObject(t, cut.View)
			got, err := query.Elements(m[tc.arrKey])
			if err != nil {
				t.Fatal(err)
			}
			items := items
			if tc.name == "smallest budget" {
				items = small
			}
			// Whole items only: exactly the first k, byte for byte.
			for i, it := range got {
				if !bytes.Equal(it, items[i]) {
					t.Fatalf("shown item %d is not whole:\n%s\nwant\n%s", i, it, items[i])
				}
			}
			// As many as fit: one more would not.
			more, _ := query.Replace(cut.View, tc.arrKey, query.AppendArray(nil, items[:len(got)+1]))
			if utf8.RuneCount(more) <= g.budget() {
				t.Errorf("item %d would still fit (%d characters)", len(got), utf8.RuneCount(more))
			}
			want := map[string]string{
				"_truncated": "true", "_shownItems": fmt.Sprint(len(got)), "_totalItems": "300",
				"_resultId": `"r_0123"`,
			}
			for k, v := range want {
				if string(m[k]) != v {
					t.Errorf("%s = %s, want %s", k, m[k], v)
				}
			}
			if cut.Shown != len(got) || cut.Total != 300 {
				t.Errorf("Cut counts %d/%d, view shows %d/300", cut.Shown, cut.Total, len(got))
			}
			if tc.arrKey == "data" {
				var note string
				json.Unmarshal(m["_note"], &note)
				if !strings.HasPrefix(note, "Every page was fetched. Showing the first") {
					t.Errorf("the engine's note was not kept first: %q", note)
				}
				if string(m["_pagingComplete"]) != "true" || string(m["has_more"]) != "false" {
					t.Errorf("envelope members lost: %s", cut.View)
				}
			}
		})
	}
}

func TestGuardNote(t *testing.T) {
	view := query.AppendArray(nil, unevenItems(200, 3))
	tests := []struct {
		id   string
		want string
	}{
		{"r_abc", `Showing the first 9 of 200 items: the whole result did not fit in the conversation. The full result is kept under _resultId "r_abc": call queryToolResult with that resultId (filter, fields, offset, limit) to read the other items, or fetchToolResult for its raw text.`},
		{"", `Showing the first 9 of 200 items: the whole result did not fit in the conversation. The full result could not be kept; narrow the call (fewer _fields, the API's own filters) to see the rest.`},
	}
	for _, tc := range tests {
		cut, err := Guard{Budget: 4000}.Cut(view, "", tc.id)
		if err != nil {
			t.Fatal(err)
		}
		m := decodeObject(t, cut.View)
		var note string
		json.Unmarshal(m["_note"], &note)
		// The count depends on the items; the wording is what is checked.
		note = strings.Replace(note, fmt.Sprintf("first %d of", cut.Shown), "first 9 of", 1)
		if diff := cmp.Diff(tc.want, note); diff != "" {
			t.Errorf("note (-want +got):\n%s", diff)
		}
		if _, has := m["_resultId"]; has != (tc.id != "") {
			t.Errorf("_resultId present = %v with id %q", has, tc.id)
		}
	}
}

func TestGuardCutsPayloadsWithoutItems(t *testing.T) {
	long := strings.Repeat(`Ünïcödé "quoted" text, <b>bold</b> & more 日本語😀 `, 2000)
	html := "<!doctype html><html><body>" + strings.Repeat("<p class=\"x\">paragraph é</p>\n", 3000) + "</body></html>"
	jsonString, _ := json.Marshal(long)
	object, _ := json.Marshal(map[string]any{"title": "Report", "meta": map[string]any{"pages": 3}, "body": long})
	withEnvelope, _ := json.Marshal(map[string]any{"body": long, "_pagingComplete": false, "_note": "First page only."})
	tiny, _ := json.Marshal(map[string]any{"tags": []string{"a"}, "body": long})
	for _, tc := range []struct {
		name  string
		view  []byte
		text  string // the long text the cut view must hold a prefix of
		field string // where it sits in the cut view
	}{
		{"one huge JSON string", jsonString, long, "text"},
		{"HTML, not JSON", []byte(html), html, "text"},
		{"object without an array", object, long, "body"},
		{"object with only a tiny array", tiny, long, "body"},
		{"envelope members are kept", withEnvelope, long, "body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := Guard{Budget: 6000}
			cut, err := g.Cut(tc.view, "", "r_1")
			if err != nil {
				t.Fatal(err)
			}
			if !cut.Truncated || cut.ByItems {
				t.Fatalf("want a character cut: %+v", cut)
			}
			if n := utf8.RuneCount(cut.View); n > g.budget() {
				t.Errorf("view is %d characters, budget %d", n, g.budget())
			}
			m := decodeObject(t, cut.View)
			var got string
			if err := json.Unmarshal(m[tc.field], &got); err != nil {
				t.Fatalf("%s: %v", tc.field, err)
			}
			if len(got) < 1000 || !strings.HasPrefix(tc.text, got) {
				t.Errorf("%s is not a substantial prefix of the payload (%d bytes)", tc.field, len(got))
			}
			if string(m["_truncated"]) != "true" || string(m["_resultId"]) != `"r_1"` ||
				string(m["_totalChars"]) != fmt.Sprint(totalChars(tc.view, tc.field)) || string(m["_shownChars"]) != fmt.Sprint(cut.Shown) {
				t.Errorf("truncation members: %s", cut.View[len(cut.View)-min(len(cut.View), 700):])
			}
			var note string
			json.Unmarshal(m["_note"], &note)
			if tc.name == "object with only a tiny array" {
				// The list is not what is too large: it is shown empty,
				// counted as not shown, never as an empty list.
				if (m["tags"] != nil && string(m["tags"]) != "[]") || string(m["_shownItems"]) != "0" || string(m["_totalItems"]) != "1" || !strings.Contains(note, "none of its items") {
					t.Errorf("the list's cut: tags %s, shown %s of %s, note %q", m["tags"], m["_shownItems"], m["_totalItems"], note)
				}
			} else if !strings.Contains(note, "fetchToolResult") || strings.Contains(note, "queryToolResult") {
				t.Errorf("note should point at fetchToolResult only: %q", note)
			}
			if tc.name == "envelope members are kept" {
				if string(m["_pagingComplete"]) != "false" || !strings.HasPrefix(note, "First page only. ") {
					t.Errorf("envelope lost: %s", cut.View)
				}
			}
		})
	}
}

func TestGuardFirstItemTooLarge(t *testing.T) {
	huge, _ := json.Marshal(map[string]any{"id": 1, "body": strings.Repeat("x", 50000)})
	view := []byte(`{"data":[` + string(huge) + `,{"id":2}],"_pagingComplete":true}`)
	cut, err := Guard{Budget: 2000}.Cut(view, "data", "r_2")
	if err != nil {
		t.Fatal(err)
	}
	// No item is cut: the first does not fit, so none is shown, and the
	// note says so and what budget would show it.
	if !cut.ByItems || cut.Shown != 0 || cut.Total != 2 || utf8.RuneCount(cut.View) > 2000 {
		t.Fatalf("want no item shown, within budget: %+v", cut)
	}
	m := decodeObject(t, cut.View)
	var note string
	json.Unmarshal(m["_note"], &note)
	if string(m["data"]) != "[]" || string(m["_pagingComplete"]) != "true" || string(m["_shownItems"]) != "0" {
		t.Errorf("view: %s", cut.View)
	}
	if !strings.Contains(note, "none of the 2 items") || !strings.Contains(note, fmt.Sprintf("(%d characters)", len(huge))) ||
		!strings.Contains(note, "queryToolResult") || !strings.Contains(note, "fetchToolResult") {
		t.Errorf("note: %q", note)
	}
}

func TestCutJSONKeepsValidity(t *testing.T) {
	doc := []byte(`{"a":"\u00e9t\u00e9 \"x\" \\ end","b":[1,2.5e3,true,null,{"c":"dd"}],"e":{"f":{"g":"hhhhhhhh"}}}`)
	var want any
	json.Unmarshal(doc, &want)
	for max := 2; max <= 120; max++ {
		out, err := cutJSON(doc, max)
		if err != nil {
			t.Fatal(err)
		}
		if !json.Valid(out) {
			t.Fatalf("max %d: invalid JSON %s", max, out)
		}
		if n := utf8.RuneCount(out); n > max {
			t.Fatalf("max %d: %d characters: %s", max, n, out)
		}
	}
	full, _ := cutJSON(doc, 1000)
	var got any
	json.Unmarshal(full, &got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("uncut document changed (-want +got):\n%s", diff)
	}
}

func FuzzGuardCut(f *testing.F) {
	f.Add([]byte(`{"data":[{"id":1},{"id":2}],"x":"yyyy"}`), 1000)
	f.Add([]byte(`[1,2,3,"four"]`), 1000)
	f.Add([]byte(`"just a string"`), 1000)
	f.Add([]byte(`<html>not json</html>`), 1000)
	f.Add([]byte(`{"a":{"b":{"c":[[],[{}]]}},"_n":1}`), 1000)
	f.Fuzz(func(t *testing.T, view []byte, budget int) {
		if budget < 0 || budget > 5000 {
			return
		}
		// Make the input long enough to need a cut.
		for len(view) > 0 && utf8.RuneCount(view) <= 5000 {
			if query.Valid(view) && len(view) > 0 && (view[0] == '[') {
				view = append(append([]byte(`[`), view...), append([]byte(`,`), view[1:]...)...)
			} else {
				view = append(view, view...)
			}
		}
		g := Guard{Budget: budget}
		cut, err := g.Cut(view, "", "r_f")
		if err != nil {
			return
		}
		if !cut.Truncated {
			return // a view that fits is passed on as it is
		}
		if !json.Valid(cut.View) {
			t.Fatalf("invalid JSON out of %q:\n%s", view, cut.View)
		}
		if utf8.RuneCount(cut.View) > g.budget() {
			// Only a verdict larger than the budget is sent over it, whole
			// and with no item, and the note says so.
			var note string
			json.Unmarshal(decodeObject(t, cut.View)["_note"], &note)
			if !strings.Contains(note, "verdict alone takes") {
				t.Fatalf("%d characters over budget %d", utf8.RuneCount(cut.View), g.budget())
			}
		}
	})
}

// BenchmarkGuardCut cuts a 24 MB view whose primary array has to be found
// among 60 other members: detection and the cut read the view a bounded
// number of times, whatever its number of members.
func BenchmarkGuardCut(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"data":[`)
	for i := range 5000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":%d,"status":"open","pad":%q}`, i, strings.Repeat("x", 4700))
	}
	sb.WriteString(`]`)
	for i := range 60 {
		fmt.Fprintf(&sb, `,"k%d":%d`, i, i)
	}
	sb.WriteString(`,"_pagingComplete":true}`)
	view := []byte(sb.String())
	b.SetBytes(int64(len(view)))
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		cut, err := Guard{}.Cut(view, "", "r_b")
		if err != nil || !cut.ByItems {
			b.Fatal(err, cut.ByItems)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// totalChars is what _totalChars counts: a text payload's own characters
// (a JSON string's, decoded), a JSON document's.
func totalChars(view []byte, field string) int {
	var s string
	if field == "text" && json.Unmarshal(view, &s) == nil {
		return utf8.RuneCountInString(s)
	}
	return utf8.RuneCount(view)
}

// TestGuardCutsUpstreamUnderscoreMembers: only trawl's own envelope
// members (the verdict, its note and boundary) are kept whole whatever the
// budget; an upstream's members that merely start with "_" (HAL's
// _embedded and _links) are content, cut like any other, so they cannot
// carry a result past the size guard.
func TestGuardCutsUpstreamUnderscoreMembers(t *testing.T) {
	big := strings.Repeat("x", 40_000)
	rows := make([]string, 50)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"id":%d}`, i)
	}
	for name, view := range map[string]string{
		"no list":         `{"_embedded":{"blob":"` + big + `"},"_links":{"self":"/x"},"_note":"Complete: 1 row."}`,
		"beside the list": `{"_links":{"self":"` + big + `"},"data":[` + strings.Join(rows, ",") + `],"_pagingComplete":true}`,
		"text":            `{"_embedded":"` + big + `"}`,
	} {
		for _, budget := range []int{1000, 4000, 32000} {
			cut, err := Guard{Budget: budget}.Cut([]byte(view), "", "r_x")
			if err != nil {
				t.Fatalf("%s, budget %d: %v", name, budget, err)
			}
			if n := utf8.RuneCount(cut.View); !cut.Truncated || n > budget+1200 {
				t.Errorf("%s, budget %d: %d characters (truncated %v): an upstream _ member passed the guard", name, budget, n, cut.Truncated)
			}
			if !json.Valid(cut.View) {
				t.Errorf("%s, budget %d: not JSON", name, budget)
			}
		}
	}
}
