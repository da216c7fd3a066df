package tools

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf16"
)

// Mask replaces every secret the scrubber finds.
const Mask = "[redacted]"

// MinSecretLen is the shortest secret a Scrubber masks. Shorter values
// (a 4-character password) would mask ordinary words everywhere; their
// encoded forms (a basic credential's base64) are still masked when long
// enough.
const MinSecretLen = 6

// Scrubber masks secrets in bytes: every occurrence of a secret, or of a
// form an upstream realistically echoes it in, becomes Mask. The forms
// are the secret itself, its base64 (standard and URL alphabets, padded
// or not), its JSON-escaped spellings (Go's, with \u003c-style escapes,
// and PHP's, with \/), and its URL-escaped spellings (query and path,
// upper- and lower-case hex). Overlapping and adjacent occurrences
// become one Mask, so no part of any secret survives.
//
// Matching is one pass over the input for all secrets at once, linear in
// its length whatever it holds (an Aho–Corasick automaton; runs of bytes
// that cannot start a secret are skipped with a two-byte filter). A Scrubber is immutable and safe for
// concurrent use; With derives one that also masks more secrets.
type Scrubber struct {
	ms     []*matcher
	pairs  *pairFilter // union of the matchers' filters
	maxLen int         // longest form
}

// NewScrubber returns a scrubber for secrets (empty and shorter than
// MinSecretLen ones are skipped).
func NewScrubber(secrets ...string) *Scrubber {
	return (&Scrubber{}).With(secrets...)
}

// With returns a scrubber that masks s's secrets and these. The new
// secrets get an automaton of their own, run in the same pass, so
// deriving a per-call scrubber (a user's runtime credential) costs
// only the new secrets' size.
func (s *Scrubber) With(secrets ...string) *Scrubber {
	if s == nil {
		s = &Scrubber{}
	}
	m := newMatcher(secretForms(secrets))
	if m == nil {
		return s
	}
	out := &Scrubber{ms: append(slices.Clip(s.ms), m), maxLen: max(s.maxLen, m.maxLen), pairs: &pairFilter{}}
	for _, x := range out.ms {
		for i := range out.pairs {
			out.pairs[i] |= x.pairs[i]
		}
	}
	return out
}

// Empty reports whether s masks nothing.
func (s *Scrubber) Empty() bool { return s == nil || len(s.ms) == 0 }

// Bytes returns b with every secret masked. When b holds none, b itself
// is returned (no copy); otherwise a new slice.
func (s *Scrubber) Bytes(b []byte) []byte {
	if s.Empty() || len(b) == 0 {
		return b
	}
	var spans []span
	states := make([]int32, len(s.ms))
	s.scan(b, 0, states, &spans)
	if len(spans) == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(spans)*len(Mask))
	prev := int64(0)
	for _, sp := range spans {
		out = append(out, b[prev:sp.start]...)
		out = append(out, Mask...)
		prev = sp.end
	}
	return append(out, b[prev:]...)
}

// String is Bytes for a string.
func (s *Scrubber) String(text string) string {
	if s.Empty() {
		return text
	}
	b := s.Bytes([]byte(text))
	return string(b)
}

// Header returns h with every value scrubbed: h itself when no value
// held a secret, else a copy. A Content-Length is dropped from a copy,
// since the body it described is scrubbed separately.
func (s *Scrubber) Header(h http.Header) http.Header {
	if s.Empty() || h == nil {
		return h
	}
	var out http.Header
	for k, vs := range h {
		for i, v := range vs {
			c := s.String(v)
			if c == v {
				continue
			}
			if out == nil {
				out = h.Clone()
				out.Del("Content-Length")
			}
			out[k][i] = c
		}
	}
	if out == nil {
		return h
	}
	return out
}

// span is a masked range [start, end) of the input.
type span struct{ start, end int64 }

// addSpan merges a match into spans (ordered by start, disjoint and not
// touching). Matches arrive by increasing end, so only the tail merges.
func addSpan(spans *[]span, start, end int64) {
	sp := *spans
	for len(sp) > 0 && sp[len(sp)-1].end >= start {
		start = min(start, sp[len(sp)-1].start)
		end = max(end, sp[len(sp)-1].end)
		sp = sp[:len(sp)-1]
	}
	*spans = append(sp, span{start, end})
}

