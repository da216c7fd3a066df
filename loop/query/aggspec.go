package query

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// AggregateSpec is an aggregate as written: queryToolResult's aggregate,
// a looping tool's _aggregate, a workflow loop block's aggregate.
//
//	{"group_by": ["currency"],
//	 "metrics": [{"op": "count"}, {"op": "sum", "field": "total"}],
//	 "filter": [{"field": "status", "op": "eq", "value": "open"}],
//	 "having": [{"field": "count", "op": "gt", "value": 10}],
//	 "order_by": [{"field": "sum(total)", "dir": "desc"}],
//	 "limit": 10}
type AggregateSpec struct {
	// GroupBy are dot-paths, as in _fields; none: one group of every row.
	GroupBy []string `json:"group_by,omitempty"`
	// Metrics are computed per group; none: a count.
	Metrics []Metric `json:"metrics,omitempty"`
	// Filter keeps the rows that satisfy every clause (the _filter
	// language), before grouping.
	Filter []Clause `json:"filter,omitempty"`
	// Having keeps the groups whose metrics satisfy every clause: field
	// names a metric, op is eq, neq, gt, gte, lt or lte, value a number.
	Having []Clause `json:"having,omitempty"`
	// OrderBy sorts the groups; none: by group key, ascending.
	OrderBy []OrderBy `json:"order_by,omitempty"`
	// Limit is how many groups are returned; zero: DefaultAggregateLimit.
	Limit int `json:"limit,omitempty"`
}

// Metric is one metric: Op over Field, named As (default: "count",
// "sum(total)", "count_distinct(customer.id)").
type Metric struct {
	Op    string `json:"op"`
	Field string `json:"field,omitempty"`
	As    string `json:"as,omitempty"`
}

// OrderBy sorts groups by a metric's name or a group_by path.
type OrderBy struct {
	Field string `json:"field"`
	// Dir is "asc" (the default) or "desc".
	Dir string `json:"dir,omitempty"`
}

// Bounds of an aggregate.
const (
	DefaultAggregateLimit = 50
	MaxAggregateLimit     = 500
	maxGroupBy            = 8
	maxMetrics            = 20
)

// AggregateOps are the metric operators, in the order messages give them.
var AggregateOps = []string{"count", "count_distinct", "sum", "avg", "min", "max"}

// AggregateError is an aggregate that cannot be read or compiled. Where
// names the member at fault as a path into the aggregate ("metrics[1].op",
// "filter[0].valu", "limit"); "" for the aggregate as a whole.
type AggregateError struct {
	Where  string
	Reason string
}

func (e *AggregateError) Error() string {
	if e.Where == "" {
		return "query: aggregate " + e.Reason
	}
	return "query: aggregate " + e.Where + ": " + e.Reason
}

func aggErr(where, format string, args ...any) *AggregateError {
	return &AggregateError{Where: where, Reason: fmt.Sprintf(format, args...)}
}

var (
	aggregateKeys = []string{"group_by", "metrics", "filter", "having", "order_by", "limit"}
	metricKeys    = []string{"op", "field", "as"}
	orderKeys     = []string{"field", "dir"}
)

