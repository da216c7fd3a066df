package workflow

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/trawl-dev/trawl/loop/query"
)

// Condition operators: those of _filter (loop/query), and truthy.
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

// op returns the condition's operator, truthy when none is given.
func (c *Condition) op() string {
	if c.Op == "" {
		return OpTruthy
	}
	return c.Op
}

// check says what is wrong with the condition's operator and value, ""
// when nothing is. Every operator but truthy is a _filter operator and is
// checked by loop/query, which also evaluates it.
func (c *Condition) check() (field, msg string) {
	switch op := c.op(); op {
	case OpTruthy:
		if c.Value != nil {
			return "value", "must be absent with op \"truthy\""
		}
		return "", ""
	case OpEq, OpNeq:
		if c.Value == nil {
			return "value", fmt.Sprintf("is required with op %q (to test for null, use op \"exists\")", op)
		}
	case OpGt, OpGte, OpLt, OpLte, OpExists:
	default:
		return "op", fmt.Sprintf("%q is not an operator; operators: eq, neq, gt, gte, lt, lte, exists, truthy (the default)", op)
	}
	if _, err := query.Test(nil, c.op(), jsonValue(c.Value)); err != nil {
		var ce *query.ClauseError
		if errors.As(err, &ce) {
			return "value", ce.Reason
		}
		return "value", err.Error()
	}
	return "", ""
}

// holds evaluates the condition on raw, the JSON its ref resolved to (nil
// when it resolved to nothing). Every operator but truthy is _filter's,
// evaluated by query.Test: numbers compare as numbers (a numeric string
// too), strings byte by byte (so ISO dates compare in time order), an
// array is tested element by element, neq holds on an absent value;
// exists: not null (with value false: null or absent). truthy: raw is
// not null, false, 0, "", [] or {}.
func (c *Condition) holds(raw []byte) bool {
	if c.op() == OpTruthy {
		return truthy(raw)
	}
	ok, err := query.Test(raw, c.op(), jsonValue(c.Value))
	return err == nil && ok
}

// truthy reports whether the JSON value raw is not null, false, 0, "",
// [] or {} (nil: absent).
func truthy(raw []byte) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case 'n', 'f':
		return false
	case 't':
		return true
	case '"':
		return len(raw) > 2
	case '[', '{':
		return len(bytes.TrimSpace(raw[1:len(raw)-1])) > 0
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return err != nil || f != 0
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
