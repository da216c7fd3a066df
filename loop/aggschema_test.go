package loop

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/prompts"
)

// jsonNames are the JSON member names of struct type t, an optional one
// (omitempty) followed by "?" when optional is set.
func jsonNames(t reflect.Type, optional bool) []string {
	var names []string
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		if optional && strings.Contains(opts, "omitempty") {
			name += "?"
		}
		names = append(names, name)
	}
	return names
}

// TestAggregateShapeTold: _aggregate's schema is an object and one line,
// the same on every looping tool, so everything about its shape — each
// member of an aggregate, of a metric and of an order_by entry, every
// op, the directions and the limit's bounds — is told in the looping
// guidance a chat sends and in the MCP server's instructions; and a
// wrong shape is refused with the shape it wants.
func TestAggregateShapeTold(t *testing.T) {
	schema := aggregateSchema()
	if schema["type"] != "object" || schema["description"] == "" {
		t.Fatalf("_aggregate's schema: %v", schema)
	}
	var want []string
	for _, n := range jsonNames(reflect.TypeFor[query.AggregateSpec](), false) {
		want = append(want, "`"+n+"`")
	}
	// A metric's members, the optional ones marked: `[{op, field?, as?}]`.
	want = append(want, "`[{"+strings.Join(jsonNames(reflect.TypeFor[query.Metric](), true), ", ")+"}]`")
	for _, op := range query.AggregateOps {
		want = append(want, "`"+op+"`")
	}
	want = append(want, `"dir": "asc"|"desc"`, fmt.Sprintf("1 to %d, default %d", query.MaxAggregateLimit, query.DefaultAggregateLimit))
	for _, name := range []string{"looping", "mcp_instructions"} {
		text := prompts.Text(name)
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s does not tell %s of _aggregate", name, w)
			}
		}
	}
	for _, c := range []struct {
		arg  any
		want string
	}{
		{"count", `_aggregate: must be an object such as {"group_by": ["currency"], "metrics": [{"op": "count"}, {"op": "sum", "field": "total"}]}, not a string`},
		{map[string]any{"group": []any{"a"}}, "_aggregate group: unknown key; an aggregate has group_by, metrics, filter, having, order_by, limit"},
		{map[string]any{"metrics": []any{map[string]any{"field": "total"}}}, "_aggregate metrics[0].op: is missing (ops: count, count_distinct, sum, avg, min, max)"},
		{map[string]any{"metrics": "count"}, `_aggregate metrics: must be an array of {"op", "field"} objects, not a string`},
		{map[string]any{"order_by": []any{map[string]any{"field": "count", "dir": "down"}}}, `_aggregate order_by[0].dir: must be "asc" or "desc", not "down"`},
	} {
		_, err := AggregateArg(ArgAggregate, c.arg)
		var te *ToolError
		if !errors.As(err, &te) || te.Code != CodeInvalidAggregate || te.Message != c.want {
			t.Errorf("%v: %v, want %s %q", c.arg, err, CodeInvalidAggregate, c.want)
		}
	}
}
