package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

var fuzzDocs = []string{
	slackPage,
	`{"a":{"b":[1,{"c":"d"}]},"e\u00e9":null,"f":[[1,2],[3]]}`,
	`[{"id":1,"tags":["x","y"]},{"id":"2"}]`,
	`{"@odata.nextLink":"u","a.b":1,"a":{"b":2}}`,
	`"str\"ing"`, `-1.5e+10`, `true`, `{}`, `[]`, `{"a":[1,]}`, `{"a" 1}`, `[1`, "\"\x01\"",
	`{"\ud83d\ude00":"\ud83d","x":"\u0000"}`,
}

var fuzzPaths = []string{"", "a", "a.b", "a.b.1.c", "0", "1.id", "@odata.nextLink", `a\.b`, "f.0.1", "eé", "x..y"}

// decodeAll decodes b as encoding/json would, numbers kept as text.
func decodeAll(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, io.ErrUnexpectedEOF
	}
	return v, nil
}

// awkwardKeys reports whether the document has duplicate keys or keys
// with dots in some object: there encoding/json (last duplicate wins) and
// Get (first wins; dotted names found by plain paths) differ on purpose.
func awkwardKeys(b []byte) bool {
	d := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err != nil {
			return false
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.obj && top.expect {
			if s, ok := tok.(string); ok {
				if top.keys[s] || strings.Contains(s, ".") {
					return true
				}
				top.keys[s] = true
				top.expect = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].obj {
			stack[len(stack)-1].expect = true
		}
	}
}

// refGet navigates a decoded value the way Get documents it.
func refGet(v any, keys []string) (any, bool) {
	for _, k := range keys {
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[k]; !ok {
				return nil, false
			}
		case []any:
			n, ok := arrayIndex(k)
			if !ok || n >= len(x) {
				return nil, false
			}
			v = x[n]
		default:
			return nil, false
		}
	}
	return v, true
}

func FuzzGet(f *testing.F) {
	for _, d := range fuzzDocs {
		for _, p := range fuzzPaths {
			f.Add([]byte(d), p)
		}
	}
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		raw, ok := Get(doc, path) // must not panic, whatever the input
		if Valid(doc) != json.Valid(doc) {
			t.Fatalf("Valid(%q) = %v, encoding/json says %v", doc, Valid(doc), json.Valid(doc))
		}
		if ok && !json.Valid(raw) {
			t.Fatalf("Get(%q, %q) returned invalid JSON %q", doc, path, raw)
		}
		if !json.Valid(doc) || !utf8.Valid(doc) || !utf8.ValidString(path) || awkwardKeys(doc) {
			return
		}
		keys, err := SplitPath(path)
		if err != nil {
			if ok {
				t.Fatalf("Get(%q) with a bad path found %q", path, raw)
			}
			return
		}
		whole, err := decodeAll(doc)
		if err != nil {
			t.Fatalf("decode valid doc: %v", err)
		}
		want, wantOK := refGet(whole, keys)
		if ok != wantOK {
			t.Fatalf("Get(%q, %q) ok = %v, encoding/json says %v", doc, path, ok, wantOK)
		}
		if !ok {
			return
		}
		got, err := decodeAll(raw)
		if err != nil {
			t.Fatalf("decode Get result %q: %v", raw, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Get(%q, %q) (-encoding/json +Get):\n%s", doc, path, diff)
		}
		if path == "" {
			return
		}
		out, err := Replace(doc, path, []byte(`{"replaced":true}`))
		if err != nil || !json.Valid(out) {
			t.Fatalf("Replace(%q, %q) = %q, %v", doc, path, out, err)
		}
		if r, ok := Get(out, path); !ok || string(r) != `{"replaced":true}` {
			t.Fatalf("after Replace, Get(%q) = %q, %v", path, r, ok)
		}
		out, err = Delete(doc, path)
		if err != nil || !json.Valid(out) {
			t.Fatalf("Delete(%q, %q) = %q, %v", doc, path, out, err)
		}
	})
}

