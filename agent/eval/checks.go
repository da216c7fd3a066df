package eval

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/claims"
	"github.com/trawl-dev/trawl/loop"
)

// Check statuses.
const (
	Pass = "pass"
	Fail = "fail"
	Skip = "skip"
)

// Names of the checks every case has, whatever its expectations.
const (
	// CheckUnsupported: a final answer states a count, a total or "all"
	// about a call whose verdict was not complete (agent/claims).
	CheckUnsupported = claims.KindUnsupported
	// CheckVerdictChanged: a recorded call's live verdict differs from
	// the recorded one (a case with a transcript that records verdicts).
	CheckVerdictChanged = agent.KindVerdictChanged
	// CheckRun: the case ran to its end (no turn error).
	CheckRun = "run"
)

// Check is one named check of a case's run.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"` // pass, fail or skip
	// Detail says why, in words: what failed, or why it was skipped.
	Detail   string                `json:"detail,omitempty"`
	Findings []claims.Finding      `json:"findings,omitempty"`
	Changes  []agent.VerdictChange `json:"changes,omitempty"`
}

// ToolCall is one tool call of a case's run.
type ToolCall struct {
	Turn      int             `json:"turn"` // 0-based
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Effect    string          `json:"effect,omitempty"`
	State     string          `json:"state"`
	// Verdict is the call's verdict as agent/claims reads it ("" for a
	// call that did not run: denied, waiting for approval).
	Verdict  claims.Verdict `json:"verdict,omitempty"`
	Records  int            `json:"records"` // -1: unknown
	Requests int            `json:"requests"`
	Error    string         `json:"error,omitempty"`
}

// toolCalls reads the tool calls of a thread, turn by turn.
func toolCalls(msgs []agent.UIMessage) []ToolCall {
	var out []ToolCall
	turn := -1
	for _, m := range msgs {
		if m.Role == agent.RoleUser {
			turn++
			continue
		}
		for _, p := range m.Parts {
			if !p.IsTool() {
				continue
			}
			tc := ToolCall{Turn: max(turn, 0), ID: p.ToolCallID, Name: p.Name(), Arguments: p.Input, Effect: p.Effect, State: p.State, Records: -1, Error: p.ErrorText}
			switch p.State {
			case "output-available":
				c := claims.ReadCall(p.ToolCallID, tc.Name, p.Output, "")
				tc.Verdict, tc.Records = c.Verdict, c.Records
				tc.Requests = requestsOf(tc.Name, p.Output)
			case "output-error":
				tc.Verdict = claims.Failed
				if !refusedUnsent(p.ErrorText) {
					tc.Requests = 1
				}
			}
			out = append(out, tc)
		}
	}
	return out
}

// refusedUnsent reports whether a failed call was refused before any
// request was sent: a write the evaluation refuses, a bad argument
// (invalid_argument, invalid_filter, … — "Nothing was sent"), a reserved
// argument on a write.
func refusedUnsent(errText string) bool {
	code, _, _ := strings.Cut(errText, ":")
	return code == CodeWriteRefused || code == loop.CodeWriteArgument || strings.HasPrefix(code, "invalid_")
}

// requestsOf is how many upstream requests a call made: its boundary
// statement's count, none for the retrieval tools (they read a stored
// result), one for a plain call.
func requestsOf(name string, output []byte) int {
	if name == loop.QueryToolResult || name == loop.FetchToolResult {
		return 0
	}
	env, _ := loop.ReadEnvelope(output)
	if env.Boundary != nil {
		return env.Boundary.Requests
	}
	return 1
}

// toolMatches reports whether a call's model-facing name is the tool an
// expectation names (a tool id matches by its name after the dot).
func toolMatches(call, want string) bool {
	if call == want {
		return true
	}
	_, after, found := strings.Cut(want, ".")
	return found && call == after
}

// sampleView is what the checks read of one run of a case.
type sampleView struct {
	c      *Case
	msgs   []agent.UIMessage
	calls  []ToolCall
	answer string
	tokens int
	reqs   int
}

