package workflow

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

var (
	workflowID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	stepID     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
)

// Lookup finds a tool by id; (*tools.Catalog).Get is one.
type Lookup func(toolID string) (*tools.Tool, bool)

// Validate checks the workflow: its id and step ids (unique identifiers,
// "end" reserved), every step's type and the fields that type takes,
// every tool (known to lookup; input members are its parameters and its
// required parameters are given; a for_each key is one of them), the
// loop block (fields, filter and aggregate compile, values are a ref or a non-empty
// list of scalars, a cache TTL is positive and applies to a walk), refs
// (well formed, naming an earlier step), branch conditions and targets
// (End or a later step, so that every run ends). A nil lookup skips the
// checks that need the tools.
//
// The error is an *InvalidError listing every problem found
// (errors.Is(err, ErrInvalid)).
func (d *Definition) Validate(lookup Lookup) error {
	v := &validator{def: d, lookup: lookup, index: map[string]int{}}
	v.run()
	if len(v.problems) == 0 {
		return nil
	}
	return invalid(v.problems...)
}

type validator struct {
	def      *Definition
	lookup   Lookup
	index    map[string]int // step id → index of its first occurrence
	problems []Problem
}

func (v *validator) fail(i int, fieldPath, format string, args ...any) {
	p := Problem{Step: i, Field: fieldPath, Message: fmt.Sprintf(format, args...)}
	if i >= 0 {
		p.StepID = v.def.Steps[i].ID
	}
	v.problems = append(v.problems, p)
}

func (v *validator) run() {
	d := v.def
	switch {
	case d.ID == "":
		v.fail(-1, "id", "is required")
	case !workflowID.MatchString(d.ID):
		v.fail(-1, "id", "%q must be 1-64 letters, digits, '_' or '-'", d.ID)
	}
	switch {
	case len(d.Steps) == 0:
		v.fail(-1, "steps", "must hold at least one step")
		return
	case len(d.Steps) > MaxSteps:
		v.fail(-1, "steps", "has %d steps; at most %d are allowed", len(d.Steps), MaxSteps)
		return
	}
	for i, s := range d.Steps {
		switch {
		case s.ID == "":
			v.fail(i, "id", "is required")
			continue
		case s.ID == End:
			v.fail(i, "id", "%q is reserved: branches use it to end the run", End)
		case !stepID.MatchString(s.ID):
			v.fail(i, "id", "%q must start with a letter or '_' and hold at most 64 letters, digits, '_' or '-'", s.ID)
		}
		if j, dup := v.index[s.ID]; dup {
			v.fail(i, "id", "%q is also the id of steps[%d]", s.ID, j)
			continue
		}
		v.index[s.ID] = i
	}
	for i, s := range d.Steps {
		switch s.Type {
		case TypeTool:
			v.toolStep(i, s)
		case TypeBranch:
			v.branchStep(i, s)
		case "":
			v.fail(i, "type", "is required: %q or %q", TypeTool, TypeBranch)
		default:
			v.fail(i, "type", "%q is not a step type: %q or %q", s.Type, TypeTool, TypeBranch)
		}
	}
}

// checkRef checks a ref used by step i.
func (v *validator) checkRef(i int, at, text string) {
	r, err := parseRef(text)
	if err != nil {
		v.fail(i, at, "%s", err.Error())
		return
	}
	j, ok := v.index[r.step]
	switch {
	case !ok:
		v.fail(i, at, "%q refers to no step %q; %s", text, r.step, v.earlier(i))
	case j >= i:
		v.fail(i, at, "%q refers to step %q, which does not run before this one; %s", text, r.step, v.earlier(i))
	}
}

// earlier lists the ids a ref of step i may name.
func (v *validator) earlier(i int) string {
	if i == 0 {
		return "the first step can refer to no step"
	}
	ids := make([]string, 0, i)
	for _, s := range v.def.Steps[:i] {
		ids = append(ids, s.ID)
	}
	return "earlier steps: " + strings.Join(ids, ", ")
}

func (v *validator) toolStep(i int, s Step) {
	if s.If != nil {
		v.fail(i, "if", "is only for branch steps")
	}
	if s.Then != "" {
		v.fail(i, "then", "is only for branch steps")
	}
	if s.Else != "" {
		v.fail(i, "else", "is only for branch steps")
	}
	if s.Tool == "" {
		v.fail(i, "tool", "is required: the id of the tool to call, such as \"acme.list_orders\"")
	}
	var t *tools.Tool
	if s.Tool != "" && v.lookup != nil {
		var ok bool
		if t, ok = v.lookup(s.Tool); !ok {
			v.fail(i, "tool", "%q is not a known tool", s.Tool)
		}
	}
	for _, k := range sortedKeys(s.Input) {
		at := "input." + k
		switch {
		case loop.IsReserved(k):
			v.fail(i, at, "is a reserved argument; declare it in the loop block (all_pages, fields, for_each, filter, aggregate)")
		case t != nil:
			if _, ok := t.Param(k); !ok {
				v.fail(i, at, "is not a parameter of %s; parameters: %s", t.ID, paramNames(t))
			}
		}
		eachRef(s.Input[k], at, func(text, at string) { v.checkRef(i, at, text) })
	}
	var forEachKey string
	if l := s.Loop; l != nil {
		forEachKey = v.loopBlock(i, s, t)
	}
	if t != nil {
		for _, p := range t.Params {
			if _, given := s.Input[p.Name]; p.Required && !given && p.Name != forEachKey {
				v.fail(i, "input", "is missing %q, a required parameter of %s (give it in input, or fan out over it with loop.for_each)", p.Name, t.ID)
			}
		}
	}
}

