package workflow

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// Step types.
const (
	TypeTool   = "tool"
	TypeBranch = "branch"
)

// End is the branch target that ends the run.
const End = "end"

// MaxSteps bounds the steps of one workflow.
const MaxSteps = 100

// Definition is a workflow: steps run in order, a branch jumping forward.
// Its JSON form is documented in the package doc; Parse (or
// json.Unmarshal, which calls the same strict decoder) reads it and
// json.Marshal writes it back.
type Definition struct {
	ID    string `json:"id"`
	Steps []Step `json:"steps"`
}

// Step is one step of a workflow: a tool call (Type "tool": Tool, Input,
// Loop) or a branch (Type "branch": If, Then, Else).
type Step struct {
	ID   string `json:"id"`
	Type string `json:"type"`

	// Tool is the id of the tool to call, such as "acme.list_orders".
	Tool string `json:"tool,omitempty"`
	// Input are the tool's own arguments. A member whose value is a ref
	// (a string starting with "$.steps.", or an object {"ref": "$.steps…"}
	// and nothing else), at any depth, is replaced by what the ref
	// resolves to when the step runs; one that resolves to null is left
	// out of the call.
	Input map[string]any `json:"input,omitempty"`
	// Loop declares the looping capabilities of the call. Nil: one
	// request (the first page of a paginated tool), still with a verdict.
	Loop *Loop `json:"loop,omitempty"`
	// AllowPartial lets a step whose tool changes data consume refs to a
	// step whose verdict is partial or unstable; without it the run fails
	// rather than act on an incomplete list.
	AllowPartial bool `json:"allow_partial,omitempty"`

	// If is the branch's condition; Then and Else name the step to jump
	// to (a later one) or End.
	If   *Condition `json:"if,omitempty"`
	Then string     `json:"then,omitempty"`
	Else string     `json:"else,omitempty"`
}

// Loop is a tool step's loop block: the reserved arguments of DESIGN.md §5,
// declared once, plus the step's opt-in to the dataset cache.
type Loop struct {
	// AllPages walks every page (_all_pages).
	AllPages bool `json:"all_pages,omitempty"`
	// Fields projects each row to these dot-paths (_fields).
	Fields []string `json:"fields,omitempty"`
	// ForEach calls the tool once per value of one parameter (_for_each).
	ForEach *ForEach `json:"for_each,omitempty"`
	// Filter keeps the rows matching every clause (_filter).
	Filter []query.Clause `json:"filter,omitempty"`
	// Aggregate groups and totals the rows (_aggregate): the step's output
	// holds the numbers under _aggregate instead of the rows, and _loop
	// its verdict.
	Aggregate *query.AggregateSpec `json:"aggregate,omitempty"`
	// Cache lets the step serve (and store) complete walks from the
	// dataset cache. Nil: the cache is not used at all.
	Cache *Cache `json:"cache,omitempty"`
}

// ForEach is a loop's fan-out: the tool is called with parameter Key set
// to each of Values.
type ForEach struct {
	Key    string `json:"key"`
	Values Values `json:"values"`
}

// Values are a fan-out's values: a literal list, or a ref resolved when the
// step runs (to a list; null values in it are dropped).
type Values struct {
	// Ref is a ref such as "$.steps.properties.properties.id"; "" when
	// List is used.
	Ref string
	// List are literal values (strings, numbers or booleans).
	List []any
}

// MarshalJSON writes {"ref": Ref} or the list.
func (v Values) MarshalJSON() ([]byte, error) {
	if v.Ref != "" {
		return json.Marshal(map[string]string{"ref": v.Ref})
	}
	if v.List == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(v.List)
}

// UnmarshalJSON reads a list, {"ref": "$.steps…"} or a "$.steps…" string.
func (v *Values) UnmarshalJSON(b []byte) error {
	tree, err := decodeTree(b)
	if err != nil {
		return err
	}
	d := &decoder{}
	*v = d.values(tree, field{step: -1, path: "values"})
	return d.err()
}

// Cache is a step's opt-in to the dataset cache.
type Cache struct {
	// TTLMinutes is how long a complete walk is served again; it must be
	// positive.
	TTLMinutes float64 `json:"ttl_minutes"`
}

// Condition is a branch's test of the value a ref resolves to. Op is one
// of eq, neq, gt, gte, lt, lte, exists, truthy ("" means truthy).
type Condition struct {
	Ref   string `json:"ref"`
	Op    string `json:"op,omitempty"`
	Value any    `json:"value,omitempty"`
}

