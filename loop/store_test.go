package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
)

var epoch = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// itemsOf lists a record's items as strings.
func itemsOf(r *StoredResult) []string {
	out := make([]string, r.NumItems())
	for i := range out {
		out[i] = string(r.Item(i))
	}
	return out
}

func TestNewStoredResultFindsItemsOnce(t *testing.T) {
	for _, tc := range []struct {
		name, doc, path string
		wantPath        string
		want            []string
	}{
		{"envelope", `{"data":[{"id":1},{"id":2}],"has_more":false}`, "data", "data", []string{`{"id":1}`, `{"id":2}`}},
		{"detected", `{"meta":{"n":2},"results":[1, "two" ,{"x":[3]}]}`, "", "results", []string{`1`, `"two"`, `{"x":[3]}`}},
		{"one level down", `{"response":{"items":[{"a":"é"}],"next":null}}`, "", "response.items", []string{`{"a":"é"}`}},
		{"bare array, pretty", "[\n  {\"id\": 1},\n  {\"id\": 2}\n]\n", "", "", []string{`{"id": 1}`, `{"id": 2}`}},
		{"empty array", `{"data":[]}`, "data", "data", []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := NewStoredResult("acme.list", []byte(tc.doc), tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if !r.HasItems() || r.ItemsPath() != tc.wantPath {
				t.Fatalf("items: %v at %q", r.HasItems(), r.ItemsPath())
			}
			if diff := cmp.Diff(tc.want, itemsOf(r)); diff != "" {
				t.Errorf("items (-want +got):\n%s", diff)
			}
			if string(r.Text()) != tc.doc {
				t.Errorf("text changed: %q", r.Text())
			}
		})
	}
}

func TestNewStoredResultWithoutItems(t *testing.T) {
	for _, doc := range []string{`"a long string"`, `<html><body>hi</body></html>`, `{"title":"x","body":"y"}`, "bad \xff utf-8"} {
		r, err := NewStoredResult("t", []byte(doc), "")
		if err != nil {
			t.Fatal(err)
		}
		if r.HasItems() {
			t.Errorf("%q: has items", doc)
		}
		if want := strings.ToValidUTF8(doc, "\uFFFD"); string(r.Text()) != want {
			t.Errorf("text %q, want %q", r.Text(), want)
		}
	}
	// Malformed JSON is still kept, as text for fetchToolResult.
	if r, err := NewStoredResult("t", []byte(`{"data":[1,}`), "data"); err != nil || r.HasItems() {
		t.Errorf("malformed JSON: %v, items %v", err, r.HasItems())
	}
}

func TestNewStoredResultFromItemsMatchesParsing(t *testing.T) {
	items := unevenItems(40, 11)
	for _, tc := range []struct{ envelope, path string }{
		{`{"data":[],"total":40,"_x":{"y":[1]}}`, "data"},
		{`{"page":{"rows":[{"stale":1}]},"ok":true}`, "page.rows"},
		{``, ""},
	} {
		built, err := NewStoredResultFromItems("t", []byte(tc.envelope), tc.path, items)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := NewStoredResult("t", built.Text(), tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if !query.Valid(built.Text()) {
			t.Fatalf("invalid text: %s", built.Text())
		}
		if diff := cmp.Diff(itemsOf(parsed), itemsOf(built)); diff != "" {
			t.Errorf("%q: spans differ from parsing (-parsed +built):\n%s", tc.path, diff)
		}
		if built.Len() != parsed.Len() || built.ItemsPath() != tc.path {
			t.Errorf("len %d vs %d, path %q", built.Len(), parsed.Len(), built.ItemsPath())
		}
	}
}

func TestStoredResultCharacterOffsets(t *testing.T) {
	text := strings.Repeat("aé日😀", 1000) // 4,000 characters, 10,000 bytes
	r, err := NewStoredResult("t", []byte(text), "")
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 4000 {
		t.Fatalf("Len %d", r.Len())
	}
	runes := []rune(text)
	for _, c := range []int{0, 1, 2, 3, 4, 1023, 1024, 1025, 2047, 2048, 3999, 4000} {
		b := r.byteAt(c)
		if got := string(r.Text()[:b]); got != string(runes[:c]) {
			t.Fatalf("byteAt(%d) = %d: wrong prefix", c, b)
		}
		if back := r.charAt(b); back != c {
			t.Fatalf("charAt(byteAt(%d)) = %d", c, back)
		}
	}
}

func TestStoredResultBinaryRoundTrip(t *testing.T) {
	orig, err := NewStoredResultFromItems("acme.list_orders", []byte(`{"data":[],"n":2}`), "data", [][]byte{[]byte(`{"a":"é"}`), []byte(`2`)})
	if err != nil {
		t.Fatal(err)
	}
	orig.Created = epoch
	b, err := orig.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var back StoredResult
	if err := back.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(orig, &back, cmp.AllowUnexported(StoredResult{}, span{})); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	for _, bad := range [][]byte{nil, b[:len(b)-1], append(append([]byte(nil), b...), 'x'), []byte("trawl.result.1\n\xff")} {
		if err := new(StoredResult).UnmarshalBinary(bad); err == nil {
			t.Errorf("corrupt record %q accepted", bad)
		}
	}
}

func FuzzStoredResultUnmarshalBinary(f *testing.F) {
	r, _ := NewStoredResultFromItems("t", []byte(`{"d":[]}`), "d", [][]byte{[]byte(`1`), []byte(`"é"`)})
	b, _ := r.MarshalBinary()
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var r StoredResult
		if r.UnmarshalBinary(data) != nil {
			return
		}
		for i := range r.NumItems() {
			_ = r.Item(i) // in bounds, or UnmarshalBinary should have refused
		}
		_ = r.byteAt(r.Len())
	})
}