// scan runs every matcher over b, whose first byte is at absolute
// position base, from states (updated in place), appending matches to
// spans.
func (s *Scrubber) scan(b []byte, base int64, states []int32, spans *[]span) {
	n := len(b)
	pairs := s.pairs
	idle := true
	for _, st := range states {
		idle = idle && st == 0
	}
	for i := 0; i < n; i++ {
		if idle {
			// Skip bytes that cannot start a secret: from the idle state, a
			// byte whose pair with the next byte begins no form leads back
			// to the idle state on that next byte (every form is at least
			// two bytes long).
			i = pairs.skip(b, i)
		}
		c := b[i]
		idle = true
		for k, m := range s.ms {
			st := m.step(states[k], c)
			states[k] = st
			if st != 0 {
				idle = false
				if l := m.out[st]; l > 0 {
					end := base + int64(i) + 1
					addSpan(spans, end-int64(l), end)
				}
			}
		}
	}
}

// pairFilter has a bit for every two-byte prefix of a form.
type pairFilter [1 << 16 / 64]uint64

func (p *pairFilter) set(a, b byte) {
	x := uint(a) | uint(b)<<8
	p[x>>6] |= 1 << (x & 63)
}

func (p *pairFilter) has(x uint) bool { return p[x>>6]&(1<<(x&63)) != 0 }

// skip returns the first position from i whose pair with the next byte
// is in the filter, or the last position of b. It reads eight bytes at a
// time (a pair is the 16-bit little-endian value at its position).
func (p *pairFilter) skip(b []byte, i int) int {
	for ; i+8 < len(b); i += 7 {
		v := binary.LittleEndian.Uint64(b[i:])
		if p.has(uint(v) & 0xffff) {
			return i
		}
		if p.has(uint(v>>8) & 0xffff) {
			return i + 1
		}
		if p.has(uint(v>>16) & 0xffff) {
			return i + 2
		}
		if p.has(uint(v>>24) & 0xffff) {
			return i + 3
		}
		if p.has(uint(v>>32) & 0xffff) {
			return i + 4
		}
		if p.has(uint(v>>40) & 0xffff) {
			return i + 5
		}
		if p.has(uint(v>>48) & 0xffff) {
			return i + 6
		}
	}
	for ; i+1 < len(b); i++ {
		if p.has(uint(b[i]) | uint(b[i+1])<<8) {
			return i
		}
	}
	return i
}

// matcher is an Aho–Corasick automaton: the trie of its patterns with
// failure links, a full transition row for the root (the state most bytes
// are read in) and children as sibling lists elsewhere. Its size is
// linear in the patterns' total length, whatever their alphabet (a
// kilobyte-long JWT costs kilobytes, not a table of states × bytes), and
// matching stays linear in the input: each byte descends at most one
// edge, and failure links only ever climb back what was descended.
type matcher struct {
	root    [256]int32 // the root's child for each byte; 0 none
	first   []int32    // a state's first child; 0 none
	sibling []int32    // the next child of the same parent; 0 none
	label   []byte     // the byte of the edge into a state
	fail    []int32    // the longest proper suffix that is a trie state
	out     []int32    // longest pattern ending in each state; 0 none
	pairs   pairFilter
	maxLen  int
}

// child is s's child on byte c, or 0.
func (m *matcher) child(s int32, c byte) int32 {
	if s == 0 {
		return m.root[c]
	}
	for t := m.first[s]; t != 0; t = m.sibling[t] {
		if m.label[t] == c {
			return t
		}
	}
	return 0
}

// step is the automaton's transition from s on byte c.
func (m *matcher) step(s int32, c byte) int32 {
	for s != 0 {
		if t := m.child(s, c); t != 0 {
			return t
		}
		s = m.fail[s]
	}
	return m.root[c]
}