// Parse reads a workflow definition strictly: unknown fields and values of
// the wrong type are errors that name their place. The error is an
// *InvalidError (errors.Is(err, ErrInvalid)). Parse does not check the
// workflow against the tools; call Validate for that.
func Parse(data []byte) (*Definition, error) {
	var d Definition
	if err := d.UnmarshalJSON(data); err != nil {
		return nil, err
	}
	return &d, nil
}

// UnmarshalJSON is Parse for json.Unmarshal (and so for any JSON decoder a
// server binds request bodies with).
func (d *Definition) UnmarshalJSON(data []byte) error {
	tree, err := decodeTree(data)
	if err != nil {
		return err
	}
	dec := &decoder{}
	*d = dec.definition(tree)
	return dec.err()
}

// decodeTree decodes one JSON value, numbers kept as json.Number.
func decodeTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, invalid(Problem{Step: -1, Field: "workflow", Message: "is not valid JSON: " + jsonErrText(err)})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid(Problem{Step: -1, Field: "workflow", Message: "is not valid JSON: data after the first value"})
	}
	return tree, nil
}

func jsonErrText(err error) string {
	if errors.Is(err, io.EOF) {
		return "empty input"
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "unexpected end of input"
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// field is where a decoded value sits: a step (by index, -1 for the
// workflow itself) and the dotted path of the field in it.
type field struct {
	step   int
	stepID string
	path   string
}

func (f field) child(name string) field {
	if f.path != "" {
		name = f.path + "." + name
	}
	return field{step: f.step, stepID: f.stepID, path: name}
}

func (f field) index(i int) field {
	return field{step: f.step, stepID: f.stepID, path: fmt.Sprintf("%s[%d]", f.path, i)}
}

// decoder turns a decoded JSON tree into a Definition, collecting every
// problem it meets rather than stopping at the first.
type decoder struct {
	problems []Problem
}

func (d *decoder) fail(at field, format string, args ...any) {
	d.problems = append(d.problems, Problem{Step: at.step, StepID: at.stepID, Field: at.path, Message: fmt.Sprintf(format, args...)})
}

func (d *decoder) err() error {
	if len(d.problems) == 0 {
		return nil
	}
	return invalid(d.problems...)
}

// object checks that v is an object holding only known members.
func (d *decoder) object(v any, at field, known ...string) (map[string]any, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		d.fail(at, "must be an object, not %s", kindOf(v))
		return nil, false
	}
	var unknown []string
	for k := range m {
		if !contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		d.fail(at, "has an unknown field %q (known: %s)", k, strings.Join(sorted(known), ", "))
	}
	return m, true
}

func (d *decoder) str(m map[string]any, name string, at field) string {
	v, ok := m[name]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		d.fail(at.child(name), "must be a string, not %s", kindOf(v))
	}
	return s
}

func (d *decoder) definition(tree any) Definition {
	var def Definition
	m, ok := d.object(tree, field{step: -1, path: "workflow"}, "id", "steps")
	if !ok {
		return def
	}
	def.ID = d.str(m, "id", field{step: -1})
	raw, ok := m["steps"]
	if !ok || raw == nil {
		return def
	}
	list, ok := raw.([]any)
	if !ok {
		d.fail(field{step: -1, path: "steps"}, "must be an array, not %s", kindOf(raw))
		return def
	}
	if len(list) > MaxSteps {
		d.fail(field{step: -1, path: "steps"}, "has %d steps; at most %d are allowed", len(list), MaxSteps)
		return def
	}
	def.Steps = make([]Step, len(list))
	for i, s := range list {
		def.Steps[i] = d.step(s, i)
	}
	return def
}

func (d *decoder) step(v any, i int) Step {
	var s Step
	at := field{step: i}
	if m, ok := v.(map[string]any); ok {
		if id, ok := m["id"].(string); ok {
			at.stepID = id
		}
	}
	m, ok := d.object(v, at, "id", "type", "tool", "input", "loop", "if", "then", "else", "allow_partial")
	if !ok {
		return s
	}
	s.ID = d.str(m, "id", at)
	s.Type = d.str(m, "type", at)
	s.Tool = d.str(m, "tool", at)
	s.Then = d.str(m, "then", at)
	s.Else = d.str(m, "else", at)
	if in, ok := m["input"]; ok && in != nil {
		if obj, ok := in.(map[string]any); ok {
			s.Input = obj
		} else {
			d.fail(at.child("input"), "must be an object, not %s", kindOf(in))
		}
	}
	if l, ok := m["loop"]; ok && l != nil {
		s.Loop = d.loop(l, at.child("loop"))
	}
	if x, ok := m["allow_partial"]; ok && x != nil {
		b, ok := x.(bool)
		if !ok {
			d.fail(at.child("allow_partial"), "must be true or false, not %s", kindOf(x))
		}
		s.AllowPartial = b
	}
	if c, ok := m["if"]; ok && c != nil {
		s.If = d.condition(c, at.child("if"))
	}
	return s
}

