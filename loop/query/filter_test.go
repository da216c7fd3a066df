package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFilterMatch(t *testing.T) {
	item := `{
	  "id": 9007199254740993, "n": 42, "price": "19.90", "code": "0042", "name": "Widget Pro",
	  "title": "Ça Marche", "paid": true, "refunded": false, "notes": null,
	  "created": "2024-03-05T10:00:00Z", "tags": ["Red", "xl", 7],
	  "customer": {"name": "Ann \"A\" Lee", "vip": true},
	  "line_items": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 10, "dims": [[1, 2], [30]]}],
	  "empty": [], "obj": {}, "esc\u0061ped": "yes"
	}`
	tests := []struct {
		field, op string
		value     any
		want      bool
	}{
		{"n", "eq", 42, true},
		{"n", "eq", 42.0, true},
		{"n", "eq", json.Number("42"), true},
		{"n", "eq", "42", true}, // numeric string value vs number
		{"n", "eq", 41, false},
		{"n", "neq", 41, true},
		{"n", "gt", 41.5, true},
		{"n", "gte", 42, true},
		{"n", "lt", 42, false},
		{"n", "lte", 42, true},
		{"n", "==", 42, true},
		{"n", "!=", 42, false},
		{"id", "eq", json.Number("9007199254740993"), true}, // exact beyond 2^53
		{"id", "eq", json.Number("9007199254740992"), false},
		{"price", "gt", 19.5, true}, // numeric string field vs number
		{"price", "lt", 20, true},
		{"price", "eq", 19.9, true},
		{"price", "eq", "19.90", true},
		{"price", "eq", "19.9", false}, // strings compare as strings
		{"code", "eq", 42, true},
		{"name", "gt", 5, false}, // not a number: kinds differ
		{"name", "eq", "Widget Pro", true},
		{"name", "eq", "widget pro", false}, // eq is case sensitive
		{"name", "contains", "WIDGET", true},
		{"name", "contains", "pro", true},
		{"name", "contains", "gadget", false},
		{"title", "contains", "ça", true}, // non-ASCII fold
		{"n", "contains", 4, true},        // numbers by their text
		{"created", "gte", "2024-03-01", true},
		{"created", "lt", "2024-03-01", false},
		{"paid", "eq", true, true},
		{"paid", "eq", false, false},
		{"refunded", "eq", false, true},
		{"paid", "gt", 0, false},
		{"notes", "eq", nil, true},
		{"missing", "eq", nil, true},
		{"name", "eq", nil, false},
		{"notes", "neq", nil, false},
		{"name", "neq", nil, true},
		{"notes", "exists", nil, false},
		{"notes", "exists", false, true},
		{"name", "exists", nil, true},
		{"name", "exists", true, true},
		{"missing", "exists", false, true},
		{"empty", "exists", true, true},
		{"obj", "exists", true, true},
		{"missing", "neq", "x", true}, // neq holds when absent
		{"missing", "eq", "x", false},
		{"tags", "contains", "xl", true},
		{"tags", "contains", "red", false}, // array contains is element equality
		{"tags", "contains", 7, true},
		{"tags", "eq", "Red", true}, // any element
		{"tags", "in", []any{"blue", "xl"}, true},
		{"tags", "in", []any{"blue"}, false},
		{"tags", "neq", "xl", false},
		{"n", "in", []any{1, 42.0}, true},
		{"n", "in", []string{"42"}, true},
		{"name", "in", []any{}, false},
		{"customer.name", "eq", `Ann "A" Lee`, true},
		{"customer.name", "contains", `"a"`, true},
		{"customer.vip", "eq", true, true},
		{"customer.zip", "exists", nil, false},
		{"line_items.sku", "eq", "B-2", true}, // mapped over the array
		{"line_items.sku", "eq", "C-3", false},
		{"line_items.qty", "gt", 5, true},
		{"line_items.qty", "gt", 10, false},
		{"line_items.dims", "eq", 30, true}, // arrays of arrays flatten
		{"line_items.dims", "gte", 31, false},
		{"line_items.sku", "exists", nil, true},
		{"escaped", "eq", "yes", true},
		{"obj", "eq", "x", false},
		{"name.first", "eq", "x", false},
		{" n ", " EQ ", 42, true}, // space and case in field and op
	}
	for _, tt := range tests {
		name := tt.field + " " + tt.op
		t.Run(name, func(t *testing.T) {
			f, err := CompileFilter([]Clause{{Field: tt.field, Op: tt.op, Value: tt.value}})
			if err != nil {
				t.Fatal(err)
			}
			if got := f.Match([]byte(item)); got != tt.want {
				t.Errorf("%s %s %#v = %v, want %v", tt.field, tt.op, tt.value, got, tt.want)
			}
		})
	}
}

