package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
)

var (
	alice = Scope{Org: "acme", Thread: "t1", User: "alice"}
)

// orders returns n order rows: every third one is open; totals climb.
func orders(n int) [][]byte {
	items := make([][]byte, n)
	for i := range items {
		status := "closed"
		if i%3 == 0 {
			status = "open"
		}
		items[i] = fmt.Appendf(nil, `{"id":"o_%d","status":%q,"total":%d,"customer":{"name":"Client %d","city":"Zürich"},"lines":[{"sku":"s%d"}]}`,
			i, status, i*10, i%7, i)
	}
	return items
}

func keepOrders(t testing.TB, r *Retrieval, scope Scope, n int) string {
	t.Helper()
	rec, err := NewStoredResultFromItems("acme.list_orders", []byte(`{"data":[],"has_more":false}`), "data", orders(n))
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Keep(context.Background(), scope, rec)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

type queryOut struct {
	Items      []json.RawMessage `json:"items"`
	Matched    int               `json:"matched"`
	Total      int               `json:"total"`
	Offset     int               `json:"offset"`
	NextOffset *int              `json:"nextOffset"`
	ResultID   string            `json:"_resultId"`
	Note       string            `json:"_note"`
}

func call[T any](t *testing.T, r *Retrieval, scope Scope, tool string, args string) T {
	t.Helper()
	out, err := r.Call(context.Background(), scope, tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("%s %s: %v", tool, args, err)
	}
	if n := utf8.RuneCount(out); n > r.guard.budget() {
		t.Fatalf("%s output is %d characters, budget %d", tool, n, r.guard.budget())
	}
	var v T
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatalf("%s output: %v\n%s", tool, err, out)
	}
	return v
}

func TestKeepIDsAreRandomAndScoped(t *testing.T) {
	ctx := context.Background()
	r := NewRetrieval(RetrievalOptions{})
	id := keepOrders(t, r, alice, 3)
	if !validResultID(id) || id == keepOrders(t, r, alice, 3) {
		t.Fatalf("id %q", id)
	}
	if _, err := r.Lookup(ctx, alice, id); err != nil {
		t.Fatalf("own scope: %v", err)
	}
	// Another user of the same thread is the same scope: results belong
	// to the conversation.
	if _, err := r.Lookup(ctx, Scope{Org: "acme", Thread: "t1", User: "bob"}, id); err != nil {
		t.Errorf("same thread: %v", err)
	}
	unknown := "r_" + strings.Repeat("0", 32)
	_, want := r.Lookup(ctx, alice, unknown)
	for name, s := range map[string]Scope{
		"other thread":       {Org: "acme", Thread: "t2", User: "alice"},
		"other organization": {Org: "globex", Thread: "t1", User: "alice"},
		"no thread":          {Org: "acme"},
	} {
		_, err := r.Lookup(ctx, s, id)
		if !errors.Is(err, ErrResultNotFound) {
			t.Errorf("%s: %v, want not found", name, err)
		}
		// Exactly as an unknown id answers (ids differ; the rest is equal).
		if strings.Replace(err.Error(), id, unknown, 1) != want.Error() {
			t.Errorf("%s: %q differs from an unknown id's %q", name, err, want)
		}
	}
	if _, err := r.Call(ctx, Scope{Org: "acme", Thread: "t2"}, QueryToolResult, json.RawMessage(`{"resultId":"`+id+`"}`)); !errors.Is(err, ErrResultNotFound) {
		t.Errorf("query from another thread: %v", err)
	}
}

