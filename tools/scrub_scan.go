package tools

import (
	"encoding/binary"
	"unicode/utf8"
)

// span is a masked range [start, end) of the input.
type span struct{ start, end int64 }

// addSpan merges a match into spans (ordered by start, disjoint and not
// touching). Matches arrive by non-decreasing end, so only the tail merges.
func addSpan(spans *[]span, start, end int64) {
	sp := *spans
	for len(sp) > 0 && sp[len(sp)-1].end >= start {
		start = min(start, sp[len(sp)-1].start)
		end = max(end, sp[len(sp)-1].end)
		sp = sp[:len(sp)-1]
	}
	*spans = append(sp, span{start, end})
}

// scanState is where a scan stands between calls of scan: each matcher's
// state in the raw reading and in the decoded one, and the decoder's.
//
// The two readings agree until an escape introducer ('%' or '\') arrives:
// while they do (synced), the decoded reading is not computed at all. On
// an introducer the decoded states start as copies of the raw ones, and
// the decoded bytes are tracked with the raw range each came from (ring),
// until every state of both readings is back at the root; then they agree
// again.
type scanState struct {
	r, d []int32 // per matcher: the raw reading's state, the decoded one's
	// idle: synced, every raw state at the root, nothing pending — bytes
	// that can start no pattern may be skipped.
	idle, synced bool
	// trailR, trailD: the last match's trailing character is the next raw
	// byte, or the next decoded byte.
	trailR, trailD bool
	// syncAt is where the readings began to agree again, and before the
	// decoded byte just before it (a match right after syncAt may lead
	// with it).
	syncAt int64
	before span
	// floor: no span starts before it (what a ScrubWriter has written).
	floor int64

	// The decoder: a pending escape, its bytes and where it began.
	esc   [6]byte
	escN  int
	escAt int64
	// ring holds the raw range of the recent decoded bytes, by decoded
	// index (nd counts them; the oldest valid is low).
	ring    []span
	mask    int64
	nd, low int64
}

func (s *Scrubber) newScan() *scanState {
	st := &scanState{r: make([]int32, len(s.ms)), d: make([]int32, len(s.ms)), idle: true, synced: true}
	return st
}

// scan runs every matcher over b, whose first byte is at absolute
// position base, from st (updated), appending matches to spans.
func (s *Scrubber) scan(b []byte, base int64, st *scanState, spans *[]span) {
	pairs := s.pairs
	for i := 0; i < len(b); i++ {
		if st.idle {
			// Skip bytes that can start no pattern: from the idle state, a
			// byte whose pair with the next byte begins no pattern (nor an
			// escape) leads back to the idle state on that next byte
			// (every pattern is at least two bytes long).
			i = pairs.skip(b, i)
		}
		s.step(st, b[i], base+int64(i), spans)
	}
}

// step reads byte c at position p in both readings.
func (s *Scrubber) step(st *scanState, c byte, p int64, spans *[]span) {
	if st.synced && (c == '%' || c == '\\') {
		st.desync(s, p)
	}
	// The decoded reading first: its matches end no later than the raw
	// one's at p+1, and spans must arrive by non-decreasing end.
	if !st.synced {
		s.decode(st, c, p, spans)
	}
	if st.trailR {
		addSpan(spans, max(p, st.floor), p+1)
		st.trailR = false
	}
	root := true
	for k, m := range s.ms {
		x := m.step(st.r[k], c)
		st.r[k] = x
		if x == 0 {
			continue
		}
		root = false
		if o := m.out[x]; o != 0 {
			start := p + 1 - int64(o>>1)
			if st.synced && start < st.syncAt {
				start = min(start, st.before.start) // the leading character was decoded
			}
			addSpan(spans, max(start, st.floor), p+1)
			st.trailR = st.trailR || o&1 != 0
		}
	}
	if st.synced {
		st.idle = root && !st.trailR
		return
	}
	if root && st.escN == 0 && !st.trailR && !st.trailD {
		for _, x := range st.d {
			if x != 0 {
				return
			}
		}
		st.synced, st.idle, st.syncAt = true, true, p+1
		st.before = st.ring[(st.nd-1)&st.mask]
	}
}