func TestFilterAND(t *testing.T) {
	f, err := CompileFilter([]Clause{{Field: "a", Op: "eq", Value: 1}, {Field: "b", Op: "eq", Value: 2}})
	if err != nil {
		t.Fatal(err)
	}
	for item, want := range map[string]bool{
		`{"a":1,"b":2}`: true, `{"a":1,"b":3}`: false, `{"b":2}`: false, `{"b":2,"a":1}`: true,
	} {
		if got := f.Match([]byte(item)); got != want {
			t.Errorf("Match(%s) = %v, want %v", item, got, want)
		}
	}
	empty, _ := CompileFilter(nil)
	if !empty.Match([]byte(`{}`)) {
		t.Error("no clauses should keep every row")
	}
	var none *Filter
	if !none.Match([]byte(`{}`)) {
		t.Error("nil filter should keep every row")
	}
}

func TestFilterMalformed(t *testing.T) {
	f, _ := CompileFilter([]Clause{{Field: "a", Op: "neq", Value: 1}})
	for _, item := range []string{``, `{`, `{"a":}`, `{"x":"open,"a":2}`, `{"x":[1,"a":2}`, `{"a":"\q"}`, `{"a":"2`, `{"a" 2}`} {
		if f.Match([]byte(item)) {
			t.Errorf("Match(%q) = true, want false on malformed input", item)
		}
	}
}

func TestCompileFilterErrors(t *testing.T) {
	tests := []struct {
		clauses []Clause
		want    string
	}{
		{[]Clause{{Field: "a", Op: "eq", Value: 1}, {Field: "status", Op: "like", Value: "x"}},
			`filter clause 1 {"field":"status","op":"like","value":"x"}: unknown op "like" (valid ops: eq, neq, gt, gte, lt, lte, contains, in, exists)`},
		{[]Clause{{Op: "eq", Value: 1}}, "field is missing"},
		{[]Clause{{Field: "a..b", Op: "eq", Value: 1}}, "bad field path"},
		{[]Clause{{Field: "a"}}, "op is missing"},
		{[]Clause{{Field: "a", Op: "in", Value: "x"}}, "in takes an array"},
		{[]Clause{{Field: "a", Op: "in", Value: []any{map[string]any{}}}}, "in takes an array of strings"},
		{[]Clause{{Field: "a", Op: "eq", Value: []any{1}}}, `use op "in" for a list`},
		{[]Clause{{Field: "a", Op: "eq", Value: map[string]any{"x": 1}}}, "value must be"},
		{[]Clause{{Field: "a", Op: "gt", Value: true}}, "gt compares numbers or strings"},
		{[]Clause{{Field: "a", Op: "gt", Value: nil}}, "gt compares numbers or strings"},
		{[]Clause{{Field: "a", Op: "contains", Value: nil}}, "contains takes a string or a number"},
		{[]Clause{{Field: "a", Op: "exists", Value: "yes"}}, "exists takes true or false"},
	}
	for _, tt := range tests {
		_, err := CompileFilter(tt.clauses)
		var ce *ClauseError
		if !errors.As(err, &ce) {
			t.Errorf("CompileFilter(%v) error = %v, want *ClauseError", tt.clauses, err)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "valid ops:") {
			t.Errorf("error %q does not contain %q and the valid ops", err, tt.want)
		}
	}
}

