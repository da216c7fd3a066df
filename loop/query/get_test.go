package query

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const slackPage = `{
  "ok": true,
  "members": [ {"id": "U1", "name": "ann"}, {"id": "U2", "name": "bo"} ],
  "response_metadata": { "next_cursor": "dXNlcjpVMEc5V0ZYTlo=" }
}`

func TestGet(t *testing.T) {
	tests := []struct {
		name, doc, path string
		want            string
		ok              bool
	}{
		{"whole doc trims space", "  [1, 2]\n", "", "[1, 2]", true},
		{"top key", slackPage, "ok", "true", true},
		{"array value", `{"data":[1,{"a":2}],"x":0}`, "data", `[1,{"a":2}]`, true},
		{"nested", slackPage, "response_metadata.next_cursor", `"dXNlcjpVMEc5V0ZYTlo="`, true},
		{"index", slackPage, "members.1.name", `"bo"`, true},
		{"index out of range", slackPage, "members.2", "", false},
		{"index on object is a key", `{"0":"zero"}`, "0", `"zero"`, true},
		{"missing", slackPage, "response_metadata.prev", "", false},
		{"through scalar", slackPage, "ok.x", "", false},
		{"escaped key in doc", `{"caf\u00e9":1,"a\"b":2}`, "café", "1", true},
		{"escaped quote key", `{"caf\u00e9":1,"a\"b":2}`, `a"b`, "2", true},
		{"unicode key", `{"名前":{"姓":"山田"}}`, "名前.姓", `"山田"`, true},
		{"surrogate pair key", `{"\ud83d\ude00":"smile"}`, "😀", `"smile"`, true},
		{"dotted key unescaped", `{"@odata.nextLink":"u","value":[]}`, "@odata.nextLink", `"u"`, true},
		{"dotted key escaped", `{"a.b":1}`, `a\.b`, "1", true},
		{"exact beats dotted", `{"a.b":1,"a":{"b":2}}`, "a.b", "2", true},
		{"dotted then deeper", `{"links.next":{"href":"h"}}`, "links.next.href", `"h"`, true},
		{"first duplicate wins", `{"a":1,"a":2}`, "a", "1", true},
		{"whitespace everywhere", " {\n\t\"a\" :\r\n { \"b\" : [ 1 , 2 ] } } ", "a.b", "[ 1 , 2 ]", true},
		{"skips deep values", `{"x":[[[[{"y":"}]"}]]]],"z":"ok"}`, "z", `"ok"`, true},
		{"strings with escapes skipped", `{"x":"a\\\"}\n","z":-1.5e3}`, "z", "-1.5e3", true},
		{"siblings skipped not checked", `{"x":[1,],"z":1}`, "z", "1", true},
		{"unterminated sibling", `{"x":"abc,"z":1}`, "z", "", false},
		{"unbalanced sibling", `{"x":[1,"z":1}`, "z", "", false},
		{"malformed target", `{"z":tru}`, "z", "", false},
		{"empty key in path", `{"a":1}`, "a.", "", false},
		{"not json", `hello`, "a", "", false},
		{"empty doc", ``, "", "", false},
		{"bare string", `"s"`, "", `"s"`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Get([]byte(tt.doc), tt.path)
			if ok != tt.ok {
				t.Fatalf("Get(%q) ok = %v, want %v (got %q)", tt.path, ok, tt.ok, got)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Get(%q) (-want +got):\n%s", tt.path, diff)
			}
		})
	}
}

func TestGetDoesNotAllocate(t *testing.T) {
	doc := []byte(slackPage)
	n := testing.AllocsPerRun(100, func() {
		if _, ok := Get(doc, "response_metadata.next_cursor"); !ok {
			t.Fatal("not found")
		}
	})
	if n != 0 {
		t.Errorf("Get allocated %v times per call, want 0", n)
	}
}

