package agent

import (
	"encoding/json"
	"hash/maphash"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/query"
)

// A compacted tool result is what an older result shrinks to when it is
// sent to the model again: its verdict — which tool, with which
// arguments, how complete, how many rows, why it stopped, its note and,
// while it lives, its stored result — without the rows, and how to get
// them back. The verdict is read with loop.ReadEnvelope; the envelope
// values kept are copied raw from the stored output, and any of them may
// be absent.

// verdict is what compaction keeps of one tool result; it is built once
// per result (see verdictCache) and rendered per step, since whether
// its stored result still lives changes with time.
type verdict struct {
	tool     string
	args     json.RawMessage // the call's arguments, as valid JSON
	chars    int             // the output's size in the thread
	members  []member        // the envelope keys kept, in their order
	note     string          // _note
	complete bool            // the envelope's completion is complete
	resultID string          // _resultId
	idHash   uint64          // resultID's hash in an idFilter (idHash)
	// edges are the hashes of the output's head and tail it was read
	// from, by its cache (verdictCache.get; zero: none): a converted turn
	// kept for the thread's next turn keeps its verdicts while its
	// outputs are the same (sameOutput).
	edges [2]uint64
	rows  []member // top-level arrays dropped: key → element count

	mu       sync.Mutex // guards the memos below
	memoFor  time.Time  // the expiry the memo was rendered with; zero: expired
	memoText string
	// The tokens of the tool message last sent with a rendering, by
	// which counter, and that message's text and call id: an older turn
	// sends the same rendering at every turn while its expiry holds, so
	// its count is read here, not hashed again (messageTokens).
	tokBy   *TokenMemo
	tokText string
	tokCall string
	tokN    int
}

// messageTokens is tc.MessageTokens(m) for m a tool message sending a
// rendering of v (or any text: it is compared), kept on v for the next
// message that sends the same text with the same call id.
func (v *verdict) messageTokens(tc *TokenMemo, m *Message) int {
	plain := m.Role == RoleTool && len(m.ToolCalls) == 0
	v.mu.Lock()
	if plain && v.tokBy == tc && v.tokText == m.Content && v.tokCall == m.ToolCallID {
		n := v.tokN
		v.mu.Unlock()
		return n
	}
	v.mu.Unlock()
	n := tc.MessageTokens(m)
	if plain {
		v.mu.Lock()
		v.tokBy, v.tokText, v.tokCall, v.tokN = tc, m.Content, m.ToolCallID, n
		v.mu.Unlock()
	}
	return n
}

// member is one key of a JSON object and its raw value.
type member struct {
	key string
	raw json.RawMessage
}

// Caps on what a verdict keeps of arguments and envelope values.
const (
	maxVerdictArgs  = 600
	maxVerdictValue = 800
	maxVerdictNote  = 600
)

// envelopeKeys are the keys of DESIGN.md §5 a verdict keeps when they
// are small, in the order they are sent.
var envelopeKeys = []string{"_aggregate", "_pagingComplete", "_likelyMoreRows", "_stoppedBy", "_boundary", "_cache",
	"_truncated", "_shownItems", "_totalItems", "_shownChars", "_totalChars", "_forEachErrors", "_forEachSkipped", "_forEachPartial"}

// boundaryKeys are what a verdict keeps of a _boundary: what was walked,
// how complete, the counts and why it stopped (not the page size, the
// masked cursor or the action statement).
var boundaryKeys = []string{"scope", "completion", "records", "reportedTotal", "duplicates", "pages", "requests", "stopReason", "uninspected"}

// aggregateCore is what a verdict keeps of an _aggregate too large to
// keep whole: its completion and verdict sentence, the rows it counted
// and how many groups it had (queryToolResult's aggregate computes the
// groups again from the stored rows).
var aggregateCore = []string{"completion", "verdict", "rows", "groupCount"}

// boundaryCore is what a verdict keeps of a _boundary whose texts (scope,
// uninspected) are too long together: how complete, the counts and why
// it stopped are never dropped with them.
var boundaryCore = []string{"completion", "records", "reportedTotal", "duplicates", "pages", "requests", "stopReason"}

