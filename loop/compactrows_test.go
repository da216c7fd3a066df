package loop

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCompactRows(t *testing.T) {
	for _, c := range []struct {
		name, in, want string
		ok             bool
	}{
		{"uniform rows, nested fields flattened, the envelope kept in order",
			`{"data":[{"id":1,"total":120.5,"customer":{"name":"Ann"}},{"id":2,"total":300,"customer":{"name":"Bo \"B\""}}],"_pagingComplete":true,"_note":"Complete: 2 rows."}`,
			`{"data":{"fields":"id,total,customer.name","rows":"1,120.5,Ann;2,300,\"Bo \\\"B\\\"\""},"_pagingComplete":true,"_note":"Complete: 2 rows."}`, true},
		{"arrays and nulls stay values",
			`{"items":[{"id":"a","tags":["x","y"],"due":null},{"id":"b","tags":[],"due":"2025-01-01"}],"resultId":"r1"}`,
			`{"items":{"fields":"id,tags,due","rows":"a,[\"x\",\"y\"],null;b,[],2025-01-01"},"resultId":"r1"}`, true},
		{"a row with another field: unchanged",
			`{"data":[{"id":1,"total":2},{"id":2}]}`, `{"data":[{"id":1,"total":2},{"id":2}]}`, false},
		{"the same fields in another order: unchanged",
			`{"data":[{"id":1,"total":2},{"total":3,"id":2}]}`, `{"data":[{"id":1,"total":2},{"total":3,"id":2}]}`, false},
		{"one row: nothing to gain",
			`{"data":[{"id":1}]}`, `{"data":[{"id":1}]}`, false},
		{"strings that would read back as something else are quoted",
			`{"d":[{"s":"2","t":"true","u":"a,b","v":""},{"s":" x","t":"[x]","u":"null","v":"1e5"},{"s":"a;b","t":"x","u":"y","v":"z"}]}`,
			`{"d":{"fields":"s,t,u,v","rows":"\"2\",\"true\",\"a,b\",\"\";\" x\",\"[x]\",\"null\",\"1e5\";\"a;b\",x,y,z"}}`, true},
		{"a field name with a comma cannot be told back",
			`{"data":[{"a,b":1},{"a,b":2}]}`, `{"data":[{"a,b":1},{"a,b":2}]}`, false},
		{"a field name with a dot cannot be told back",
			`{"data":[{"a.b":1},{"a.b":2}]}`, `{"data":[{"a.b":1},{"a.b":2}]}`, false},
		{"an empty nested object cannot be told back",
			`{"data":[{"id":1,"meta":{}},{"id":2,"meta":{}}]}`, `{"data":[{"id":1,"meta":{}},{"id":2,"meta":{}}]}`, false},
		{"scalars in the array: unchanged", `{"ids":[1,2,3]}`, `{"ids":[1,2,3]}`, false},
		{"not an object: unchanged", `[{"id":1},{"id":2}]`, `[{"id":1},{"id":2}]`, false},
		{"text: unchanged", `plain text`, `plain text`, false},
		{"two arrays of rows, each compacted",
			`{"a":[{"x":1},{"x":2}],"b":[{"y":"p"},{"y":"q"}]}`,
			`{"a":{"fields":"x","rows":"1;2"},"b":{"fields":"y","rows":"p;q"}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := CompactRows([]byte(c.in))
			if diff := cmp.Diff(c.want, string(got)); diff != "" || ok != c.ok {
				t.Errorf("ok %v, want %v; (-want +got):\n%s", ok, c.ok, diff)
			}
			if ok && !json.Valid(got) {
				t.Errorf("not JSON: %s", got)
			}
		})
	}
}

// readCompactRows reads a compact text of rows back into their values,
// as the layout tells a model to: a cell that starts with a quote, a
// bracket or a brace is JSON and runs to that value's end; any other runs
// to the next comma or semicolon and is true, false, null, a number, or
// else text; a comma ends a cell, a semicolon a row.
func readCompactRows(t *testing.T, text string) [][]any {
	t.Helper()
	var out [][]any
	var row []any
	for i := 0; ; i++ {
		var v any
		if i < len(text) && strings.ContainsRune(`"[{`, rune(text[i])) {
			d := json.NewDecoder(strings.NewReader(text[i:]))
			d.UseNumber()
			if err := d.Decode(&v); err != nil {
				t.Fatalf("a JSON cell at %d of %q: %v", i, text, err)
			}
			i += int(d.InputOffset())
		} else {
			end := strings.IndexAny(text[i:], ",;")
			if end < 0 {
				end = len(text) - i
			}
			cell := text[i : i+end]
			i += end
			switch n := json.Number(cell); {
			case cell == "true" || cell == "false":
				v = cell == "true"
			case cell == "null":
			case json.Valid([]byte(cell)):
				v = n
			default:
				v = cell
				// A bare text is not one a reader could take for a
				// number either (NaN, +1, .5, 007, 0x10).
				_, ferr := strconv.ParseFloat(cell, 64)
				_, ierr := strconv.ParseInt(cell, 0, 64)
				if ferr == nil || ierr == nil || errors.Is(ferr, strconv.ErrRange) || errors.Is(ierr, strconv.ErrRange) {
					t.Errorf("the bare text %q of %q reads as a number", cell, text)
				}
			}
		}
		row = append(row, v)
		if i >= len(text) {
			return append(out, row)
		}
		switch text[i] {
		case ';':
			out, row = append(out, row), nil
		case ',':
		default:
			t.Fatalf("at %d of %q: %q, want a comma or a semicolon", i, text, text[i])
		}
	}
}

