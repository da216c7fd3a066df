package loop

import (
	"fmt"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// Check validates call c as Call would, without any request: the
// reserved arguments, what a write takes (_for_each only under bulk and
// looping), the fan-out values, and the tool's own arguments — their
// names, types and the required ones. A door that asks a human before a
// call runs checks it first, so that nobody is asked to approve a call
// that can never run. The error is the *ToolError Call would return.
func (e *Engine) Check(c Call) error {
	_, err := e.prepare(c)
	return err
}

// prepared is a call checked and parsed, ready to walk.
type prepared struct {
	own    map[string]any
	r      Request
	effect tools.Effect
	budget paginate.Budget
	values []any // _for_each values, coerced and de-duplicated; nil without
	// unknown are the arguments no parameter declares that the tool's
	// schema admits (additionalProperties): sent, and listed in the
	// envelope's _unknownArgs.
	unknown []string
}

// prepare is everything Call does before its first request.
func (e *Engine) prepare(c Call) (prepared, error) {
	if c.Tool == nil {
		return prepared{}, fmt.Errorf("loop: Call.Tool is nil")
	}
	own, r, err := ParseRequest(c.Args)
	if err != nil {
		return prepared{}, err
	}
	if c.Request != nil {
		r = *c.Request
	}
	p := prepared{own: own, r: r, effect: e.Effect(c.Tool, c.Binding)}
	if p.effect.Writes() {
		if err := checkWrite(c.Tool, p.effect, r, c.Binding); err != nil {
			return p, err
		}
	}
	if p.unknown, err = checkArgNames(c.Tool, own, c.Binding.LoopResponses); err != nil {
		return p, err
	}
	if !c.Binding.LoopResponses {
		// Reserved arguments are stripped but ignored: one plain call.
		return p, checkArgs(c.Tool, own, "")
	}
	p.budget = e.opt.Budget.Merge(c.Binding.Budget).Resolved()
	if p.effect.Writes() {
		p.budget.ForEachValues = min(p.budget.ForEachValues, bulkValues(c.Binding))
	}
	key := ""
	if r.ForEach != nil {
		if p.values, err = forEachValues(c.Tool, r.ForEach, p.budget.ForEachValues); err != nil {
			return p, err
		}
		key = r.ForEach.Key
	}
	return p, checkArgs(c.Tool, own, key)
}

// checkArgNames checks the names of a call's own arguments (reserved ones
// already taken out) against the tool's parameters. They are a closed
// list unless the tool's schema admits more (tools.Tool.OpenArgs): then
// the names it does not declare are returned, to go through and be
// listed; otherwise the first is refused (invalid_argument) with what it
// most likely meant and the real parameters. looping adds the reserved
// arguments to the names a misspelling is matched against.
func checkArgNames(t *tools.Tool, own map[string]any, looping bool) ([]string, error) {
	unknown := t.Undeclared(own)
	if len(unknown) == 0 || t.OpenArgs != "" {
		return unknown, nil
	}
	names := make([]string, 0, len(t.Params))
	for _, p := range t.Params {
		names = append(names, p.Name)
	}
	candidates := names
	if looping {
		candidates = append(append([]string(nil), names...), reservedArgs...)
	}
	var b strings.Builder
	if len(unknown) == 1 {
		fmt.Fprintf(&b, "argument %q is not a parameter of %s", unknown[0], t.Name)
	} else {
		fmt.Fprintf(&b, "arguments %s are not parameters of %s", quoteList(unknown), t.Name)
	}
	var meant []string
	for _, u := range unknown {
		if s := tools.Similar(u, candidates); len(s) > 0 {
			meant = append(meant, fmt.Sprintf("%q for %q", s[0], u))
		}
	}
	switch {
	case len(meant) == 1 && len(unknown) == 1:
		fmt.Fprintf(&b, " (did you mean %s?)", strings.SplitN(meant[0], " for ", 2)[0])
	case len(meant) > 0:
		fmt.Fprintf(&b, " (did you mean %s?)", strings.Join(meant, ", "))
	}
	if len(names) == 0 {
		fmt.Fprintf(&b, "; %s takes no arguments", t.Name)
	} else {
		fmt.Fprintf(&b, "; its parameters are: %s", strings.Join(slices.Sorted(slices.Values(names)), ", "))
	}
	b.WriteString(". Nothing was sent: call it again with its own parameter names")
	return nil, &ToolError{Code: CodeInvalidArgument, Message: b.String()}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
