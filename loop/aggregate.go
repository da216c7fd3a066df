package loop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/loop/query"
)

// AggregateArg parses an aggregate value as decoded from JSON (or its
// JSON text, a json.RawMessage, or a query.AggregateSpec): _aggregate,
// queryToolResult's aggregate, a workflow loop block's aggregate. arg
// names the argument in the message. A mistake is a *ToolError
// (invalid_aggregate, or invalid_filter for its filter's clauses' shape)
// naming the member at fault: "_aggregate metrics[1].feild: unknown key".
func AggregateArg(arg string, v any) (*query.Aggregate, error) {
	var spec query.AggregateSpec
	var err error
	if raw, ok := v.(json.RawMessage); ok {
		spec, err = query.ParseAggregate(raw)
	} else {
		spec, err = query.AggregateOf(jsonArg(v))
	}
	var a *query.Aggregate
	if err == nil {
		a, err = query.CompileAggregate(spec)
	}
	if err != nil {
		var ae *query.AggregateError
		if errors.As(err, &ae) {
			where := arg
			if ae.Where != "" {
				where += " " + ae.Where
			}
			return nil, &ToolError{Code: CodeInvalidAggregate, Message: where + ": " + ae.Reason}
		}
		return nil, argError(CodeInvalidAggregate, arg, strings.TrimPrefix(err.Error(), "query: "))
	}
	return a, nil
}

// aggregateSchema is _aggregate as the model sees it: an object and one
// line. Its members are the same on every looping tool (nothing in them
// is the tool's own), so their shape — group_by, metrics {op, field,
// as} and the ops, filter, having, order_by, limit and its bounds — is
// told once, in the looping guidance and the MCP server's instructions
// (TestAggregateShapeTold), as queryToolResult's aggregate is told in its
// description; AggregateArg reads it strictly and names the member at
// fault with the shape it wants. Built per call: a schema handed out is
// the caller's to change.
func aggregateSchema() map[string]any {
	return map[string]any{
		"type":        "object",
		"description": "Exact counts and totals of every row, not the rows.",
	}
}

// Aggregated is an aggregate's result with the verdict of the set it ran
// over: what `_aggregate` (and queryToolResult's aggregate) shows, typed,
// for every surface to render and for a check to compare a number quoted
// in an answer with the aggregate it came from.
type Aggregated struct {
	// Result holds the groups and their metrics.
	Result *query.AggregateResult
	// Set is the verdict of the rows the aggregate ran over; Filtered says
	// a filter chose the rows aggregated among them.
	Set      SetVerdict
	Filtered bool
	// Verdict is the one sentence that says over what the numbers are
	// ("over all 364 rows (complete)"): Set.Over of the rows aggregated.
	Verdict string
}

func newAggregated(res *query.AggregateResult, set SetVerdict, filtered bool) *Aggregated {
	return &Aggregated{Result: res, Set: set, Filtered: filtered, Verdict: set.Over(res.Rows, filtered)}
}

// Complete reports whether the numbers are over every row of a complete
// walk: the only case in which they are totals.
func (a *Aggregated) Complete() bool { return a.Set.Completion == Complete && !a.Set.Resumed }

// JSON renders the aggregate as the model reads it under `_aggregate`:
// its completion and verdict first, then the result (query's
// AggregateResult.AppendJSON), within room characters (0: no bound).
func (a *Aggregated) JSON(room int) []byte {
	completion, _ := json.Marshal(a.Set.Completion)
	if a.Set.Completion == "" {
		completion = []byte("null")
	}
	head := []query.Member{
		{Key: "completion", Value: completion},
		{Key: "verdict", Value: query.AppendString(nil, a.Verdict)},
	}
	return a.Result.AppendJSON(nil, head, room)
}

// Lines renders the aggregate for a terminal: the verdict, then one line
// per group ("EUR  count 170  sum(total) 131895.20"), from the typed
// result.
func (a *Aggregated) Lines() []string {
	out := []string{"aggregate: " + a.Verdict}
	r := a.Result
	for _, g := range r.Groups {
		var b strings.Builder
		for k, path := range r.GroupBy {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%s=%s", path, g.Key[k])
		}
		if len(r.GroupBy) == 0 {
			b.WriteString("all rows")
		}
		for mi, m := range r.Metrics {
			text := g.Values[mi].Text
			if g.Values[mi].Null() {
				text = "null"
			}
			fmt.Fprintf(&b, "  %s %s", m.Name, text)
		}
		out = append(out, "  "+b.String())
	}
	if len(r.Groups) < r.GroupCount {
		out = append(out, fmt.Sprintf("  (%d of %d groups)", len(r.Groups), r.GroupCount))
	}
	for mi, m := range r.Metrics {
		if s := r.Skipped[mi]; s.Total() > 0 {
			out = append(out, fmt.Sprintf("  %s skipped: %d null, %d missing, %d not a number, %d out of range", m.Name, s.Null, s.Missing, s.NotANumber, s.OutOfRange))
		}
	}
	return out
}

