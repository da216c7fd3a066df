package workflow

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Condition operators.
const (
	OpEq     = "eq"
	OpNeq    = "neq"
	OpGt     = "gt"
	OpGte    = "gte"
	OpLt     = "lt"
	OpLte    = "lte"
	OpExists = "exists"
	OpTruthy = "truthy"
)

var conditionOps = []string{OpEq, OpNeq, OpGt, OpGte, OpLt, OpLte, OpExists, OpTruthy}

// op returns the condition's operator, truthy when none is given.
func (c *Condition) op() string {
	if c.Op == "" {
		return OpTruthy
	}
	return c.Op
}

// check says what is wrong with the condition's operator and value, ""
// when nothing is.
func (c *Condition) check() (field, msg string) {
	switch op := c.op(); op {
	case OpEq, OpNeq:
		if c.Value == nil {
			return "value", fmt.Sprintf("is required with op %q (to test for null, use op \"exists\")", op)
		}
	case OpGt, OpGte, OpLt, OpLte:
		if _, ok := toNumber(c.Value); ok {
			break
		}
		if _, ok := c.Value.(string); ok {
			break
		}
		return "value", fmt.Sprintf("must be a number or a string with op %q, not %s", op, kindOf(c.Value))
	case OpExists:
		if c.Value == nil {
			break
		}
		if _, ok := c.Value.(bool); !ok {
			return "value", fmt.Sprintf("must be true or false with op \"exists\" (or absent, meaning true), not %s", kindOf(c.Value))
		}
	case OpTruthy:
		if c.Value != nil {
			return "value", "must be absent with op \"truthy\""
		}
	default:
		return "op", fmt.Sprintf("%q is not an operator; operators: eq, neq, gt, gte, lt, lte, exists, truthy (the default)", op)
	}
	return "", ""
}

// holds evaluates the condition on v, the value its ref resolved to.
//
//   - eq, neq: JSON equality (numbers by value, arrays and objects member
//     by member).
//   - gt, gte, lt, lte: numbers compare as numbers, strings byte by byte
//     (so ISO dates compare in time order); a value of another kind never
//     satisfies them.
//   - exists: v is not null (with value false: v is null).
//   - truthy: v is not null, false, 0, "", [] or {}.
func (c *Condition) holds(v any) bool {
	switch c.op() {
	case OpEq:
		return jsonEqual(v, c.Value)
	case OpNeq:
		return !jsonEqual(v, c.Value)
	case OpGt, OpGte, OpLt, OpLte:
		cmp, ok := compare(v, c.Value)
		if !ok {
			return false
		}
		switch c.op() {
		case OpGt:
			return cmp > 0
		case OpGte:
			return cmp >= 0
		case OpLt:
			return cmp < 0
		}
		return cmp <= 0
	case OpExists:
		want := true
		if b, ok := c.Value.(bool); ok {
			want = b
		}
		return (v != nil) == want
	}
	return truthy(v)
}

func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	if n, ok := toNumber(v); ok {
		return n != 0
	}
	return true
}

// toNumber reads a JSON number however it was decoded or written in Go.
func toNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil || isRange(err)
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	}
	return 0, false
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func compare(a, b any) (int, bool) {
	if x, ok := toNumber(a); ok {
		y, ok := toNumber(b)
		if !ok || math.IsNaN(x) || math.IsNaN(y) {
			return 0, false
		}
		switch {
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	}
	x, ok := a.(string)
	if !ok {
		return 0, false
	}
	y, ok := b.(string)
	if !ok {
		return 0, false
	}
	switch {
	case x < y:
		return -1, true
	case x > y:
		return 1, true
	}
	return 0, true
}

// jsonEqual compares two JSON values; numbers compare by value whatever
// their Go type, and a []T or map[string]T written in Go compares with its
// decoded form.
func jsonEqual(a, b any) bool {
	a, b = normalize(a), normalize(b)
	if x, ok := toNumber(a); ok {
		if sa, ok := a.(json.Number); ok {
			if sb, ok := b.(json.Number); ok && sa == sb {
				return true // the same literal, however long
			}
		}
		y, ok := toNumber(b)
		return ok && x == y
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// normalize turns Go values that are not of the decoded JSON kinds
// ([]string, map[string]string, structs…) into them.
func normalize(v any) any {
	switch v.(type) {
	case nil, bool, string, json.Number, float64, float32, int, int64, int32, uint, uint64, []any, map[string]any:
		return v
	}
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	out, err := decodeNumbers(b)
	if err != nil {
		return v
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