func TestParseFilter(t *testing.T) {
	f, err := ParseFilter([]byte(`{"field":"id","op":"eq","value":12345678901234567}`))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Match([]byte(`{"id":12345678901234567}`)) || f.Match([]byte(`{"id":12345678901234568}`)) {
		t.Error("big integer ids must compare exactly")
	}
	f, err = ParseFilter([]byte(` [{"field":"a","op":"exists"},{"field":"b","op":"in","value":[1,"x"]}] `))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]bool{true, false}, []bool{f.Match([]byte(`{"a":0,"b":"x"}`)), f.Match([]byte(`{"a":0,"b":2}`))}); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	for _, bad := range []string{``, `"eq"`, `{"field":"a","operator":"eq"}`, `[{"field":"a","op":"eq","value":1},]`} {
		if _, err := ParseFilter([]byte(bad)); err == nil {
			t.Errorf("ParseFilter(%s): no error", bad)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	f, _ := CompileFilter([]Clause{{Field: "status", Op: "eq", Value: "paid"}, {Field: "line_items.qty", Op: "gte", Value: 5},
		{Field: "customer.name", Op: "contains", Value: "lee"}})
	item := []byte(sampleOrder)
	n := testing.AllocsPerRun(100, func() {
		if !f.Match(item) {
			t.Fatal("no match")
		}
	})
	if n != 0 {
		t.Errorf("Match allocated %v times per call, want 0", n)
	}
}

// ClausesFromJSON's fast path accepts and rejects exactly what ClausesOf
// does on the decoded value, with the same clauses and errors.
func TestClausesFromJSONAgreesWithClausesOf(t *testing.T) {
	for _, raw := range []string{
		`[{"field":"status","op":"eq","value":"paid"},{"field":"total","op":"gte","value":20000}]`,
		`[{"field":"a","op":"in","value":[1,"x",null]}]`,
		`[{"field":"a","op":"exists"}]`,
		`[{"field":"a\u0062","op":"eq","value":"\n"}]`,
		`[{"FIELD":"a","op":"eq","value":1}]`,
		`[{"field":"a","op":"eq","valu":1}]`,
		`[{"field":3,"op":"eq","value":1}]`,
		"[{\"field\":\"\xe9\"}]", // invalid UTF-8 is repaired, as decoding does (found by FuzzClausesFromJSON)
		`[{"field":"a","op":"eq","value":1},"x"]`,
		`{"field":"a","op":"lt","value":-2.5e3}`,
		`[]`,
		`"a > 1"`,
	} {
		got, gotErr := ClausesFromJSON([]byte(raw))
		v, err := decodeArg([]byte(raw))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		want, wantErr := ClausesOf(v)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
			t.Errorf("%s:\n got %#v, %v\nwant %#v, %v", raw, got, gotErr, want, wantErr)
		}
	}
}

func TestTestIsOneClause(t *testing.T) {
	for _, tc := range []struct {
		v     string
		op    string
		value any
		want  bool
	}{
		{`5`, "gt", 3, true},
		{`"2024-05-01"`, "lt", "2024-06-01", true},
		{`[1,7]`, "gte", 7, true},
		{``, "neq", "x", true},
		{``, "exists", nil, false},
		{`null`, "eq", nil, true},
		{`"Paid"`, "contains", "pai", true},
	} {
		var raw []byte
		if tc.v != "" {
			raw = []byte(tc.v)
		}
		got, err := Test(raw, tc.op, tc.value)
		if err != nil || got != tc.want {
			t.Errorf("Test(%s %s %v) = %v, %v; want %v", tc.v, tc.op, tc.value, got, err, tc.want)
		}
	}
	var ce *ClauseError
	if _, err := Test([]byte(`1`), "like", 1); !errors.As(err, &ce) {
		t.Errorf("bad op: %v", err)
	}
}

// TestShortNumberIsParse: numberOf's fast path gives exactly strconv's
// answer (the same float64 bits, the same integer) for every text it
// takes, and leaves the rest to strconv — random numbers of 1 to 18
// digits with and without a fraction, at the 15-digit edge, negative
// zero, and texts that are no JSON numbers.
func TestShortNumberIsParse(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 29))
	odd := []string{"-0", "0", "-0.0", "00", "01.5", "0.", ".5", "-", "1.2.3", "--1", "1e2", "1E+2", "+1", "1_0", "0x10",
		"999999999999999", "9999999999999999", "0.000000000000001", "123456789012345.6", "9007199254740993", `"12.5"`, "1.50"}
	for k := 0; k < 200000; k++ {
		var v []byte
		if k < len(odd) {
			v = []byte(odd[k])
		} else {
			if r.IntN(3) == 0 {
				v = append(v, '-')
			}
			n := 1 + r.IntN(18)
			point := -1
			if r.IntN(2) == 0 {
				point = 1 + r.IntN(n)
			}
			for d := 0; d < n; d++ {
				if d == point {
					v = append(v, '.')
				}
				c := byte('0' + r.IntN(10))
				if d == 0 && n > 1 && point != 1 && r.IntN(4) > 0 {
					c = byte('1' + r.IntN(9))
				}
				v = append(v, c)
			}
		}
		n, i, isInt, ok := shortNumber(v)
		if !ok {
			continue
		}
		pn, pi, pInt, pok := parseNumberOf(v)
		if !pok || math.Float64bits(n) != math.Float64bits(pn) || i != pi || isInt != pInt {
			t.Fatalf("%q: shortNumber %v %d %v, strconv %v %d %v %v", v, n, i, isInt, pn, pi, pInt, pok)
		}
	}
	for _, v := range []string{"1e2", "1234567890123456", "0.", ".5", `"1"`, "+1"} {
		if _, _, _, ok := shortNumber([]byte(v)); ok {
			t.Errorf("shortNumber takes %q", v)
		}
	}
}