// AggregateOf reads an aggregate from a decoded JSON value (an
// AggregateSpec passes through) strictly: a member other than those of
// AggregateSpec, Metric or OrderBy, or one of the wrong type, is an
// *AggregateError naming it; filter and having clauses are read as
// ClausesOf reads _filter. Operators, paths and names are checked by
// CompileAggregate.
func AggregateOf(v any) (AggregateSpec, error) {
	switch x := v.(type) {
	case AggregateSpec:
		return x, nil
	case *AggregateSpec:
		if x != nil {
			return *x, nil
		}
	}
	m, ok := v.(map[string]any)
	if !ok {
		return AggregateSpec{}, aggErr("", "must be an object such as {\"group_by\": [\"currency\"], \"metrics\": [{\"op\": \"count\"}, {\"op\": \"sum\", \"field\": \"total\"}]}, not %s", KindName(v))
	}
	if k := unknownKey(m, aggregateKeys); k != "" {
		return AggregateSpec{}, aggErr(k, "unknown key; an aggregate has %s", strings.Join(aggregateKeys, ", "))
	}
	var s AggregateSpec
	if x, ok := m["group_by"]; ok && x != nil {
		paths, err := PathsOf(x)
		if err != nil {
			return s, aggErr("group_by", "%s", strings.Replace(err.Error(), "must be an array of dot-paths", "must be a dot-path or an array of them", 1))
		}
		s.GroupBy = paths
	}
	if x, ok := m["metrics"]; ok && x != nil {
		list, ok := x.([]any)
		if !ok {
			if one, isObj := x.(map[string]any); isObj {
				list = []any{one}
			} else {
				return s, aggErr("metrics", "must be an array of {\"op\", \"field\"} objects, not %s", KindName(x))
			}
		}
		for i, e := range list {
			at := fmt.Sprintf("metrics[%d]", i)
			mm, ok := e.(map[string]any)
			if !ok {
				return s, aggErr(at, "is %s, not a {\"op\", \"field\"} object", KindName(e))
			}
			if k := unknownKey(mm, metricKeys); k != "" {
				return s, aggErr(at+"."+k, "unknown key; a metric has %s (ops: %s)", strings.Join(metricKeys, ", "), strings.Join(AggregateOps, ", "))
			}
			var met Metric
			for _, k := range metricKeys {
				x, has := mm[k]
				if !has || x == nil {
					continue
				}
				str, isStr := x.(string)
				if !isStr {
					return s, aggErr(at+"."+k, "must be a string, not %s", KindName(x))
				}
				switch k {
				case "op":
					met.Op = str
				case "field":
					met.Field = str
				case "as":
					met.As = str
				}
			}
			s.Metrics = append(s.Metrics, met)
		}
	}
	var err error
	if s.Filter, err = aggClauses(m, "filter"); err != nil {
		return s, err
	}
	if s.Having, err = aggClauses(m, "having"); err != nil {
		return s, err
	}
	if x, ok := m["order_by"]; ok && x != nil {
		list, ok := x.([]any)
		if !ok {
			if one, isObj := x.(map[string]any); isObj {
				list = []any{one}
			} else {
				return s, aggErr("order_by", "must be an array of {\"field\", \"dir\"} objects, not %s", KindName(x))
			}
		}
		for i, e := range list {
			at := fmt.Sprintf("order_by[%d]", i)
			om, ok := e.(map[string]any)
			if !ok {
				return s, aggErr(at, "is %s, not a {\"field\", \"dir\"} object", KindName(e))
			}
			if k := unknownKey(om, orderKeys); k != "" {
				return s, aggErr(at+"."+k, "unknown key; an order_by entry has %s", strings.Join(orderKeys, ", "))
			}
			var o OrderBy
			for _, k := range orderKeys {
				x, has := om[k]
				if !has || x == nil {
					continue
				}
				str, isStr := x.(string)
				if !isStr {
					return s, aggErr(at+"."+k, "must be a string, not %s", KindName(x))
				}
				if k == "field" {
					o.Field = str
				} else {
					o.Dir = str
				}
			}
			s.OrderBy = append(s.OrderBy, o)
		}
	}
	if x, ok := m["limit"]; ok && x != nil {
		n, ok := wholeNumber(x)
		if !ok {
			return s, aggErr("limit", "must be a whole number of groups, not %s", shown(x))
		}
		if n < 1 {
			return s, aggErr("limit", "must be at least 1, not %d", n)
		}
		s.Limit = int(min(n, math.MaxInt32))
	}
	return s, nil
}

// ParseAggregate decodes and reads an aggregate argument's JSON text.
func ParseAggregate(raw []byte) (AggregateSpec, error) {
	v, err := decodeArg(raw)
	if err != nil {
		return AggregateSpec{}, aggErr("", "is not valid JSON: %v", err)
	}
	return AggregateOf(v)
}

func aggClauses(m map[string]any, key string) ([]Clause, error) {
	x, ok := m[key]
	if !ok || x == nil {
		return nil, nil
	}
	clauses, err := ClausesOf(x)
	if err != nil {
		if ce, ok := err.(*ClauseError); ok {
			at := fmt.Sprintf("%s[%d]", key, ce.Index)
			if ce.Key != "" {
				at += "." + ce.Key
			}
			return nil, aggErr(at, "%s", ce.Reason)
		}
		return nil, aggErr(key, "%s", strings.TrimPrefix(strings.TrimPrefix(err.Error(), "query: "), "filter "))
	}
	return clauses, nil
}

// unknownKey is the first member of m, in sorted order, not in allowed.
func unknownKey(m map[string]any, allowed []string) string {
	for _, k := range sortedKeys(m) {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			return k
		}
	}
	return ""
}

// wholeNumber reads a limit: a JSON number without a fraction, or a
// string holding one (models send both).
func wholeNumber(v any) (int64, bool) {
	var text string
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		text = strings.TrimSpace(x)
	case float64:
		if x != math.Trunc(x) || math.IsInf(x, 0) {
			return 0, false
		}
		return int64(max(min(x, math.MaxInt32), math.MinInt32)), true
	case int:
		return int64(x), true
	case int64:
		return x, true
	default:
		return 0, false
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return int64(max(min(f, math.MaxInt32), math.MinInt32)), true
}

func shown(v any) string {
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return KindName(v)
}
