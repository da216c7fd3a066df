package agent

import (
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/stream"
)

// Fitting a step into the agent's context budget.
//
// The system prompt, the guidance, the tool definitions, the newest user
// message and the current turn's steps are always sent whole. Of the
// older turns, tool results older than the keep-recent window are sent
// as their verdicts (see compact.go); then, while the step does not fit:
// the recent results are compacted too, oldest first; the older turns'
// long texts are shortened, oldest turn first; the oldest turns are left
// out whole (a turn's tool calls and results go together, so the OpenAI
// pairing of calls and results stays valid). When any text was shortened
// or left out, a system message says so. If even the whole minimum does
// not fit, the step fails before any request.
//
// Every decision is one pass over the thread, and what a result
// compacts to is read once per result and kept (verdictCache), so a step
// costs the same with a thousand older messages as with ten, give or take
// the pass itself.

// Token estimates.
const (
	// DefaultCharsPerToken is the estimate before the model server has
	// reported any usage: JSON and code run at about 3 characters (UTF-8
	// bytes) per token, English prose at about 4, other scripts at 2–3
	// bytes, so 3 errs on the side of sending less.
	DefaultCharsPerToken = 3.0
	// calibratedMargin is kept below a calibrated estimate, since the
	// next step's text need not tokenize like the previous one's.
	calibratedMargin = 0.95
	// messageOverhead counts a message's framing (role, separators) in
	// characters.
	messageOverhead = 12
	// shortenTo is how long an older text stays when texts are shortened.
	shortenTo = 400
	// noticeReserve is kept for the system message that says the
	// conversation was shortened.
	noticeReserve = 400
	// maxReportedCalls bounds the call ids a context report lists.
	maxReportedCalls = 50
)

// shortenedMark ends a text that was shortened.
const shortenedMark = " … [shortened]"

// ContextBudgetError is a step that cannot fit its budget even with every
// older turn left out: the system prompt, the tool definitions, the
// newest user message and the current turn's steps alone are too large.
// No request was sent.
type ContextBudgetError struct {
	Model string
	// Need is the least the step must send and Limit its budget, in
	// characters; the token figures are the same by the estimate used
	// (zero when the budget is in characters only).
	Need, Limit           int
	NeedTokens, MaxTokens int
}

func (e *ContextBudgetError) Error() string {
	if e.MaxTokens > 0 {
		return fmt.Sprintf("the conversation does not fit the model's context: the system prompt, the tools, the newest message and this turn's tool results alone need about %d tokens (%d characters), and the budget for %s is %d tokens; start a new chat, ask for less at once, or raise the agent's context.max_tokens",
			e.NeedTokens, e.Need, e.Model, e.MaxTokens)
	}
	return fmt.Sprintf("the conversation does not fit the model's context: the system prompt, the tools, the newest message and this turn's tool results alone need %d characters, and the agent's context.max_chars is %d; start a new chat, ask for less at once, or raise context.max_chars",
		e.Need, e.Limit)
}

// budget is one step's budget, resolved.
type budget struct {
	model      string
	maxTokens  int // 0: none
	maxChars   int // 0: none
	keepRecent int
	cpt        float64 // characters per token
	calibrated bool
	limit      int // characters: what maxChars and maxTokens allow
}

// resolveBudget derives the budget of def's next step on model, with the
// characters-per-token estimate cpt (0: the default).
func resolveBudget(def Definition, model string, cpt float64) budget {
	b := budget{model: model, keepRecent: DefaultKeepRecentSteps, cpt: DefaultCharsPerToken}
	if cpt > 0 {
		b.cpt, b.calibrated = cpt, true
	}
	if c := def.Context; c != nil {
		b.maxTokens, b.maxChars = c.MaxTokens, c.MaxChars
		if c.KeepRecentSteps != nil {
			b.keepRecent = *c.KeepRecentSteps
		}
	}
	if b.maxTokens == 0 && b.maxChars == 0 {
		w, _ := ContextWindow(model)
		b.maxTokens = w.Prompt()
	}
	b.limit = math.MaxInt
	if b.maxChars > 0 {
		b.limit = b.maxChars
	}
	if b.maxTokens > 0 {
		per := b.cpt
		if b.calibrated {
			per *= calibratedMargin
		}
		b.limit = min(b.limit, int(float64(b.maxTokens)*per))
	}
	return b
}

// tokens is the estimate of chars in tokens.
func (b budget) tokens(chars int) int { return int(math.Ceil(float64(chars) / b.cpt)) }

// fitInput is what one step's fitting reads.
type fitInput struct {
	system    []Message   // the agent's prompt and the guidance: always whole
	toolChars int         // the size of the tool definitions
	thread    []UIMessage // the stored thread, the newest user message last but for this turn's
	current   *UIMessage  // this turn's assistant message so far; nil when empty
	budget    budget
	// expiry is when a stored result id expires; false when it has
	// expired or the thread does not know it.
	expiry  func(id string) (time.Time, bool)
	verdict func(p *Part) *verdict
	// memo keeps the older turns' conversion between the steps of one
	// turn, whose older turns do not change. Nil: none.
	memo *olderMemo
}

// olderMemo holds the conversion of a thread's older turns between the
// steps of one turn; fit never changes it.
type olderMemo struct {
	first *UIMessage // the older turns it was built from: the first and their count
	n     int
	conv  *olderTurns
}

// olderTurns are a thread's older turns as model messages, tool results
// deferred, with what fitting needs of each message.
type olderTurns struct {
	msgs     []Message
	parts    []*Part    // a tool message's part; nil for other messages
	turn     []int32    // the turn of each message, from 0
	age      []int32    // a tool message's step age: 0 for the newest older step
	size     []int      // each message's size, tool results whole
	verdicts []*verdict // each compacted result's verdict, once read
	turns    int
}