// aggregateRows aggregates the rows that pass filter (nil: all), and
// counts those.
func aggregateRows(rows [][]byte, filter *query.Filter, agg *query.Aggregate) (*query.AggregateResult, int, error) {
	res, err := agg.RunIndexed(len(rows), func(i int) []byte { return rows[i] }, filter)
	if err != nil {
		return nil, 0, err
	}
	kept := len(rows)
	if filter != nil {
		if agg.Filter() == nil {
			kept = res.Rows
		} else {
			kept = 0
			for _, r := range rows {
				if filter.Match(r) {
					kept++
				}
			}
		}
	}
	return res, kept, nil
}

// withoutItems is the envelope without its primary array, to carry an
// aggregate instead of the rows: {} for a bare array.
func withoutItems(env []byte, path string) []byte {
	if path == "" || query.FirstByte(env) != '{' {
		return []byte("{}")
	}
	if out, err := query.Delete(env, path); err == nil {
		return out
	}
	return env
}

// aggregateRoom is what is left of budget for the `_aggregate` member of
// view (which holds everything else): 0 when there is no bound.
func aggregateRoom(budget int, view []byte) int {
	if budget <= 0 {
		return 0
	}
	return max(budget-utf8.RuneCount(view)-len(`,"_aggregate":`)-8, 400)
}

// aggregate runs queryToolResult's aggregate: over every stored item
// that passes filter (the call's) and the aggregate's own filter, with
// the verdict the stored result kept of its walk. It answers
// {"_aggregate": {...}, "total": stored items, "_resultId"}, within the
// budget. fields, offset and limit do not apply to groups.
func (r *Retrieval) aggregate(ctx context.Context, scope Scope, id string, filter *query.Filter, args map[string]json.RawMessage) (json.RawMessage, error) {
	const tool = QueryToolResult
	for _, k := range []string{"fields", "offset", "limit"} {
		if !isNull(args[k]) {
			return nil, &RetrievalArgError{Tool: tool, Arg: k, Msg: "does not apply with aggregate, which returns groups, not items (the aggregate takes its own limit)"}
		}
	}
	agg, err := AggregateArg("aggregate", args["aggregate"])
	if err != nil {
		return nil, retrievalArg(tool, "aggregate", err)
	}
	rec, err := r.Lookup(ctx, scope, id)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	if !rec.HasItems() {
		return nil, &RetrievalArgError{Tool: tool, Arg: "resultId", Msg: "this result has no list of items to aggregate; read it with fetchToolResult"}
	}
	total := rec.NumItems()
	res, err := agg.RunIndexed(total, rec.Item, filter)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tool, err)
	}
	a := newAggregated(res, rec.Set, filter != nil || agg.Filter() != nil)
	tail := []byte(`,"total":`)
	tail = fmt.Appendf(tail, "%d", total)
	tail = append(tail, `,"_resultId":`...)
	tail = query.AppendString(tail, id)
	tail = append(tail, '}')
	out := []byte(`{"_aggregate":`)
	room := r.guard.budget() - len(out) - utf8.RuneCount(tail)
	out = append(out, a.JSON(room)...)
	return append(out, tail...), nil
}

// AggregateReport is an `_aggregate` read back from a tool's JSON output
// (a thread's tool part, a workflow step's output): the typed form a
// check compares a number quoted in an answer with — the number, its
// metric, its group and the verdict of the rows it was computed over.
type AggregateReport struct {
	// Completion is the set's ("" for rows of a call that did not loop).
	Completion Completion `json:"completion"`
	Verdict    string     `json:"verdict"`
	Rows       int        `json:"rows"`
	GroupBy    []string   `json:"groupBy"`
	GroupCount int        `json:"groupCount"`
	Groups     []AggregateGroup
}

// AggregateGroup is one group of an AggregateReport.
type AggregateGroup struct {
	// Key is the group's value of each group_by path, as JSON.
	Key map[string]json.RawMessage
	// Values holds each metric's exact number as written ("170",
	// "131895.20"); "" for null.
	Values map[string]string
}

// ReadAggregate reads the `_aggregate` member of output (the Aggregate
// of its ReadEnvelope); ok is false when it has none.
func ReadAggregate(output []byte) (rep *AggregateReport, ok bool, err error) {
	env, err := ReadEnvelope(output)
	return env.Aggregate, env.Aggregate != nil, err
}

// readAggregate decodes an `_aggregate` object.
func readAggregate(raw []byte) (*AggregateReport, error) {
	var top struct {
		AggregateReport
		Groups []map[string]json.RawMessage `json:"groups"`
	}
	err := json.Unmarshal(raw, &top)
	rep := &top.AggregateReport
	for _, g := range top.Groups {
		ag := AggregateGroup{Key: map[string]json.RawMessage{}, Values: map[string]string{}}
		for k, v := range g {
			switch {
			case k == "_skipped":
			case contains(rep.GroupBy, k):
				ag.Key[k] = v
			default:
				var s string
				switch {
				case string(v) == "null":
				case json.Unmarshal(v, &s) == nil:
				default:
					s = string(v)
				}
				ag.Values[k] = s
			}
		}
		rep.Groups = append(rep.Groups, ag)
	}
	if err != nil {
		return rep, fmt.Errorf("_aggregate: %w", err)
	}
	return rep, nil
}