func TestRetrievalExpiry(t *testing.T) {
	clock := paginate.NewFakeClock(epoch)
	r := NewRetrieval(RetrievalOptions{Now: clock.Now})
	id := keepOrders(t, r, alice, 3)
	clock.Advance(14 * time.Minute)
	call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`"}`)
	clock.Advance(time.Minute)
	_, err := r.Call(context.Background(), alice, FetchToolResult, json.RawMessage(`{"resultId":"`+id+`"}`))
	if !errors.Is(err, ErrResultExpired) {
		t.Fatalf("after 15 minutes: %v", err)
	}
	want := fmt.Sprintf(`fetchToolResult: resultId %q: expired — call the tool again`, id)
	if err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestQueryFiltersOnFieldsNotProjected(t *testing.T) {
	r := NewRetrieval(RetrievalOptions{})
	id := keepOrders(t, r, alice, 30)
	got := call[queryOut](t, r, alice, QueryToolResult,
		`{"resultId":"`+id+`","fields":["id"],"filter":[{"field":"status","op":"eq","value":"open"},{"field":"total","op":"gte","value":100}]}`)
	var ids []string
	for _, it := range got.Items {
		ids = append(ids, string(it))
	}
	want := []string{`{"id":"o_12"}`, `{"id":"o_15"}`, `{"id":"o_18"}`, `{"id":"o_21"}`, `{"id":"o_24"}`, `{"id":"o_27"}`}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("items (-want +got):\n%s", diff)
	}
	if got.Matched != 6 || got.Total != 30 || got.Offset != 0 || got.NextOffset != nil || got.ResultID != id || got.Note != "" {
		t.Errorf("envelope: %+v", got)
	}
}

func TestQueryPagesToTheEnd(t *testing.T) {
	r := NewRetrieval(RetrievalOptions{})
	id := keepOrders(t, r, alice, 200)
	var seen []string
	offset, calls := 0, 0
	for {
		calls++
		got := call[queryOut](t, r, alice, QueryToolResult, fmt.Sprintf(`{"resultId":%q,"fields":["id","customer.name"],"filter":{"field":"status","op":"eq","value":"open"},"offset":%d,"limit":7}`, id, offset))
		if got.Matched != 67 || got.Offset != offset {
			t.Fatalf("matched %d offset %d", got.Matched, got.Offset)
		}
		for _, it := range got.Items {
			var row struct{ ID string }
			json.Unmarshal(it, &row)
			seen = append(seen, row.ID)
		}
		if got.NextOffset == nil {
			break
		}
		if *got.NextOffset != offset+len(got.Items) {
			t.Fatalf("nextOffset %d after %d items from %d", *got.NextOffset, len(got.Items), offset)
		}
		offset = *got.NextOffset
	}
	var want []string
	for i := 0; i < 200; i += 3 {
		want = append(want, fmt.Sprint("o_", i))
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("paged ids (-want +got):\n%s", diff)
	}
	if calls != 10 {
		t.Errorf("%d calls for 67 rows by 7", calls)
	}
	// Past the end: nothing, and no next offset.
	got := call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`","offset":500}`)
	if len(got.Items) != 0 || got.NextOffset != nil || got.Matched != 200 {
		t.Errorf("past the end: %+v", got)
	}
	// ... and a note that says so: an empty page past the end is not
	// "nothing matched".
	if !strings.Contains(got.Note, "offset 500 is past the end: 200 items matched") {
		t.Errorf("past the end: note %q does not say the offset is past the end", got.Note)
	}
	// The last page itself carries no such note.
	if got := call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`","offset":199}`); len(got.Items) != 1 || got.Note != "" {
		t.Errorf("last item: %+v", got)
	}
}

