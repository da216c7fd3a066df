package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/agent/claims"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/stream"
)

// ClaimCheckName names the data part a turn streams after a final answer
// whose claims its calls do not support: "data-claim-check".
const ClaimCheckName = "claim-check"

// Claim check statuses.
const (
	// ClaimUnsupported: the answer above states a count, a total or "all"
	// that its calls do not support; nothing follows it.
	ClaimUnsupported = "unsupported"
	// ClaimRevising: the same, and a correction follows (answer_check
	// revise): the next text of the turn is the revision.
	ClaimRevising = "revising"
)

// ClaimCheck is the data of a data-claim-check part.
type ClaimCheck struct {
	Mode   AnswerCheck `json:"mode"`   // warn or revise
	Status string      `json:"status"` // ClaimUnsupported or ClaimRevising
	// Revision says the answer checked is itself a correction.
	Revision bool             `json:"revision,omitempty"`
	Findings []claims.Finding `json:"findings"`
}

// turnCalls are the calls of msg the claim check reads: the reads of
// bound tools and the retrieval tools, with their results (a call denied
// or waiting for approval holds none and is left out).
func turnCalls(msg UIMessage) []claims.Call {
	var out []claims.Call
	for _, p := range msg.Parts {
		if !p.IsTool() {
			continue
		}
		name := p.Name()
		retrieval := name == loop.QueryToolResult || name == loop.FetchToolResult
		if !retrieval && p.Effect != "read" {
			continue // a write, a meta tool or an unknown name: no rows claimed
		}
		switch p.State {
		case "output-available":
			out = append(out, claims.ReadCall(p.ToolCallID, name, p.Output, ""))
		case "output-error":
			out = append(out, claims.ReadCall(p.ToolCallID, name, nil, p.ErrorText))
		}
	}
	return out
}

// checkAnswer checks the turn's final answer under the agent's
// answer_check. It reports whether the turn takes one more step: under
// revise, the first unsupported answer of a turn is followed by a step
// told why (st.revision), whose text is the correction.
func (r *Runner) checkAnswer(st *turnState, def Definition, step int) (again bool, err error) {
	mode := def.AnswerCheck
	if mode == "" {
		mode = AnswerCheckWarn
	}
	if mode == AnswerCheckOff || st.waiting || strings.TrimSpace(st.answer) == "" {
		return false, nil
	}
	st.mu.Lock()
	calls := turnCalls(st.msg)
	st.mu.Unlock()
	findings := claims.Check(st.answer, calls)
	if len(findings) == 0 {
		return false, nil
	}
	cc := ClaimCheck{Mode: mode, Status: ClaimUnsupported, Revision: st.revised, Findings: findings}
	if mode == AnswerCheckRevise && !st.revised {
		cc.Status = ClaimRevising
		var why strings.Builder
		why.WriteString(prompts.Text("claimcheck"))
		for _, f := range findings {
			why.WriteString("\n- " + f.Reason)
		}
		st.revision, st.revised = why.String(), true
	}
	data, err := json.Marshal(cc)
	if err != nil {
		return false, err
	}
	id := fmt.Sprintf("claim-check-%d", step)
	st.mu.Lock()
	st.msg.Parts = append(st.msg.Parts, Part{Type: "data-" + ClaimCheckName, ID: id, Data: data})
	st.mu.Unlock()
	r.log.Info("unsupported claim in an answer", "thread", st.Thread.Key, "mode", mode, "claim", findings[0].Claim,
		"tool", findings[0].Tool, "verdict", findings[0].Verdict)
	if err := st.Emit(stream.Data{Name: ClaimCheckName, ID: id, Data: json.RawMessage(data)}); err != nil {
		return false, err
	}
	return cc.Status == ClaimRevising, nil
}