// newVerdict reads the verdict of a finished tool part.
func newVerdict(p *Part) *verdict {
	v := &verdict{tool: p.Name(), chars: len(p.Output)}
	v.args = p.Input
	if len(v.args) == 0 || !json.Valid(v.args) {
		v.args = json.RawMessage(jsonString(string(p.Input)))
	}
	if len(v.args) > maxVerdictArgs {
		v.args = json.RawMessage(jsonString(shorten(string(p.Input), maxVerdictArgs-40)))
	}
	out := []byte(p.Output)
	switch query.FirstByte(out) {
	case '[':
		if elems, err := query.Elements(out); err == nil {
			v.rows = append(v.rows, member{"items", json.RawMessage(strconv.Itoa(len(elems)))})
		}
		return v
	case '{':
	default:
		return v
	}
	keys, err := query.Keys(out)
	if err != nil {
		return v
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "_") {
			if raw, ok := query.Get(out, query.JoinPath(k)); ok && query.FirstByte(raw) == '[' {
				if elems, err := query.Elements(raw); err == nil {
					v.rows = append(v.rows, member{k, json.RawMessage(strconv.Itoa(len(elems)))})
				}
			}
		}
	}
	get := func(k string) (json.RawMessage, bool) {
		raw, ok := query.Get(out, query.JoinPath(k))
		return raw, ok
	}
	for _, k := range envelopeKeys {
		raw, ok := get(k)
		if !ok {
			continue
		}
		if k == "_boundary" && query.FirstByte(raw) == '{' {
			if raw = subset(raw, boundaryKeys); len(raw) > maxVerdictValue {
				raw = subset(raw, boundaryCore)
			}
		}
		if k == "_aggregate" && len(raw) > maxVerdictValue && query.FirstByte(raw) == '{' {
			raw = subset(raw, aggregateCore) // the groups go; over what they were, stays
		}
		if len(raw) <= maxVerdictValue {
			v.members = append(v.members, member{k, raw})
		} else if query.FirstByte(raw) == '[' {
			if elems, err := query.Elements(raw); err == nil {
				v.members = append(v.members, member{k + "Count", json.RawMessage(strconv.Itoa(len(elems)))})
			}
		}
	}
	env, _ := loop.ReadEnvelope(out) // what is malformed reads as absent
	v.note, v.resultID, v.complete = env.Note, env.ResultID, env.Completion == loop.Complete
	v.idHash = idHash(v.resultID)
	return v
}

// subset keeps the keys of obj that are in keys.
func subset(obj json.RawMessage, keys []string) json.RawMessage {
	b := []byte{'{'}
	for _, k := range keys {
		raw, ok := query.Get(obj, query.JoinPath(k))
		if !ok || len(raw) > maxVerdictValue/2 {
			continue
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, jsonString(k)...)
		b = append(b, ':')
		b = append(b, raw...)
	}
	return append(b, '}')
}

// render is the compacted result as the model reads it. expires is when
// its stored result expires, zero when it has expired (or was never
// known to the thread): an id is offered as live only with a known
// expiry in the future.
func (v *verdict) render(expires time.Time) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.memoText != "" && v.memoFor.Equal(expires) {
		return v.memoText
	}
	live := v.resultID != "" && !expires.IsZero()
	var how strings.Builder
	how.WriteString("An older result, sent as its verdict: its rows (")
	how.WriteString(strconv.Itoa(v.chars))
	how.WriteString(" characters) are left out to fit the context budget. To read them, call ")
	how.WriteString(v.tool)
	how.WriteString(" again with the same arguments")
	if v.complete {
		how.WriteString(" (a complete walk is served from the cache)")
	}
	switch {
	case live:
		how.WriteString(", or " + loop.QueryToolResult + " with its _resultId before _resultExpires.")
	case v.resultID != "":
		how.WriteString(". Its stored result has expired (_resultExpired): do not call " +
			loop.QueryToolResult + " or " + loop.FetchToolResult + " with it.")
	default:
		how.WriteString(".")
	}
	b := []byte{'{'}
	add := func(k string, raw []byte) {
		if len(b) > 1 {
			b = append(b, ',')
		}
		b = append(b, jsonString(k)...)
		b = append(b, ':')
		b = append(b, raw...)
	}
	add("_compacted", []byte(jsonString(how.String())))
	add("_tool", []byte(jsonString(v.tool)))
	add("_arguments", v.args)
	for _, m := range v.members {
		add(m.key, m.raw)
	}
	if len(v.rows) > 0 {
		rows := []byte{'{'}
		for i, m := range v.rows {
			if i > 0 {
				rows = append(rows, ',')
			}
			rows = append(rows, jsonString(m.key)...)
			rows = append(rows, ':')
			rows = append(rows, m.raw...)
		}
		add("_rowsLeftOut", append(rows, '}'))
	}
	if note := v.noteFor(live); note != "" {
		add("_note", []byte(jsonString(note)))
	}
	switch {
	case live:
		add("_resultId", []byte(jsonString(v.resultID)))
		add("_resultExpires", []byte(jsonString(expires.UTC().Format(time.RFC3339))))
	case v.resultID != "":
		add("_resultExpired", []byte(jsonString(v.resultID)))
	}
	v.memoFor, v.memoText = expires, string(append(b, '}'))
	return v.memoText
}