func TestQueryOutputIsSizeGuarded(t *testing.T) {
	r := NewRetrieval(RetrievalOptions{Budget: 3000})
	rec, err := NewStoredResultFromItems("t", nil, "", unevenItemsUpTo(120, 5, 900))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := r.Keep(context.Background(), alice, rec)
	// Walk every item with a page size the budget cannot hold: fewer items
	// come back, nextOffset continues, nothing is skipped but the items
	// that are too large alone, which the note points at.
	offset, shown, skipped := 0, 0, 0
	for calls := 0; ; calls++ {
		if calls > 200 {
			t.Fatal("paging does not progress")
		}
		got := call[queryOut](t, r, alice, QueryToolResult, fmt.Sprintf(`{"resultId":%q,"offset":%d,"limit":500}`, id, offset))
		for i, it := range got.Items {
			if want := string(rec.Item(offset + i)); string(it) != want {
				t.Fatalf("item %d is not whole", offset+i)
			}
		}
		shown += len(got.Items)
		if len(got.Items) == 0 {
			skipped++
			if !strings.Contains(got.Note, "fetchToolResult at offset") {
				t.Errorf("no pointer for an oversized item: %q", got.Note)
			}
		} else if got.NextOffset != nil && !strings.Contains(got.Note, "call again with offset") {
			t.Errorf("a shortened page without a note: %q", got.Note)
		}
		if got.NextOffset == nil {
			break
		}
		if *got.NextOffset <= offset {
			t.Fatalf("nextOffset %d does not advance from %d", *got.NextOffset, offset)
		}
		offset = *got.NextOffset
	}
	if shown+skipped != 120 || skipped == 0 {
		t.Errorf("shown %d + skipped %d of 120", shown, skipped)
	}
}

func TestQueryOversizedItemPointsAtItsText(t *testing.T) {
	r := NewRetrieval(RetrievalOptions{Budget: 1000})
	big := fmt.Sprintf(`{"id":"big","body":%q}`, strings.Repeat("日本", 2000))
	rec, _ := NewStoredResultFromItems("t", []byte(`{"pre":"ééé","data":[]}`), "data", [][]byte{[]byte(`{"id":"a"}`), []byte(big)})
	id, _ := r.Keep(context.Background(), alice, rec)
	got := call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`","offset":1}`)
	if len(got.Items) != 0 || got.NextOffset != nil {
		t.Fatalf("%+v", got)
	}
	var at, length int
	if _, err := fmt.Sscanf(got.Note[strings.Index(got.Note, "at offset"):], "at offset %d (length %d", &at, &length); err != nil {
		t.Fatalf("note %q: %v", got.Note, err)
	}
	text := []rune(string(rec.Text()))
	if string(text[at:at+length]) != big {
		t.Errorf("the note's offset %d, length %d do not frame the item", at, length)
	}
}

func TestQueryLimitCap(t *testing.T) {
	r := NewRetrieval(RetrievalOptions{Budget: 200000})
	id := keepOrders(t, r, alice, 600)
	got := call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`","fields":["id"],"limit":1000}`)
	if len(got.Items) != MaxQueryLimit || *got.NextOffset != 500 || !strings.Contains(got.Note, "limit was lowered to the maximum, 500") {
		t.Errorf("%d items, next %v, note %q", len(got.Items), got.NextOffset, got.Note)
	}
	got = call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`","fields":["id"]}`)
	if len(got.Items) != DefaultQueryLimit {
		t.Errorf("default limit: %d items", len(got.Items))
	}
}

