package loop

import (
	"encoding/json"
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
			`{"data":{"fields":["id","total","customer.name"],"rows":[[1,120.5,"Ann"],[2,300,"Bo \"B\""]]},"_pagingComplete":true,"_note":"Complete: 2 rows."}`, true},
		{"arrays and nulls stay values",
			`{"items":[{"id":"a","tags":["x","y"],"due":null},{"id":"b","tags":[],"due":"2025-01-01"}],"resultId":"r1"}`,
			`{"items":{"fields":["id","tags","due"],"rows":[["a",["x","y"],null],["b",[],"2025-01-01"]]},"resultId":"r1"}`, true},
		{"a row with another field: unchanged",
			`{"data":[{"id":1,"total":2},{"id":2}]}`, `{"data":[{"id":1,"total":2},{"id":2}]}`, false},
		{"the same fields in another order: unchanged",
			`{"data":[{"id":1,"total":2},{"total":3,"id":2}]}`, `{"data":[{"id":1,"total":2},{"total":3,"id":2}]}`, false},
		{"one row: nothing to gain",
			`{"data":[{"id":1}]}`, `{"data":[{"id":1}]}`, false},
		{"a field name with a dot cannot be told back",
			`{"data":[{"a.b":1},{"a.b":2}]}`, `{"data":[{"a.b":1},{"a.b":2}]}`, false},
		{"an empty nested object cannot be told back",
			`{"data":[{"id":1,"meta":{}},{"id":2,"meta":{}}]}`, `{"data":[{"id":1,"meta":{}},{"id":2,"meta":{}}]}`, false},
		{"scalars in the array: unchanged", `{"ids":[1,2,3]}`, `{"ids":[1,2,3]}`, false},
		{"not an object: unchanged", `[{"id":1},{"id":2}]`, `[{"id":1},{"id":2}]`, false},
		{"text: unchanged", `plain text`, `plain text`, false},
		{"two arrays of rows, each compacted",
			`{"a":[{"x":1},{"x":2}],"b":[{"y":"p"},{"y":"q"}]}`,
			`{"a":{"fields":["x"],"rows":[[1],[2]]},"b":{"fields":["y"],"rows":[["p"],["q"]]}}`, true},
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