// noteFor is the note as it may be shown: without the sentences that
// offer an expired result id.
func (v *verdict) noteFor(live bool) string {
	note := v.note
	if !live && v.resultID != "" && strings.Contains(note, v.resultID) {
		var kept []string
		for _, s := range sentences(note) {
			if !strings.Contains(s, v.resultID) {
				kept = append(kept, s)
			}
		}
		note = strings.Join(kept, " ")
	}
	return shorten(note, maxVerdictNote)
}

// sentences splits text after each ". ", keeping the periods.
func sentences(text string) []string {
	var out []string
	for text != "" {
		i := strings.Index(text, ". ")
		if i < 0 {
			out = append(out, strings.TrimSpace(text))
			break
		}
		out = append(out, strings.TrimSpace(text[:i+1]))
		text = text[i+2:]
	}
	return out
}

// verdictCache keeps the verdicts of the results runners have compacted,
// so that a step of a long thread reads each older result once, not at
// every step. It holds at most about 2×max entries in two generations:
// when the newer fills up, the older is dropped, so entries used in the
// last generation survive. It is safe for concurrent use.
type verdictCache struct {
	max int

	mu       sync.Mutex
	cur, old map[verdictKey]*verdict
}

// verdictKey names one tool part without reading all of it: its call id,
// a hash of its arguments, its size and hashes of its first and last
// bytes (a stored result is never changed, so a call with the same
// arguments, size, head and tail is the same result; the envelope's keys
// are in its tail).
type verdictKey struct {
	call             string
	size             int
	args, head, tail uint64
}

const verdictEdge = 64

// verdictSeed is the seed of verdicts' keys.
var verdictSeed = maphash.MakeSeed()

// outputEdges are the hashes of out's first and last verdictEdge bytes.
func outputEdges(out []byte) [2]uint64 {
	edge := min(verdictEdge, len(out))
	return [2]uint64{maphash.Bytes(verdictSeed, out[:edge]), maphash.Bytes(verdictSeed, out[len(out)-edge:])}
}

// sameOutput reports whether p's output is the one v was read from, p
// being a part whose call, name and arguments are those of v's (a kept
// turn's, taken by its key): the same size, head and tail, as the cache
// tells results apart (a stored result is never changed).
func (v *verdict) sameOutput(p *Part) bool {
	return v.edges != [2]uint64{} && len(p.Output) == v.chars && outputEdges(p.Output) == v.edges
}

func newVerdictCache(max int) *verdictCache {
	return &verdictCache{max: max, cur: map[verdictKey]*verdict{}}
}

func (c *verdictCache) get(p *Part) *verdict {
	e := outputEdges(p.Output)
	k := verdictKey{call: p.ToolCallID, size: len(p.Output), args: maphash.Bytes(verdictSeed, p.Input), head: e[0], tail: e[1]}
	c.mu.Lock()
	v, ok := c.cur[k]
	if !ok {
		if v, ok = c.old[k]; ok {
			c.put(k, v)
		}
	}
	c.mu.Unlock()
	if ok {
		return v
	}
	v = newVerdict(p)
	v.edges = e
	c.mu.Lock()
	c.put(k, v)
	c.mu.Unlock()
	return v
}

// put adds under c.mu.
func (c *verdictCache) put(k verdictKey, v *verdict) {
	if len(c.cur) >= c.max {
		c.old, c.cur = c.cur, make(map[verdictKey]*verdict, c.max)
	}
	c.cur[k] = v
}