func TestSplitPath(t *testing.T) {
	tests := []struct {
		path    string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"a", []string{"a"}, false},
		{"a.b.c", []string{"a", "b", "c"}, false},
		{`a\.b.c`, []string{"a.b", "c"}, false},
		{`a\\.b`, []string{`a\`, "b"}, false},
		{"a..b", nil, true},
		{".a", nil, true},
		{"a.", nil, true},
		{`a\b`, nil, true},
		{`a\`, nil, true},
	}
	for _, tt := range tests {
		got, err := SplitPath(tt.path)
		if (err != nil) != tt.wantErr {
			t.Errorf("SplitPath(%q) error = %v, wantErr %v", tt.path, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("SplitPath(%q) (-want +got):\n%s", tt.path, diff)
		}
		if err == nil && tt.path != "" {
			if back := JoinPath(got...); back != tt.path {
				t.Errorf("JoinPath(SplitPath(%q)) = %q", tt.path, back)
			}
		}
	}
}

func TestElements(t *testing.T) {
	tests := []struct {
		name    string
		arr     string
		want    []string
		wantErr string
	}{
		{"empty", " [ ] ", nil, ""},
		{"mixed", `[1, "two", {"three": [3]}, [[4], []], null, true, false, -0.5e-2]`,
			[]string{"1", `"two"`, `{"three": [3]}`, "[[4], []]", "null", "true", "false", "-0.5e-2"}, ""},
		{"not an array", `{"a":1}`, nil, "want '[' (an array)"},
		{"trailing comma", `[1,2,]`, []string{"1", "2"}, "want value"},
		{"unterminated", `[1,2`, []string{"1", "2"}, "unexpected end of input"},
		{"garbage after", `[1] x`, []string{"1"}, "end of input after the array"},
		{"bad string", "[\"a\tb\"]", nil, "control character"},
		{"bad escape", `["\x"]`, nil, "escape character"},
		{"bad number", `[01]`, []string{"0"}, "want ',' or ']'"},
		{"bad number 2", `[1.]`, nil, "digit after decimal point"},
		{"bad literal", `[nul]`, nil, "literal null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Elements([]byte(tt.arr))
			if tt.wantErr == "" && err != nil {
				t.Fatalf("Elements: %v", err)
			}
			if tt.wantErr != "" {
				var se *SyntaxError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Elements error = %v, want a SyntaxError containing %q", err, tt.wantErr)
				}
			}
			var gotS []string
			for _, g := range got {
				gotS = append(gotS, string(g))
			}
			if diff := cmp.Diff(tt.want, gotS); diff != "" {
				t.Errorf("Elements (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDeepNesting(t *testing.T) {
	ok := strings.Repeat("[", 500) + strings.Repeat("]", 500)
	if _, err := Elements([]byte(ok)); err != nil {
		t.Errorf("500 levels: %v", err)
	}
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	if _, err := Elements([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nesting deeper") {
		t.Errorf("%d levels: error = %v, want nesting error", MaxDepth+1, err)
	}
	obj := strings.Repeat(`{"a":`, 200) + "1" + strings.Repeat("}", 200)
	got, ok2 := Get([]byte(obj), strings.TrimSuffix(strings.Repeat("a.", 200), "."))
	if !ok2 || string(got) != "1" {
		t.Errorf("Get 200 levels deep = %q, %v", got, ok2)
	}
}

func TestKeys(t *testing.T) {
	got, err := Keys([]byte(`{"b":1, "a\u0041":{"x":2}, "":3, "b":4}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "aA", "", "b"}, got); diff != "" {
		t.Errorf("Keys (-want +got):\n%s", diff)
	}
	for _, bad := range []string{`[1]`, `{"a":1`, `{"a" 1}`, `{a:1}`, `{"a":1,}`, `{"a":1} {}`} {
		if _, err := Keys([]byte(bad)); err == nil {
			t.Errorf("Keys(%s): no error", bad)
		}
	}
}

func TestReplace(t *testing.T) {
	tests := []struct {
		name, doc, path, value, want string
		wantErr                      error
	}{
		{"primary array", `{"data": [1,2], "has_more": true}`, "data", `[1,2,3,4]`, `{"data": [1,2,3,4], "has_more": true}`, nil},
		{"nested", `{"a":{"b":1,"c":2}}`, "a.c", `"x"`, `{"a":{"b":1,"c":"x"}}`, nil},
		{"index", `{"a":[0,1,2]}`, "a.1", `{}`, `{"a":[0,{},2]}`, nil},
		{"whole doc", `[1]`, "", ` {"items":[1]} `, `{"items":[1]}`, nil},
		{"add member", `{"a":1 }`, "b", `2`, `{"a":1 ,"b":2}`, nil},
		{"add to empty", `{"a":{}}`, "a.b", `true`, `{"a":{"b":true}}`, nil},
		{"add escapes key", `{}`, `x"y`, `1`, `{"x\"y":1}`, nil},
		{"missing parent", `{"a":1}`, "b.c", `1`, "", ErrNotFound},
		{"index past end", `[1]`, "3", `1`, "", ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Replace([]byte(tt.doc), tt.path, []byte(tt.value))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Replace error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Replace (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := Replace([]byte(`{}`), "a", []byte(`{bad`)); err == nil {
		t.Error("Replace with an invalid value: no error")
	}
	if _, err := Replace([]byte(`{"a":[1,}`), "a", []byte(`1`)); err == nil {
		t.Error("Replace in a malformed doc: no error")
	}
}

func TestDelete(t *testing.T) {
	tests := []struct {
		name, doc, path, want string
		wantErr               bool
	}{
		{"middle", `{"a":1, "_fields":["x"], "b":2}`, "_fields", `{"a":1, "b":2}`, false},
		{"first", `{ "_fields":["x"] , "b":2}`, "_fields", `{ "b":2}`, false},
		{"last", `{"a":1,"b":2}`, "b", `{"a":1}`, false},
		{"only", `{ "a" : 1 }`, "a", `{  }`, false},
		{"nested", `{"x":{"a":1,"b":2}}`, "x.a", `{"x":{"b":2}}`, false},
		{"array element", `[1,2,3]`, "1", `[1,3]`, false},
		{"first element", `[1,2,3]`, "0", `[2,3]`, false},
		{"missing", `{"a":1}`, "b", "", true},
		{"root", `{"a":1}`, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Delete([]byte(tt.doc), tt.path)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Delete error = %v, wantErr %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Delete (-want +got):\n%s", diff)
			}
			if err == nil && !json.Valid(got) {
				t.Errorf("Delete produced invalid JSON %s", got)
			}
		})
	}
}

func TestAppendElementsAt(t *testing.T) {
	var rows [][]byte
	var err error
	for _, page := range []string{
		`{"data":[{"id":1},{"id":2}],"has_more":true}`,
		`{"meta":{"x":[1,{"y":"]"}]},"data":[ {"id":3} ],"has_more":false}`,
	} {
		if rows, err = AppendElementsAt(rows, []byte(page), "data"); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for _, r := range rows {
		got = append(got, string(r))
	}
	if diff := cmp.Diff([]string{`{"id":1}`, `{"id":2}`, `{"id":3}`}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if rows, err = AppendElementsAt(nil, []byte(`[1,2]`), ""); err != nil || len(rows) != 2 {
		t.Errorf("bare array: %q, %v", rows, err)
	}
	if _, err := AppendElementsAt(nil, []byte(`{"items":[]}`), "data"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing path: %v, want ErrNotFound", err)
	}
	var se *SyntaxError
	if _, err := AppendElementsAt(nil, []byte(`{"data":{"a":1}}`), "data"); !errors.As(err, &se) {
		t.Errorf("not an array: %v, want *SyntaxError", err)
	}
	if _, err := AppendElementsAt(nil, []byte(`{"data":[1,{"a":tru}]}`), "data"); !errors.As(err, &se) {
		t.Errorf("malformed item: %v, want *SyntaxError", err)
	}
}

func TestCollect(t *testing.T) {
	doc := []byte(`{"a":{"b":[{"id":1,"t":[{"x":"p"},{"x":"q"}]},{"id":2},{"t":[{"x":"r"}]}]},"n":null}`)
	for path, want := range map[string]string{
		"":         string(doc),
		"a.b.id":   `[1,2]`,
		"a.b.0.id": `1`,
		"a.b.t.x":  `["p","q","r"]`,
		"a.b.9":    "",
		"a.b.zz":   `[]`,
		"n":        `null`,
		"nope":     "",
	} {
		got, ok := Collect(doc, path)
		if want == "" {
			if ok {
				t.Errorf("Collect(%q) = %s, want nothing", path, got)
			}
			continue
		}
		if !ok || string(got) != want {
			t.Errorf("Collect(%q) = %s, %v; want %s", path, got, ok, want)
		}
	}
	if _, ok := Collect([]byte(`{"a":`), "a"); ok {
		t.Error("Collect on invalid JSON: ok")
	}
}
