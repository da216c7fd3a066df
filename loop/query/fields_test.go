package query

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const sampleOrder = `{
  "id": "ord_1", "total": 129.5, "status": "paid",
  "customer": {"name": "Ann Lee", "email": "ann@example.com", "address": {"city": "Lyon", "zip": "69001"}},
  "line_items": [
    {"sku": "A-1", "qty": 2, "tags": ["red", "xl"]},
    {"sku": "B-2", "qty": 1},
    {"qty": 5}
  ],
  "notes": null,
  "matrix": [[{"x": 1}, {"x": 2}], [], [{"y": 3}]],
  "caf\u00e9": "crème", "a.b": "dotted"
}`

func TestProject(t *testing.T) {
	tests := []struct {
		name        string
		item        string
		paths       []string
		want        string
		wantMatched []bool
	}{
		{"top level in path sampleOrder", sampleOrder, []string{"status", "id"},
			`{"status":"paid","id":"ord_1"}`, []bool{true, true}},
		{"nested", sampleOrder, []string{"customer.name", "customer.address.city", "id"},
			`{"customer":{"name":"Ann Lee","address":{"city":"Lyon"}},"id":"ord_1"}`, []bool{true, true, true}},
		{"array mapped", sampleOrder, []string{"line_items.sku"},
			`{"line_items":[{"sku":"A-1"},{"sku":"B-2"},{"sku":null}]}`, []bool{true}},
		{"array mapped two keys", sampleOrder, []string{"line_items.sku", "line_items.tags"},
			`{"line_items":[{"sku":"A-1","tags":["red","xl"]},{"sku":"B-2","tags":null},{"sku":null,"tags":null}]}`, []bool{true, true}},
		{"arrays of arrays", sampleOrder, []string{"matrix.x"},
			`{"matrix":[[{"x":1},{"x":2}],[],[{"x":null}]]}`, []bool{true}},
		{"missing gives null", sampleOrder, []string{"id", "nope", "customer.phone"},
			`{"id":"ord_1","nope":null,"customer":{"phone":null}}`, []bool{true, false, false}},
		{"null value matches", sampleOrder, []string{"notes"}, `{"notes":null}`, []bool{true}},
		{"through a scalar", sampleOrder, []string{"status.code"}, `{"status":null}`, []bool{false}},
		{"whole object compacted", sampleOrder, []string{"customer.address"},
			`{"customer":{"address":{"city":"Lyon","zip":"69001"}}}`, []bool{true}},
		{"prefix wins", sampleOrder, []string{"customer.name", "customer", "customer.zzz"},
			`{"customer":{"name":"Ann Lee","email":"ann@example.com","address":{"city":"Lyon","zip":"69001"}}}`,
			[]bool{true, true, false}},
		{"escaped key in item", sampleOrder, []string{"café"}, `{"café":"crème"}`, []bool{true}},
		{"dotted key escaped in path", sampleOrder, []string{`a\.b`}, `{"a.b":"dotted"}`, []bool{true}},
		{"duplicate paths", sampleOrder, []string{"id", "id"}, `{"id":"ord_1"}`, []bool{true, true}},
		{"key needing escape", `{"x\"y":1}`, []string{`x"y`}, `{"x\"y":1}`, []bool{true}},
		{"array item mapped", `[{"a":1},{"b":2},3]`, []string{"a"}, `[{"a":1},{"a":null},null]`, []bool{true}},
		{"scalar item", `42`, []string{"a"}, `null`, []bool{false}},
		{"first duplicate wins", `{"a":1,"a":2}`, []string{"a"}, `{"a":1}`, []bool{true}},
		{"unicode", `{"名前":{"姓":"山田","名":"太郎"}}`, []string{"名前.名"}, `{"名前":{"名":"太郎"}}`, []bool{true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := CompileFields(tt.paths)
			if err != nil {
				t.Fatal(err)
			}
			matched := make([]bool, len(tt.paths))
			got, err := f.Project([]byte(tt.item), []byte("prefix:"), matched)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(got), "prefix:") {
				t.Fatalf("Project did not append to dst: %s", got)
			}
			got = got[len("prefix:"):]
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("Project (-want +got):\n%s", diff)
			}
			if !json.Valid(got) {
				t.Errorf("invalid JSON: %s", got)
			}
			if diff := cmp.Diff(tt.wantMatched, matched); diff != "" {
				t.Errorf("matched (-want +got):\n%s", diff)
			}
		})
	}
}

