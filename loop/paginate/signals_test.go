package paginate

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// pageRead is the comparable part of signals.
type pageRead struct {
	Items        []string
	ItemsMissing bool
	Flag         more
	Token        string
	NextURL      string
	LinkNext     string
	Total        int
	TotalPages   int
}

func readOf(s signals) pageRead {
	r := pageRead{ItemsMissing: s.itemsMissing, Flag: s.flag, Token: s.token, NextURL: s.nextURL,
		LinkNext: s.link.next, Total: s.total, TotalPages: s.totalPages}
	for _, it := range s.items {
		r.Items = append(r.Items, string(it))
	}
	return r
}

func TestReadPage(t *testing.T) {
	base, _ := url.Parse("https://api.example.com/v1/items?limit=2")
	full := Plan{Strategy: Cursor, Items: "data", ItemsFound: true, NextToken: "meta.next", MoreFlag: "has_more",
		NextURLField: "links.next", Total: "meta.total", TotalPages: "meta.pages"}
	cases := []struct {
		name    string
		plan    Plan
		body    string
		link    string
		want    pageRead
		wantErr string // substring of the inconsistency; "" none
	}{
		{
			name: "every signal",
			plan: full,
			body: `{"links":{"next":"/v1/items?after=b"},"data":[{"id":"a"}, {"id":"b"}],"has_more":true,"meta":{"next":"b","total":7,"pages":"4"}}`,
			want: pageRead{Items: []string{`{"id":"a"}`, `{"id":"b"}`}, Flag: moreYes, Token: "b",
				NextURL: "https://api.example.com/v1/items?after=b", Total: 7, TotalPages: 4},
		},
		{
			name: "done: nulls and empties",
			plan: full,
			body: `{"data":[],"has_more":false,"meta":{"next":"","total":null},"links":{"next":null}}`,
			want: pageRead{Flag: moreNo, Total: -1, TotalPages: -1},
		},
		{
			name: "absent fields",
			plan: full,
			body: `{"data":[{"id":1}]}`,
			want: pageRead{Items: []string{`{"id":1}`}, Total: -1, TotalPages: -1},
		},
		{
			name: "inverted flag",
			plan: Plan{Strategy: PageNumber, Items: "values", ItemsFound: true, MoreFlag: "isLast", MoreInverted: true},
			body: `{"values":[{"id":1}],"isLast":true}`,
			want: pageRead{Items: []string{`{"id":1}`}, Flag: moreNo, Total: -1, TotalPages: -1},
		},
		{
			name: "numeric token, escaped string",
			plan: Plan{Strategy: Cursor, Items: "data", ItemsFound: true, NextToken: "next", NextURLField: "url"},
			body: `{"data":[],"next":1234,"url":"https:\/\/api.example.com\/v1\/items?p=2"}`,
			want: pageRead{Token: "1234", NextURL: "https://api.example.com/v1/items?p=2", Total: -1, TotalPages: -1},
		},
		{
			name: "bare array",
			plan: Plan{Strategy: LinkHeader, ItemsFound: true},
			body: ` [ {"id":1} , {"id":2} ] `,
			link: `<?page=2>; rel="next"`,
			want: pageRead{Items: []string{`{"id":1}`, `{"id":2}`}, LinkNext: "https://api.example.com/v1/items?page=2", Total: -1, TotalPages: -1},
		},
		{
			name: "items null",
			plan: full,
			body: `{"data":null,"has_more":false}`,
			want: pageRead{ItemsMissing: true, Flag: moreNo, Total: -1, TotalPages: -1},
		},
		{
			name: "empty body",
			plan: full,
			body: ``,
			want: pageRead{ItemsMissing: true, Total: -1, TotalPages: -1},
		},
		{
			name: "dotted key",
			plan: Plan{Strategy: NextURL, Items: "value", ItemsFound: true, NextURLField: "@odata.nextLink"},
			body: `{"value":[{"id":1}],"@odata.nextLink":"https://api.example.com/v1/items?$skiptoken=x"}`,
			want: pageRead{Items: []string{`{"id":1}`}, NextURL: "https://api.example.com/v1/items?$skiptoken=x", Total: -1, TotalPages: -1},
		},
		{name: "token object", plan: full, body: `{"data":[],"meta":{"next":{"a":1}}}`, wantErr: `"meta.next" is neither`},
		{name: "token boolean", plan: full, body: `{"data":[],"meta":{"next":true}}`, wantErr: `"meta.next" is neither`},
		{name: "flag string", plan: full, body: `{"data":[],"has_more":"no"}`, wantErr: `"has_more" is not a boolean`},
		{name: "flag string false", plan: full, body: `{"data":[],"has_more":"false"}`, want: pageRead{Flag: moreNo, Total: -1, TotalPages: -1}},
		{name: "next URL number", plan: full, body: `{"data":[],"links":{"next":2}}`, wantErr: `"links.next" is not a string`},
		{name: "total negative", plan: full, body: `{"data":[],"meta":{"total":-1}}`, wantErr: `"meta.total" is not a non-negative integer`},
		{name: "total fraction", plan: full, body: `{"data":[],"meta":{"total":1.5}}`, wantErr: `"meta.total"`},
		{name: "items not an array", plan: full, body: `{"data":{"id":1}}`, wantErr: `"data" is not an array`},
		{name: "bare body not an array", plan: Plan{ItemsFound: true}, body: `{"id":1}`, wantErr: `not the JSON array`},
		{name: "not JSON", plan: full, body: `<html>oops</html>`, wantErr: `not valid JSON`},
		{name: "not JSON, no signals", plan: Plan{Strategy: None, Items: "data", ItemsFound: true}, body: `<html>login</html>`, wantErr: `not valid JSON`},
		{name: "broken after the items", plan: full, body: `{"data":[{"id":1}],"has_more":tru}`, wantErr: `not valid JSON`},
		{name: "malformed Link", plan: Plan{Strategy: LinkHeader, ItemsFound: true}, body: `[]`, link: `</a; rel=next`, wantErr: `Link`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			if c.link != "" {
				h.Set("Link", c.link)
			}
			s, err := readPage(c.plan, []byte(c.body), h, base, nil, nil)
			if c.wantErr != "" {
				if err == nil || !errors.Is(err, errInconsistent) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error = %v, want an inconsistency mentioning %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("readPage: %v", err)
			}
			if diff := cmp.Diff(c.want, readOf(s)); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
		})
	}
}