// TestCompactRowsReadBack: every row of random results, written in the
// compact layout, reads back as exactly the row's values.
func TestCompactRowsReadBack(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 6))
	texts := []string{"Ann", "a,b", "", " x", "x ", "2", "-1.5", "1e5", "true", "null", "false", "[x]", "{y}", `say "hi"`,
		`back\slash`, "line\nbreak", "tab\t", "café", "東京", "0x10", "NaN", "bkg_00001", "2025-01-01T10:00:00Z", "a b", "é,", "]", "}", "\"", "a;b", ";", "x;", ";y",
		"Infinity", "-Inf", "+1", ".5", "1.", "007", "0b1", "1_000", "0x1p-2", "1e999"}
	value := func() any {
		switch r.IntN(7) {
		case 0:
			return json.Number([]string{"0", "-3", "120.50", "1e-7", "9007199254740993"}[r.IntN(5)])
		case 1:
			return []bool{true, false}[r.IntN(2)]
		case 2:
			return nil
		case 3:
			return []any{texts[r.IntN(len(texts))], json.Number("1")}
		}
		return texts[r.IntN(len(texts))]
	}
	for run := range 300 {
		n := 2 + r.IntN(5)
		rows := make([]map[string]any, n)
		for i := range rows {
			rows[i] = map[string]any{"a": value(), "b": map[string]any{"c": value()}, "d": value()}
		}
		in, _ := json.Marshal(map[string]any{"data": rows})
		out, ok := CompactRows(in)
		if !ok {
			t.Fatalf("run %d: not compacted: %s", run, in)
		}
		var got struct {
			Data struct {
				Fields string `json:"fields"`
				Rows   string `json:"rows"`
			} `json:"data"`
		}
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("run %d: %v: %s", run, err, out)
		}
		back := readCompactRows(t, got.Data.Rows)
		if got.Data.Fields != "a,b.c,d" || len(back) != n {
			t.Fatalf("run %d: %d rows read back of %d: %s", run, len(back), n, out)
		}
		for i, cells := range back {
			want := []any{rows[i]["a"], rows[i]["b"].(map[string]any)["c"], rows[i]["d"]}
			wb, _ := json.Marshal(want)
			var wantBack []any
			d := json.NewDecoder(bytes.NewReader(wb))
			d.UseNumber()
			d.Decode(&wantBack)
			if diff := cmp.Diff(wantBack, cells); diff != "" {
				t.Errorf("run %d row %d of %q (-want +read back):\n%s", run, i, got.Data.Rows, diff)
			}
		}
	}
}