// ClaimCheckOf reads a data-claim-check chunk, as streamed or parsed back
// from the wire; ok is false for any other chunk.
func ClaimCheckOf(d stream.Data) (ClaimCheck, bool) {
	if d.Name != ClaimCheckName {
		return ClaimCheck{}, false
	}
	if cc, ok := d.Data.(ClaimCheck); ok {
		return cc, true
	}
	b, err := json.Marshal(d.Data)
	if err != nil {
		return ClaimCheck{}, false
	}
	var cc ClaimCheck
	if json.Unmarshal(b, &cc) != nil {
		return ClaimCheck{}, false
	}
	return cc, true
}

// Lines words a claim check for a person: one line per finding, then
// what follows.
func (cc ClaimCheck) Lines() []string {
	var out []string
	for _, f := range cc.Findings {
		out = append(out, fmt.Sprintf("⚠ unsupported claim %q: %s (%s) was %s, not complete", f.Claim, f.Tool, f.CallID, strings.ReplaceAll(string(f.Verdict), "_", " ")))
	}
	if cc.Status == ClaimRevising {
		out = append(out, "  a correction follows")
	}
	return out
}

// CheckAnswer checks an assistant message: its last text against its
// calls (see turnCalls). A replay or an evaluation checks a thread with
// it, whatever the agent's answer_check.
func CheckAnswer(m UIMessage) []claims.Finding {
	return CheckAnswerText(m.Answer(), m)
}

// Answer is the last text part of m, an assistant message: its final
// answer ("" when it has none).
func (m UIMessage) Answer() string {
	text := ""
	for _, p := range m.Parts {
		if p.Type == "text" {
			text = p.Text
		}
	}
	return text
}

// CheckAnswerText checks text against the calls of m, an assistant
// message: what an evaluation does with a recorded answer that the
// replay did not give (its calls' verdicts changed), to say whether it
// would have claimed what this run's calls do not support.
func CheckAnswerText(text string, m UIMessage) []claims.Finding {
	if strings.TrimSpace(text) == "" {
		return nil
	}
	return claims.Check(text, turnCalls(m))
}

// KindVerdictChanged names a recorded call whose live verdict differs.
const KindVerdictChanged = "verdict_changed"

// VerdictChange is a recorded call whose live verdict is not the
// recorded one.
type VerdictChange struct {
	Tool     string         `json:"tool"`
	CallID   string         `json:"callId"` // the live call
	Recorded claims.Verdict `json:"recorded"`
	Live     claims.Verdict `json:"live"`
}

// VerdictChanges compares the calls of turn i of t, as recorded, with
// the live calls of m, the assistant message that played it, call by
// call in order (a call without a recorded verdict is not compared).
func (t *Transcript) VerdictChanges(i int, m UIMessage) []VerdictChange {
	recorded := t.turnCalls(i)
	var out []VerdictChange
	k := -1
	for _, p := range m.Parts {
		if !p.IsTool() {
			continue
		}
		if k++; k >= len(recorded) || recorded[k].Verdict == "" || recorded[k].Name != p.Name() {
			continue
		}
		var live claims.Call
		switch p.State {
		case "output-available":
			live = claims.ReadCall(p.ToolCallID, p.Name(), p.Output, "")
		case "output-error":
			live = claims.ReadCall(p.ToolCallID, p.Name(), nil, p.ErrorText)
		default:
			live = claims.ReadCall(p.ToolCallID, p.Name(), nil, "the call did not run")
		}
		if live.Verdict != recorded[k].Verdict {
			out = append(out, VerdictChange{Tool: p.Name(), CallID: p.ToolCallID, Recorded: recorded[k].Verdict, Live: live.Verdict})
		}
	}
	return out
}

// turnCalls are the recorded calls of turn i, in order.
func (t *Transcript) turnCalls(i int) []TranscriptCall {
	if i < 0 || i >= len(t.Turns) {
		return nil
	}
	var out []TranscriptCall
	for _, s := range t.Turns[i].Steps {
		out = append(out, s.ToolCalls...)
	}
	return out
}