// loopBlock checks a tool step's loop block and returns its for_each key.
func (v *validator) loopBlock(i int, s Step, t *tools.Tool) string {
	l := s.Loop
	if l.Fields != nil && len(l.Fields) == 0 {
		v.fail(i, "loop.fields", "must not be empty (leave it out to keep every field)")
	}
	for j, p := range l.Fields {
		if _, err := query.CompileFields([]string{p}); err != nil {
			msg := err.Error()
			var pe *query.PathError
			if errors.As(err, &pe) {
				msg = pe.Msg
			}
			v.fail(i, fmt.Sprintf("loop.fields[%d]", j), "%q is not a dot-path: %s", p, msg)
		}
	}
	if len(l.Filter) > 0 {
		if _, err := query.CompileFilter(l.Filter); err != nil {
			var ce *query.ClauseError
			if errors.As(err, &ce) {
				v.fail(i, fmt.Sprintf("loop.filter[%d]", ce.Index), "%s: %s (ops: eq, neq, gt, gte, lt, lte, contains, in, exists)", ce.Clause, ce.Reason)
			} else {
				v.fail(i, "loop.filter", "%s", err.Error())
			}
		}
	}
	if l.Aggregate != nil {
		if _, err := query.CompileAggregate(*l.Aggregate); err != nil {
			var ae *query.AggregateError
			if errors.As(err, &ae) && ae.Where != "" {
				v.fail(i, "loop.aggregate."+ae.Where, "%s", ae.Reason)
			} else {
				v.fail(i, "loop.aggregate", "%s", strings.TrimPrefix(err.Error(), "query: aggregate "))
			}
		}
	}
	var key string
	if fe := l.ForEach; fe != nil {
		key = fe.Key
		switch {
		case fe.Key == "":
			v.fail(i, "loop.for_each.key", "is required: the parameter that takes each value")
		case t != nil:
			if _, ok := t.Param(fe.Key); !ok {
				v.fail(i, "loop.for_each.key", "%q is not a parameter of %s; parameters: %s", fe.Key, t.ID, paramNames(t))
			}
		}
		if _, both := s.Input[fe.Key]; fe.Key != "" && both {
			v.fail(i, "loop.for_each.key", "%q is also given in input; give it in one place", fe.Key)
		}
		switch {
		case fe.Values.Ref != "":
			v.checkRef(i, "loop.for_each.values.ref", fe.Values.Ref)
		case len(fe.Values.List) == 0:
			v.fail(i, "loop.for_each.values", "must be a non-empty list or a ref such as {\"ref\": \"$.steps.<id>.<path>\"}")
		default:
			for j, e := range fe.Values.List {
				switch e.(type) {
				case map[string]any, []any, nil:
					v.fail(i, fmt.Sprintf("loop.for_each.values[%d]", j), "must be a string, a number or a boolean, not %s", kindOf(e))
				}
			}
		}
	}
	if c := l.Cache; c != nil {
		switch {
		case !(c.TTLMinutes > 0) || math.IsInf(c.TTLMinutes, 0):
			v.fail(i, "loop.cache.ttl_minutes", "must be a positive number of minutes")
		case !l.AllPages && l.ForEach == nil:
			v.fail(i, "loop.cache", "applies only to walks: set loop.all_pages or loop.for_each, or leave cache out")
		}
	}
	return key
}

func (v *validator) branchStep(i int, s Step) {
	if s.Tool != "" {
		v.fail(i, "tool", "is only for tool steps")
	}
	if s.Input != nil {
		v.fail(i, "input", "is only for tool steps")
	}
	if s.Loop != nil {
		v.fail(i, "loop", "is only for tool steps")
	}
	if c := s.If; c == nil {
		v.fail(i, "if", "is required: {\"ref\": \"$.steps.<id>.<path>\", \"op\": \"eq\", \"value\": …}")
	} else {
		if c.Ref == "" {
			v.fail(i, "if.ref", "is required")
		} else {
			v.checkRef(i, "if.ref", c.Ref)
		}
		if f, msg := c.check(); msg != "" {
			v.fail(i, "if."+f, "%s", msg)
		}
	}
	v.target(i, "then", s.Then)
	v.target(i, "else", s.Else)
}

// target checks a branch target: End or a later step.
func (v *validator) target(i int, at, id string) {
	if id == "" {
		v.fail(i, at, "is required: the id of a later step, or %q", End)
		return
	}
	if id == End {
		return
	}
	j, ok := v.index[id]
	switch {
	case !ok:
		v.fail(i, at, "%q is not a step; name a later step or %q", id, End)
	case j <= i:
		v.fail(i, at, "%q is not after this step; branches jump forward only (to a later step or %q), so that every run ends", id, End)
	}
}

func paramNames(t *tools.Tool) string {
	names := make([]string, 0, len(t.Params))
	for _, p := range t.Params {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}