// Signals are read in the envelope without the items, which must not
// shadow them: a "next" inside an item is not the page's.
func TestReadPageIgnoresItemFields(t *testing.T) {
	p := Plan{Strategy: Cursor, Items: "data", ItemsFound: true, NextToken: "next"}
	body := `{"data":[{"id":1,"next":"inner"},{"id":2,"next":"inner2"}, {"id":3,"pad":"` + strings.Repeat("x", 100) + `"}]}`
	s, err := readPage(p, []byte(body), http.Header{}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.hasToken || len(s.items) != 3 {
		t.Errorf("token %q (present %v), %d items; want no token and 3 items", s.token, s.hasToken, len(s.items))
	}
}

func TestWithoutItems(t *testing.T) {
	body := []byte(`{"a":1,"data": [ ` + strings.Repeat(`{"id":1},`, 20) + `{"id":2} ] ,"next":"x"}`)
	items, err := query.AppendElementsAt(nil, body, "data")
	if err != nil {
		t.Fatal(err)
	}
	if got := withoutItems(body, items); string(got) != `{"a":1,"data": [] ,"next":"x"}` {
		t.Errorf("withoutItems = %s", got)
	}
	copied := [][]byte{[]byte(`{"id":1}`)}
	if got := withoutItems(body, copied); &got[0] != &body[0] {
		t.Error("items from another buffer must give the body back")
	}
	if _, ok := query.OffsetIn(body[10:], body[:5]); ok {
		t.Error("offsetIn accepted a slice that starts before the buffer")
	}
	if off, ok := query.OffsetIn(body, body[7:12]); !ok || off != 7 {
		t.Errorf("offsetIn = %d, %v; want 7, true", off, ok)
	}
	if _, ok := query.OffsetIn(body[:10], body[8:12]); ok {
		t.Error("offsetIn accepted a slice that runs past the buffer")
	}
}

func TestSnippet(t *testing.T) {
	const key = "abcd1234efgh/+x"
	scrub := tools.NewScrubber(key)
	cases := []struct {
		name, body string
		scrub      *tools.Scrubber
		want       string
	}{
		{"message field", `{"error":{"code":"x","message":"Invalid  page\nsize"}}`, nil, "Invalid page size"},
		{"raw text", "<html>\n<b>Bad gateway</b>\n</html>", nil, "<html> <b>Bad gateway</b> </html>"},
		{"credential", `{"message":"key abcd1234efgh/+x is revoked"}`, scrub, "key [redacted] is revoked"},
		// The message field is read decoded: an upstream that escapes some
		// characters of the key (which the Caller's scrub of the raw body
		// also masks) cannot have the decoding undo the mask.
		{"credential escaped in the message", `{"message":"key abcd\u00312\u00334efgh\/+x is revoked"}`, scrub, "key [redacted] is revoked"},
		{"credential in a longer base64 string", `{"message":"got ` + base64.StdEncoding.EncodeToString([]byte("Bearer "+key)) + `"}`, scrub,
			"got QmVhcmVyI" + tools.Mask + "=="}, // "Bearer" and six bits of the space stay
		// Values the deployment does not hold are the upstream's business:
		// no guessing at what looks like a credential.
		{"unknown token", `{"message":"sent Authorization: Bearer eyJhbGciOi.x.y"}`, scrub, "sent Authorization: Bearer eyJhbGciOi.x.y"},
		{"json secret", `{"detail":"bad","token":"zzz"}`, nil, "bad"},
		{"long", strings.Repeat("a", 500), nil, strings.Repeat("a", 200) + "…"},
		{"control characters", "a\x00b\x1bc", nil, "a b c"},
	}
	for _, c := range cases {
		if got := snippet([]byte(c.body), c.scrub); got != c.want {
			t.Errorf("%s: snippet = %q, want %q", c.name, got, c.want)
		}
	}
}

func TestCursorRejected(t *testing.T) {
	for body, want := range map[string]bool{
		`{"error":"invalid_cursor"}`:                     true,
		`{"message":"The page token has expired"}`:       true,
		`{"errors":[{"detail":"Cursor is not valid"}]}`:  true,
		`{"message":"Invalid value for limit"}`:          false,
		`{"message":"cursor accepted, server exploded"}`: false,
	} {
		if got := cursorRejected([]byte(body)); got != want {
			t.Errorf("cursorRejected(%s) = %v, want %v", body, got, want)
		}
	}
}

// FuzzReadPage: any body, any Link header — readPage never panics, and
// the items it returns are sub-slices of the body.
func FuzzReadPage(f *testing.F) {
	f.Add(`{"data":[{"id":1}],"has_more":true,"next":"x","total":3}`, `</a>; rel=next`)
	f.Add(`[1,2,3]`, ``)
	f.Add(`{"data":null}`, `<`)
	f.Add(`{"data":[{"id":"a\"b"}],"next":{"a":[1,2]}}`, ``)
	plans := []Plan{
		{Strategy: Cursor, Items: "data", ItemsFound: true, NextToken: "next", MoreFlag: "has_more", Total: "total"},
		{Strategy: LinkHeader, ItemsFound: true},
		{Strategy: NextURL, Items: "data", ItemsFound: true, NextURLField: "next"},
	}
	base, _ := url.Parse("https://api.example.com/items")
	f.Fuzz(func(t *testing.T, body, link string) {
		h := http.Header{}
		if link != "" {
			h.Set("Link", link)
		}
		b := []byte(body)
		for _, p := range plans {
			s, _ := readPage(p, b, h, base, nil, nil)
			for _, it := range s.items {
				if len(it) == 0 || !strings.Contains(body, string(it)) {
					t.Fatalf("item %q is not part of the body", it)
				}
			}
		}
	})
}

// FuzzItemID: on any valid item, the fast path agrees with query.Get.
func FuzzItemID(f *testing.F) {
	for _, s := range []string{`{"id":"ord_1","x":1}`, `{"id":12.5e3}`, `{"id":"a\"b"}`, `{"id" : 1}`,
		`{"idx":1,"id":2}`, `{"id":-0}`, `{"id":null}`, `{"id":{"a":1}}`, `[1]`, `{"id":"é"}`} {
		f.Add(s, "id")
	}
	f.Add(`{"key":"k1"}`, "key")
	f.Add(`{"a.b":1}`, "a.b")
	f.Add(`{"":"","":0}`, "")
	f.Fuzz(func(t *testing.T, item, path string) {
		if !query.Valid([]byte(item)) {
			return
		}
		b := []byte(strings.TrimSpace(item))
		got, gotOK := itemID(b, path)
		want, wantOK := query.Get(b, path)
		if gotOK != wantOK || string(got) != string(want) {
			t.Fatalf("itemID(%s, %q) = %s, %v; query.Get = %s, %v", item, path, got, gotOK, want, wantOK)
		}
	})
}
