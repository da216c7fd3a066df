package paginate

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/tools"
)

// chooseSize is the page size a walk asks for when the caller set none:
// the schema's maximum, else defaultPageSize, never above the item
// budget nor below the schema's minimum. guessed is true when the schema
// declares no maximum (a server cap cannot be ruled out).
func chooseSize(t *tools.Tool, name string, items int) (size int, guessed bool) {
	size, guessed = defaultPageSize, true
	s := paramSchema(t, name)
	if s != nil && s.Maximum != nil && *s.Maximum >= 1 {
		size, guessed = int(*s.Maximum), false
	}
	if size > items {
		size = items
	}
	if s != nil && s.Minimum != nil && float64(size) < *s.Minimum {
		size = int(*s.Minimum)
	}
	return size, guessed
}

// pageBase is the first page's number: the schema's default or minimum
// when it says 0, else 1.
func pageBase(t *tools.Tool, name string) int {
	s := paramSchema(t, name)
	if s == nil {
		return 1
	}
	if n, ok := numberOf(s.Default); ok && (n == 0 || n == 1) {
		return n
	}
	if s.Minimum != nil && *s.Minimum == 0 {
		return 0
	}
	return 1
}

// paramSchema is the schema of the walk parameter name: a parameter of
// t, or a property further down in a body parameter ("body.cursor", as
// detection names it; "data.attributes.page.cursor" as Datadog's
// x-pagination does). Nil when unknown.
func paramSchema(t *tools.Tool, name string) *tools.Schema {
	if p, ok := t.Param(name); ok {
		return p.Schema
	}
	root, rest, nested := strings.Cut(name, ".")
	if !nested {
		return nil
	}
	p, ok := t.Param(root)
	if !ok {
		return nil
	}
	s := p.Schema
	for _, k := range strings.Split(rest, ".") {
		if s == nil {
			return nil
		}
		s = s.Properties[k]
	}
	return s
}

// cloneArgs copies the top level of args (nested maps are copied when
// written, by setArg).
func cloneArgs(args map[string]any) map[string]any {
	out := make(map[string]any, len(args)+2)
	for k, v := range args {
		out[k] = v
	}
	return out
}

// setArg sets the walk parameter name in args. A name that is not a
// parameter of t but names a property one level down in a body parameter
// ("body.cursor") sets that property in a copy of the parameter's object. Integers are sent as the
// parameter's declared type (a string when it says string).
func setArg(t *tools.Tool, args map[string]any, name string, v any) {
	if n, ok := v.(int); ok {
		v = json.Number(strconv.Itoa(n))
		if s := paramSchema(t, name); s != nil && s.Type == "string" {
			v = strconv.Itoa(n)
		}
	}
	if _, ok := t.Param(name); ok || !strings.Contains(name, ".") {
		args[name] = v
		return
	}
	// Copy each object on the way down, so the caller's arguments are
	// never written through.
	keys := strings.Split(name, ".")
	m := args
	for _, k := range keys[:len(keys)-1] {
		inner := map[string]any{}
		if old, ok := m[k].(map[string]any); ok {
			for kk, x := range old {
				inner[kk] = x
			}
		}
		m[k] = inner
		m = inner
	}
	m[keys[len(keys)-1]] = v
}

// lookupArg finds the value of name in args, following setArg's rule.
func lookupArg(args map[string]any, name string) (any, bool) {
	if v, ok := args[name]; ok {
		return v, v != nil
	}
	keys := strings.Split(name, ".")
	if len(keys) == 1 {
		return nil, false
	}
	m := args
	for _, k := range keys[:len(keys)-1] {
		inner, ok := m[k].(map[string]any)
		if !ok {
			return nil, false
		}
		m = inner
	}
	v, ok := m[keys[len(keys)-1]]
	return v, ok && v != nil
}

func argInt(args map[string]any, name string) (int, bool) {
	if name == "" {
		return 0, false
	}
	v, ok := lookupArg(args, name)
	if !ok {
		return 0, false
	}
	return numberOf(v)
}

func argString(args map[string]any, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	v, ok := lookupArg(args, name)
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	if n, ok := numberOf(v); ok {
		return strconv.Itoa(n), true
	}
	return "", false
}

// numberOf reads an integer from a JSON-decoded value.
func numberOf(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case json.Number:
		if n, err := strconv.Atoi(x.String()); err == nil {
			return n, true
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, true
		}
	}
	return 0, false
}

// originOf is the scheme://host:port of a URL (tools.OriginOf: one
// origin comparison for redirects, continuation URLs and next links).
func originOf(raw string) string { return tools.OriginOf(raw) }