func mustRecord(t testing.TB, doc string) *StoredResult {
	t.Helper()
	r, err := NewStoredResult("t", []byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMemoryResultStoreExpiresByInjectedClock(t *testing.T) {
	ctx := context.Background()
	clock := paginate.NewFakeClock(epoch)
	s := NewMemoryResultStore(MemoryStoreOptions{Now: clock.Now})
	rec := mustRecord(t, `[1,2,3]`)
	if err := s.Put(ctx, "k", rec, epoch.Add(15*time.Minute)); err != nil {
		t.Fatal(err)
	}
	clock.Advance(15*time.Minute - time.Second)
	if got, err := s.Get(ctx, "k"); err != nil || got != rec {
		t.Fatalf("before expiry: %v, %v", got, err)
	}
	clock.Advance(time.Second)
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrResultExpired) {
		t.Fatalf("at expiry: %v, want ErrResultExpired", err)
	}
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrResultExpired) {
		t.Fatalf("asked again: %v, want ErrResultExpired", err)
	}
	if _, err := s.Get(ctx, "never"); !errors.Is(err, ErrResultNotFound) {
		t.Fatalf("unknown key: %v, want ErrResultNotFound", err)
	}
	if s.Bytes() != 0 {
		t.Errorf("%d bytes still counted", s.Bytes())
	}
}

func TestMemoryResultStoreEvictsOldestFirst(t *testing.T) {
	ctx := context.Background()
	clock := paginate.NewFakeClock(epoch)
	rec := func(i int) *StoredResult {
		return mustRecord(t, fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 1000)))
	}
	size := rec(0).Size()
	s := NewMemoryResultStore(MemoryStoreOptions{Now: clock.Now, MaxBytes: 3*size + size/2})
	for i := range 5 {
		if err := s.Put(ctx, fmt.Sprint("k", i), rec(i), epoch.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if s.Bytes() > 3*size+size/2 {
			t.Fatalf("over the bound: %d", s.Bytes())
		}
	}
	for i, want := range []error{ErrResultExpired, ErrResultExpired, nil, nil, nil} {
		got, err := s.Get(ctx, fmt.Sprint("k", i))
		if !errors.Is(err, want) || (want == nil && !bytes.Contains(got.Text(), []byte(fmt.Sprintf(`"n":%d`, i)))) {
			t.Errorf("k%d: %v, want %v", i, err, want)
		}
	}
	big := mustRecord(t, `"`+strings.Repeat("y", int(4*size))+`"`)
	if err := s.Put(ctx, "big", big, epoch.Add(time.Hour)); !errors.Is(err, ErrResultTooLarge) {
		t.Errorf("oversized record: %v", err)
	}
	if _, err := s.Get(ctx, "k4"); err != nil {
		t.Errorf("a refused record evicted others: %v", err)
	}
}

func TestMemoryResultStoreJanitorEviction(t *testing.T) {
	// go-cache's janitor removing an entry (simulated by deleting it from
	// the container) is accounted for and answers "expired".
	ctx := context.Background()
	s := NewMemoryResultStore(MemoryStoreOptions{Now: paginate.NewFakeClock(epoch).Now})
	if err := s.Put(ctx, "k", mustRecord(t, `[1]`), epoch.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	s.m.items.Delete("k")
	if _, err := s.Get(ctx, "k"); !errors.Is(err, ErrResultExpired) {
		t.Errorf("after cleanup: %v", err)
	}
	if s.Bytes() != 0 || s.m.order.Len() != 0 || len(s.m.index) != 0 {
		t.Errorf("bookkeeping left: %d bytes, %d entries", s.Bytes(), s.m.order.Len())
	}
}

func TestMemoryResultStoreBoundsTombstones(t *testing.T) {
	m := newMemory[int](MemoryStoreOptions{Now: paginate.NewFakeClock(epoch).Now, MaxBytes: 1}, 3)
	for i := range 5 {
		m.put(fmt.Sprint(i), i, 1, epoch.Add(time.Hour)) // each evicts the previous
	}
	var states []memState
	for i := range 5 {
		_, _, st := m.get(fmt.Sprint(i))
		states = append(states, st)
	}
	// 0 was forgotten (three tombstones: 1, 2, 3); 4 is live.
	if diff := cmp.Diff([]memState{memMissing, memExpired, memExpired, memExpired, memFound}, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
}
