package agent

import (
	"fmt"
	"hash/maphash"
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
// older turns, tool results older than the keep-recent window (or whose
// stored result has expired) are sent as their verdicts (see compact.go);
// then, while the step does not fit: the recent results are compacted
// too, oldest first; the older turns' long texts are shortened, oldest
// turn first; the oldest turns are left out whole (a turn's tool calls
// and results go together, so the OpenAI pairing of calls and results
// stays valid). When any text was shortened or left out, a system
// message says so. If even the whole minimum does not fit, the step
// fails before any request.
//
// A step's cost follows what it sends, not what the thread holds: the
// older turns are converted newest first and only while they may still
// be sent (olderTurns), once per turn; a result's verdict is read once
// and kept (verdictCache); each decision is one pass.

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
	// ByChars: the agent's context.max_chars is the bound that binds.
	ByChars bool
	// Compacted: this turn's tool results were already sent as their
	// verdicts (see viewbudget.go).
	Compacted bool
}

func (e *ContextBudgetError) Error() string {
	what := "this turn's tool results"
	if e.Compacted {
		what = "this turn's calls (their results cut to their verdicts)"
	}
	if !e.ByChars {
		return fmt.Sprintf("the conversation does not fit the model's context: the system prompt, the tools, the newest message and %s alone need about %d tokens (%d characters), and the budget for %s is %d tokens; start a new chat, ask for less at once, or raise the agent's context.max_tokens",
			what, e.NeedTokens, e.Need, e.Model, e.MaxTokens)
	}
	return fmt.Sprintf("the conversation does not fit the model's context: the system prompt, the tools, the newest message and %s alone need %d characters, and the agent's context.max_chars is %d; start a new chat, ask for less at once, or raise context.max_chars",
		what, e.Need, e.Limit)
}