// desync starts the decoded reading at position p, where an escape
// introducer arrived: its states are the raw ones, and the raw bytes
// they depend on (plus one, a possible leading character) go in the ring.
func (st *scanState) desync(s *Scrubber, p int64) {
	st.synced, st.idle = false, false
	copy(st.d, st.r)
	st.trailD = st.trailR
	if st.ring == nil {
		n := int64(8)
		for n < int64(s.window)+2 {
			n <<= 1
		}
		st.ring, st.mask = make([]span, n), n-1
	}
	depth := int32(0)
	for k, m := range s.ms {
		depth = max(depth, m.depth[st.r[k]])
	}
	st.nd, st.low = p, p
	for j := int64(1); j <= int64(depth)+1; j++ {
		pos := p - j
		if pos < st.syncAt {
			if st.syncAt > 0 {
				st.ring[pos&st.mask], st.low = st.before, pos
			}
			break
		}
		st.ring[pos&st.mask], st.low = span{pos, pos + 1}, pos
	}
}

// decode feeds byte c at position p to the escape decoder, which hands
// each decoded byte to the decoded reading.
func (s *Scrubber) decode(st *scanState, c byte, p int64, spans *[]span) {
	for {
		if st.escN == 0 {
			if c == '%' || c == '\\' {
				st.esc[0], st.escN, st.escAt = c, 1, p
				return
			}
			s.emit(st, c, p, p+1, spans)
			return
		}
		st.esc[st.escN] = c
		st.escN++
		n := st.escN
		if st.esc[0] == '%' {
			if hexVal(c) < 0 {
				break // not an escape
			}
			if n == 3 {
				st.escN = 0
				s.emit(st, byte(hexVal(st.esc[1])<<4|hexVal(c)), st.escAt, p+1, spans)
			}
			return
		}
		if n == 2 {
			if c == 'u' {
				return
			}
			x, ok := jsonEscape(c)
			if !ok {
				break
			}
			st.escN = 0
			s.emit(st, x, st.escAt, p+1, spans)
			return
		}
		if hexVal(c) < 0 {
			break
		}
		if n == 6 {
			st.escN = 0
			r := rune(hexVal(st.esc[2])<<12 | hexVal(st.esc[3])<<8 | hexVal(st.esc[4])<<4 | hexVal(c))
			var u [utf8.UTFMax]byte
			for _, x := range u[:utf8.EncodeRune(u[:], r)] {
				s.emit(st, x, st.escAt, p+1, spans)
			}
		}
		return
	}
	// Not an escape: what was held is plain text, and c is read afresh.
	held := st.escN - 1
	st.escN = 0
	for i := range held {
		s.emit(st, st.esc[i], st.escAt+int64(i), st.escAt+int64(i)+1, spans)
	}
	s.decode(st, c, p, spans)
}

// emit is the decoded reading's step: byte x, spelled by raw [start, end).
func (s *Scrubber) emit(st *scanState, x byte, start, end int64, spans *[]span) {
	if st.trailD {
		addSpan(spans, max(start, st.floor), end)
		st.trailD = false
	}
	st.ring[st.nd&st.mask] = span{start, end}
	st.nd++
	for k, m := range s.ms {
		y := m.step(st.d[k], x)
		st.d[k] = y
		if y == 0 {
			continue
		}
		if o := m.out[y]; o != 0 {
			first := max(st.nd-int64(o>>1), st.low)
			addSpan(spans, max(st.ring[first&st.mask].start, st.floor), end)
			st.trailD = st.trailD || o&1 != 0
		}
	}
}

// finish ends a scan at the end of the input: a pending escape was plain
// text after all.
func (st *scanState) finish(s *Scrubber, spans *[]span) {
	if st.escN == 0 {
		return
	}
	held := st.escN
	st.escN = 0
	for i := range held {
		s.emit(st, st.esc[i], st.escAt+int64(i), st.escAt+int64(i)+1, spans)
	}
}