func (d *decoder) loop(v any, at field) *Loop {
	m, ok := d.object(v, at, "all_pages", "fields", "for_each", "filter", "aggregate", "cache")
	if !ok {
		return nil
	}
	l := &Loop{}
	if x, ok := m["all_pages"]; ok && x != nil {
		b, ok := x.(bool)
		if !ok {
			d.fail(at.child("all_pages"), "must be true or false, not %s", kindOf(x))
		}
		l.AllPages = b
	}
	if x, ok := m["fields"]; ok && x != nil {
		// The parser of _fields: an array of dot-paths or one
		// comma-separated string.
		paths, err := query.PathsOf(x)
		if err != nil {
			d.fail(at.child("fields"), "%s", err.Error())
		}
		l.Fields = append([]string{}, paths...) // [] stays given, for validate to reject
	}
	if x, ok := m["for_each"]; ok && x != nil {
		l.ForEach = d.forEach(x, at.child("for_each"))
	}
	if x, ok := m["filter"]; ok && x != nil {
		l.Filter = d.filter(x, at.child("filter"))
	}
	if x, ok := m["aggregate"]; ok && x != nil {
		// The parser of _aggregate; ops, paths and names are checked by
		// validate.
		spec, err := query.AggregateOf(x)
		if err != nil {
			ae := err.(*query.AggregateError)
			aat := at.child("aggregate")
			if ae.Where != "" {
				aat = aat.child(ae.Where)
			}
			d.fail(aat, "%s", ae.Reason)
		} else {
			l.Aggregate = &spec
		}
	}
	if x, ok := m["cache"]; ok && x != nil {
		cat := at.child("cache")
		if cm, ok := d.object(x, cat, "ttl_minutes"); ok {
			l.Cache = &Cache{}
			if t, ok := cm["ttl_minutes"]; ok && t != nil {
				n, isNum := t.(json.Number)
				f, err := n.Float64()
				if !isNum || err != nil {
					d.fail(cat.child("ttl_minutes"), "must be a number of minutes, not %s", kindOf(t))
				}
				l.Cache.TTLMinutes = f
			}
		}
	}
	return l
}

func (d *decoder) forEach(v any, at field) *ForEach {
	m, ok := d.object(v, at, "key", "values")
	if !ok {
		return nil
	}
	fe := &ForEach{Key: d.str(m, "key", at)}
	if x, ok := m["values"]; ok && x != nil {
		fe.Values = d.values(x, at.child("values"))
	}
	return fe
}

// values reads a fan-out's values: a list, {"ref": …} or a ref string.
func (d *decoder) values(v any, at field) Values {
	switch x := v.(type) {
	case []any:
		return Values{List: x}
	case string:
		if isRefString(x) {
			return Values{Ref: x}
		}
		d.fail(at, "must be a list or a ref such as {\"ref\": \"$.steps.<id>.<path>\"}, not the string %q", x)
	case map[string]any:
		if m, ok := d.object(x, at, "ref"); ok {
			r := d.str(m, "ref", at)
			if r == "" {
				d.fail(at.child("ref"), "is missing")
			}
			return Values{Ref: r}
		}
	default:
		d.fail(at, "must be a list or a ref such as {\"ref\": \"$.steps.<id>.<path>\"}, not %s", kindOf(v))
	}
	return Values{}
}

// filter reads a loop's filter with the parser of _filter
// (query.ClausesOf), so a workflow accepts and rejects exactly what a
// tool call does; operators and values are checked by validate.
func (d *decoder) filter(v any, at field) []query.Clause {
	clauses, err := query.ClausesOf(v)
	if err != nil {
		var ce *query.ClauseError
		switch {
		case errors.As(err, &ce):
			d.fail(at.index(ce.Index), "%s", ce.Reason)
		default:
			d.fail(at, "%s", strings.TrimPrefix(err.Error(), "query: filter "))
		}
		return nil
	}
	return clauses
}

func (d *decoder) condition(v any, at field) *Condition {
	m, ok := d.object(v, at, "ref", "op", "value")
	if !ok {
		return nil
	}
	return &Condition{Ref: d.str(m, "ref", at), Op: d.str(m, "op", at), Value: m["value"]}
}

// kindOf names a decoded JSON value's kind for error messages.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func sorted(list []string) []string {
	out := append([]string(nil), list...)
	sort.Strings(out)
	return out
}
