package eval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
)

// Expect is what a good run of a case is. Every field is optional and
// each one set becomes one named check of the case's report (its json
// name):
//
//   - tools: tool names the turn's calls must include. An array asks for
//     them in that order (other calls may come between);
//     {"names": […], "any_order": true} in any order. Names are the
//     model-facing ones (list_orders, queryToolResult); a tool id
//     (acme.list_orders) matches by its part after the dot.
//   - args: {"tool": {…}}: some call of the tool has arguments holding
//     the object as a JSON subset (every key present with an equal value;
//     objects compared as subsets, arrays and scalars exactly).
//   - completion: true: every read call's verdict is complete (or a
//     single response); ["tool", …]: those tools' calls are.
//   - no_writes: true: no call wrote (a write refused counts too).
//   - max_tool_calls, max_upstream_requests, max_tokens: upper bounds
//     (requests as the calls' boundary statements count them; tokens as
//     the model reported them — the replay model reports none).
//   - answer_contains: a string or strings the final answer holds (case
//     and spacing set aside).
//   - answer_matches: a Go regular expression the final answer matches.
//   - answer_number: {"value", "tolerance"?, "near"?}: the number in the
//     final answer — the first one after the words of near when given,
//     else the first — is value ± tolerance.
//   - rubric: a judge prompt the configured model scores the answer by,
//     pass or fail with its reason; skipped on the replay model.
type Expect struct {
	Tools               *ToolsExpect      `json:"tools,omitempty"`
	Args                map[string]Subset `json:"args,omitempty"`
	Completion          *CompletionExpect `json:"completion,omitempty"`
	NoWrites            bool              `json:"no_writes,omitempty"`
	MaxToolCalls        *int              `json:"max_tool_calls,omitempty"`
	MaxUpstreamRequests *int              `json:"max_upstream_requests,omitempty"`
	AnswerContains      Strings           `json:"answer_contains,omitempty"`
	AnswerMatches       string            `json:"answer_matches,omitempty"`
	AnswerNumber        *NumberExpect     `json:"answer_number,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	Rubric              string            `json:"rubric,omitempty"`
	matches             *regexp.Regexp    // AnswerMatches, compiled
}

// ToolsExpect is the tools expectation.
type ToolsExpect struct {
	Names    []string `json:"names"`
	AnyOrder bool     `json:"any_order,omitempty"`
}

// UnmarshalJSON reads an array of names (in order) or {"names", "any_order"}.
func (t *ToolsExpect) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		t.AnyOrder = false
		return json.Unmarshal(b, &t.Names)
	}
	type plain ToolsExpect
	var p plain
	if err := strictDecode(b, &p); err != nil {
		return fmt.Errorf("want an array of tool names or {\"names\": […], \"any_order\": true}: %v", err)
	}
	*t = ToolsExpect(p)
	return nil
}

// CompletionExpect is the completion expectation: every read call, or
// the named tools' calls.
type CompletionExpect struct {
	All   bool     `json:"-"`
	Tools []string `json:"-"`
}

// UnmarshalJSON reads true or an array of tool names.
func (c *CompletionExpect) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case string(b) == "true":
		c.All = true
		return nil
	case len(b) > 0 && b[0] == '[':
		if err := json.Unmarshal(b, &c.Tools); err != nil {
			return err
		}
		if len(c.Tools) == 0 {
			return errors.New("an empty list of tools expects nothing; write true for every read call")
		}
		return nil
	}
	return fmt.Errorf("want true or an array of tool names, not %s", b)
}

// MarshalJSON writes it back as read.
func (c CompletionExpect) MarshalJSON() ([]byte, error) {
	if c.All {
		return []byte("true"), nil
	}
	return json.Marshal(c.Tools)
}

// Strings is a string or an array of strings.
type Strings []string

// UnmarshalJSON reads "s" or ["s", …].
func (s *Strings) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Strings{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("want a string or an array of strings")
	}
	*s = many
	return nil
}

// Subset is a JSON object a call's arguments must hold.
type Subset map[string]json.RawMessage

// NumberExpect is the answer_number expectation.
type NumberExpect struct {
	Value     float64 `json:"value"`
	Tolerance float64 `json:"tolerance,omitempty"`
	Near      string  `json:"near,omitempty"`
}

// UnmarshalJSON reads the object strictly and requires value.
func (n *NumberExpect) UnmarshalJSON(b []byte) error {
	var p struct {
		Value     *float64 `json:"value"`
		Tolerance float64  `json:"tolerance"`
		Near      string   `json:"near"`
	}
	if err := strictDecode(b, &p); err != nil {
		return err
	}
	if p.Value == nil {
		return errors.New("value: missing")
	}
	*n = NumberExpect{Value: *p.Value, Tolerance: p.Tolerance, Near: p.Near}
	return nil
}

// validate checks what decoding cannot, and compiles answer_matches.
// Errors name the field.
func (e *Expect) validate() error {
	if e.Tools != nil {
		if len(e.Tools.Names) == 0 {
			return errors.New("tools: name at least one tool")
		}
		for i, n := range e.Tools.Names {
			if strings.TrimSpace(n) == "" {
				return fmt.Errorf("tools[%d]: blank", i)
			}
		}
	}
	for tool, sub := range e.Args {
		if sub == nil {
			return fmt.Errorf("args.%s: want a JSON object", tool)
		}
	}
	for name, v := range map[string]*int{"max_tool_calls": e.MaxToolCalls, "max_upstream_requests": e.MaxUpstreamRequests, "max_tokens": e.MaxTokens} {
		if v != nil && *v < 0 {
			return fmt.Errorf("%s: want 0 or more, not %d", name, *v)
		}
	}
	for i, s := range e.AnswerContains {
		if strings.TrimSpace(s) == "" {
			return fmt.Errorf("answer_contains[%d]: blank", i)
		}
	}
	if e.AnswerMatches != "" {
		re, err := regexp.Compile(e.AnswerMatches)
		if err != nil {
			return fmt.Errorf("answer_matches: %v", err)
		}
		e.matches = re
	}
	if n := e.AnswerNumber; n != nil && (n.Tolerance < 0 || math.IsNaN(n.Tolerance)) {
		return fmt.Errorf("answer_number.tolerance: want 0 or more, not %v", n.Tolerance)
	}
	if e.Rubric != "" && strings.TrimSpace(e.Rubric) == "" {
		return errors.New("rubric: blank")
	}
	return nil
}