func TestRetrievalBadArguments(t *testing.T) {
	r := NewRetrieval(RetrievalOptions{})
	id := keepOrders(t, r, alice, 3)
	text, _ := r.Keep(context.Background(), alice, mustRecord(t, `"just text"`))
	for _, tc := range []struct {
		tool, args, arg string
	}{
		{QueryToolResult, `{}`, "resultId"},
		{QueryToolResult, `{"resultId":7}`, "resultId"},
		{QueryToolResult, `{"resultId":"` + id + `","limt":5}`, "limt"},
		{QueryToolResult, `{"resultId":"` + id + `","limit":0}`, "limit"},
		{QueryToolResult, `{"resultId":"` + id + `","limit":"many"}`, "limit"},
		{QueryToolResult, `{"resultId":"` + id + `","offset":-1}`, "offset"},
		{QueryToolResult, `{"resultId":"` + id + `","offset":1.5}`, "offset"},
		{QueryToolResult, `{"resultId":"` + id + `","fields":{"id":true}}`, "fields"},
		{QueryToolResult, `{"resultId":"` + id + `","fields":["a..b"]}`, "fields"},
		{QueryToolResult, `{"resultId":"` + id + `","filter":[{"field":"status","op":"like","value":"x"}]}`, "filter"},
		{QueryToolResult, `{"resultId":"` + id + `","filter":[{"field":"status","op":"eq","vaule":"x"}]}`, "filter"},
		{QueryToolResult, `{"resultId":"` + text + `"}`, "resultId"},
		{FetchToolResult, `{"resultId":"` + id + `","length":0}`, "length"},
		{FetchToolResult, `{"resultId":"` + id + `","offset":100000}`, "offset"},
		{FetchToolResult, `{"resultId":"` + id + `","fields":["x"]}`, "fields"},
	} {
		_, err := r.Call(context.Background(), alice, tc.tool, json.RawMessage(tc.args))
		var ae *RetrievalArgError
		if !errors.As(err, &ae) || ae.Arg != tc.arg || ae.Tool != tc.tool {
			t.Errorf("%s %s: %v, want an error naming %s", tc.tool, tc.args, err, tc.arg)
			continue
		}
		if !strings.Contains(err.Error(), "argument "+tc.arg+":") {
			t.Errorf("message does not name the argument: %q", err)
		}
	}
	// Integers as models send them.
	got := call[queryOut](t, r, alice, QueryToolResult, `{"resultId":"`+id+`","offset":"1","limit":2.0}`)
	if got.Offset != 1 || len(got.Items) != 2 {
		t.Errorf("offset \"1\", limit 2.0: %+v", got)
	}
	if _, err := r.Call(context.Background(), alice, "search_tools", nil); !errors.Is(err, ErrNotRetrievalTool) {
		t.Errorf("unknown tool: %v", err)
	}
}

type fetchOut struct {
	Text        string `json:"text"`
	Offset      int    `json:"offset"`
	NextOffset  *int   `json:"nextOffset"`
	TotalLength int    `json:"totalLength"`
}

func TestFetchSlicesReassembleExactly(t *testing.T) {
	var sb strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&sb, `{"i":%d,"s":"é日本😀 \"q\" \\ \n\t\u0001 <b>&amp;</b>"},`, i)
	}
	doc := "[" + strings.TrimSuffix(sb.String(), ",") + "]"
	for _, tc := range []struct {
		name   string
		budget int
		length int
	}{
		{"default budget, full slices", 0, 0},
		{"small slices", 0, 777},
		{"budget tighter than the slice", 1500, 16000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRetrieval(RetrievalOptions{Budget: tc.budget})
			rec := mustRecord(t, doc)
			id, _ := r.Keep(context.Background(), alice, rec)
			var got strings.Builder
			offset := 0
			for calls := 0; ; calls++ {
				args := fmt.Sprintf(`{"resultId":%q,"offset":%d}`, id, offset)
				if tc.length > 0 {
					args = fmt.Sprintf(`{"resultId":%q,"offset":%d,"length":%d}`, id, offset, tc.length)
				}
				out := call[fetchOut](t, r, alice, FetchToolResult, args)
				if out.TotalLength != utf8.RuneCountInString(doc) || out.Offset != offset {
					t.Fatalf("totalLength %d, offset %d", out.TotalLength, out.Offset)
				}
				n := utf8.RuneCountInString(out.Text)
				if n > MaxFetchLength || (tc.length > 0 && n > tc.length) {
					t.Fatalf("slice of %d characters", n)
				}
				got.WriteString(out.Text)
				if out.NextOffset == nil {
					break
				}
				if *out.NextOffset != offset+n {
					t.Fatalf("nextOffset %d after %d characters from %d", *out.NextOffset, n, offset)
				}
				offset = *out.NextOffset
			}
			if got.String() != doc {
				t.Errorf("slices do not reassemble the stored text")
			}
		})
	}
}