func TestProjectMalformed(t *testing.T) {
	f, err := CompileFields([]string{"a.b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range []string{``, `{`, `{"a":{"b":tru}}`, `{"a":[{"b":1},]}`, `{"a" 1}`, `{"c":"x`, `[1,`, `{"a":{"b":1}},`} {
		got, err := f.Project([]byte(item), []byte("keep"), nil)
		var se *SyntaxError
		if item == `{"a":{"b":1}},` {
			// Project reads one value; what follows is the caller's.
			continue
		}
		if !errors.As(err, &se) {
			t.Errorf("Project(%q) error = %v, want *SyntaxError", item, err)
		}
		if string(got) != "keep" {
			t.Errorf("Project(%q) changed dst to %q", item, got)
		}
	}
}

func TestProjectMatchedLength(t *testing.T) {
	f, _ := CompileFields([]string{"a", "b"})
	if _, err := f.Project([]byte(`{}`), nil, make([]bool, 1)); err == nil {
		t.Error("short matched slice: no error")
	}
}

func TestCompileFieldsErrors(t *testing.T) {
	for _, paths := range [][]string{nil, {""}, {"a", "b..c"}, {".a"}, {"a."}, {`a\`}} {
		_, err := CompileFields(paths)
		if err == nil {
			t.Errorf("CompileFields(%q): no error", paths)
		}
	}
	_, err := CompileFields([]string{"ok", "b..c"})
	if err == nil || !strings.Contains(err.Error(), "_fields[1]") || !strings.Contains(err.Error(), "b..c") {
		t.Errorf("error should name the path and its index: %v", err)
	}
}

func TestProjectManyPaths(t *testing.T) {
	// More nodes than the on-stack span buffer holds.
	var paths []string
	obj := "{"
	for i := 0; i < 40; i++ {
		k := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		paths = append(paths, k+".v")
		if i > 0 {
			obj += ","
		}
		obj += `"` + k + `":{"v":` + "1" + `}`
	}
	obj += "}"
	f, err := CompileFields(paths)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Project([]byte(obj), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(obj, string(got)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestProjectDoesNotAllocate(t *testing.T) {
	f, _ := CompileFields([]string{"id", "customer.name", "line_items.sku"})
	item := []byte(sampleOrder)
	dst := make([]byte, 0, 1024)
	matched := make([]bool, 3)
	n := testing.AllocsPerRun(100, func() {
		var err error
		if _, err = f.Project(item, dst[:0], matched); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("Project allocated %v times per call, want 0", n)
	}
}

func TestRun(t *testing.T) {
	page := []byte(`[
	 {"id":1,"status":"paid","total":"120.00","customer":{"name":"Ann"}},
	 {"id":2,"status":"open","total":80,"customer":{"name":"Bo"}},
	 {"id":3,"status":"paid","total":15,"customer":null},
	 {"id":4,"status":"paid","total":300}
	]`)
	rows, err := Elements(page)
	if err != nil {
		t.Fatal(err)
	}
	fields, err := CompileFields([]string{"id", "customer.name", "customr"})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := CompileFilter([]Clause{{Field: "status", Op: "eq", Value: "paid"}, {Field: "total", Op: "gte", Value: 100}})
	if err != nil {
		t.Fatal(err)
	}
	out, st, err := Run(rows, fields, filter)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":1,"customer":{"name":"Ann"},"customr":null},{"id":4,"customer":null,"customr":null}]`
	if diff := cmp.Diff(want, string(AppendArray(nil, out))); diff != "" {
		t.Errorf("Run (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Stats{Rows: 4, Kept: 2, Unmatched: []string{"customr"}}, st); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}

	// Filter only: the rows themselves, no copy.
	out, st, err = Run(rows, nil, filter)
	if err != nil || len(out) != 2 || &out[1][0] != &rows[3][0] || st.Unmatched != nil {
		t.Errorf("filter only: %q %+v %v", out, st, err)
	}
	// Nothing kept: nothing to judge the paths by.
	none, _ := CompileFilter([]Clause{{Field: "id", Op: "gt", Value: 99}})
	out, st, err = Run(rows, fields, none)
	if err != nil || len(out) != 0 || st.Kept != 0 || st.Unmatched != nil {
		t.Errorf("none kept: %q %+v %v", out, st, err)
	}
	// Neither: the rows unchanged.
	out, st, err = Run(rows, nil, nil)
	if err != nil || len(out) != 4 || st.Kept != 4 {
		t.Errorf("no-op: %q %+v %v", out, st, err)
	}
	// A malformed row (not from Elements) is reported with its index.
	_, _, err = Run([][]byte{[]byte(`{"id":1}`), []byte(`{"id":`)}, fields, nil)
	if err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("malformed row: %v", err)
	}
}

func TestParseFields(t *testing.T) {
	for _, raw := range []string{`["id","customer.name"]`, `"id, customer.name"`, ` "id,customer.name" `} {
		f, err := ParseFields([]byte(raw))
		if err != nil {
			t.Fatalf("ParseFields(%s): %v", raw, err)
		}
		got, err := f.Project([]byte(`{"id":1,"customer":{"name":"A","x":2}}`), nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(`{"id":1,"customer":{"name":"A"}}`, string(got)); diff != "" {
			t.Errorf("ParseFields(%s) (-want +got):\n%s", raw, diff)
		}
	}
	for _, bad := range []string{``, `[]`, `""`, `"a,,b"`, `[1]`, `{"a":1}`, `["a..b"]`} {
		if _, err := ParseFields([]byte(bad)); err == nil {
			t.Errorf("ParseFields(%s): no error", bad)
		}
	}
}
