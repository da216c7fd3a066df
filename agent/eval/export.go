package eval

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/claims"
	"github.com/trawl-dev/trawl/loop"
)

// NoAnswerText is the recorded answer of an exported turn that ended
// without one (it waited for an approval, or failed).
const NoAnswerText = "(the recorded turn ended without an answer)"

// CaseFromThread makes a case of a stored thread: its user messages, and
// its answers and tool calls, with each call's verdict, as the case's
// transcript (the baseline a replay of the case is compared with). A
// stored result id a later call names ({"resultId": …}) is written as
// {{lastResultId}}, so the replay names the one its own run handed out.
// A step that answered without calls and was followed by another (a
// correction under answer_check revise) is left out: the correction is
// the answer.
func CaseFromThread(id, agentID string, msgs []agent.UIMessage) (*Case, error) {
	tr := &agent.Transcript{Name: id}
	resultIDs := map[string]bool{}
	for i := 0; i < len(msgs); i++ {
		if msgs[i].Role != agent.RoleUser {
			continue
		}
		turn := agent.TranscriptTurn{User: msgs[i].Text()}
		if strings.TrimSpace(turn.User) == "" {
			continue
		}
		if i+1 < len(msgs) && msgs[i+1].Role == agent.RoleAssistant {
			turn.Steps = exportSteps(msgs[i+1], resultIDs)
			i++
		}
		if n := len(turn.Steps); n == 0 || len(turn.Steps[n-1].ToolCalls) > 0 {
			turn.Steps = append(turn.Steps, agent.TranscriptStep{Text: NoAnswerText})
		}
		tr.Turns = append(tr.Turns, turn)
	}
	if len(tr.Turns) == 0 {
		return nil, fmt.Errorf("chat %s holds no user message", id)
	}
	// Through the parser: what is exported is what a dataset reads back.
	b, err := json.Marshal(tr)
	if err != nil {
		return nil, err
	}
	if tr, err = agent.ParseTranscript(b); err != nil {
		return nil, fmt.Errorf("chat %s: %w", id, err)
	}
	return &Case{ID: caseID(id), Agent: agentID, Transcript: tr, Tags: []string{"exported"}}, nil
}

var notID = regexp.MustCompile(`[^A-Za-z0-9._:/-]+`)

// caseID makes a chat id a case id.
func caseID(chat string) string {
	id := strings.Trim(notID.ReplaceAllString(chat, "-"), "-")
	if id == "" || !idPattern.MatchString(id) {
		id = "chat-" + id
	}
	if len(id) > 128 {
		id = id[:128]
	}
	return id
}

// exportSteps splits an assistant message into its steps.
func exportSteps(m agent.UIMessage, resultIDs map[string]bool) []agent.TranscriptStep {
	var steps []agent.TranscriptStep
	var cur agent.TranscriptStep
	flush := func() {
		if cur.Text == "" && len(cur.ToolCalls) == 0 {
			cur = agent.TranscriptStep{}
			return
		}
		if n := len(steps); n > 0 && len(steps[n-1].ToolCalls) == 0 {
			steps = steps[:n-1] // an answer a later step superseded
		}
		steps = append(steps, cur)
		cur = agent.TranscriptStep{}
	}
	for _, p := range m.Parts {
		switch {
		case p.Type == "step-start":
			flush()
		case p.Type == "text":
			if cur.Text != "" {
				cur.Text += "\n\n"
			}
			cur.Text += p.Text
		case p.Type == "reasoning":
			cur.Reasoning += p.Text
		case p.IsTool():
			call := agent.TranscriptCall{Name: p.Name(), Arguments: withResultRef(p.Input, resultIDs)}
			switch p.State {
			case "output-available":
				call.Verdict = claims.ReadCall(p.ToolCallID, call.Name, p.Output, "").Verdict
				if env, _ := loop.ReadEnvelope(p.Output); env.ResultID != "" {
					resultIDs[env.ResultID] = true
				}
			case "output-error":
				call.Verdict = claims.Failed
			}
			cur.ToolCalls = append(cur.ToolCalls, call)
		}
	}
	flush()
	return steps
}

// withResultRef writes the stored result ids of input's top-level
// string values as agent.LastResultIDRef.
func withResultRef(input json.RawMessage, ids map[string]bool) json.RawMessage {
	var args map[string]any
	if len(input) == 0 || json.Unmarshal(input, &args) != nil {
		return input
	}
	changed := false
	for k, v := range args {
		if s, ok := v.(string); ok && ids[s] {
			args[k], changed = agent.LastResultIDRef, true
		}
	}
	if !changed {
		return input
	}
	b, err := json.Marshal(args)
	if err != nil {
		return input
	}
	return b
}
