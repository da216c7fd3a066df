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
	before decoded
	// floor: no span starts before it (what a ScrubWriter has written).
	floor int64
	// The bytes of the current scan call (cur, from position curAt) and
	// those held before them (prev, from prevAt): where a match's leading
	// character is read.
	cur, prev     []byte
	curAt, prevAt int64

	// The decoder: a pending escape, its bytes and where it began.
	esc   [6]byte
	escN  int
	escAt int64
	// ring holds the recent decoded bytes and the raw range of each, by
	// decoded index (nd counts them; the oldest valid is low).
	ring    []decoded
	mask    int64
	nd, low int64
}

// decoded is one byte of the decoded reading, spelled by raw [start, end).
type decoded struct {
	span
	b byte
}

// byteAt is the input's byte at position q, if the scan still has it.
func (st *scanState) byteAt(q int64) (byte, bool) {
	switch {
	case q >= st.curAt && q < st.curAt+int64(len(st.cur)):
		return st.cur[q-st.curAt], true
	case q >= st.prevAt && q < st.prevAt+int64(len(st.prev)):
		return st.prev[q-st.prevAt], true
	}
	return 0, false
}

// isBase64 reports whether c is a character of either base64 alphabet:
// a base64 core's leading and trailing characters are masked with it only
// when they are such characters, as they are in real base64.
func isBase64(c byte) bool { return base64Chars[c] }

var base64Chars = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_") {
		t[c] = true
	}
	return t
}()

// rawLead is where a match whose core starts at raw position c begins
// with its leading character: c-1 when the character there is a base64
// one (in the raw reading, or as decoded just before syncAt), else c.
func (st *scanState) rawLead(c int64) int64 {
	q := c - 1
	if st.synced && q < st.syncAt {
		if q >= 0 && st.syncAt > 0 && isBase64(st.before.b) {
			return st.before.start
		}
		return c
	}
	if b, ok := st.byteAt(q); ok && isBase64(b) {
		return q
	}
	return c
}

func (s *Scrubber) newScan() *scanState {
	st := &scanState{r: make([]int32, len(s.ms)), d: make([]int32, len(s.ms)), idle: true, synced: true}
	return st
}

// scan runs every matcher over b, whose first byte is at absolute
// position base, from st (updated), appending matches to spans. prev are
// the bytes just before b that the caller still holds (a match's leading
// character may be among them).
func (s *Scrubber) scan(b []byte, base int64, prev []byte, st *scanState, spans *[]span) {
	st.cur, st.curAt, st.prev, st.prevAt = b, base, prev, base-int64(len(prev))
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
		if isBase64(c) {
			addSpan(spans, max(p, st.floor), p+1)
		}
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
			start := p + 1 - int64(o>>2)
			if o&2 != 0 {
				start = st.rawLead(start)
			}
			addSpan(spans, max(start, 0, st.floor), p+1)
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
		st.ring, st.mask = make([]decoded, n), n-1
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
		b, _ := st.byteAt(pos) // gone only when it could lead nothing
		st.ring[pos&st.mask], st.low = decoded{span{pos, pos + 1}, b}, pos
	}
}

// escapeStep takes c into an escape that has begun (or begins one): true
// when c was consumed, false when what was held is not an escape.
func (s *Scrubber) escapeStep(st *scanState, c byte, p int64, spans *[]span) bool {
	if st.escN == 0 {
		if c == '%' || c == '\\' {
			st.esc[0], st.escN, st.escAt = c, 1, p
			return true
		}
		s.emit(st, c, p, p+1, spans)
		return true
	}
	st.esc[st.escN] = c
	st.escN++
	n := st.escN
	if st.esc[0] == '%' {
		if hexVal(c) < 0 {
			return false // not an escape
		}
		if n == 3 {
			st.escN = 0
			s.emit(st, byte(hexVal(st.esc[1])<<4|hexVal(c)), st.escAt, p+1, spans)
		}
		return true
	}
	if n == 2 {
		if c == 'u' {
			return true
		}
		x, ok := jsonEscape(c)
		if !ok {
			return false
		}
		st.escN = 0
		s.emit(st, x, st.escAt, p+1, spans)
		return true
	}
	if hexVal(c) < 0 {
		return false
	}
	if n == 6 {
		st.escN = 0
		r := rune(hexVal(st.esc[2])<<12 | hexVal(st.esc[3])<<8 | hexVal(st.esc[4])<<4 | hexVal(c))
		var u [utf8.UTFMax]byte
		for _, x := range u[:utf8.EncodeRune(u[:], r)] {
			s.emit(st, x, st.escAt, p+1, spans)
		}
	}
	return true
}