// budget is one step's budget, resolved.
type budget struct {
	model      string
	maxTokens  int // always set: the agent's, or the model's window
	maxChars   int // 0: none
	keepRecent int
	cpt        float64 // characters per token
	calibrated bool
	// counted: cpt is what the model's tokenizer counted of this step as
	// fitted first (fitStep).
	counted bool
	limit   int // characters: what maxChars and maxTokens allow
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
	if b.maxTokens == 0 {
		// The model's window bounds a step even under a character budget.
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
	expiry func(id string) (time.Time, bool)
	// live, when set, is every stored result expiry answers for, with
	// its expiry: a step whose live results are those of the turn's
	// previous step may take that step's decisions (reuse). Nil: never.
	live    map[string]time.Time
	verdict func(p *Part) *verdict
	// memo keeps the older turns' conversion between the steps of one
	// turn, whose older turns do not change. Nil: none.
	memo *olderMemo
	// compact sends tool results' rows in the compact layout (the
	// agent's rows: compact).
	compact bool
	// kept holds the converted turns of the threads' previous turns
	// (olderkept.go), by thread key (threadKey); nil: none are kept.
	kept      *olderKept
	threadKey string
}

// olderMemo holds the conversion of a thread's older turns between the
// steps of one turn; a step converts only the turns it may send (newest
// first), and fit never changes a converted turn.
type olderMemo struct {
	first *UIMessage // the older messages it was built from: the first and their count
	n     int
	conv  *olderTurns
}

// olderTurns are a thread's older turns as model messages, converted
// lazily from the newest, tool results deferred.
type olderTurns struct {
	src    []UIMessage
	starts []int        // the first message of each turn, in src
	turns  []*olderTurn // by turn; nil until converted
	left   int          // turns not converted yet: turns[:left]
	steps  int          // tool-calling steps of the converted turns
	gen    uint32       // counts fit calls, for olderTurn.compGen
	// compact: tool results' rows in the compact layout (rows: compact).
	compact bool
	// model is the model the turns were fitted (and their messages'
	// tokens counted) for.
	model string
	// last is the turn's previous step's fit when it sent every older
	// turn at its least, for the next step to reuse.
	last *leastFit
	// With keys, each converted turn is keyed by turnKey under seed, and
	// a turn of kept (the thread's previous turn's) with the same key is
	// taken rather than converted.
	keys bool
	seed maphash.Seed
	kept *keptTurns
}

// olderTurn is one converted turn with what fitting needs of each
// message (e, by the index in msgs).
type olderTurn struct {
	msgs []Message
	e    []olderEntry
	// key is the turn's turnKey, when keyed (olderkept.go).
	key   uint64
	keyed bool
	// least is the turn's least size (texts shortened, results
	// compacted) as the last bound that walked it found.
	least int
}

// olderEntry is what fitting knows of one message of an older turn.
type olderEntry struct {
	part *Part // a tool message's part; nil for other messages
	// at is where part is in the turn: its message, then its index
	// among the message's parts (so that a kept turn finds it again).
	at      [2]int32
	verdict *verdict // a tool result's verdict, once read
	size    int      // the message's size, a tool result whole
	age     int32    // a tool message's step age: 0 for the newest older step
	// What a tool result compacts to ("" when it stays whole), for the
	// expiry of its stored result it was rendered with (unix
	// nanoseconds; 0: expired, or never known), and the fit call that
	// last checked that expiry.
	compGen uint32
	compExp int64
	comp    string
	// whole is a tool result's text sent whole, once built; tokens the
	// message's tokens as last counted, plus one (0: never), with the
	// text it was counted with (counted), so that a turn's steps count
	// each older message once (fitted.countTokens).
	whole   string
	tokens  int32
	counted string
}

func newOlderTurns(older []UIMessage, compact bool, model string) *olderTurns {
	o := &olderTurns{src: older, compact: compact, model: model}
	// A turn is most often a question and its answer: room for that many
	// starts, so that a long thread's are not grown (nor read twice).
	o.starts = make([]int, 0, len(older)/2+1)
	for i := range older {
		if i == 0 || older[i].Role == RoleUser {
			o.starts = append(o.starts, i)
		}
	}
	o.turns = make([]*olderTurn, len(o.starts))
	o.left = len(o.turns)
	return o
}

// turnChunk is how many turns are converted at once, sharing their
// allocations.
const turnChunk = 16

// turn returns turn t, converting it and every newer one if needed, in
// chunks of turns. The turns not yet converted are always the oldest.
func (o *olderTurns) turn(t int) *olderTurn {
	for o.left > t {
		o.convert(max(0, o.left-turnChunk), o.left-1)
		o.left = max(0, o.left-turnChunk)
	}
	return o.turns[t]
}

// convert converts turns lo..hi, all newer ones being converted already:
// those kept from the thread's previous turn are taken (taken), the
// others converted in runs; then every message's step age is set,
// newest first.
func (o *olderTurns) convert(lo, hi int) {
	var keys [turnChunk]uint64
	var keyed [turnChunk]bool
	for k := lo; k <= hi; k++ {
		if o.keys {
			keys[k-lo], keyed[k-lo] = turnKey(o.seed, o.src[o.starts[k]:o.end(k)])
		}
		if keyed[k-lo] && o.kept != nil {
			if ot := o.kept.find(k, keys[k-lo]); ot != nil {
				o.taken(k, ot)
			}
		}
	}
	for a := lo; a <= hi; {
		if o.turns[a] != nil {
			a++
			continue
		}
		b := a
		for b+1 <= hi && o.turns[b+1] == nil {
			b++
		}
		o.convertRun(a, b)
		for k := a; k <= b; k++ {
			o.turns[k].key, o.turns[k].keyed = keys[k-lo], keyed[k-lo]
		}
		a = b + 1
	}
	for k := hi; k >= lo; k-- {
		ot := o.turns[k]
		for i := len(ot.msgs) - 1; i >= 0; i-- {
			ot.e[i].age = int32(o.steps)
			if len(ot.msgs[i].ToolCalls) > 0 {
				o.steps++ // its results, after it, have its age
			}
		}
	}
}

// end is the end of turn k in src.
func (o *olderTurns) end(k int) int {
	if k+1 < len(o.starts) {
		return o.starts[k+1]
	}
	return len(o.src)
}

// taken makes ot, kept from the thread's previous turn with the same
// key as turn k, turn k: its parts are k's, and what their outputs give
// (sizes, verdicts, texts) is read from them again.
func (o *olderTurns) taken(k int, ot *olderTurn) {
	src := o.src[o.starts[k]:o.end(k)]
	for i := range ot.e {
		e := &ot.e[i]
		e.size = messageSize(&ot.msgs[i])
		if ot.msgs[i].Role != RoleTool {
			continue
		}
		e.part = &src[e.at[0]].Parts[e.at[1]]
		e.size += toolResultLen(e.part, o.compact)
		if e.verdict != nil && !e.verdict.sameOutput(e.part) {
			e.verdict = nil // read again (fitter.compacted)
		}
	}
	o.turns[k] = ot
}

// convertRun converts turns lo..hi, which share their allocations.
func (o *olderTurns) convertRun(lo, hi int) {
	from, to := o.starts[lo], o.end(hi)
	n, calls := 0, 0 // messages and tool calls, at most
	for i := from; i < to; i++ {
		n++
		for j := range o.src[i].Parts {
			switch p := &o.src[i].Parts[j]; {
			case p.Type == "step-start":
				n++
			case p.IsTool():
				n++
				calls++
			}
		}
	}
	conv := converter{out: make([]Message, 0, n), deferred: true, compact: o.compact,
		parts: make([]*Part, 0, n), calls: make([]ToolCall, 0, calls)}
	bounds := make([]int, 0, hi-lo+2)
	for k := lo; k <= hi; k++ {
		bounds = append(bounds, len(conv.out))
		for i := o.starts[k]; i < o.end(k); i++ {
			conv.add(&o.src[i])
		}
	}
	bounds = append(bounds, len(conv.out))
	ents := make([]olderEntry, len(conv.out))
	chunk := make([]olderTurn, hi-lo+1)
	for k := lo; k <= hi; k++ {
		a, b := bounds[k-lo], bounds[k-lo+1]
		ot := &chunk[k-lo]
		*ot = olderTurn{msgs: conv.out[a:b:b], e: ents[a:b:b]}
		src := o.src[o.starts[k]:o.end(k)]
		for i := range ot.msgs {
			e := &ot.e[i]
			e.part = conv.parts[a+i]
			e.size = messageSize(&ot.msgs[i])
			if e.part != nil {
				e.size += toolResultLen(e.part, o.compact)
				e.at = partAt(src, e.part)
			}
		}
		o.turns[k] = ot
	}
}

// partAt is where p is in msgs: its message, and its index there.
func partAt(msgs []UIMessage, p *Part) [2]int32 {
	for i := range msgs {
		for j := range msgs[i].Parts {
			if &msgs[i].Parts[j] == p {
				return [2]int32{int32(i), int32(j)}
			}
		}
	}
	panic("agent: a converted tool message's part is not in its turn")
}

// fitted is what one step sends and what fitting did.
type fitted struct {
	msgs  []Message
	chars int
	// tokens is what the model's tokenizer counts of the step (messages,
	// tools, framing); 0 when trawl has no tokenizer for the model.
	tokens         int
	compacted      int
	compactedChars int
	compactedCalls []string
	shortened      int
	dropped        int
	// fixed is what the step sends whatever the budget (the system
	// messages, the tools, the newest user message and this turn so
	// far); history what the older turns take with every tool result
	// sent as its verdict, math.MaxInt when they cannot all fit so.
	fixed, history int
	// The older turns sent, whose messages are msgs[olderAt:] in order.
	olderAt    int
	olderTurns []*olderTurn
}

type entryState uint8

const (
	entryWhole entryState = iota
	entryCompacted
	entryShortened
)

func messageSize(m *Message) int {
	n := messageOverhead + len(m.Content) + len(m.ToolCallID)
	for _, c := range m.ToolCalls {
		n += messageOverhead + len(c.ID) + len(c.Name) + len(c.Arguments)
	}
	return n
}

// fit decides what one step sends, in the three phases it has always
// had: bound (which older turns may be sent at all), choose (what each of
// their messages is sent as: whole, compacted to its verdict or
// shortened) and assemble (the messages, and the report's figures).
func fit(in fitInput) (*fitted, error) {
	f := newFitter(in)
	if !f.reuse() {
		f.bound()
		if err := f.choose(); err != nil {
			return nil, err
		}
	}
	return f.assemble(), nil
}

// fitter is one fit's state, shared by its phases.
type fitter struct {
	in    fitInput
	o     *olderTurns
	tail  []Message // the protected tail: from the newest user message on
	fixed int       // what the step sends whatever the budget
	gen   uint32    // this fit's generation in o's compaction cache

	// bound's result: the older turns first..T-1 may be sent; minimal
	// when they are certain to be sent at their least.
	first, T int
	minimal  bool
	compSum  int // the older turns' size with every result compacted
	// walked is the oldest turn bound walked.
	walked int
	asked  idFilter // the stored result ids this fit found not live

	// choose's state, per message of the turns that may be sent (off[t]
	// is turn first+t's first index): its state and size, the total.
	off   []int
	state []entryState
	size  []int
	total int
	cut   bool // the notice is sent
	out   *fitted
}

// newFitter finds the protected tail, converts (or takes from the memo)
// the older turns and sizes the part that is sent whatever the budget.
func newFitter(in fitInput) *fitter {
	protect := 0
	for i := len(in.thread) - 1; i >= 0; i-- {
		if in.thread[i].Role == RoleUser {
			protect = i
			break
		}
	}
	older := in.thread[:protect]
	var o *olderTurns
	if m := in.memo; m != nil && m.conv != nil && m.n == len(older) && (m.n == 0 || m.first == &older[0]) &&
		m.conv.compact == in.compact && m.conv.model == in.budget.model {
		o = m.conv
	} else {
		o = newOlderTurns(older, in.compact, in.budget.model)
		if in.kept != nil {
			o.keys, o.seed, o.kept = true, in.kept.seed, in.kept.take(in.threadKey, in.compact, in.budget.model)
		}
		if m != nil {
			m.conv, m.n, m.first = o, len(older), nil
			if len(older) > 0 {
				m.first = &older[0]
			}
		}
	}
	tail := modelMessages(in.thread[protect:], in.compact)
	if in.current != nil {
		tail = append(tail, modelMessages([]UIMessage{*in.current}, in.compact)...)
	}
	fixed := in.toolChars
	for i := range in.system {
		fixed += messageSize(&in.system[i])
	}
	for i := range tail {
		fixed += messageSize(&tail[i])
	}
	o.gen++
	return &fitter{in: in, o: o, tail: tail, fixed: fixed, gen: o.gen}
}

// compacted is what a tool result is sent as when compacted ("" when it
// stays whole: not a finished result, or no shorter).
func (f *fitter) compacted(ot *olderTurn, i int) string {
	if ot.e[i].compGen == f.gen {
		return ot.e[i].comp
	}
	p := ot.e[i].part
	if p == nil || p.State != "output-available" {
		ot.e[i].compGen = f.gen
		return ""
	}
	v := ot.e[i].verdict
	if v == nil {
		v = f.in.verdict(p)
		ot.e[i].verdict = v
	}
	var exp time.Time // zero: expired, or never known
	if v.resultID != "" {
		if t, ok := f.in.expiry(v.resultID); ok {
			exp = t
		} else {
			f.asked.add(v.idHash) // one not live now (liveSame)
		}
	}
	var nanos int64
	if !exp.IsZero() {
		nanos = exp.UnixNano()
	}
	if ot.e[i].compGen == 0 || ot.e[i].compExp != nanos {
		ot.e[i].comp, ot.e[i].compExp = "", nanos
		// A verdict replaces the result when it is shorter, and
		// always once the result's stored id has expired.
		if text := v.render(exp); len(text) < len(p.Output) || v.resultID != "" && exp.IsZero() {
			ot.e[i].comp = text
		}
	}
	ot.e[i].compGen = f.gen
	return ot.e[i].comp
}

// expiredID reports a result whose stored result id has expired: it is
// compacted whatever its age, so the id is never offered as live.
func (f *fitter) expiredID(ot *olderTurn, i int) bool {
	f.compacted(ot, i)
	v := ot.e[i].verdict
	return v != nil && v.resultID != "" && ot.e[i].compExp == 0
}

// shortened is what an older text is sent as when shortened ("" when it
// is a tool result or short enough already).
func (f *fitter) shortened(ot *olderTurn, i int) string {
	if c := ot.msgs[i].Content; ot.e[i].part == nil {
		if _, ok := shortenedLen(c); ok {
			return cutText(c, shortenTo) + shortenedMark
		}
	}
	return ""
}

// bound walks the older turns newest first: each turn's size with every
// result compacted (texts whole), and its least size (texts shortened
// too). Once the least sizes alone overflow with the notice, and the
// compacted sizes overflow without it, the older turns are certain to be
// left out — choose would shorten everything and drop them — so they are
// never converted.
func (f *fitter) bound() {
	o, limit := f.o, f.in.budget.limit
	f.T = len(o.turns)
	minSum, cand := 0, -1
	for t := f.T - 1; t >= 0; t-- {
		ot := o.turn(t)
		f.walked, ot.least = t, minSum
		for i := range ot.msgs {
			sz := ot.e[i].size
			if ot.e[i].part != nil {
				if text := f.compacted(ot, i); text != "" {
					sz += len(text) - toolResultLen(ot.e[i].part, o.compact)
				}
				f.compSum += sz
			} else {
				f.compSum += sz
				if n, ok := shortenedLen(ot.msgs[i].Content); ok {
					sz += n - len(ot.msgs[i].Content)
				}
			}
			minSum += sz
		}
		ot.least = minSum - ot.least
		if cand < 0 && f.fixed+noticeReserve+minSum > limit {
			cand = t + 1
		}
		if cand >= 0 && f.fixed+f.compSum > limit {
			f.first, f.minimal = cand, true
			break
		}
	}
}

// set sends message i of ot (index j among those sent) as text in state
// st, unless it is already other than whole or text is "".
func (f *fitter) set(ot *olderTurn, i, j int, text string, st entryState) {
	if text == "" || f.state[j] != entryWhole {
		return
	}
	old := len(ot.msgs[i].Content)
	if st == entryCompacted {
		old = toolResultLen(ot.e[i].part, f.o.compact)
		f.out.compacted++
		f.out.compactedChars += len(ot.e[i].part.Output)
	} else {
		f.out.shortened++
	}
	f.total += len(text) - old
	f.size[j] += len(text) - old
	f.state[j] = st
}

// each calls fn for every message of the turns that may be sent, oldest
// first, while it returns true.
func (f *fitter) each(fn func(ot *olderTurn, i, j int) bool) {
	for t := f.first; t < f.T; t++ {
		ot := f.o.turns[t]
		for i := range ot.msgs {
			if !fn(ot, i, f.off[t-f.first]+i) {
				return
			}
		}
	}
}

// choose decides what each message of the turns that may be sent is sent
// as; a *ContextBudgetError when even the least does not fit.
func (f *fitter) choose() error {
	o, b := f.o, f.in.budget
	first, T := f.first, f.T
	keep := int32(min(b.keepRecent, math.MaxInt32))
	f.off = make([]int, T-first+1)
	for t := first; t < T; t++ {
		f.off[t-first+1] = f.off[t-first] + len(o.turns[t].msgs)
	}
	n := f.off[T-first]
	f.state = make([]entryState, n)
	f.size = make([]int, n)
	f.total = f.fixed
	for t := first; t < T; t++ {
		for i, e := range o.turns[t].e {
			f.size[f.off[t-first]+i] = e.size
		}
	}
	for _, sz := range f.size {
		f.total += sz
	}
	f.out = &fitted{dropped: first, fixed: f.fixed, history: f.compSum}
	if f.minimal {
		f.out.history = math.MaxInt
	}
	f.cut = f.minimal
	if f.minimal {
		// Every turn sent is at its least.
		f.each(func(ot *olderTurn, i, j int) bool {
			f.set(ot, i, j, f.compacted(ot, i), entryCompacted)
			f.set(ot, i, j, f.shortened(ot, i), entryShortened)
			return true
		})
		f.total += noticeReserve
	} else {
		// Results older than the window, or whose stored result has expired,
		// are always sent as verdicts;
		// then the recent ones, oldest first, while the step does not fit.
		f.each(func(ot *olderTurn, i, j int) bool {
			if ot.e[i].age >= keep || f.expiredID(ot, i) {
				f.set(ot, i, j, f.compacted(ot, i), entryCompacted)
			}
			return true
		})
		f.each(func(ot *olderTurn, i, j int) bool {
			if f.total <= b.limit {
				return false
			}
			f.set(ot, i, j, f.compacted(ot, i), entryCompacted)
			return true
		})
		if f.total > b.limit && n > 0 {
			f.total += noticeReserve
			f.cut = true
			// Older turns' texts, oldest turn first (a turn is shortened
			// whole once begun).
			for t := first; t < T && f.total > b.limit; t++ {
				ot := o.turns[t]
				for i := range ot.msgs {
					f.set(ot, i, f.off[t-first]+i, f.shortened(ot, i), entryShortened)
				}
			}
		}
	}
	if f.total > b.limit {
		o.last = nil
		need := f.fixed
		if f.cut {
			need += noticeReserve
		}
		return &ContextBudgetError{Model: b.model, Need: need, Limit: b.limit,
			NeedTokens: b.tokens(need), MaxTokens: b.maxTokens, ByChars: b.maxChars > 0 && b.limit == b.maxChars}
	}
	o.last = nil
	if f.minimal && f.in.live != nil {
		o.last = &leastFit{live: f.in.live, asked: f.asked, first: first, walked: f.walked, compSum: f.compSum, off: f.off, state: f.state}
	}
	return nil
}

// leastFit is a step's fit that sent every older turn it kept at its
// least (bound's minimal): what the next steps of the turn need to take
// its decisions rather than make them again (reuse).
type leastFit struct {
	live  map[string]time.Time
	asked idFilter
	// bound's: the first turn sent, the oldest turn it walked (each
	// walked turn's least size is olderTurn.least) and their compacted
	// size; choose's: the older messages' offsets and states.
	first, walked, compSum int
	off                    []int
	state                  []entryState
}

// liveSame reports whether live answers as the fit's live did for every
// stored result id it asked about: each result live then is live now
// with the same expiry, and each one live only now (this turn's calls
// keep new ones) is one it never found not live.
func (m *leastFit) liveSame(live map[string]time.Time) bool {
	if live == nil {
		return false
	}
	for id, e := range m.live {
		if now, ok := live[id]; !ok || !now.Equal(e) {
			return false
		}
	}
	if len(live) > len(m.live) {
		for id := range live {
			if _, ok := m.live[id]; !ok && m.asked.has(id) {
				return false
			}
		}
	}
	return true
}

// idFilter is a Bloom filter of ids: has is true for every id added, and
// for few others.
type idFilter [64]uint64

var idFilterSeed = maphash.MakeSeed()

// idHash is id's hash in an idFilter (a verdict keeps its result id's).
func idHash(id string) uint64 { return maphash.String(idFilterSeed, id) }

// add adds the id of hash h (idHash).
func (b *idFilter) add(h uint64) {
	b[h>>6&63] |= 1 << (h & 63)
	b[h>>38&63] |= 1 << (h >> 32 & 63)
}

func (b *idFilter) has(id string) bool {
	h := idHash(id)
	return b[h>>6&63]&(1<<(h&63)) != 0 && b[h>>38&63]&(1<<(h>>32&63)) != 0
}

// reuse takes the turn's previous step's decisions (olderTurns.last) when
// this step would make the same ones, but for leaving out more of the
// oldest turns: the same older turns (the memo) and the same expiry of
// every stored result that fit asked about (liveSame), so the same sizes
// and verdicts, and a fixed part (it grows by this
// turn's calls) and limit with which bound would keep turns first..T-1
// for some first no older than the previous step's — the newest turns
// at their least that fit, which the least sizes walked give — and still
// find the compacted size over the limit, so that choose would send each
// message of them as the previous step did. The limit enters the
// decisions only through these comparisons.
func (f *fitter) reuse() bool {
	m, limit := f.o.last, f.in.budget.limit
	if m == nil || !m.liveSame(f.in.live) || f.fixed+m.compSum <= limit {
		return false
	}
	least, T := f.fixed+noticeReserve, len(f.o.turns)
	if least > limit {
		return false
	}
	first, sum := T, 0
	for ; first > m.first; first-- {
		if least+sum+f.o.turns[first-1].least > limit {
			break
		}
		sum += f.o.turns[first-1].least
	}
	if first == m.first && (first == m.walked || least+sum+f.o.turns[first-1].least <= limit) {
		return false // bound would keep the turn the previous step left out, or walk past it
	}
	f.first, f.T, f.minimal, f.cut = first, T, true, true
	base := m.off[first-m.first]
	f.off = make([]int, T-first+1)
	for t := range f.off {
		f.off[t] = m.off[first-m.first+t] - base
	}
	f.state = m.state[base:]
	f.total = least + sum
	f.out = &fitted{dropped: first, fixed: f.fixed, history: math.MaxInt}
	f.each(func(ot *olderTurn, i, j int) bool {
		switch f.state[j] {
		case entryCompacted:
			f.out.compacted++
			f.out.compactedChars += len(ot.e[i].part.Output)
		case entryShortened:
			f.out.shortened++
		}
		return true
	})
	return true
}

// assemble writes what the step sends: the system messages, the notice,
// the older messages kept, the tail; and the report's figures.
func (f *fitter) assemble() *fitted {
	o, out, in := f.o, f.out, f.in
	first, T := f.first, f.T
	send := make([]Message, 0, len(in.system)+1+len(f.state)+len(f.tail))
	send = append(send, in.system...)
	if f.cut {
		send = append(send, Message{Role: RoleSystem, Content: notice(out.dropped, T, out.shortened)})
	}
	out.olderAt, out.olderTurns = len(send), o.turns[first:T]
	for t := first; t < T; t++ {
		// A turn's messages at once, then the texts that are not as
		// converted: its results (deferred), and what is shortened.
		ot, at := o.turns[t], len(send)
		send = append(send, ot.msgs...)
		state := f.state[f.off[t-first]:]
		for i := range ot.msgs {
			switch state[i] {
			case entryCompacted:
				send[at+i].Content = ot.e[i].comp // as compacted when its state was set
			case entryShortened:
				send[at+i].Content = f.shortened(ot, i)
			default:
				if ot.e[i].part != nil {
					if ot.e[i].whole == "" {
						ot.e[i].whole = toolResultText(*ot.e[i].part, o.compact)
					}
					send[at+i].Content = ot.e[i].whole
				}
			}
		}
	}
	send = append(send, f.tail...)
	// The report lists the newest compacted calls.
	for t := T - 1; t >= first && len(out.compactedCalls) < maxReportedCalls; t-- {
		ot := o.turns[t]
		for i := len(ot.msgs) - 1; i >= 0 && len(out.compactedCalls) < maxReportedCalls; i-- {
			if f.state[f.off[t-first]+i] == entryCompacted && ot.e[i].part.ToolCallID != "" {
				out.compactedCalls = append(out.compactedCalls, ot.e[i].part.ToolCallID)
			}
		}
	}
	slices.Reverse(out.compactedCalls)
	out.msgs = send
	out.chars = in.toolChars
	for i := range send {
		out.chars += messageSize(&send[i])
	}
	return out
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

// shortenedLen is the length of an older text once shortened, and
// whether it is shortened at all.
func shortenedLen(c string) (int, bool) {
	if len(c) <= shortenTo+len(shortenedMark) {
		return 0, false
	}
	return len(cutText(c, shortenTo)) + len(shortenedMark), true
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
	if f.tokens > 0 {
		r.Tokens, r.Counted = f.tokens, true
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
	in := fitInput{
		system: r.systemMessages(def, bound), toolChars: toolChars,
		thread: thread, current: current, budget: b,
		expiry: func(id string) (time.Time, bool) {
			t, ok := live[id]
			return t, ok
		},
		live:    live,
		verdict: r.verdicts.get,
		memo:    &st.older,
		compact: def.Rows == RowsCompact,
		kept:    r.older, threadKey: st.Thread.Key,
	}
	f, err := fitCompacting(in)
	tc, known := r.tokenCounter(model)
	if !known || b.maxTokens <= 0 || err == nil && tokensAtMost(f, specs) <= b.maxTokens {
		return f, b, err // no tokenizer; or the step fits whatever its text (no count needed)
	}
	// A model family trawl has the tokenizer of: what the step sends is
	// counted (each text once per process: the memo), and when it is over
	// the budget — or the estimate left out what would have fitted — the
	// step is fitted again at the ratio counted.
	for refit := 0; err == nil && f.chars > 0; refit++ {
		f.tokens = f.countTokens(tc, specs)
		measured := min(max(float64(f.chars)/float64(max(f.tokens, 1)), 1), 8)
		over := f.tokens > b.maxTokens
		roomy := !b.counted && f.compacted+f.shortened+f.dropped > 0 && measured > b.cpt*1.1
		if refit == maxRefits || !over && !roomy {
			// The next step (and turn) starts from the ratio counted, so
			// it is fitted again only when what it adds changes it.
			st.cpt = measured
			r.calib.Store(model, measured)
			break
		}
		b = resolveBudget(def, model, measured)
		b.counted = true
		in.budget = b
		f, err = fitCompacting(in)
	}
	return f, b, err
}

// countTokens is what the step sends with specs, in tc's tokens: the
// older turns' messages counted once per turn (kept on the converted
// turn, by the text sent), the rest through tc's memo. It is
// RequestTokens(tc, the step's request).
func (f *fitted) countTokens(tc *TokenMemo, specs []ToolSpec) int {
	end := f.olderAt
	for _, ot := range f.olderTurns {
		end += len(ot.msgs)
	}
	n := tc.RequestTokens(&ModelRequest{Messages: f.msgs[:f.olderAt], Tools: specs})
	n += tc.RequestTokens(&ModelRequest{Messages: f.msgs[end:]}) - tokensReplyPrime
	// The messages not counted yet go to the memo in batches of
	// tokenBatch (one lock a batch).
	var batch [tokenBatch]*Message
	var ents [tokenBatch]*olderEntry
	var counts [tokenBatch]int
	b := 0
	flush := func() {
		tc.messagesTokens(batch[:b], counts[:b])
		for j, e := range ents[:b] {
			e.tokens, e.counted = int32(counts[j])+1, batch[j].Content
			n += counts[j]
		}
		b = 0
	}
	k := f.olderAt
	for _, ot := range f.olderTurns {
		for i := range ot.msgs {
			m, e := &f.msgs[k], &ot.e[i]
			k++
			switch {
			case e.tokens != 0 && e.counted == m.Content:
				n += int(e.tokens) - 1
			case e.verdict != nil:
				// A compacted result: kept on its verdict across turns.
				c := e.verdict.messageTokens(tc, m)
				e.tokens, e.counted = int32(c)+1, m.Content
				n += c
			default:
				batch[b], ents[b] = m, e
				if b++; b == tokenBatch {
					flush()
				}
			}
		}
	}
	flush()
	return n
}

// tokenBatch is how many messages countTokens looks up in the memo at
// once.
const tokenBatch = 64

// tokensAtMost bounds what f and specs can cost in tokens: a token is at
// least one byte of text, and each message and tool adds its framing.
func tokensAtMost(f *fitted, specs []ToolSpec) int {
	n := f.chars + tokensReplyPrime + 2*tokensPerMessage*(len(f.msgs)+len(specs))
	for i := range f.msgs {
		n += len(f.msgs[i].Role) + tokensPerMessage*len(f.msgs[i].ToolCalls)
	}
	return n
}

// maxRefits bounds the fits of a step again at the ratio its tokenizer
// counted (fitStep).
const maxRefits = 2

// tokenCounter is the tokenizer of model's family, through the runner's
// memo of counts, when trawl knows it.
func (r *Runner) tokenCounter(model string) (*TokenMemo, bool) {
	enc, ok := encodingFor(model)
	if !ok {
		return nil, false
	}
	if m, ok := r.tokens.Load(enc); ok {
		return m.(*TokenMemo), true
	}
	m, _ := r.tokens.LoadOrStore(enc, NewTokenMemo(bpeCounter(enc), 0))
	return m.(*TokenMemo), true
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
