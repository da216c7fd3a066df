package loop

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// The reserved arguments (DESIGN.md §5). They are stripped from every
// call, whatever the binding, before the upstream request is built.
const (
	ArgFields   = "_fields"
	ArgAllPages = "_all_pages"
	ArgForEach  = "_for_each"
	ArgFilter   = "_filter"
	ArgRefresh  = "_refresh"
	// ArgAggregate groups and totals the rows after the walk, the fan-out
	// and _filter; the view holds the numbers instead of the rows.
	ArgAggregate = "_aggregate"
	// ArgMaxChars is a client's budget for one result: the size guard
	// cuts this call's view at it instead of the deployment's view
	// budget. Every tool takes it; the MCP server advertises it.
	ArgMaxChars = "_max_chars"
)

// The bounds of _max_chars.
const (
	MinMaxChars = minViewBudget
	MaxMaxChars = 1_000_000
)

var reservedArgs = []string{ArgFields, ArgAllPages, ArgForEach, ArgFilter, ArgRefresh, ArgAggregate, ArgMaxChars}

// IsReserved reports whether name is a reserved argument.
func IsReserved(name string) bool {
	for _, r := range reservedArgs {
		if r == name {
			return true
		}
	}
	return false
}

// ForEach is a parsed _for_each: one call per value of parameter Key.
type ForEach struct {
	Key    string `json:"key"`
	Values []any  `json:"values"`
}

// forEachValues checks the key against the tool's parameters, coerces the
// values to the parameter's declared type and removes duplicates.
func forEachValues(t *tools.Tool, fe *ForEach, max int) ([]any, error) {
	p, ok := t.Param(fe.Key)
	if !ok {
		names := make([]string, 0, len(t.Params))
		for _, p := range t.Params {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, &ToolError{Code: CodeInvalidForEachKey, Message: fmt.Sprintf(
				"%s key %q is not a parameter of %s: %s has no parameters, so it cannot be called once per value",
				ArgForEach, fe.Key, t.Name, t.Name)}
		}
		return nil, &ToolError{Code: CodeInvalidForEachKey, Message: fmt.Sprintf(
			"%s key %q is not a parameter of %s; its parameters are: %s",
			ArgForEach, fe.Key, t.Name, strings.Join(names, ", "))}
	}
	seen := map[string]bool{}
	var out []any
	for i, v := range fe.Values {
		c, err := coerce(v, p.Type())
		if err != nil {
			return nil, argError(CodeInvalidForEach, ArgForEach, fmt.Sprintf("values[%d]: %v", i, err))
		}
		k := fmt.Sprintf("%T:%v", c, c)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, c)
	}
	if len(out) > max {
		return nil, argError(CodeInvalidForEach, ArgForEach, fmt.Sprintf(
			"has %d distinct values; at most %d are fetched in one call — split them over several calls", len(out), max))
	}
	return out, nil
}

// coerce converts v to the JSON type typ ("" keeps v).
func coerce(v any, typ string) (any, error) {
	switch x := v.(type) { // values written in Go
	case int:
		v = float64(x)
	case int64:
		v = float64(x)
	case int32:
		v = float64(x)
	}
	switch typ {
	case "integer", "number":
		switch x := v.(type) {
		case float64:
			if typ == "integer" && x != float64(int64(x)) {
				return nil, fmt.Errorf("%s is not a whole number", shownValue(x))
			}
			return x, nil
		case json.Number:
			return coerce(string(x), typ)
		case string:
			f, err := strconv.ParseFloat(strings.TrimSpace(x), 64)
			if err != nil || typ == "integer" && f != float64(int64(f)) {
				return nil, fmt.Errorf("%q is not a valid %s", x, typ)
			}
			return f, nil
		}
		return nil, fmt.Errorf("%s is not %s", shownValue(v), article(typ))
	case "string":
		switch x := v.(type) {
		case string:
			return x, nil
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64), nil
		case json.Number:
			return x.String(), nil
		case bool:
			return strconv.FormatBool(x), nil
		}
		return nil, fmt.Errorf("%s is not a string", shownValue(v))
	case "boolean":
		switch x := v.(type) {
		case bool:
			return x, nil
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("%s is not a boolean", shownValue(v))
	}
	switch v.(type) {
	case map[string]any, []any:
		return nil, fmt.Errorf("values must be strings, numbers or booleans")
	}
	return v, nil
}