// newMatcher builds the automaton for patterns; nil when there are none.
func newMatcher(patterns []string) *matcher {
	if len(patterns) == 0 {
		return nil
	}
	m := &matcher{first: []int32{0}, sibling: []int32{0}, label: []byte{0}, out: []int32{0}}
	for _, p := range patterns {
		m.pairs.set(p[0], p[1])
		m.maxLen = max(m.maxLen, len(p))
		st := int32(0)
		for i := 0; i < len(p); i++ {
			t := m.child(st, p[i])
			if t == 0 {
				t = int32(len(m.out))
				m.first = append(m.first, 0)
				m.label = append(m.label, p[i])
				m.out = append(m.out, 0)
				if st == 0 {
					m.sibling = append(m.sibling, 0)
					m.root[p[i]] = t
				} else {
					m.sibling = append(m.sibling, m.first[st])
					m.first[st] = t
				}
			}
			st = t
		}
		m.out[st] = max(m.out[st], int32(len(p)))
	}
	// Breadth first: a state's failure link is found from its parent's.
	m.fail = make([]int32, len(m.out))
	queue := make([]int32, 0, len(m.out))
	for c := range m.root {
		if t := m.root[c]; t != 0 {
			queue = append(queue, t) // fail 0
		}
	}
	for len(queue) > 0 {
		st := queue[0]
		queue = queue[1:]
		m.out[st] = max(m.out[st], m.out[m.fail[st]])
		for t := m.first[st]; t != 0; t = m.sibling[t] {
			m.fail[t] = m.step(m.fail[st], m.label[t])
			queue = append(queue, t)
		}
	}
	return m
}

// secretForms is every spelling of secrets the scrubber masks, without
// duplicates, each at least MinSecretLen (and two) bytes long.
func secretForms(secrets []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(f string) {
		if len(f) >= max(MinSecretLen, 2) && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			// Too short to mask on its own; a longer encoding of it
			// (base64 of "user:pass") arrives as a secret of its own.
			continue
		}
		add(s)
		// Unpadded base64 is a prefix of the padded form.
		add(base64.RawStdEncoding.EncodeToString([]byte(s)))
		add(base64.RawURLEncoding.EncodeToString([]byte(s)))
		for _, j := range jsonForms(s) {
			add(j)
		}
		for _, u := range []string{url.QueryEscape(s), url.PathEscape(s)} {
			add(u)
			add(lowerHex(u))
			// A query value echoed inside JSON by PHP-style encoders.
			add(strings.ReplaceAll(u, "/", `\/`))
		}
	}
	return out
}

// jsonForms are the spellings of s inside a JSON string: Go's (HTML
// characters as \u003c…), a plain encoder's, and with '/' as '\/'.
func jsonForms(s string) []string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	_ = enc.Encode(s)
	goForm := strings.TrimSpace(b.String())
	goForm = goForm[1 : len(goForm)-1]
	b.Reset()
	enc = json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	plain := strings.TrimSpace(b.String())
	plain = plain[1 : len(plain)-1]
	forms := []string{goForm, plain, strings.ReplaceAll(goForm, "/", `\/`), strings.ReplaceAll(plain, "/", `\/`)}
	if len(s) <= maxEscapedSecret {
		forms = append(forms, allEscaped(s, "\\u%04x"), allEscaped(s, "\\u%04X"))
	}
	return forms
}

// maxEscapedSecret bounds the secrets whose every-character-escaped form
// is masked: tokens and keys are short, and the form is six times the
// secret (a kilobyte-long JWT would cost the automaton tens of KB more).
const maxEscapedSecret = 256

// allEscaped is s with every character written as a \uXXXX escape (an
// encoder that escapes everything, or an upstream hiding a value): it
// decodes to s in any JSON parser.
func allEscaped(s, format string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		fmt.Fprintf(&b, format, u)
	}
	return b.String()
}

// lowerHex lower-cases the hex digits of %XX escapes.
func lowerHex(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}

// Writer returns a writer that scrubs what it is given on its way to w,
// holding back at most the longest form's length (plus a pending mask)
// until more arrives or Close flushes it. A secret split across Write
// calls is masked like one written whole.
func (s *Scrubber) Writer(w io.Writer) *ScrubWriter {
	return &ScrubWriter{s: s, w: w, states: make([]int32, len(s.ms))}
}

// ScrubWriter is Scrubber.Writer's writer. It is not safe for concurrent
// use.
type ScrubWriter struct {
	s       *Scrubber
	w       io.Writer
	states  []int32
	tail    []byte // held back: absolute positions [tailPos, tailPos+len(tail))
	tailPos int64
	spans   []span // matches not yet written, by start
	err     error
}

