package workflow

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/trawl-dev/trawl/loop/query"
)

// hotelBookings is the workflow most tests run: list the hotels, fan out
// over their ids for every page of bookings (cancelled ones of five nights
// or more), and branch on whether that walk was complete.
const hotelBookings = `{
  "id": "hotel-bookings",
  "steps": [
    {"id": "properties", "type": "tool", "tool": "acme.list_properties",
     "input": {"type": "hotel"}, "loop": {"fields": ["id"]}},
    {"id": "bookings", "type": "tool", "tool": "acme.list_property_bookings",
     "loop": {"all_pages": true, "fields": ["id", "property_id", "nights"],
              "for_each": {"key": "property_id", "values": {"ref": "$.steps.properties.properties.id"}},
              "filter": [{"field": "status", "op": "eq", "value": "cancelled"},
                         {"field": "nights", "op": "gte", "value": 5}]}},
    {"id": "gate", "type": "branch",
     "if": {"ref": "$.steps.bookings._loop.complete", "op": "eq", "value": true},
     "then": "end", "else": "stats"},
    {"id": "stats", "type": "tool", "tool": "acme.get_stats"}
  ]
}`

func TestParse(t *testing.T) {
	def, err := Parse([]byte(hotelBookings))
	if err != nil {
		t.Fatal(err)
	}
	want := &Definition{ID: "hotel-bookings", Steps: []Step{
		{ID: "properties", Type: TypeTool, Tool: "acme.list_properties",
			Input: map[string]any{"type": "hotel"}, Loop: &Loop{Fields: []string{"id"}}},
		{ID: "bookings", Type: TypeTool, Tool: "acme.list_property_bookings", Loop: &Loop{
			AllPages: true, Fields: []string{"id", "property_id", "nights"},
			ForEach: &ForEach{Key: "property_id", Values: Values{Ref: "$.steps.properties.properties.id"}},
			Filter: []query.Clause{{Field: "status", Op: "eq", Value: "cancelled"},
				{Field: "nights", Op: "gte", Value: json.Number("5")}}}},
		{ID: "gate", Type: TypeBranch, If: &Condition{Ref: "$.steps.bookings._loop.complete", Op: "eq", Value: true},
			Then: "end", Else: "stats"},
		{ID: "stats", Type: TypeTool, Tool: "acme.get_stats"},
	}}
	if diff := cmp.Diff(want, def); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}

	// json.Unmarshal is as strict as Parse, and Marshal writes it back.
	var viaJSON Definition
	if err := json.Unmarshal([]byte(hotelBookings), &viaJSON); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, &viaJSON); diff != "" {
		t.Errorf("json.Unmarshal (-want +got):\n%s", diff)
	}
	out, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(out)
	if err != nil {
		t.Fatalf("Parse(Marshal(def)): %v\n%s", err, out)
	}
	if diff := cmp.Diff(def, again); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

