package workflow

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	outs := newOutputs()
	outs.set("properties", json.RawMessage(`{"properties": [
		{"id": "p_1", "tags": ["sea", "pool"], "rooms": [{"n": 1}, {"n": 2}], "owner": {"id": "o_1"}},
		{"id": "p_2", "tags": [], "rooms": [{"n": 3}]},
		{"id": "p_3", "owner": null, "rooms": [[{"n": 4}], {"n": 5}]}
	], "_loop": {"complete": true, "itemCount": 3}, "big": 12345678901234567890}`))
	outs.set("bare", json.RawMessage(`[{"id": 1}, {"id": 2}]`))
	tests := []struct {
		ref  string
		want any
	}{
		{"$.steps.properties._loop.complete", true},
		{"$.steps.properties._loop.itemCount", json.Number("3")},
		{"$.steps.properties.big", json.Number("12345678901234567890")},
		// Keys on an array map over its elements.
		{"$.steps.properties.properties.id", []any{"p_1", "p_2", "p_3"}},
		// Elements that reach nothing add nothing; an explicit null is a value.
		{"$.steps.properties.properties.owner.id", []any{"o_1"}},
		{"$.steps.properties.properties.owner", []any{map[string]any{"id": "o_1"}, nil}},
		// Arrays met while mapping are mapped over too: the list is flat.
		{"$.steps.properties.properties.rooms.n", []any{json.Number("1"), json.Number("2"), json.Number("3"), json.Number("4"), json.Number("5")}},
		// The values reached are not flattened.
		{"$.steps.properties.properties.tags", []any{[]any{"sea", "pool"}, []any{}}},
		// A number on an array picks an element.
		{"$.steps.properties.properties.1.id", "p_2"},
		{"$.steps.properties.properties.9.id", nil},
		{"$.steps.properties.properties.0.tags.1", "pool"},
		{"$.steps.bare.id", []any{json.Number("1"), json.Number("2")}},
		{"$.steps.bare", []any{map[string]any{"id": json.Number("1")}, map[string]any{"id": json.Number("2")}}},
		// Missing paths, and steps that did not run, resolve to null.
		{"$.steps.properties.nothing", nil},
		{"$.steps.properties._loop.complete.deeper", nil},
		{"$.steps.skipped.ids", nil},
		// Mapping over no matches gives an empty list, not null.
		{"$.steps.properties.properties.nothing", []any{}},
	}
	for _, tt := range tests {
		t.Run(tt.ref, func(t *testing.T) {
			r, err := parseRef(tt.ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := outs.resolve(r)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRefEscapes(t *testing.T) {
	r, err := parseRef(`$.steps.a.odd\.key.b`)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ref{text: `$.steps.a.odd\.key.b`, step: "a", keys: []string{"odd.key", "b"}}, r, cmp.AllowUnexported(ref{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestResolveInput(t *testing.T) {
	outs := newOutputs()
	outs.set("a", json.RawMessage(`{"ids": ["x", "y"], "first": "x", "n": 7}`))
	in := map[string]any{
		"plain":   "text",
		"dollar":  "$5 off", // not a ref
		"str":     "$.steps.a.first",
		"obj":     map[string]any{"ref": "$.steps.a.ids"},
		"gone":    "$.steps.a.nothing",
		"skipped": map[string]any{"ref": "$.steps.b.x"},
		"gitref":  map[string]any{"ref": "main"}, // a literal object
		"nested":  map[string]any{"n": "$.steps.a.n", "list": []any{"$.steps.a.first", "$.steps.a.none", 1}},
		"null":    nil,
	}
	got, err := outs.resolveInput(in)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"plain":  "text",
		"dollar": "$5 off",
		"str":    "x",
		"obj":    []any{"x", "y"},
		"gitref": map[string]any{"ref": "main"},
		"nested": map[string]any{"n": json.Number("7"), "list": []any{"x", nil, 1}},
		"null":   nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if _, err := outs.resolveInput(map[string]any{"bad": map[string]any{"ref": "$.nope"}}); err == nil {
		t.Error("a malformed ref object resolved")
	}
}

func TestConditionHolds(t *testing.T) {
	// v is the JSON the ref resolved to; "" when it reached nothing.
	tests := []struct {
		name string
		c    Condition
		v    string
		want bool
	}{
		{"eq true", Condition{Op: OpEq, Value: true}, `true`, true},
		{"eq false", Condition{Op: OpEq, Value: true}, `false`, false},
		{"eq null is not true", Condition{Op: OpEq, Value: true}, `null`, false},
		{"eq absent is not true", Condition{Op: OpEq, Value: true}, ``, false},
		{"eq number kinds", Condition{Op: OpEq, Value: 3}, `3.0`, true},
		// Values written in Go reach the comparison as decoded JSON
		// (jsonValue, the steps' inputs' reader too).
		{"eq Go-typed number", Condition{Op: OpEq, Value: uint8(7)}, `7`, true},
		{"lt Go-typed float", Condition{Op: OpLt, Value: float32(0.5)}, `0.25`, true},
		{"eq big literal", Condition{Op: OpEq, Value: json.Number("12345678901234567891")}, `12345678901234567891`, true},
		{"eq string", Condition{Op: OpEq, Value: "complete_total_reached"}, `"complete_total_reached"`, true},
		// The comparisons are _filter's: a numeric string compares as a
		// number, and an array is tested element by element.
		{"eq numeric string", Condition{Op: OpEq, Value: "3"}, `3`, true},
		{"eq list element", Condition{Op: OpEq, Value: "b"}, `["a","b"]`, true},
		{"neq", Condition{Op: OpNeq, Value: "budget_pages"}, `"complete_no_next"`, true},
		{"neq missing", Condition{Op: OpNeq, Value: true}, ``, true},
		{"gt", Condition{Op: OpGt, Value: 100}, `101`, true},
		{"gt equal", Condition{Op: OpGt, Value: 100}, `100`, false},
		{"gte equal", Condition{Op: OpGte, Value: 100}, `100`, true},
		{"lt", Condition{Op: OpLt, Value: json.Number("0.5")}, `0.25`, true},
		{"lte", Condition{Op: OpLte, Value: 1}, `2`, false},
		{"dates", Condition{Op: OpLt, Value: "2024-06-01"}, `"2024-05-31T23:59:59Z"`, true},
		{"gt numeric string", Condition{Op: OpGt, Value: 1}, `"2"`, true},
		{"gt word", Condition{Op: OpGt, Value: 1}, `"two"`, false},
		{"gt null", Condition{Op: OpGt, Value: 1}, `null`, false},
		{"gt list", Condition{Op: OpGt, Value: 0}, `[1]`, true},
		{"gt object", Condition{Op: OpGt, Value: 0}, `{"a":1}`, false},
		{"exists", Condition{Op: OpExists}, `0`, true},
		{"exists null", Condition{Op: OpExists}, `null`, false},
		{"exists absent", Condition{Op: OpExists}, ``, false},
		{"exists false", Condition{Op: OpExists, Value: false}, `null`, true},
		{"truthy default", Condition{}, `"x"`, true},
		{"truthy empty string", Condition{}, `""`, false},
		{"truthy zero", Condition{Op: OpTruthy}, `0`, false},
		{"truthy negative zero", Condition{Op: OpTruthy}, `-0.0`, false},
		{"truthy number", Condition{Op: OpTruthy}, `0.1`, true},
		{"truthy empty list", Condition{}, `[ ]`, false},
		{"truthy list", Condition{}, `[null]`, true},
		{"truthy empty object", Condition{}, `{}`, false},
		{"truthy false", Condition{}, `false`, false},
		{"truthy null", Condition{}, `null`, false},
		{"truthy absent", Condition{}, ``, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if f, msg := tt.c.check(); msg != "" {
				t.Fatalf("condition invalid: %s %s", f, msg)
			}
			var raw []byte
			if tt.v != "" {
				raw = []byte(tt.v)
			}
			if got := tt.c.holds(raw); got != tt.want {
				t.Errorf("holds(%s) = %v, want %v", tt.v, got, tt.want)
			}
		})
	}
	// Values _filter rejects are rejected here too, with its reason.
	for _, c := range []Condition{{Op: OpEq, Value: []any{"a"}}, {Op: OpGt, Value: true}, {Op: OpExists, Value: "yes"}, {Op: "like", Value: "x"}} {
		if _, msg := c.check(); msg == "" {
			t.Errorf("check(%+v) accepted it", c)
		}
	}
}