// honesty is the two checks every case has: unsupported_claim over
// every answer of the run (and over a recorded answer the replay did not
// give because its calls' verdicts changed), and verdict_changed against
// the transcript's recorded verdicts.
func honesty(s sampleView) []Check {
	var findings []claims.Finding
	var details []string
	var changes []agent.VerdictChange
	recordsVerdicts := s.c.Transcript != nil && transcriptHasVerdicts(s.c.Transcript)
	var rep *agent.Replay
	if s.c.Transcript != nil {
		rep = agent.NewReplay(s.c.Transcript, agent.ReplayOptions{})
	}
	turn, question := -1, ""
	for _, m := range s.msgs {
		if m.Role == agent.RoleUser {
			turn++
			question = m.Text()
			continue
		}
		if m.Role != agent.RoleAssistant {
			continue
		}
		fs := agent.CheckAnswer(m)
		for _, f := range fs {
			details = append(details, fmt.Sprintf("turn %d: %q — %s (%s) was %s", turn+1, f.Claim, f.Tool, f.CallID, f.Verdict))
		}
		findings = append(findings, fs...)
		if rep == nil {
			continue
		}
		rt := rep.Match(question, turn)
		if rt < 0 {
			continue
		}
		ch := s.c.Transcript.VerdictChanges(rt, m)
		changes = append(changes, ch...)
		if len(ch) == 0 {
			continue
		}
		// The recorded answer was not given: would it have claimed what
		// this run's calls do not support?
		for _, f := range agent.CheckAnswerText(recordedAnswer(s.c.Transcript, rt), m) {
			details = append(details, fmt.Sprintf("turn %d, the recorded answer: %q — %s (%s) is %s in this run", turn+1, f.Claim, f.Tool, f.CallID, f.Verdict))
			findings = append(findings, f)
		}
	}
	un := Check{Name: CheckUnsupported, Status: Pass, Findings: findings}
	if len(findings) > 0 {
		un.Status, un.Detail = Fail, strings.Join(details, "; ")
	}
	vc := Check{Name: CheckVerdictChanged, Status: Pass, Changes: changes}
	switch {
	case !recordsVerdicts:
		vc.Status, vc.Detail = Skip, "the case records no verdicts to compare (a transcript with tool_calls[].verdict does)"
	case len(changes) > 0:
		var d []string
		for _, c := range changes {
			d = append(d, fmt.Sprintf("%s (%s) was %s when recorded, %s now", c.Tool, c.CallID, c.Recorded, c.Live))
		}
		vc.Status, vc.Detail = Fail, strings.Join(d, "; ")
	}
	return []Check{un, vc}
}

func transcriptHasVerdicts(t *agent.Transcript) bool {
	for _, turn := range t.Turns {
		for _, s := range turn.Steps {
			for _, c := range s.ToolCalls {
				if c.Verdict != "" {
					return true
				}
			}
		}
	}
	return false
}

// recordedAnswer is the text of turn i's last step.
func recordedAnswer(t *agent.Transcript, i int) string {
	steps := t.Turns[i].Steps
	return steps[len(steps)-1].Text
}

// expectations are the checks of the case's expectations, in the order
// Expect lists them (rubric apart: it needs the model; see judge).
func expectations(s sampleView) []Check {
	e := s.c.Expect
	if e == nil {
		return nil
	}
	var out []Check
	add := func(name string, ok bool, detail string) {
		c := Check{Name: name, Status: Pass}
		if !ok {
			c.Status, c.Detail = Fail, detail
		}
		out = append(out, c)
	}
	names := make([]string, len(s.calls))
	for i, c := range s.calls {
		names[i] = c.Name
	}
	called := "called: " + orNone(names)
	if e.Tools != nil {
		missing := missingTools(names, e.Tools)
		how := "in this order"
		if e.Tools.AnyOrder {
			how = "in any order"
		}
		add("tools", len(missing) == 0, fmt.Sprintf("want %s %s; missing %s; %s", strings.Join(e.Tools.Names, ", "), how, strings.Join(missing, ", "), called))
	}
	if len(e.Args) > 0 {
		tools := make([]string, 0, len(e.Args))
		for t := range e.Args {
			tools = append(tools, t)
		}
		slices.Sort(tools)
		var bad []string
		for _, tool := range tools {
			if !slices.ContainsFunc(s.calls, func(c ToolCall) bool { return toolMatches(c.Name, tool) && holdsSubset(c.Arguments, e.Args[tool]) }) {
				want, _ := json.Marshal(e.Args[tool])
				var got []string
				for _, c := range s.calls {
					if toolMatches(c.Name, tool) {
						got = append(got, string(c.Arguments))
					}
				}
				bad = append(bad, fmt.Sprintf("no %s call holds %s (its calls: %s)", tool, want, orNone(got)))
			}
		}
		add("args", len(bad) == 0, strings.Join(bad, "; "))
	}
	if e.Completion != nil {
		var bad []string
		seen := map[string]bool{}
		for _, c := range s.calls {
			if c.Effect != "read" && c.Name != loop.QueryToolResult && c.Name != loop.FetchToolResult {
				continue
			}
			if !e.Completion.All && !slices.ContainsFunc(e.Completion.Tools, func(t string) bool { return toolMatches(c.Name, t) }) {
				continue
			}
			seen[c.Name] = true
			if !c.Verdict.Supports() {
				bad = append(bad, fmt.Sprintf("%s (%s) was %s", c.Name, c.ID, orNone([]string{string(c.Verdict)})))
			}
		}
		for _, t := range e.Completion.Tools {
			if !slices.ContainsFunc(s.calls, func(c ToolCall) bool { return toolMatches(c.Name, t) }) {
				bad = append(bad, t+" was not called")
			}
		}
		add("completion", len(bad) == 0, strings.Join(bad, "; "))
	}
	if e.NoWrites {
		var writes []string
		for _, c := range s.calls {
			if c.Effect == "write" || c.Effect == "destructive" {
				writes = append(writes, fmt.Sprintf("%s (%s, %s)", c.Name, c.ID, c.State))
			}
		}
		add("no_writes", len(writes) == 0, "writes: "+strings.Join(writes, ", "))
	}
	if e.MaxToolCalls != nil {
		add("max_tool_calls", len(s.calls) <= *e.MaxToolCalls, fmt.Sprintf("%d tool calls, more than %d; %s", len(s.calls), *e.MaxToolCalls, called))
	}
	if e.MaxUpstreamRequests != nil {
		add("max_upstream_requests", s.reqs <= *e.MaxUpstreamRequests, fmt.Sprintf("%d upstream requests, more than %d", s.reqs, *e.MaxUpstreamRequests))
	}
	if len(e.AnswerContains) > 0 {
		folded := foldSpace(s.answer)
		var missing []string
		for _, want := range e.AnswerContains {
			if !strings.Contains(folded, foldSpace(want)) {
				missing = append(missing, strconv.Quote(want))
			}
		}
		add("answer_contains", len(missing) == 0, "the answer lacks "+strings.Join(missing, ", ")+": "+quoteShort(s.answer))
	}
	if e.AnswerMatches != "" {
		re := e.matches
		if re == nil {
			re = regexp.MustCompile(e.AnswerMatches) // validated when parsed
		}
		add("answer_matches", re.MatchString(s.answer), fmt.Sprintf("the answer does not match %s: %s", e.AnswerMatches, quoteShort(s.answer)))
	}
	if n := e.AnswerNumber; n != nil {
		got, ok := answerNumber(s.answer, n.Near)
		where := "the first number"
		if n.Near != "" {
			where = fmt.Sprintf("the first number after %q", n.Near)
		}
		switch {
		case !ok:
			add("answer_number", false, fmt.Sprintf("%s: none in the answer: %s", where, quoteShort(s.answer)))
		default:
			add("answer_number", math.Abs(got-n.Value) <= n.Tolerance, fmt.Sprintf("%s is %s, want %s ± %s",
				where, fmtNum(got), fmtNum(n.Value), fmtNum(n.Tolerance)))
		}
	}
	if e.MaxTokens != nil {
		add("max_tokens", s.tokens <= *e.MaxTokens, fmt.Sprintf("%d tokens, more than %d", s.tokens, *e.MaxTokens))
	}
	return out
}