// Write scrubs p and writes what can no longer be part of a secret.
func (sw *ScrubWriter) Write(p []byte) (int, error) {
	if sw.err != nil {
		return 0, sw.err
	}
	if sw.s.Empty() {
		_, sw.err = sw.w.Write(p)
		if sw.err != nil {
			return 0, sw.err
		}
		return len(p), nil
	}
	base := sw.tailPos + int64(len(sw.tail))
	sw.s.scan(p, base, sw.states, &sw.spans)
	end := base + int64(len(p))
	// Bytes before frontier can start no future match; a pending span
	// reaching past it may still grow.
	frontier := end + 1 - int64(sw.s.maxLen)
	if n := len(sw.spans); n > 0 && sw.spans[n-1].end >= frontier {
		frontier = min(frontier, sw.spans[n-1].start)
	}
	if frontier <= sw.tailPos {
		sw.tail = append(sw.tail, p...)
		return len(p), nil
	}
	if err := sw.emit(p, base, frontier); err != nil {
		return 0, err
	}
	return len(p), nil
}

// emit writes the virtual buffer tail+p (p starting at base) up to
// upTo, masking spans, and keeps the rest as the new tail.
func (sw *ScrubWriter) emit(p []byte, base, upTo int64) error {
	at := func(from, to int64) []byte { // bytes [from, to) of tail+p, to ≤ base or from ≥ base
		if to <= base {
			return sw.tail[from-sw.tailPos : to-sw.tailPos]
		}
		return p[from-base : to-base]
	}
	write := func(from, to int64) {
		for from < to && sw.err == nil {
			stop := to
			if from < base && to > base {
				stop = base
			}
			_, sw.err = sw.w.Write(at(from, stop))
			from = stop
		}
	}
	pos := sw.tailPos
	k := 0
	for ; k < len(sw.spans) && sw.spans[k].end <= upTo; k++ {
		sp := sw.spans[k]
		write(pos, sp.start)
		if sw.err == nil {
			_, sw.err = io.WriteString(sw.w, Mask)
		}
		pos = sp.end
	}
	if k < len(sw.spans) && sw.spans[k].start < upTo {
		upTo = sw.spans[k].start
	}
	if pos < upTo {
		write(pos, upTo)
		pos = upTo
	}
	sw.spans = append(sw.spans[:0], sw.spans[k:]...)
	// The new tail: [pos, base+len(p)).
	if pos < base {
		n := copy(sw.tail, sw.tail[pos-sw.tailPos:])
		sw.tail = append(sw.tail[:n], p...)
	} else {
		sw.tail = append(sw.tail[:0], p[pos-base:]...)
	}
	sw.tailPos = pos
	return sw.err
}

// Close writes what was held back. It does not close the underlying
// writer.
func (sw *ScrubWriter) Close() error {
	if sw.err != nil {
		return sw.err
	}
	if len(sw.tail) == 0 && len(sw.spans) == 0 {
		return nil
	}
	end := sw.tailPos + int64(len(sw.tail))
	return sw.emit(nil, end, end)
}

// scrubError masks secrets in an error's text. RefusedError and ArgError
// keep their types; any other error whose text changes becomes one that
// still matches the sentinels callers branch on (ErrUpstream,
// ErrMCPClosed, ErrRefused, context errors) but not the original's types,
// whose text would not be masked.
func scrubError(scrub *Scrubber, err error) error {
	var ae *ArgError
	var re *RefusedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return &RefusedError{Code: re.Code, Msg: scrub.String(re.Msg)}
	case errors.As(err, &ae):
		return &ArgError{Arg: scrub.String(ae.Arg), Msg: scrub.String(ae.Msg)}
	}
	msg := err.Error()
	if clean := scrub.String(msg); clean != msg {
		return &scrubbedError{msg: clean, err: err}
	}
	return err
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Is(target error) bool {
	switch target {
	case ErrUpstream, ErrMCPClosed, ErrRefused, context.DeadlineExceeded, context.Canceled:
		return errors.Is(e.err, target)
	}
	return false
}
