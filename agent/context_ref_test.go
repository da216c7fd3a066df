package agent

import (
	"math"
	"slices"
	"time"
)

const refEntryDropped entryState = 9

// refOlderTurns are a thread's older turns as model messages, tool results
// deferred, with what fitting needs of each message.
type refOlderTurns struct {
	msgs     []Message
	parts    []*Part    // a tool message's part; nil for other messages
	turn     []int32    // the turn of each message, from 0
	age      []int32    // a tool message's step age: 0 for the newest older step
	size     []int      // each message's size, tool results whole
	verdicts []*verdict // each compacted result's verdict, once read
	turns    int
}

func refConvertOlder(older []UIMessage) *refOlderTurns {
	n, calls := 0, 0 // messages and tool calls, at most
	for i := range older {
		n++
		for j := range older[i].Parts {
			switch p := &older[i].Parts[j]; {
			case p.Type == "step-start":
				n++
			case p.IsTool():
				n++
				calls++
			}
		}
	}
	conv := converter{out: make([]Message, 0, n), deferred: true,
		parts: make([]*Part, 0, n), calls: make([]ToolCall, 0, calls)}
	o := &refOlderTurns{turn: make([]int32, 0, n)}
	turn := int32(-1)
	for i := range older {
		m := &older[i]
		if m.Role == RoleUser || turn < 0 {
			turn++
		}
		conv.add(m)
		for len(o.turn) < len(conv.out) {
			o.turn = append(o.turn, turn)
		}
	}
	o.msgs, o.parts, o.turns = conv.out, conv.parts, int(turn+1)
	o.age, o.size = make([]int32, len(o.msgs)), make([]int, len(o.msgs))
	o.verdicts = make([]*verdict, len(o.msgs))
	steps := int32(0)
	for i := range o.msgs {
		o.size[i] = messageSize(&o.msgs[i])
		if p := o.parts[i]; p != nil {
			o.size[i] += toolResultLen(p, false)
		} else if len(o.msgs[i].ToolCalls) > 0 {
			steps++
		}
	}
	age := steps
	for i := range o.msgs {
		if len(o.msgs[i].ToolCalls) > 0 {
			age--
		}
		o.age[i] = age
	}
	return o
}

// refFit is the first implementation of fit: every older turn converted,
// then the passes over all of them. fit must decide exactly as it does.
func refFit(in fitInput) (*fitted, error) {
	// The protected tail: from the newest user message on.
	protect := 0
	for i := len(in.thread) - 1; i >= 0; i-- {
		if in.thread[i].Role == RoleUser {
			protect = i
			break
		}
	}
	older := in.thread[:protect]
	o := refConvertOlder(older)
	tail := ModelMessages(in.thread[protect:])
	if in.current != nil {
		tail = append(tail, ModelMessages([]UIMessage{*in.current})...)
	}
	fixed := in.toolChars
	for i := range in.system {
		fixed += messageSize(&in.system[i])
	}
	for i := range tail {
		fixed += messageSize(&tail[i])
	}

	// What each older message becomes: its state, size and new text.
	n := len(o.msgs)
	state := make([]entryState, n)
	size := slices.Clone(o.size)
	texts := make([]string, n)
	total := fixed
	for _, sz := range size {
		total += sz
	}
	out := &fitted{}
	b := in.budget
	compact := func(i int) {
		p := o.parts[i]
		if state[i] != entryWhole || p == nil || p.State != "output-available" {
			return
		}
		v := o.verdicts[i]
		if v == nil {
			v = in.verdict(p)
			o.verdicts[i] = v
		}
		var exp time.Time // zero: expired, or never known
		if v.resultID != "" {
			if t, ok := in.expiry(v.resultID); ok {
				exp = t
			}
		}
		text := v.render(exp)
		if len(text) >= len(p.Output) && !(v.resultID != "" && exp.IsZero()) {
			return
		}
		sz := size[i] - len(p.Output) + len(text)
		total += sz - size[i]
		size[i], texts[i], state[i] = sz, text, entryCompacted
		out.compacted++
		out.compactedChars += len(p.Output)
	}
	// Results older than the window are always sent as verdicts.
	keep := int32(min(b.keepRecent, math.MaxInt32))
	for i := range n {
		if o.parts[i] != nil && (o.age[i] >= keep || refExpiredID(in, o.parts[i])) {
			compact(i)
		}
	}
	// Then the recent ones, oldest first, while the step does not fit.
	for i := 0; i < n && total > b.limit; i++ {
		if o.parts[i] != nil {
			compact(i)
		}
	}
	cut := false
	if total > b.limit && n > 0 {
		total += noticeReserve
		cut = true
	}
	// Older turns' texts, oldest turn first.
	for i := 0; i < n && total > b.limit; {
		t := o.turn[i]
		for ; i < n && o.turn[i] == t; i++ {
			content := o.msgs[i].Content
			if o.parts[i] != nil || len(content) <= shortenTo+len(shortenedMark) {
				continue
			}
			text := cutText(content, shortenTo) + shortenedMark
			sz := size[i] - len(content) + len(text)
			total += sz - size[i]
			size[i], texts[i], state[i] = sz, text, entryShortened
			out.shortened++
		}
	}
	// Then the oldest turns, whole.
	dropped := 0
	for dropped < n && total > b.limit {
		t := o.turn[dropped]
		for ; dropped < n && o.turn[dropped] == t; dropped++ {
			total -= size[dropped]
			switch state[dropped] {
			case entryCompacted:
				out.compacted--
				out.compactedChars -= len(o.parts[dropped].Output)
			case entryShortened:
				out.shortened--
			}
			state[dropped] = refEntryDropped
		}
		out.dropped++
	}
	if total > b.limit {
		need := fixed
		if cut {
			need += noticeReserve
		}
		return nil, &ContextBudgetError{Model: b.model, Need: need, Limit: b.limit,
			NeedTokens: b.tokens(need), MaxTokens: b.maxTokens, ByChars: b.maxChars > 0 && b.limit == b.maxChars}
	}

	// Assemble: the system messages, the notice, the older messages
	// kept, the tail.
	send := make([]Message, 0, len(in.system)+1+n-dropped+len(tail))
	send = append(send, in.system...)
	if cut {
		send = append(send, Message{Role: RoleSystem, Content: notice(out.dropped, o.turns, out.shortened)})
	}
	for i := dropped; i < n; i++ {
		m := o.msgs[i]
		switch {
		case texts[i] != "":
			m.Content = texts[i]
		case o.parts[i] != nil:
			m.Content = toolResultText(*o.parts[i], false)
		}
		send = append(send, m)
	}
	send = append(send, tail...)
	// The report lists the newest compacted calls.
	for i := n - 1; i >= dropped && len(out.compactedCalls) < maxReportedCalls; i-- {
		if state[i] == entryCompacted && o.parts[i].ToolCallID != "" {
			out.compactedCalls = append(out.compactedCalls, o.parts[i].ToolCallID)
		}
	}
	slices.Reverse(out.compactedCalls)
	out.msgs = send
	out.chars = in.toolChars
	for i := range send {
		out.chars += messageSize(&send[i])
	}
	return out, nil
}

// refExpiredID reports a finished result whose stored result id has
// expired.
func refExpiredID(in fitInput, p *Part) bool {
	if p.State != "output-available" {
		return false
	}
	v := in.verdict(p)
	if v.resultID == "" {
		return false
	}
	_, ok := in.expiry(v.resultID)
	return !ok
}