// missingTools are the expected names not called (as a subsequence of
// names, unless any order).
func missingTools(names []string, e *ToolsExpect) []string {
	var missing []string
	if e.AnyOrder {
		for _, w := range e.Names {
			if !slices.ContainsFunc(names, func(n string) bool { return toolMatches(n, w) }) {
				missing = append(missing, w)
			}
		}
		return missing
	}
	i := 0
	for k, w := range e.Names {
		for i < len(names) && !toolMatches(names[i], w) {
			i++
		}
		if i == len(names) {
			return append(missing, e.Names[k:]...)
		}
		i++
	}
	return nil
}

// holdsSubset reports whether the JSON object args holds sub: each key
// present, objects compared as subsets, anything else equal.
func holdsSubset(args json.RawMessage, sub Subset) bool {
	var got map[string]any
	if json.Unmarshal(args, &got) != nil {
		return false
	}
	want := map[string]any{}
	for k, v := range sub {
		var x any
		if json.Unmarshal(v, &x) != nil {
			return false
		}
		want[k] = x
	}
	return subsetOf(want, got)
}

func subsetOf(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		return bytes.Equal(a, b)
	}
	gm, ok := got.(map[string]any)
	if !ok {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || !subsetOf(wv, gv) {
			return false
		}
	}
	return true
}

// numberRE is a number as an answer writes it: 2,621 · 131,895.20 · -3.5.
var numberRE = regexp.MustCompile(`-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|-?\d+(?:\.\d+)?`)

// answerNumber is the first number of answer after the words near (case
// and spacing set aside; the first number when near is ""), with
// thousands separators read.
func answerNumber(answer, near string) (float64, bool) {
	text := strings.NewReplacer("**", "", "__", "", "`", "").Replace(answer)
	if near != "" {
		folded, want := foldSpace(text), foldSpace(near)
		i := strings.Index(folded, want)
		if i < 0 {
			return 0, false
		}
		text = folded[i+len(want):]
	}
	m := numberRE.FindString(text)
	if m == "" {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(m, ",", ""), 64)
	return v, err == nil
}

// foldSpace is s in lower case with each run of spaces one space.
func foldSpace(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func orNone(s []string) string {
	if len(s) == 0 || len(s) == 1 && s[0] == "" {
		return "none"
	}
	return strings.Join(s, ", ")
}

// quoteShort quotes s, cut to 200 characters.
func quoteShort(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 200 {
		s = string(r[:199]) + "…"
	}
	return strconv.Quote(s)
}