func TestParseValuesForms(t *testing.T) {
	tests := []struct {
		in   string
		want Values
	}{
		{`["p_1", 2, true]`, Values{List: []any{"p_1", json.Number("2"), true}}},
		{`{"ref": "$.steps.a.ids"}`, Values{Ref: "$.steps.a.ids"}},
		{`"$.steps.a.ids"`, Values{Ref: "$.steps.a.ids"}},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var got Values
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	step := func(s string) string { return `{"id": "w", "steps": [` + s + `]}` }
	tests := []struct {
		name, in, want string
	}{
		{"empty", ``, `workflow is not valid JSON: empty input`},
		{"syntax", `{"id": "w",}`, `workflow is not valid JSON: invalid character '}' looking for beginning of object key string`},
		{"truncated", `{"id": "w"`, `workflow is not valid JSON: unexpected end of input`},
		{"trailing", `{"id": "w"} {}`, `workflow is not valid JSON: data after the first value`},
		{"array", `[]`, `workflow must be an object, not an array`},
		{"unknown top", `{"id": "w", "name": "x", "steps": []}`, `workflow has an unknown field "name" (known: id, steps)`},
		{"id type", `{"id": 7, "steps": []}`, `id must be a string, not a number`},
		{"steps type", `{"id": "w", "steps": {}}`, `steps must be an array, not an object`},
		{"step type", step(`"fetch"`), `steps[0]: must be an object, not a string`},
		{"unknown step field", step(`{"id": "a", "type": "tool", "tool": "t", "args": {}}`),
			`steps[0] (a): has an unknown field "args" (known: allow_partial, else, id, if, input, loop, then, tool, type)`},
		{"unknown loop field", step(`{"id": "fetch", "type": "tool", "tool": "t", "loop": {"all_page": true}}`),
			`steps[0] (fetch): loop has an unknown field "all_page" (known: aggregate, all_pages, cache, fields, filter, for_each)`},
		// loop.aggregate is read by the parser of _aggregate.
		{"aggregate unknown", step(`{"id": "a", "loop": {"aggregate": {"group_by": ["currency"], "metrics": [{"op": "sum", "feild": "total"}]}}}`),
			`steps[0] (a): loop.aggregate.metrics[0].feild unknown key; a metric has op, field, as (ops: count, count_distinct, sum, avg, min, max)`},
		{"aggregate type", step(`{"id": "a", "loop": {"aggregate": ["currency"]}}`),
			`steps[0] (a): loop.aggregate must be an object such as {"group_by": ["currency"], "metrics": [{"op": "count"}, {"op": "sum", "field": "total"}]}, not an array`},
		{"all_pages type", step(`{"id": "a", "loop": {"all_pages": "yes"}}`),
			`steps[0] (a): loop.all_pages must be true or false, not a string`},
		// loop.fields and loop.filter are read by the parsers of _fields
		// and _filter: the same shapes, the same messages.
		{"fields type", step(`{"id": "a", "loop": {"fields": 3}}`),
			`steps[0] (a): loop.fields must be an array of dot-paths such as ["id", "customer.name"] or a comma-separated string, not a number`},
		{"fields element", step(`{"id": "a", "loop": {"fields": ["id", 3]}}`),
			`steps[0] (a): loop.fields must be an array of dot-paths such as ["id", "customer.name"] or a comma-separated string; element 1 is a number`},
		{"for_each unknown", step(`{"id": "a", "loop": {"for_each": {"key": "k", "value": [1]}}}`),
			`steps[0] (a): loop.for_each has an unknown field "value" (known: key, values)`},
		{"values number", step(`{"id": "a", "loop": {"for_each": {"key": "k", "values": 3}}}`),
			`steps[0] (a): loop.for_each.values must be a list or a ref such as {"ref": "$.steps.<id>.<path>"}, not a number`},
		{"values plain string", step(`{"id": "a", "loop": {"for_each": {"key": "k", "values": "p_1"}}}`),
			`steps[0] (a): loop.for_each.values must be a list or a ref such as {"ref": "$.steps.<id>.<path>"}, not the string "p_1"`},
		{"values ref extra", step(`{"id": "a", "loop": {"for_each": {"key": "k", "values": {"ref": "$.steps.x.y", "path": "z"}}}}`),
			`steps[0] (a): loop.for_each.values has an unknown field "path" (known: ref)`},
		{"values ref missing", step(`{"id": "a", "loop": {"for_each": {"key": "k", "values": {}}}}`),
			`steps[0] (a): loop.for_each.values.ref is missing`},
		{"filter type", step(`{"id": "a", "loop": {"filter": "total > 3"}}`),
			`steps[0] (a): loop.filter must be a clause {"field","op","value"} or an array of them, not a string`},
		{"filter clause unknown", step(`{"id": "a", "loop": {"filter": [{"field": "total", "op": "gt", "vaule": 3}]}}`),
			`steps[0] (a): loop.filter[0] unknown key "vaule"; a clause has only field, op, value`},
		{"cache type", step(`{"id": "a", "loop": {"cache": {"ttl_minutes": "60"}}}`),
			`steps[0] (a): loop.cache.ttl_minutes must be a number of minutes, not a string`},
		{"input type", step(`{"id": "a", "input": ["x"]}`),
			`steps[0] (a): input must be an object, not an array`},
		{"if unknown", step(`{"id": "b", "type": "branch", "if": {"ref": "$.steps.a.x", "equals": 1}}`),
			`steps[0] (b): if has an unknown field "equals" (known: op, ref, value)`},
		{"several", step(`{"id": 1, "type": true}, {"id": "b", "loop": []}`),
			`steps[0]: id must be a string, not a number; steps[0]: type must be a string, not a boolean; steps[1] (b): loop must be an object, not an array`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v is not ErrInvalid", err)
			}
			if diff := cmp.Diff(tt.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTooManySteps(t *testing.T) {
	steps := make([]string, MaxSteps+1)
	for i := range steps {
		steps[i] = `{"id": "s", "type": "tool", "tool": "acme.get_stats"}`
	}
	_, err := Parse([]byte(`{"id": "w", "steps": [` + strings.Join(steps, ",") + `]}`))
	if want := "steps has 101 steps; at most 100 are allowed"; err == nil || err.Error() != want {
		t.Errorf("error = %v, want %q", err, want)
	}
}

func TestValidate(t *testing.T) {
	cat := acmeCatalog(t, "http://127.0.0.1:1")
	tests := []struct {
		name, in, want string
	}{
		{"ok", hotelBookings, ""},
		{"ok literal values and input refs", `{"id": "w", "steps": [
			{"id": "one", "type": "tool", "tool": "acme.list_properties"},
			{"id": "two", "type": "tool", "tool": "acme.list_property_bookings",
			 "input": {"property_id": "$.steps.one.properties.0.id", "status": {"ref": "$.steps.one.x"}}},
			{"id": "three", "type": "tool", "tool": "acme.list_property_bookings",
			 "loop": {"for_each": {"key": "property_id", "values": ["p_1", "p_2"]}, "all_pages": true, "cache": {"ttl_minutes": 0.5}}},
			{"id": "four", "type": "branch", "if": {"ref": "$.steps.three.data"}, "then": "end", "else": "end"}]}`, ""},
		{"no id", `{"steps": [{"id": "a", "type": "tool", "tool": "acme.get_stats"}]}`, `id is required`},
		{"bad id", `{"id": "a b", "steps": [{"id": "a", "type": "tool", "tool": "acme.get_stats"}]}`,
			`id "a b" must be 1-64 letters, digits, '_' or '-'`},
		{"no steps", `{"id": "w", "steps": []}`, `steps must hold at least one step`},
		{"step id", `{"id": "w", "steps": [{"type": "tool", "tool": "acme.get_stats"}, {"id": "end", "type": "tool", "tool": "acme.get_stats"},
			{"id": "a.b", "type": "tool", "tool": "acme.get_stats"}, {"id": "c", "type": "tool", "tool": "acme.get_stats"},
			{"id": "c", "type": "tool", "tool": "acme.get_stats"}]}`,
			`steps[0]: id is required; steps[1] (end): id "end" is reserved: branches use it to end the run; ` +
				`steps[2] (a.b): id "a.b" must start with a letter or '_' and hold at most 64 letters, digits, '_' or '-'; ` +
				`steps[4] (c): id "c" is also the id of steps[3]`},
		{"type", `{"id": "w", "steps": [{"id": "a", "tool": "acme.get_stats"}, {"id": "b", "type": "call"}]}`,
			`steps[0] (a): type is required: "tool" or "branch"; steps[1] (b): type "call" is not a step type: "tool" or "branch"`},
		{"tool", `{"id": "w", "steps": [{"id": "a", "type": "tool"}, {"id": "b", "type": "tool", "tool": "acme.list_bookings"}]}`,
			`steps[0] (a): tool is required: the id of the tool to call, such as "acme.list_orders"; steps[1] (b): tool "acme.list_bookings" is not a known tool`},
		{"input", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_property_bookings",
			"input": {"property_id": "p_1", "_all_pages": true, "state": "x"}}]}`,
			`steps[0] (a): input._all_pages is a reserved argument; declare it in the loop block (all_pages, fields, for_each, filter, aggregate); ` +
				`steps[0] (a): input.state is not a parameter of acme.list_property_bookings; parameters: page, per_page, property_id, status`},
		{"required", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_property_bookings"}]}`,
			`steps[0] (a): input is missing "property_id", a required parameter of acme.list_property_bookings (give it in input, or fan out over it with loop.for_each)`},
		{"for_each key", `{"id": "w", "steps": [{"id": "p", "type": "tool", "tool": "acme.list_properties"},
			{"id": "x", "type": "branch", "if": {"ref": "$.steps.p._loop.complete"}, "then": "fetch", "else": "end"},
			{"id": "fetch", "type": "tool", "tool": "acme.list_property_bookings", "input": {"property_id": "p_1"},
			 "loop": {"for_each": {"key": "property", "values": {"ref": "$.steps.p.properties.id"}}}}]}`,
			`steps[2] (fetch): loop.for_each.key "property" is not a parameter of acme.list_property_bookings; parameters: page, per_page, property_id, status`},
		{"for_each key twice", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_property_bookings",
			"input": {"property_id": "p_1"}, "loop": {"for_each": {"key": "property_id", "values": ["p_2"]}}}]}`,
			`steps[0] (a): loop.for_each.key "property_id" is also given in input; give it in one place`},
		{"for_each no key", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_properties",
			"loop": {"for_each": {"values": ["hotel"]}}}]}`,
			`steps[0] (a): loop.for_each.key is required: the parameter that takes each value`},
		{"for_each values", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_property_bookings",
			"loop": {"for_each": {"key": "property_id", "values": []}}},
			{"id": "b", "type": "tool", "tool": "acme.list_property_bookings",
			"loop": {"for_each": {"key": "property_id", "values": ["p_1", {"id": "p_2"}, null]}}}]}`,
			`steps[0] (a): loop.for_each.values must be a non-empty list or a ref such as {"ref": "$.steps.<id>.<path>"}; ` +
				`steps[1] (b): loop.for_each.values[1] must be a string, a number or a boolean, not an object; ` +
				`steps[1] (b): loop.for_each.values[2] must be a string, a number or a boolean, not null`},
		{"refs", `{"id": "w", "steps": [
			{"id": "a", "type": "tool", "tool": "acme.list_property_bookings",
			 "loop": {"for_each": {"key": "property_id", "values": {"ref": "$.steps.b.ids"}}}},
			{"id": "b", "type": "tool", "tool": "acme.list_property_bookings",
			 "input": {"property_id": "$.steps.b.x", "status": {"ref": "$.step.a"}},
			 "loop": {"for_each": {"key": "page", "values": {"ref": "$.steps.zz.ids"}}}},
			{"id": "c", "type": "tool", "tool": "acme.list_properties", "input": {"type": "$.steps..x"}}]}`,
			`steps[0] (a): loop.for_each.values.ref "$.steps.b.ids" refers to step "b", which does not run before this one; the first step can refer to no step; ` +
				`steps[1] (b): input.property_id "$.steps.b.x" refers to step "b", which does not run before this one; earlier steps: a; ` +
				`steps[1] (b): input.status "$.step.a" is not a ref: refs have the form "$.steps.<step id>.<path>"; ` +
				`steps[1] (b): loop.for_each.values.ref "$.steps.zz.ids" refers to no step "zz"; earlier steps: a; ` +
				`steps[2] (c): input.type "$.steps..x" is not a ref: refs have the form "$.steps.<step id>.<path>" with no empty segment`},
		{"aggregate", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_properties",
			"loop": {"aggregate": {"group_by": ["city"], "metrics": [{"op": "median", "field": "rating"}]}}},
			{"id": "b", "type": "tool", "tool": "acme.list_properties", "loop": {"aggregate": {"having": [{"field": "sum(rating)", "op": "gt", "value": 3}]}}}]}`,
			`steps[0] (a): loop.aggregate.metrics[0].op unknown op "median" (ops: count, count_distinct, sum, avg, min, max); ` +
				`steps[1] (b): loop.aggregate.having[0].field "sum(rating)" is not a metric; having tests a metric (count), filter tests rows`},
		{"fields and filter", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_properties",
			"loop": {"fields": ["id", "address..city"], "filter": [{"field": "rating", "op": "gt", "value": 4}, {"field": "type", "op": "like", "value": "h"}]}},
			{"id": "b", "type": "tool", "tool": "acme.list_properties", "loop": {"fields": []}}]}`,
			`steps[0] (a): loop.fields[1] "address..city" is not a dot-path: empty key (use ` + "`\\.`" + ` for a dot inside a key); ` +
				`steps[0] (a): loop.filter[1] {"field":"type","op":"like","value":"h"}: unknown op "like" (ops: eq, neq, gt, gte, lt, lte, contains, in, exists); ` +
				`steps[1] (b): loop.fields must not be empty (leave it out to keep every field)`},
		{"cache", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.list_properties", "loop": {"all_pages": true, "cache": {"ttl_minutes": 0}}},
			{"id": "b", "type": "tool", "tool": "acme.list_properties", "loop": {"cache": {"ttl_minutes": 60}}}]}`,
			`steps[0] (a): loop.cache.ttl_minutes must be a positive number of minutes; ` +
				`steps[1] (b): loop.cache applies only to walks: set loop.all_pages or loop.for_each, or leave cache out`},
		{"fields of the other type", `{"id": "w", "steps": [
			{"id": "a", "type": "tool", "tool": "acme.get_stats", "if": {"ref": "$.steps.x"}, "then": "b", "else": "end"},
			{"id": "b", "type": "branch", "tool": "acme.get_stats", "input": {}, "loop": {}, "if": {"ref": "$.steps.a"}, "then": "end", "else": "end"}]}`,
			`steps[0] (a): if is only for branch steps; steps[0] (a): then is only for branch steps; steps[0] (a): else is only for branch steps; ` +
				`steps[1] (b): tool is only for tool steps; steps[1] (b): input is only for tool steps; steps[1] (b): loop is only for tool steps`},
		{"branch condition", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.get_stats"},
			{"id": "b", "type": "branch", "then": "end", "else": "end"},
			{"id": "c", "type": "branch", "if": {"op": "eq", "value": 1}, "then": "end", "else": "end"},
			{"id": "d", "type": "branch", "if": {"ref": "$.steps.a.x", "op": "eq"}, "then": "end", "else": "end"},
			{"id": "e", "type": "branch", "if": {"ref": "$.steps.a.x", "op": "truthy", "value": 1}, "then": "end", "else": "end"},
			{"id": "f", "type": "branch", "if": {"ref": "$.steps.a.x", "op": "gt", "value": true}, "then": "end", "else": "end"},
			{"id": "g", "type": "branch", "if": {"ref": "$.steps.a.x", "op": "exists", "value": "yes"}, "then": "end", "else": "end"},
			{"id": "h", "type": "branch", "if": {"ref": "$.steps.a.x", "op": "matches"}, "then": "end", "else": "end"}]}`,
			`steps[1] (b): if is required: {"ref": "$.steps.<id>.<path>", "op": "eq", "value": …}; ` +
				`steps[2] (c): if.ref is required; ` +
				`steps[3] (d): if.value is required with op "eq" (to test for null, use op "exists"); ` +
				`steps[4] (e): if.value must be absent with op "truthy"; ` +
				`steps[5] (f): if.value gt compares numbers or strings; ` +
				`steps[6] (g): if.value exists takes true or false; ` +
				`steps[7] (h): if.op "matches" is not an operator; operators: eq, neq, gt, gte, lt, lte, exists, truthy (the default)`},
		{"branch targets", `{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "acme.get_stats"},
			{"id": "b", "type": "branch", "if": {"ref": "$.steps.a"}, "then": "a", "else": "b"},
			{"id": "c", "type": "branch", "if": {"ref": "$.steps.a"}, "then": "nowhere"},
			{"id": "d", "type": "tool", "tool": "acme.get_stats"}]}`,
			`steps[1] (b): then "a" is not after this step; branches jump forward only (to a later step or "end"), so that every run ends; ` +
				`steps[1] (b): else "b" is not after this step; branches jump forward only (to a later step or "end"), so that every run ends; ` +
				`steps[2] (c): then "nowhere" is not a step; name a later step or "end"; ` +
				`steps[2] (c): else is required: the id of a later step, or "end"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			err = def.Validate(cat.Get)
			got := ""
			if err != nil {
				got = err.Error()
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v is not ErrInvalid", err)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateWithoutLookup(t *testing.T) {
	def, err := Parse([]byte(`{"id": "w", "steps": [{"id": "a", "type": "tool", "tool": "nowhere.to_be_found", "input": {"anything": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := def.Validate(nil); err != nil {
		t.Errorf("Validate(nil) = %v; the checks needing tools are skipped", err)
	}
}

func TestInvalidErrorCapsProblems(t *testing.T) {
	var ps []Problem
	for range maxProblems + 5 {
		ps = append(ps, Problem{Step: -1, Field: "id", Message: "is required"})
	}
	got := invalid(ps...).Error()
	if !strings.HasSuffix(got, "; … and 5 more problems") || strings.Count(got, "id is required") != maxProblems {
		t.Errorf("Error() = %q", got)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(hotelBookings))
	f.Add([]byte(`{"id": "w", "steps": [{"id": "a", "type": "branch", "if": {"ref": "$.steps.x", "value": [1, {"a": null}]}}]}`))
	f.Add([]byte(`{"id": "w", "steps": [{"id": "a", "loop": {"for_each": {"key": "k", "values": "$.steps.a.b"}, "cache": {"ttl_minutes": 1e400}}}]}`))
	f.Add([]byte(`[{"id": 1}, "x", null]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		def, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) || err.Error() == "" {
				t.Fatalf("error %v is not a described ErrInvalid", err)
			}
			return
		}
		_ = def.Validate(nil)
		out, err := json.Marshal(def)
		if err != nil {
			t.Fatalf("Marshal: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(def)) = %v\n%s", err, out)
		}
		if diff := cmp.Diff(def, again, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
