package paginate

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseLinks(t *testing.T) {
	cases := []struct {
		name    string
		values  []string
		want    []Link
		wantErr bool
	}{
		{
			name:   "GitHub",
			values: []string{`<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last"`},
			want: []Link{
				{URL: "https://api.github.com/repositories/1/issues?page=2", Rel: []string{"next"}},
				{URL: "https://api.github.com/repositories/1/issues?page=5", Rel: []string{"last"}},
			},
		},
		{
			name:   "several fields",
			values: []string{`</a?page=2>; rel=next`, `</a?page=1>; rel=prev`},
			want:   []Link{{URL: "/a?page=2", Rel: []string{"next"}}, {URL: "/a?page=1", Rel: []string{"prev"}}},
		},
		{
			name:   "rel list, case folded",
			values: []string{`</p/3>; REL="Next  Last"`},
			want:   []Link{{URL: "/p/3", Rel: []string{"next", "last"}}},
		},
		{
			name:   "commas and semicolons inside the target and quotes",
			values: []string{`</x?a=1,2;b>; title="one, two; three"; rel="next"`},
			want:   []Link{{URL: "/x?a=1,2;b", Rel: []string{"next"}, Params: map[string]string{"title": "one, two; three"}}},
		},
		{
			name:   "escaped quote, extended and bare params",
			values: []string{`</y>; rel=next; title="say \"hi\""; title*=UTF-8'de'n%c3%a4chstes; crossorigin`},
			want: []Link{{URL: "/y", Rel: []string{"next"}, Params: map[string]string{
				"title": `say "hi"`, "title*": "UTF-8'de'n%c3%a4chstes", "crossorigin": "",
			}}},
		},
		{
			name:   "only the first rel counts",
			values: []string{`</z>; rel="prev"; rel="next"`},
			want:   []Link{{URL: "/z", Rel: []string{"prev"}}},
		},
		{
			name:   "empty elements and whitespace",
			values: []string{` , </a>;rel="next" ,, `},
			want:   []Link{{URL: "/a", Rel: []string{"next"}}},
		},
		{
			name:   "URI relation type",
			values: []string{`</a>; rel=http://example.com/rel/next`},
			want:   []Link{{URL: "/a", Rel: []string{"http://example.com/rel/next"}}},
		},
		{
			name:    "junk before a link",
			values:  []string{`page=2; rel="next", </b>; rel="last"`},
			want:    []Link{{URL: "/b", Rel: []string{"last"}}},
			wantErr: true,
		},
		{
			name:    "unterminated target",
			values:  []string{`</a; rel="next"`},
			wantErr: true,
		},
		{
			name:    "unterminated quoted string",
			values:  []string{`</a>; rel="next`},
			wantErr: true,
		},
		{
			name:    "junk after a parameter",
			values:  []string{`</a>; rel=next junk, </b>; rel=last`},
			want:    []Link{{URL: "/b", Rel: []string{"last"}}},
			wantErr: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseLinks(c.values)
			if (err != nil) != c.wantErr {
				t.Fatalf("ParseLinks error = %v, want error %v", err, c.wantErr)
			}
			if err != nil && !errors.Is(err, ErrMalformedLink) {
				t.Errorf("error %v does not wrap ErrMalformedLink", err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("links (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadLinkHeader(t *testing.T) {
	base, _ := url.Parse("https://api.example.com/v2/items?page=1&per_page=50")
	cases := []struct {
		name    string
		link    []string
		want    linkSignal
		wantErr bool
	}{
		{name: "no header", want: linkSignal{}},
		{name: "absolute next", link: []string{`<https://api.example.com/v2/items?page=2>; rel="next"`},
			want: linkSignal{present: true, next: "https://api.example.com/v2/items?page=2"}},
		{name: "relative path", link: []string{`</v2/items?page=2>; rel="next"`},
			want: linkSignal{present: true, next: "https://api.example.com/v2/items?page=2"}},
		{name: "relative query", link: []string{`<?page=2&per_page=50>; rel="next"`},
			want: linkSignal{present: true, next: "https://api.example.com/v2/items?page=2&per_page=50"}},
		{name: "last page", link: []string{`</v2/items?page=1>; rel="first prev"`},
			want: linkSignal{present: true}},
		{name: "same next twice", link: []string{`</a>; rel=next`, `<https://api.example.com/a>; rel=next`},
			want: linkSignal{present: true, next: "https://api.example.com/a"}},
		{name: "two different nexts", link: []string{`</a>; rel=next, </b>; rel=next`}, wantErr: true},
		{name: "Sentry's next with results", link: []string{`<https://api.example.com/v2/items?cursor=0:100:0>; rel="previous"; results="true"; cursor="0:0:1", <https://api.example.com/v2/items?cursor=0:200:0>; rel="next"; results="true"; cursor="0:200:0"`},
			want: linkSignal{present: true, next: "https://api.example.com/v2/items?cursor=0:200:0"}},
		{name: "Sentry's last page: next with results=false", link: []string{`<https://api.example.com/v2/items?cursor=0:100:1>; rel="previous"; results="true"; cursor="0:100:1", <https://api.example.com/v2/items?cursor=0:300:0>; rel="next"; results="false"; cursor="0:300:0"`},
			want: linkSignal{present: true}},
		{name: "empty next", link: []string{`<>; rel=next`}, wantErr: true},
		{name: "malformed", link: []string{`</a; rel=next`}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for _, v := range c.link {
				h.Add("Link", v)
			}
			got, err := readLinkHeader(h, base)
			if (err != nil) != c.wantErr {
				t.Fatalf("error = %v, want error %v", err, c.wantErr)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(linkSignal{})); diff != "" {
				t.Errorf("signal (-want +got):\n%s", diff)
			}
		})
	}
}

// formatLinks writes links back as one header value.
func formatLinks(links []Link) string {
	var parts []string
	for _, l := range links {
		var b strings.Builder
		fmt.Fprintf(&b, "<%s>", l.URL)
		if len(l.Rel) > 0 {
			fmt.Fprintf(&b, "; rel=%q", strings.Join(l.Rel, " "))
		}
		for k, v := range l.Params {
			fmt.Fprintf(&b, "; %s=\"%s\"", k, strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v))
		}
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ", ")
}

// FuzzParseLinks: the parser never panics, what it returns is
// well-formed, and a header it parsed cleanly parses back to the same
// links once rewritten.
func FuzzParseLinks(f *testing.F) {
	for _, s := range []string{
		`<https://a.example/x?page=2>; rel="next", <https://a.example/x?page=9>; rel="last"`,
		`</y>; rel=next; title="say \"hi\""; title*=UTF-8'de'x`,
		`<a,b>; rel="next last"`, `<`, `<a>;`, `<a>; rel`, `<a>; ="x"`, `,,,`, `<a>; rel="`, `<a>; t="\`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		links, err := ParseLinks([]string{s})
		for _, l := range links {
			if strings.Contains(l.URL, ">") {
				t.Fatalf("URL %q holds '>'", l.URL)
			}
			for _, r := range l.Rel {
				if r == "" || r != strings.ToLower(r) || strings.ContainsAny(r, " \t") {
					t.Fatalf("bad rel %q", r)
				}
			}
		}
		if err != nil {
			return
		}
		for _, l := range links {
			for k := range l.Params {
				if k == "" || strings.ContainsAny(k, "=;,\" \t") || strings.ContainsAny(l.URL, "\r\n") {
					return // not representable in the simple writer above
				}
			}
		}
		again, err := ParseLinks([]string{formatLinks(links)})
		if err != nil {
			t.Fatalf("rewritten %q: %v", formatLinks(links), err)
		}
		if diff := cmp.Diff(links, again); diff != "" {
			t.Fatalf("round trip of %q (-first +second):\n%s", s, diff)
		}
	})
}

func ExampleParseLinks() {
	links, err := ParseLinks([]string{`<https://api.github.com/repositories/1/issues?page=2>; rel="next", <https://api.github.com/repositories/1/issues?page=5>; rel="last"`})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range links {
		if l.HasRel("next") {
			fmt.Println(l.URL)
		}
	}
	// Output: https://api.github.com/repositories/1/issues?page=2
}