func convertOlder(older []UIMessage) *olderTurns {
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
	o := &olderTurns{turn: make([]int32, 0, n)}
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
			o.size[i] += toolResultLen(p)
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

// fitted is what one step sends and what fitting did.
type fitted struct {
	msgs           []Message
	chars          int
	compacted      int
	compactedChars int
	compactedCalls []string
	shortened      int
	dropped        int
}

type entryState uint8

const (
	entryWhole entryState = iota
	entryCompacted
	entryShortened
	entryDropped
)

func messageSize(m *Message) int {
	n := messageOverhead + len(m.Content) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += messageOverhead + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}

// fit decides what one step sends.
func fit(in fitInput) (*fitted, error) {
	// The protected tail: from the newest user message on.
	protect := 0
	for i := len(in.thread) - 1; i >= 0; i-- {
		if in.thread[i].Role == RoleUser {
			protect = i
			break
		}
	}
	older := in.thread[:protect]
	var o *olderTurns
	if m := in.memo; m != nil && m.conv != nil && m.n == len(older) && (m.n == 0 || m.first == &older[0]) {
		o = m.conv
	} else {
		o = convertOlder(older)
		if m != nil {
			m.conv, m.n, m.first = o, len(older), nil
			if len(older) > 0 {
				m.first = &older[0]
			}
		}
	}
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
		if len(text) >= len(p.Output) {
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
		if o.parts[i] != nil && o.age[i] >= keep {
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
			state[dropped] = entryDropped
		}
		out.dropped++
	}
	if total > b.limit {
		need := fixed
		if cut {
			need += noticeReserve
		}
		err := &ContextBudgetError{Model: b.model, Need: need, Limit: b.limit}
		if b.maxTokens > 0 {
			err.NeedTokens, err.MaxTokens = b.tokens(need), b.maxTokens
		}
		return nil, err
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
			m.Content = toolResultText(*o.parts[i])
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

// notice is the system message that says the conversation was shortened.
func notice(dropped, turns, shortened int) string {
	s := "Earlier parts of this conversation were shortened to fit the model's context:"
	if dropped > 0 {
		s += fmt.Sprintf(" the %d oldest of %d earlier turns are left out;", dropped, turns)
	}
	if shortened > 0 {
		s += fmt.Sprintf(" %d older messages are cut short (marked %q);", shortened, shortenedMark)
	}
	return s + " older tool results appear as their verdicts. Ask the user, or call the tools again, for anything you no longer see."
}

// cutText is the first n bytes of s, cut at a character boundary.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// report is the step's data-context chunk.
func (f *fitted) report(step int, b budget, reported int) stream.ContextReport {
	r := stream.ContextReport{
		Step: step, Model: b.model, Chars: f.chars, Tokens: b.tokens(f.chars),
		CharsPerToken: math.Round(b.cpt*100) / 100, Calibrated: b.calibrated,
		BudgetTokens: b.maxTokens, BudgetChars: b.limit, Messages: len(f.msgs),
		Compacted: f.compacted, CompactedChars: f.compactedChars, CompactedCalls: f.compactedCalls,
		Shortened: f.shortened, DroppedTurns: f.dropped, ReportedPromptTokens: reported,
	}
	if r.BudgetChars == math.MaxInt {
		r.BudgetChars = 0
	}
	return r
}

// verdictCacheSize bounds the verdicts a runner keeps per generation.
const verdictCacheSize = 8192

// toolOverhead counts a tool definition's framing in characters.
const toolOverhead = 48

// fitStep builds the step's messages within the agent's budget on model.
func (r *Runner) fitStep(st *turnState, def Definition, bound []boundTool, specs []ToolSpec, model string) (*fitted, budget, error) {
	toolChars := 0
	for _, t := range specs {
		toolChars += toolOverhead + len(t.Name) + len(t.Description) + len(t.Parameters)
	}
	now := r.opt.Now()
	st.mu.Lock()
	var current *UIMessage
	if len(st.msg.Parts) > 0 {
		c := st.msg
		c.Parts = append([]Part(nil), st.msg.Parts...)
		current = &c
	}
	live := make(map[string]time.Time, len(st.Thread.Results))
	for _, kr := range st.Thread.Results {
		if kr.Expires.After(now) {
			live[kr.ID] = kr.Expires
		}
	}
	thread := st.Thread.Msgs
	st.mu.Unlock()

	cpt := st.cpt
	if cpt == 0 {
		if v, ok := r.calib.Load(model); ok {
			cpt = v.(float64)
		}
	}
	b := resolveBudget(def, model, cpt)
	f, err := fit(fitInput{
		system: systemMessages(def, bound), toolChars: toolChars,
		thread: thread, current: current, budget: b,
		expiry: func(id string) (time.Time, bool) {
			t, ok := live[id]
			return t, ok
		},
		verdict: r.verdicts.get,
		memo:    &st.older,
	})
	return f, b, err
}

// calibrate learns the characters per token of model from the prompt
// tokens the server reported for a step of chars characters.
func (r *Runner) calibrate(st *turnState, b budget, chars int, u Usage) {
	if u.PromptTokens <= 0 || chars <= 0 {
		return
	}
	cpt := min(max(float64(chars)/float64(u.PromptTokens), 1), 8)
	st.cpt, st.reported = cpt, u.PromptTokens
	r.calib.Store(b.model, cpt)
	if b.maxTokens > 0 && u.PromptTokens > b.maxTokens {
		r.log.Warn("a step's prompt was over the context budget by the server's count; the estimate is calibrated from now on",
			"model", b.model, "prompt_tokens", u.PromptTokens, "budget_tokens", b.maxTokens, "chars", chars)
	}
}
