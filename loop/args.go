package loop

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// checkArgs checks a call's own arguments against the tool's schema
// before any request is made: every required parameter is given (the
// fan-out key counts as given: each value supplies it), and every value
// has its parameter's JSON type and, when the schema lists them, one of
// its enum values. An argument error is a *ToolError (invalid_argument):
// it costs no request and is never retried.
func checkArgs(t *tools.Tool, own map[string]any, forEachKey string) error {
	idem, _ := t.IdempotencyParam() // filled by the invoker
	for _, p := range t.Params {
		v, given := own[p.Name]
		if !given || v == nil {
			if p.Required && p.Name != forEachKey && p.Name != idem.Name {
				return &ToolError{Code: CodeInvalidArgument, Message: fmt.Sprintf(
					"argument %q is required by %s", p.Name, t.Name)}
			}
			continue
		}
		if msg := checkValue(p.Schema, v, t.Kind == tools.KindMCP); msg != "" {
			return &ToolError{Code: CodeInvalidArgument, Message: fmt.Sprintf("argument %q %s", p.Name, msg)}
		}
	}
	return nil
}

// checkValue says what is wrong with v under schema s ("" when nothing
// is). Scalars are accepted in any form coerce accepts ("20" for an
// integer), as the invoker sends them into a URL or a form — unless
// typed: the arguments go as JSON values as they are (an MCP tool's), so
// a value must be of its declared JSON type. A number must lie within
// the schema's minimum and maximum.
func checkValue(s *tools.Schema, v any, typed bool) string {
	if s == nil {
		return ""
	}
	switch s.Type {
	case "object":
		if _, ok := v.(map[string]any); !ok {
			return fmt.Sprintf("must be an object, not %s", query.KindName(v))
		}
		return ""
	case "array":
		list, ok := v.([]any)
		if !ok {
			if _, isMap := v.(map[string]any); isMap {
				return "must be an array, not an object"
			}
			list = []any{v} // one value for a list parameter
		}
		for i, e := range list {
			if msg := checkValue(s.Items, e, typed); msg != "" {
				return fmt.Sprintf("[%d] %s", i, msg)
			}
		}
		return ""
	}
	c := v
	if typed && s.Type != "" && !jsonTyped(v, s.Type) {
		return fmt.Sprintf("must be %s, not %s", article(s.Type), query.KindName(v))
	}
	if s.Type != "" {
		var err error
		if c, err = coerce(v, s.Type); err != nil {
			return "must be " + article(s.Type) + ": " + err.Error()
		}
	}
	if f, ok := c.(float64); ok {
		switch {
		case s.Minimum != nil && f < *s.Minimum:
			return fmt.Sprintf("must be at least %v, not %v", *s.Minimum, f)
		case s.Maximum != nil && f > *s.Maximum:
			return fmt.Sprintf("must be at most %v, not %v", *s.Maximum, f)
		}
	}
	if len(s.Enum) > 0 {
		for _, e := range s.Enum {
			if fmt.Sprint(e) == fmt.Sprint(c) {
				return ""
			}
		}
		opts := make([]string, len(s.Enum))
		for i, e := range s.Enum {
			opts[i] = fmt.Sprintf("%v", e)
		}
		return fmt.Sprintf("is %v, not one of its values: %s", c, strings.Join(opts, ", "))
	}
	return ""
}

// jsonTyped reports whether v, as decoded from JSON, is of JSON type typ
// (a whole number for integer).
func jsonTyped(v any, typ string) bool {
	switch x := v.(type) {
	case string:
		return typ == "string"
	case bool:
		return typ == "boolean"
	case float64:
		return typ == "number" || typ == "integer" && x == float64(int64(x))
	case int, int64, int32:
		return typ == "number" || typ == "integer"
	case json.Number:
		if typ == "integer" {
			_, err := x.Int64()
			return err == nil
		}
		return typ == "number"
	}
	return false
}

func article(typ string) string {
	switch typ {
	case "integer", "object", "array":
		return "an " + typ
	}
	return "a " + typ
}
