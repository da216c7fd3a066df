package agent

import (
	"encoding/json"
	"errors"
	"math"
	"slices"
	"time"
)

// The agent's context budget governs the size guard.
//
// A tool result is cut to what is left of the agent's context for the
// step, not only to the deployment's view budget: after the model's call,
// the room is the step's budget less what the step must send whatever
// happens (the system messages, the tools, the newest message, this turn
// so far), what the step's answer adds (its text and tool calls, one tool
// message per call, room for the notice that older turns were shortened)
// and what the older turns take with their results as verdicts — but
// those never more than half of what is free, so a long conversation
// cannot starve the step at hand. The room is shared evenly by the
// step's calls. A result over its share is cut at an item boundary and
// kept whole under its _resultId, and the next step offers only the
// retrieval tools; older turns make room by the usual rules (fit).
//
// Should the next step still not fit — several results, a share below
// the guard's least budget — this turn's own tool results are sent as
// their verdicts, oldest first, until it does (compactCurrent): a step
// fails for size only when the system prompt, the tools, the newest
// message and this turn's calls, their results cut to verdicts, cannot
// fit.

// viewRoom is each of calls' share of what is left of the budget b after
// a step that sent f and answered text and calls; 0 when the budget sets
// no bound. It is at least 1 (the guard then cuts to its least budget).
func viewRoom(f *fitted, b budget, text string, calls []ToolCall) int {
	if b.limit == math.MaxInt || len(calls) == 0 {
		return 0
	}
	used := f.fixed + noticeReserve + messageOverhead + len(text)
	for _, c := range calls {
		// The call in the assistant message, and its tool message.
		used += 2*messageOverhead + 2*len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	free := b.limit - used
	free -= min(f.history, max(free, 0)/2)
	return max(free/len(calls), 1)
}

// capView is the view budget under room (0: no room bound) of a
// configured one.
func capView(configured, room int) int {
	if room <= 0 {
		return configured
	}
	return min(configured, room)
}

// compactCurrent is cur with its tool results sent as their verdicts,
// oldest first, until at least need characters are saved (or none is
// left to compact); it returns the new message, the characters saved and
// the calls compacted. cur itself is not changed.
func compactCurrent(cur *UIMessage, need int, verdictOf func(*Part) *verdict, expiry func(string) (time.Time, bool)) (*UIMessage, int, []string) {
	out := *cur
	out.Parts = append([]Part(nil), cur.Parts...)
	saved := 0
	var calls []string
	for i := range out.Parts {
		if saved >= need {
			break
		}
		p := &out.Parts[i]
		if !p.IsTool() || p.State != "output-available" {
			continue
		}
		v := verdictOf(p)
		var exp time.Time
		if v.resultID != "" {
			exp, _ = expiry(v.resultID)
		}
		text := v.render(exp)
		if len(text) >= len(p.Output) {
			continue
		}
		saved += len(p.Output) - len(text)
		p.Output = json.RawMessage(text)
		calls = append(calls, p.ToolCallID)
	}
	return &out, saved, calls
}

// fitCompacting is fit, and when the step does not fit only because of
// this turn's own tool results, fit again with them sent as verdicts.
func fitCompacting(in fitInput) (*fitted, error) {
	f, err := fit(in)
	var be *ContextBudgetError
	if !errors.As(err, &be) || in.current == nil {
		return f, err
	}
	orig := in.current
	var calls []string
	// What the first fit missed by, then, if that was not enough, every
	// result.
	for _, need := range []int{be.Need - be.Limit, math.MaxInt} {
		cur, saved, compacted := compactCurrent(orig, need, in.verdict, in.expiry)
		if saved == 0 {
			return f, err
		}
		in.current, calls = cur, compacted
		if f, err = fit(in); err == nil {
			break
		}
		if errors.As(err, &be) {
			be.Compacted = true
		}
	}
	if err != nil {
		return f, err
	}
	f.compacted += len(calls)
	for _, p := range orig.Parts {
		if p.IsTool() && slices.Contains(calls, p.ToolCallID) {
			f.compactedChars += len(p.Output)
		}
	}
	for _, id := range calls {
		if len(f.compactedCalls) < maxReportedCalls {
			f.compactedCalls = append(f.compactedCalls, id)
		}
	}
	return f, nil
}
