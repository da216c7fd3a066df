package loop

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// Request is what the reserved arguments of one call ask for, parsed and
// checked: the typed loop request the engine runs. ParseRequest fills it
// from a tool call's arguments; a workflow's loop block and
// queryToolResult's fields and filter go through the same FieldsArg and
// FilterArg, so the three accept and reject exactly the same things.
type Request struct {
	// AllPages walks every page (_all_pages).
	AllPages bool
	// Fields projects each row (_fields); nil keeps every field.
	Fields *query.Fields
	// Filter keeps the rows matching every clause (_filter); nil keeps
	// every row.
	Filter *query.Filter
	// ForEach fans the call out over the values of one parameter
	// (_for_each); nil calls once.
	ForEach *ForEach
	// Refresh skips the dataset cache (_refresh).
	Refresh bool
	// MaxChars is the caller's view budget for this call (_max_chars);
	// zero keeps the binding's.
	MaxChars int
	// Aggregate groups and totals the rows (_aggregate) instead of
	// listing them; nil lists them.
	Aggregate *query.Aggregate
}

// ParseRequest separates the tool's own arguments from the reserved ones
// and parses the latter strictly: a value of the wrong type, an unknown
// member of a _for_each or of a _filter clause, an unknown operator or a
// path that does not parse is a *ToolError whose code names the argument
// (invalid_fields, invalid_filter, invalid_for_each, invalid_aggregate,
// invalid_argument)
// and whose message names the clause and the key. args is not modified;
// a reserved argument given as null is absent.
func ParseRequest(args map[string]any) (own map[string]any, r Request, err error) {
	own = make(map[string]any, len(args))
	for k, v := range args {
		if !IsReserved(k) {
			own[k] = v
			continue
		}
		if v == nil {
			continue
		}
		switch k {
		case ArgFields:
			r.Fields, err = FieldsArg(k, v)
		case ArgAllPages:
			r.AllPages, err = boolArg(k, v)
		case ArgRefresh:
			r.Refresh, err = boolArg(k, v)
		case ArgForEach:
			r.ForEach, err = ForEachArg(k, v)
		case ArgFilter:
			r.Filter, err = FilterArg(k, v)
		case ArgMaxChars:
			r.MaxChars, err = maxCharsArg(k, v)
		case ArgAggregate:
			r.Aggregate, err = AggregateArg(k, v)
		}
		if err != nil {
			return nil, Request{}, err
		}
	}
	return own, r, nil
}

// FieldsArg parses a _fields value as decoded from JSON: an array of
// dot-paths, or one comma-separated string. arg names the argument in the
// message (_fields, fields, loop.fields). An empty list projects nothing
// and gives a nil *Fields.
func FieldsArg(arg string, v any) (*query.Fields, error) {
	paths, err := query.PathsOf(jsonArg(v))
	if err != nil {
		return nil, argError(CodeInvalidFields, arg, err.Error())
	}
	if len(paths) == 0 {
		return nil, nil
	}
	f, err := query.CompileFields(paths)
	if err != nil {
		return nil, argError(CodeInvalidFields, arg, strings.TrimPrefix(err.Error(), "query: "))
	}
	return f, nil
}

// FilterArg parses a _filter value as decoded from JSON (or its JSON
// text, a json.RawMessage): one clause {"field","op","value"} or an array
// of them. arg names the argument in
// the message. No clauses give a nil *Filter.
func FilterArg(arg string, v any) (*query.Filter, error) {
	var clauses []query.Clause
	var err error
	if raw, ok := v.(json.RawMessage); ok {
		clauses, err = query.ClausesFromJSON(raw)
	} else {
		clauses, err = query.ClausesOf(jsonArg(v))
	}
	if err == nil && len(clauses) == 0 {
		return nil, nil
	}
	var f *query.Filter
	if err == nil {
		f, err = query.CompileFilter(clauses)
	}
	if err != nil {
		var ce *query.ClauseError
		if errors.As(err, &ce) {
			return nil, argError(CodeInvalidFilter, arg, fmt.Sprintf("clause %d %s: %s (a clause is {\"field\", \"op\", \"value\"}; ops: eq, neq, gt, gte, lt, lte, contains, in, exists)",
				ce.Index, ce.Clause, ce.Reason))
		}
		return nil, argError(CodeInvalidFilter, arg, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "query: "), "filter "))
	}
	return f, nil
}

// ForEachArg parses a _for_each value: {"key": "<parameter>", "values":
// [...]}, nothing else. The key is checked against the tool, and the
// values coerced to its type, when the call runs.
func ForEachArg(arg string, v any) (*ForEach, error) {
	const shape = `must be {"key": "<parameter>", "values": [...]}`
	m, ok := v.(map[string]any)
	if !ok {
		if fe, ok := v.(*ForEach); ok && fe != nil {
			m = map[string]any{"key": fe.Key, "values": fe.Values}
		} else {
			return nil, argError(CodeInvalidForEach, arg, shape)
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "key" && k != "values" {
			return nil, argError(CodeInvalidForEach, arg, fmt.Sprintf("has an unknown key %q; it %s", k, shape))
		}
	}
	key, ok := m["key"].(string)
	if !ok || strings.TrimSpace(key) == "" {
		return nil, &ToolError{Code: CodeInvalidForEachKey, Message: fmt.Sprintf("%s key is missing or not a string; it %s", arg, shape)}
	}
	vals, ok := jsonArg(m["values"]).([]any)
	if !ok {
		return nil, argError(CodeInvalidForEach, arg, "values must be an array; it "+shape)
	}
	if len(vals) == 0 {
		return nil, argError(CodeInvalidForEach, arg, "values must not be empty")
	}
	return &ForEach{Key: key, Values: vals}, nil
}

func boolArg(name string, v any) (bool, error) {
	switch x := v.(type) {
	case bool:
		return x, nil
	case string:
		if b, err := strconv.ParseBool(x); err == nil {
			return b, nil
		}
	}
	return false, argError(CodeInvalidArgument, name, "must be true or false")
}

// maxCharsArg parses _max_chars: a whole number of characters within
// MinMaxChars and MaxMaxChars.
func maxCharsArg(name string, v any) (int, error) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, argError(CodeInvalidArgument, name, fmt.Sprintf("must be a whole number from %d to %d", MinMaxChars, MaxMaxChars))
		}
	default:
		return 0, argError(CodeInvalidArgument, name, fmt.Sprintf("must be a whole number from %d to %d", MinMaxChars, MaxMaxChars))
	}
	if f != float64(int(f)) || f < MinMaxChars || f > MaxMaxChars {
		return 0, argError(CodeInvalidArgument, name, fmt.Sprintf("must be a whole number from %d to %d, not %s", MinMaxChars, MaxMaxChars, shownValue(v)))
	}
	return int(f), nil
}

// jsonArg returns v as decoded JSON when it is a Go value of another
// shape ([]string, []query.Clause, a struct): the parsers read decoded
// JSON, so a caller in Go gets the same checks as a model.
func jsonArg(v any) any {
	switch v.(type) {
	case nil, bool, string, float64, json.Number, []any, []string, map[string]any, []query.Clause, json.RawMessage, query.AggregateSpec, *query.AggregateSpec:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return v
	}
	return out
}