// frontier is the earliest position at or after which any later match
// may start, given the input read so far ends at end.
func (st *scanState) frontier(s *Scrubber, end int64) int64 {
	depth := int32(0)
	for k, m := range s.ms {
		depth = max(depth, m.depth[st.r[k]])
	}
	f := end - int64(depth) - 1 // a leading character included
	if st.synced {
		if f < st.syncAt {
			f = min(f, st.before.start)
		}
	} else {
		dd := int32(0)
		for k, m := range s.ms {
			dd = max(dd, m.depth[st.d[k]])
		}
		if first := max(st.nd-int64(dd)-1, st.low); first < st.nd {
			f = min(f, st.ring[first&st.mask].start)
		}
		if st.escN > 0 {
			f = min(f, st.escAt)
		}
	}
	return max(f, st.floor)
}

func hexVal(c byte) int32 {
	switch {
	case c >= '0' && c <= '9':
		return int32(c - '0')
	case c >= 'a' && c <= 'f':
		return int32(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int32(c-'A') + 10
	}
	return -1
}

// jsonEscape is the byte a JSON two-character escape \c stands for.
func jsonEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// pairFilter has a bit for every two-byte prefix of a pattern, and for
// every escape introducer followed by what makes it an escape.
type pairFilter [1 << 16 / 64]uint64

func (p *pairFilter) set(a, b byte) {
	x := uint(a) | uint(b)<<8
	p[x>>6] |= 1 << (x & 63)
}

func (p *pairFilter) has(x uint) bool { return p[x>>6]&(1<<(x&63)) != 0 }

// setEscapes stops the skip at every escape, so that the decoder reads
// the input as one decoding from its start would, however it is cut.
func (p *pairFilter) setEscapes() {
	for _, h := range []byte("0123456789abcdefABCDEF") {
		p.set('%', h)
	}
	for _, e := range []byte(`u/"\bfnrt`) {
		p.set('\\', e)
	}
}

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
	depth   []int32    // a state's distance from the root
	// out is, for the patterns ending in a state (itself or a suffix),
	// how far back the masked range starts (the longest pattern with its
	// leading character) shifted left by one, and in the low bit whether
	// any of them masks the character after it. 0: none ends there.
	out    []int32
	pairs  pairFilter
	window int // the longest pattern with its leading character
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

// mergeOut combines two out values: the farther start, either trail.
func mergeOut(a, b int32) int32 {
	return max(a>>1, b>>1)<<1 | (a|b)&1
}

// newMatcher builds the automaton for patterns; nil when there are none.
func newMatcher(patterns []pattern) *matcher {
	if len(patterns) == 0 {
		return nil
	}
	m := &matcher{first: []int32{0}, sibling: []int32{0}, label: []byte{0}, out: []int32{0}, depth: []int32{0}}
	for _, pt := range patterns {
		p := pt.text
		m.pairs.set(p[0], p[1])
		// The second byte may arrive escaped.
		m.pairs.set(p[0], '%')
		m.pairs.set(p[0], '\\')
		reach := int32(len(p))
		if pt.lead {
			reach++
		}
		m.window = max(m.window, int(reach))
		st := int32(0)
		for i := 0; i < len(p); i++ {
			t := m.child(st, p[i])
			if t == 0 {
				t = int32(len(m.out))
				m.first = append(m.first, 0)
				m.label = append(m.label, p[i])
				m.out = append(m.out, 0)
				m.depth = append(m.depth, int32(i+1))
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
		o := reach << 1
		if pt.trail {
			o |= 1
		}
		m.out[st] = mergeOut(m.out[st], o)
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
		m.out[st] = mergeOut(m.out[st], m.out[m.fail[st]])
		for t := m.first[st]; t != 0; t = m.sibling[t] {
			m.fail[t] = m.step(m.fail[st], m.label[t])
			queue = append(queue, t)
		}
	}
	return m
}