// refProject is Project on decoded values, following the compiled tree.
func refProject(v any, n *fieldNode) any {
	switch x := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for _, c := range n.children {
			val, ok := x[c.key]
			switch {
			case !ok:
				out[c.key] = nil
			case c.leaf:
				out[c.key] = val
			default:
				out[c.key] = refProject(val, c)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = refProject(e, n)
		}
		return out
	}
	return nil
}

// refResolves reports whether keys reach a value in v, mapping arrays.
func refResolves(v any, keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	switch x := v.(type) {
	case map[string]any:
		val, ok := x[keys[0]]
		return ok && refResolves(val, keys[1:])
	case []any:
		for _, e := range x {
			if refResolves(e, keys) {
				return true
			}
		}
	}
	return false
}

func FuzzProject(f *testing.F) {
	for _, d := range append(fuzzDocs, sampleOrder) {
		f.Add([]byte(d), "id,customer.name,line_items.sku")
		f.Add([]byte(d), "a.b,a,f.x,eé")
		f.Add([]byte(d), `a\.b,tags,matrix.x`)
	}
	f.Fuzz(func(t *testing.T, item []byte, pathList string) {
		paths := strings.Split(pathList, ",")
		for _, p := range paths {
			// Filters over the same paths must never panic either.
			if flt, err := CompileFilter([]Clause{{Field: p, Op: "eq", Value: "x"}, {Field: p, Op: "exists"}}); err == nil {
				flt.Match(item)
			}
			if flt, err := CompileFilter([]Clause{{Field: p, Op: "contains", Value: "X"}, {Field: p, Op: "lt", Value: 3}}); err == nil {
				flt.Match(item)
			}
		}
		fields, err := CompileFields(paths)
		if err != nil {
			return
		}
		matched := make([]bool, len(paths))
		out, err := fields.Project(item, []byte("["), matched)
		if err != nil {
			if string(out) != "[" {
				t.Fatalf("Project(%q) failed but changed dst: %q", item, out)
			}
			if json.Valid(item) {
				t.Fatalf("Project(%q) failed on valid JSON: %v", item, err)
			}
			return
		}
		out = append(out, ']')
		if !json.Valid(out) {
			t.Fatalf("Project(%q, %q) produced invalid JSON %q", item, paths, out)
		}
		if !json.Valid(item) || !utf8.Valid(item) || !utf8.ValidString(pathList) || awkwardKeys(item) {
			return
		}
		v, err := decodeAll(item)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeAll(out)
		if err != nil {
			t.Fatal(err)
		}
		want := []any{refProject(v, fields.root)}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Project(%q, %q) (-reference +got):\n%s", item, paths, diff)
		}
		for i, p := range paths {
			keys, _ := SplitPath(strings.TrimSpace(p))
			if w := refResolves(v, keys); w != matched[i] {
				t.Fatalf("Project(%q): matched[%d] (%q) = %v, reference %v", item, i, p, matched[i], w)
			}
		}
	})
}

// FuzzClausesFromJSON: the scanner's fast path reads exactly what
// ClausesOf reads from the decoded value — the same clauses, the same
// errors — whatever the input.
func FuzzClausesFromJSON(f *testing.F) {
	for _, s := range []string{
		`[{"field":"status","op":"eq","value":"paid"}]`,
		`[{"field":"a","op":"in","value":[1,"x",null]},{"field":"b","op":"exists"}]`,
		`[{"field":"a\u0062","op":"eq","value":"\n"}]`,
		`[{"FIELD":"a","op":"eq","value":1}]`,
		`[{"field":"a","op":"eq","valu":1}]`,
		`[{"field":"a","field":"b","op":"lt","value":-2.5e3}]`,
		`{"field":"a","op":"gt","value":1}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := decodeArg([]byte(raw))
		if err != nil {
			return // not JSON: both report a decode error, worded apart
		}
		want, wantErr := ClausesOf(v)
		got, gotErr := ClausesFromJSON([]byte(raw))
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
			t.Fatalf("%s:\n got %#v, %v\nwant %#v, %v", raw, got, gotErr, want, wantErr)
		}
	})
}