// shownValue is v as the model wrote it (JSON), for messages.
func shownValue(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// The reserved arguments' schemas are terse: their types, enums and
// required keys, and one line each (_aggregate's: an object and its line,
// aggregateSchema). A looping tool carries them in every request, so
// their full use — when to walk, the shapes of _for_each and _aggregate
// with examples, an aggregate's members, ops and bounds, the limits — is
// told once, in the looping
// guidance a chat sends as a system message (prompts/looping.md) and in
// the MCP server's instructions (prompts/mcp_instructions.md). They are
// built per call: a schema handed out is the caller's to change.
func fieldsSchema() map[string]any {
	return map[string]any{
		"type":        "array",
		"items":       map[string]any{"type": "string"},
		"description": "Only these dot-paths of each item.",
	}
}

func forEachSchema() map[string]any {
	return map[string]any{
		"type":        "object",
		"description": "One call per value of one parameter, rows merged.",
		"properties": map[string]any{
			"key":    map[string]any{"type": "string"},
			"values": map[string]any{"type": "array"},
		},
		"required": []string{"key", "values"},
	}
}

// MaxCharsSchema is the schema of _max_chars, for a door that lets its
// client state a budget for one result (budget: the view budget it
// replaces).
func MaxCharsSchema(budget int) map[string]any {
	return map[string]any{
		"type": "integer", "minimum": MinMaxChars, "maximum": MaxMaxChars,
		"description": fmt.Sprintf("The most characters this result may put in front of you (default %d). A longer result is cut at a row boundary and kept whole under _resultId.", budget),
	}
}

// Describe is a tool's description as the model reads it: the effect's
// marker first ("[writes] Send a message…"), nothing added for a read.
func Describe(t *tools.Tool, effect tools.Effect) string {
	if m := effect.Marker(); m != "" {
		return m + " " + t.Description
	}
	return t.Description
}

// SchemaFor returns the tool's input schema as the model sees it under a
// binding: with looping on, a read gains _fields, _all_pages (only when
// pagination was detected), _for_each, _aggregate and, when the dataset
// cache serves walks again (cached), _refresh. _filter
// is honoured but never advertised: next to the API's own filter
// parameters a model would reach for it and fetch everything to filter
// afterwards. A write (or a destructive call) gains only _fields, and
// _for_each when bulk is set (at most bulkMax values); its description
// starts with the effect's marker ([writes], [destructive]) — see
// Describe. A tool with no parameters is never offered _for_each: there
// is no parameter to call it once per value of, so the call would only
// be refused (forEachValues).
func SchemaFor(t *tools.Tool, plan paginate.Plan, looping bool, effect tools.Effect, bulk bool, bulkMax int, cached bool) map[string]any {
	s := t.InputSchema()
	if !looping {
		return s
	}
	if effect.Writes() {
		props := maps.Clone(s["properties"].(map[string]any))
		props[ArgFields] = fieldsSchema()
		if bulk && len(t.Params) > 0 {
			fe := forEachSchema()
			fe["description"] = fmt.Sprintf("Make this change once per value of one of its parameters (at most %d values), e.g. {\"key\": \"id\", \"values\": [\"a\", \"b\"]}. Only after listing the objects completely and saying how many will change.", bulkMax)
			props[ArgForEach] = fe
		}
		s["properties"] = props
		return s
	}
	props := maps.Clone(s["properties"].(map[string]any))
	props[ArgFields] = fieldsSchema()
	if plan.Paginated() {
		props[ArgAllPages] = map[string]any{
			"type":        "boolean",
			"description": "Fetch every page, merged, with a verdict.",
		}
	}
	if len(t.Params) > 0 {
		props[ArgForEach] = forEachSchema()
	}
	props[ArgAggregate] = aggregateSchema()
	if cached {
		props[ArgRefresh] = map[string]any{
			"type":        "boolean",
			"description": "Fresh data, not the cache.",
		}
	}
	s["properties"] = props
	return s
}