func TestRetrievalTools(t *testing.T) {
	tools := NewRetrieval(RetrievalOptions{}).Tools()
	if len(tools) != 2 || tools[0].Name != QueryToolResult || tools[1].Name != FetchToolResult {
		t.Fatalf("%+v", tools)
	}
	for _, tl := range tools {
		var schema struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil || schema.Type != "object" {
			t.Errorf("%s schema: %v", tl.Name, err)
		}
		if diff := cmp.Diff([]string{"resultId"}, schema.Required); diff != "" {
			t.Errorf("%s required (-want +got):\n%s", tl.Name, diff)
		}
		if !strings.Contains(tl.Description, "resultId") || len(tl.Description) < 300 {
			t.Errorf("%s description: %q", tl.Name, tl.Description)
		}
		// Each argument is told once, in the description the model reads
		// beside the schema: named there, not described again.
		for k, p := range schema.Properties {
			if !strings.Contains(tl.Description, "`"+k+"`") {
				t.Errorf("%s: the description does not name the argument `%s`", tl.Name, k)
			}
			if strings.Contains(string(p), `"description"`) {
				t.Errorf("%s: the schema describes %s again: %s", tl.Name, k, p)
			}
		}
	}
}

func ExampleRetrieval() {
	ctx := context.Background()
	r := NewRetrieval(RetrievalOptions{})
	scope := Scope{Org: "acme", Thread: "thread-1"}
	rec, _ := NewStoredResult("acme.list_orders", []byte(`{"data":[{"id":1,"status":"open"},{"id":2,"status":"paid"}]}`), "data")
	id, _ := r.Keep(ctx, scope, rec)
	out, _ := r.Call(ctx, scope, QueryToolResult, json.RawMessage(`{"resultId":"`+id+`","fields":["id"],"filter":[{"field":"status","op":"eq","value":"open"}]}`))
	fmt.Println(strings.Replace(string(out), id, "r_…", 1))
	// Output: {"verdict":"matched and total are counted over the 1 of the 2 rows of one response that match the filter (the call did not loop): nothing says whether more rows exist, so these are not totals","items":[{"id":1}],"matched":1,"total":2,"offset":0,"nextOffset":null,"_resultId":"r_…"}
}

// BenchmarkQueryToolResult is a two-clause filter over 5,000 stored items,
// a projection and a page of 50: the stored text is not parsed again,
// only the items the filter reads.
func BenchmarkQueryToolResult(b *testing.B) {
	r := NewRetrieval(RetrievalOptions{})
	id := keepOrders(b, r, alice, 5000)
	args := json.RawMessage(`{"resultId":"` + id + `","fields":["id","total","customer.name"],"filter":[{"field":"status","op":"eq","value":"open"},{"field":"total","op":"gte","value":20000}],"offset":100,"limit":50}`)
	ctx := context.Background()
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		if _, err := r.Call(ctx, alice, QueryToolResult, args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkStoredResultMemory reports the heap a kept 24 MB result holds:
// the text itself plus its item and character index.
func BenchmarkStoredResultMemory(b *testing.B) {
	for _, tc := range []struct {
		name string
		pad  string
	}{
		{"ascii", strings.Repeat("x", 4700)},
		{"multibyte", strings.Repeat("日", 1567)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			items := make([][]byte, 5000) // 5,000 items of ~4.8 KB: 24 MB
			for i := range items {
				items[i] = fmt.Appendf(nil, `{"id":%d,"status":"open","pad":%q}`, i, tc.pad)
			}
			var text []byte
			text = query.AppendArray(text, items)
			items = nil
			var held float64
			for b.Loop() {
				ctx := context.Background()
				r := NewRetrieval(RetrievalOptions{})
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				doc := append([]byte(nil), text...) // what the engine hands over
				rec, err := NewStoredResult("t", doc, "")
				if err != nil {
					b.Fatal(err)
				}
				if _, err := r.Keep(ctx, alice, rec); err != nil {
					b.Fatal(err)
				}
				doc, rec = nil, nil
				runtime.GC()
				runtime.ReadMemStats(&after)
				held = float64(after.HeapAlloc) - float64(before.HeapAlloc)
				runtime.KeepAlive(r)
			}
			b.ReportMetric(float64(len(text))/(1<<20), "MiB-payload")
			b.ReportMetric(held/(1<<20), "MiB-held")
		})
	}
}