// decode feeds byte c at position p to the escape decoder, which hands
// each decoded byte to the decoded reading.
func (s *Scrubber) decode(st *scanState, c byte, p int64, spans *[]span) {
	if s.escapeStep(st, c, p, spans) {
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
		if isBase64(x) {
			addSpan(spans, max(start, st.floor), end)
		}
		st.trailD = false
	}
	st.ring[st.nd&st.mask] = decoded{span{start, end}, x}
	st.nd++
	for k, m := range s.ms {
		y := m.step(st.d[k], x)
		st.d[k] = y
		if y == 0 {
			continue
		}
		if o := m.out[y]; o != 0 {
			first := max(st.nd-int64(o>>2), st.low)
			from := st.ring[first&st.mask].start
			if lead := first - 1; o&2 != 0 && lead >= st.low && isBase64(st.ring[lead&st.mask].b) {
				from = st.ring[lead&st.mask].start
			}
			addSpan(spans, max(from, st.floor), end)
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
// may start, given the input read so far ends at end: the start of the
// longest pattern prefix either reading is in, or of the base64 character
// just before it, which a match would lead with.
func (st *scanState) frontier(s *Scrubber, end int64) int64 {
	depth := int32(0)
	for k, m := range s.ms {
		depth = max(depth, m.depth[st.r[k]])
	}
	f := st.rawLead(end - int64(depth))
	if !st.synced {
		dd := int32(0)
		for k, m := range s.ms {
			dd = max(dd, m.depth[st.d[k]])
		}
		if first := st.nd - int64(dd); first >= st.low {
			if first < st.nd {
				f = min(f, st.ring[first&st.mask].start)
			}
			if lead := first - 1; lead >= st.low && isBase64(st.ring[lead&st.mask].b) {
				f = min(f, st.ring[lead&st.mask].start)
			}
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
// edge, and failure links only ever climb back what was descended. A
// folding matcher's patterns are lower-cased and it reads each byte
// through asciiFold (tr), so it matches them in any ASCII case; tr is
// the identity otherwise.
type matcher struct {
	tr      [256]byte  // what each input byte is read as
	root    [256]int32 // the root's child for each (read) byte; 0 none
	first   []int32    // a state's first child; 0 none
	sibling []int32    // the next child of the same parent; 0 none
	label   []byte     // the byte of the edge into a state
	fail    []int32    // the longest proper suffix that is a trie state
	depth   []int32    // a state's distance from the root
	// out is, for the patterns ending in a state (itself or a suffix), the
	// longest one's length shifted left by two; bit 1: one of that length
	// masks the (base64) character before it with it; bit 0: one of them
	// masks the character after it. 0: none ends there.
	out    []int32
	pairs  pairFilter
	window int // the longest pattern with its leading character
}

// spellings are the input bytes m reads as pattern byte c: c, and its
// upper case when m folds.
func (m *matcher) spellings(c byte) []byte {
	if m.tr['A'] == 'a' && c >= 'a' && c <= 'z' {
		return []byte{c, c - 'a' + 'A'}
	}
	return []byte{c}
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

// step is the automaton's transition from s on input byte c.
func (m *matcher) step(s int32, c byte) int32 {
	c = m.tr[c]
	for s != 0 {
		if t := m.child(s, c); t != 0 {
			return t
		}
		s = m.fail[s]
	}
	return m.root[c]
}

// mergeOut combines two out values: the longer pattern (with its lead;
// either's when they are as long), either trail. A shorter pattern's lead
// lies inside the longer one.
func mergeOut(a, b int32) int32 {
	switch {
	case a>>2 > b>>2:
		return a | b&1
	case b>>2 > a>>2:
		return b | a&1
	}
	return a | b
}

// newMatcher builds the automaton for patterns; nil when there are none.
// With fold, the patterns (lower-cased) are matched in any ASCII case.
func newMatcher(patterns []pattern, fold bool) *matcher {
	if len(patterns) == 0 {
		return nil
	}
	m := &matcher{first: []int32{0}, sibling: []int32{0}, label: []byte{0}, out: []int32{0}, depth: []int32{0}}
	for i := range m.tr {
		m.tr[i] = byte(i)
	}
	if fold {
		m.tr = asciiFold
	}
	for _, pt := range patterns {
		p := pt.text
		// Every input byte read as p[0] may start it; the second byte may
		// also arrive escaped.
		for _, c := range m.spellings(p[0]) {
			for _, d := range m.spellings(p[1]) {
				m.pairs.set(c, d)
			}
			m.pairs.set(c, '%')
			m.pairs.set(c, '\\')
		}
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
		o := int32(len(p)) << 2
		if pt.lead {
			o |= 2
		}
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
