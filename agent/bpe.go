package agent

import (
	"fmt"
	"math"
	"math/bits"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"
)

// Counting tokens without a regular expression engine.
//
// tiktoken-go splits a text into pieces with its encoding's split pattern
// run by regexp2 (a backtracking engine, about 5 MB/s here), then merges
// each piece's bytes by rank (byte-pair encoding). Only the count is
// needed, so trawl splits with a hand-written matcher of each pattern —
// the same pieces, branch for branch, as tiktoken-go's generated regexp2
// matcher gives (including where that matcher departs from the pattern's
// usual reading; see o200kAt) — and merges by the same ranks, read once
// from the embedded encoding. TestPretokenizerMatchesRegexp2 and
// FuzzTokenCount hold it to tiktoken-go's pieces and counts.

// The split patterns, as tiktoken-go 0.10.0 compiles them: the tests run
// them through regexp2 as the reference.
const (
	o200kPattern  = `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	cl100kPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// Character classes of the split patterns, as bits.
const (
	cX uint8 = 1 << iota // [^\r\n\p{L}\p{N}]: the optional character before a word
	cP                   // [^\s\p{L}\p{N}]: punctuation and symbols
	cS                   // \s (unicode.IsSpace)
	cN                   // \p{N}
	cL                   // \p{L}
	cU                   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]: a word's capitals
	cW                   // [\p{Ll}\p{Lm}\p{Lo}\p{M}]: a word's small letters
)

// asciiClass holds the classes of the ASCII characters. DEL (U+007F) is in
// none: the bitmaps of tiktoken-go's generated matcher leave it out of
// both cX and cP, so no branch matches it and it is skipped, never counted.
var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = wideClass(r)
		if r == '\r' || r == '\n' {
			t[r] &^= cX
		}
	}
	t[0x7f] &^= cX | cP
	return t
}()

// wideClass is the classes of r by the unicode package's tables, which
// regexp2 and its generated matchers use. r is not CR or LF (both ASCII).
func wideClass(r rune) uint8 {
	switch {
	case unicode.IsLetter(r):
		// The letter categories are disjoint and make up L.
		c := cL
		if !unicode.Is(unicode.Ll, r) {
			c |= cU
		}
		if !unicode.Is(unicode.Lu, r) && !unicode.Is(unicode.Lt, r) {
			c |= cW
		}
		return c
	case unicode.IsNumber(r):
		return cN
	case unicode.IsSpace(r):
		return cX | cS
	case unicode.Is(unicode.M, r):
		return cX | cP | cU | cW
	}
	return cX | cP
}

// at decodes the character at s[i:]: its width and classes. It is small
// enough to be inlined for ASCII; other characters go through atWide.
func at(s string, i int) (w int, c uint8) {
	if b := s[i]; b < utf8.RuneSelf {
		return 1, asciiClass[b]
	}
	return atWide(s, i)
}

func atWide(s string, i int) (w int, c uint8) {
	r, w := utf8.DecodeRuneInString(s[i:])
	return w, wideClass(r)
}

// run is the end of the characters of class c from i.
func run(s string, i int, c uint8) int {
	for i < len(s) {
		w, k := at(s, i)
		if k&c == 0 {
			break
		}
		i += w
	}
	return i
}

// contraction is the end of `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at i, or i.
// The case-insensitive set of s is [STstſ], as regexp2 folds it.
func contraction(s string, i int) int {
	if i+1 >= len(s) || s[i] != '\'' {
		return i
	}
	third := func(want byte) bool { return i+2 < len(s) && s[i+2]|0x20 == want }
	switch s[i+1] {
	case 'S', 'T', 's', 't':
		return i + 2
	case 'M', 'm', 'D', 'd':
		return i + 2
	case 'R', 'r', 'V', 'v':
		if third('e') {
			return i + 3
		}
	case 'L', 'l':
		if third('l') {
			return i + 3
		}
	case 0xC5: // ſ (U+017F) is C5 BF
		if i+2 < len(s) && s[i+2] == 0xBF {
			return i + 3
		}
	}
	return i
}

// capsThenSmall is the end of `[U]*[W]+` at i, or -1: the capitals as
// many as there are, then at least one small letter — giving back the
// last capitals that are also small letters (Lm, Lo, M) when none
// follows, as the backtracking matcher does.
func capsThenSmall(s string, i int) int {
	last := -1 // the last of the capitals that is also in cW
	for i < len(s) {
		w, c := at(s, i)
		if c&cU == 0 {
			if c&cW != 0 {
				return run(s, i, cW)
			}
			break
		}
		if c&cW != 0 {
			last = i
		}
		i += w
	}
	if last < 0 {
		return -1
	}
	return run(s, last, cW)
}

// spaces is the shared part of the three white-space branches at i: the
// end of the white space, where its last character starts, and the end of
// `\s*[\r\n]+` (-1 when it does not match). tiktoken-go's generated
// matcher backtracks `\s*` to the first line break of the white space,
// not the last, so "  \n  \nx" splits as "  \n", "  \n", "x".
func spaces(s string, i int) (end, lastStart, lineEnd int) {
	end, lastStart, lineEnd = i, -1, -1
	for end < len(s) {
		w, c := at(s, end)
		if c&cS == 0 {
			break
		}
		if lineEnd < 0 && (s[end] == '\n' || s[end] == '\r') {
			lineEnd = end
		}
		lastStart = end
		end += w
	}
	if lineEnd >= 0 {
		for lineEnd < len(s) && (s[lineEnd] == '\n' || s[lineEnd] == '\r') {
			lineEnd++
		}
	}
	return end, lastStart, lineEnd
}

// spaceBranches are `\s*[\r\n]+|\s+(?!\S)|\s+` at i: the piece's end, or
// -1.
func spaceBranches(s string, i int) int {
	end, lastStart, lineEnd := spaces(s, i)
	switch {
	case lineEnd >= 0:
		return lineEnd
	case end == i:
		return -1
	case end == len(s) || lastStart == i: // `\s+(?!\S)` or, one character, `\s+`
		return end
	}
	return lastStart // `\s+(?!\S)` gives back the last one
}

// upTo3 is the end of `\p{N}{1,3}` at i, or -1.
func upTo3(s string, i int) int {
	end := i
	for k := 0; k < 3 && end < len(s); k++ {
		w, c := at(s, end)
		if c&cN == 0 {
			break
		}
		end += w
	}
	if end == i {
		return -1
	}
	return end
}

// symbols is the end of ` ?[P]+` at i then the characters of tail, or -1
// (the space is taken atomically, as the generated matcher does).
func symbols(s string, i int, tail string) int {
	p := i
	if s[p] == ' ' {
		p++
	}
	end := run(s, p, cP)
	if end == p {
		return -1
	}
	for end < len(s) && indexByte(tail, s[end]) {
		end++
	}
	return end
}

func indexByte(set string, b byte) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == b {
			return true
		}
	}
	return false
}

// o200kAt is the end of o200k_base's piece at i, or -1 when no branch
// matches (DEL).
func o200kAt(s string, i int) int {
	w, c := at(s, i)
	// [X]?[U]*[W]+('s…)?
	if c&cX != 0 && i+w < len(s) {
		if e := capsThenSmall(s, i+w); e >= 0 {
			return contraction(s, e)
		}
	}
	if e := capsThenSmall(s, i); e >= 0 {
		return contraction(s, e)
	}
	// [X]?[U]+[W]*('s…)?
	if c&cX != 0 && i+w < len(s) {
		if e := run(s, i+w, cU); e > i+w {
			return contraction(s, run(s, e, cW))
		}
	}
	if e := run(s, i, cU); e > i {
		return contraction(s, run(s, e, cW))
	}
	if c&cN != 0 {
		return upTo3(s, i)
	}
	if e := symbols(s, i, "\r\n/"); e >= 0 {
		return e
	}
	return spaceBranches(s, i)
}

// cl100kAt is o200kAt for cl100k_base.
func cl100kAt(s string, i int) int {
	if e := contraction(s, i); e > i {
		return e
	}
	w, c := at(s, i)
	if c&cX != 0 && i+w < len(s) {
		if e := run(s, i+w, cL); e > i+w {
			return e
		}
	}
	if e := run(s, i, cL); e > i {
		return e
	}
	if c&cN != 0 {
		return upTo3(s, i)
	}
	if e := symbols(s, i, "\r\n"); e >= 0 {
		return e
	}
	return spaceBranches(s, i)
}

// bpeEncoding is an encoding's split and ranks.
type bpeEncoding struct {
	o200k bool // the split of o200k_base (o200kAt), else cl100k_base's
	ranks rankTable
	// pairs holds the rank of every two-byte token by its bytes (noRank
	// for the pairs that are none): a merge starts from single bytes, so
	// its first pairs are read here rather than in ranks.
	pairs []uint32
	// caches holds *pieceCache for count.
	caches sync.Pool
}

// newBPE reads enc's ranks from tiktoken-go's embedded vocabulary (every
// token decoded by its id: the module exposes no other way) and pairs
// them with enc's split. It costs some tens of milliseconds and about
// 5.8 MB for o200k_base (rankTable), once per process.
func newBPE(enc tokenizer.Encoding) (*bpeEncoding, error) {
	codec, err := tokenizer.Get(enc)
	if err != nil {
		return nil, err
	}
	e := &bpeEncoding{o200k: enc != tokenizer.Cl100kBase}
	// Ids are dense from 0; the special tokens (past the last id) are not
	// in the vocabulary and never come out of a count.
	var toks []string
	var ids []uint32
	for id, misses := uint(0), 0; misses < 1024; id++ {
		tok, err := codec.Decode([]uint{id})
		if err != nil {
			misses++
			continue
		}
		misses = 0
		toks, ids = append(toks, tok), append(ids, uint32(id))
	}
	if err := e.ranks.build(toks, ids); err != nil {
		return nil, err
	}
	for b := range 256 { // a piece of one byte is one token (cachedTokens)
		if e.ranks.rank(string([]byte{byte(b)})) == noRank {
			return nil, fmt.Errorf("byte %#x is not a token", b)
		}
	}
	e.pairs = make([]uint32, 1<<16)
	for i := range e.pairs {
		e.pairs[i] = noRank
	}
	for i, tok := range toks {
		if len(tok) == 2 {
			e.pairs[int(tok[0])<<8|int(tok[1])] = ids[i]
		}
	}
	return e, nil
}

// count is the number of tokens of text, as tiktoken-go's Count gives it
// (ErrorModeNone: regexp2 reads a byte that is not UTF-8 as U+FFFD, so the
// count is that of the text so replaced).
func (e *bpeEncoding) count(text string) int {
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	n := 0
	if len(text) < pieceCacheMin {
		for i, end := e.next(text, 0); i < len(text); i, end = e.next(text, end) {
			n += e.pieceTokens(text[i:end])
		}
		return n
	}
	c, _ := e.caches.Get().(*pieceCache)
	if c == nil {
		c = new(pieceCache)
	}
	for i, end := e.next(text, 0); i < len(text); i, end = e.next(text, end) {
		n += e.cachedTokens(c, text[i:end])
	}
	e.caches.Put(c)
	return n
}

// Counting a long text goes through a pieceCache: the token counts of the
// short pieces it met last, by their bytes. A tool result's JSON repeats
// its keys and punctuation row after row, and a piece's first lookup in
// the rank table (megabytes, read at random) costs a cache miss or two of
// the processor's; a piece's count is the same wherever it is met, so
// the caches are shared by every text counted (a sync.Pool: one per
// processor at a time, none of them ever holding a stale count).
const (
	pieceCacheMin  = 256 // the texts counted through a cache, in bytes
	pieceCacheBits = 12  // 4,096 slots, 96 KiB
	maxCachedPiece = 16  // the longest piece kept, in bytes
)

// pieceCache is direct-mapped: a piece's slot is by a hash of its bytes,
// and a piece met in a slot that holds another replaces it.
type pieceCache [1 << pieceCacheBits]pieceSlot

// pieceSlot is one piece (up to maxCachedPiece bytes, held exactly by
// pieceKey) and its count; n 0 is an empty slot.
type pieceSlot struct {
	lo, hi    uint64
	n, tokens uint8
}

// cachedTokens is pieceTokens(piece), through c.
func (e *bpeEncoding) cachedTokens(c *pieceCache, piece string) int {
	n := len(piece)
	if n == 1 {
		return 1 // every byte is a token (newBPE checks it)
	}
	if n > maxCachedPiece {
		return e.pieceTokens(piece)
	}
	lo, hi := pieceKey(piece)
	h := (lo ^ bits.RotateLeft64(hi, 29)) * 0x9e3779b97f4a7c15 // pieces that differ by their length only share a slot
	s := &c[h>>(64-pieceCacheBits)]
	if s.lo == lo && s.hi == hi && int(s.n) == n {
		return int(s.tokens)
	}
	t := e.pieceTokens(piece) // at most n: a piece's bytes are tokens
	*s = pieceSlot{lo: lo, hi: hi, n: uint8(n), tokens: uint8(t)}
	return t
}

// pieceKey holds the bytes of s (1 to 16 of them) in two words: with its
// length, no two pieces have the same key. Up to 8 bytes are in lo (its
// first four and last four, or for up to 3 its first, middle and last),
// more are its first eight (lo) and last eight (hi), overlapping.
func pieceKey(s string) (lo, hi uint64) {
	switch n := len(s); {
	case n >= 8:
		return le64(s), le64(s[n-8:])
	case n >= 4:
		return uint64(le32(s)) | uint64(le32(s[n-4:]))<<32, 0
	default:
		return uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16, 0
	}
}

func le32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func le64(s string) uint64 { return uint64(le32(s)) | uint64(le32(s[4:]))<<32 }

// split yields the pieces of text (valid UTF-8) in order.
func (e *bpeEncoding) split(text string, yield func(piece string)) {
	for i, end := e.next(text, 0); i < len(text); i, end = e.next(text, end) {
		yield(text[i:end])
	}
}

// next is the piece of text (valid UTF-8) that starts at or after i:
// text[start:end], start being len(text) when there is none. A character
// no branch matches (DEL) is in none, as the regexp2 scanner steps over
// it.
func (e *bpeEncoding) next(text string, i int) (start, end int) {
	for i < len(text) {
		var end int
		if e.o200k {
			end = o200kAt(text, i)
		} else {
			end = cl100kAt(text, i)
		}
		if end >= 0 {
			return i, end
		}
		w, _ := at(text, i)
		i += w
	}
	return len(text), len(text)
}

// pieceTokens is the number of tokens byte-pair encoding makes of piece.
func (e *bpeEncoding) pieceTokens(piece string) int {
	if e.rank(piece) != noRank {
		return 1
	}
	if len(piece) < mergeScanMax {
		return e.mergeScan(piece)
	}
	return e.mergeHeap(piece)
}

const noRank = math.MaxUint32

// mergeScanMax bounds the pieces merged by scanning (quadratic, nothing
// allocated); longer ones go through a heap, as tiktoken-go does.
const mergeScanMax = 96

// rank is the rank of piece, or noRank.
func (e *bpeEncoding) rank(piece string) uint32 {
	if len(piece) == 2 {
		return e.pairs[int(piece[0])<<8|int(piece[1])]
	}
	return e.ranks.rank(piece)
}

// mergeScan merges the leftmost pair of lowest rank until none is left,
// finding it by a scan, and returns the parts left.
func (e *bpeEncoding) mergeScan(piece string) int {
	var offs [mergeScanMax + 1]int32
	var ranks [mergeScanMax + 1]uint32
	n := len(piece) + 1 // boundaries
	for i := range n {
		offs[i] = int32(i)
	}
	pair := func(i int) uint32 { // the rank of parts i and i+1 merged
		if i+2 >= n {
			return noRank
		}
		return e.rank(piece[offs[i]:offs[i+2]])
	}
	for i := range n - 1 {
		ranks[i] = pair(i)
	}
	for n > 2 {
		best, at := uint32(noRank), -1
		for i := range n - 2 {
			if ranks[i] < best {
				best, at = ranks[i], i
			}
		}
		if at < 0 {
			break
		}
		copy(offs[at+1:n-1], offs[at+2:n])
		copy(ranks[at+1:n-1], ranks[at+2:n])
		n--
		ranks[at] = pair(at)
		if at > 0 {
			ranks[at-1] = pair(at - 1)
		}
	}
	return n - 1
}

// mergeHeap is mergeScan over a linked list and a heap of candidate
// pairs ordered by rank then offset: the same merges in O(n log n).
func (e *bpeEncoding) mergeHeap(piece string) int {
	n := int32(len(piece))
	next := make([]int32, n+1) // the next boundary, -1 after the last
	prev := make([]int32, n+1)
	rank := make([]uint32, n+1) // of the pair starting at a boundary
	for i := range next {
		next[i], prev[i], rank[i] = int32(i)+1, int32(i)-1, noRank
	}
	next[n] = -1
	pair := func(i int32) uint32 {
		j := next[i]
		if j < 0 || next[j] < 0 {
			return noRank
		}
		return e.rank(piece[i:next[j]])
	}
	h := pairHeap{}
	for i := int32(0); i+2 <= n; i++ {
		if r := pair(i); r != noRank {
			rank[i] = r
			h = append(h, candidate{r, i})
		}
	}
	h.init()
	parts := int(n)
	for len(h) > 0 {
		top := h.pop()
		i := top.off
		if rank[i] != top.rank {
			continue // stale: this boundary's pair changed since
		}
		j := next[i]
		k := next[j]
		rank[j] = noRank
		next[i] = k
		if k >= 0 {
			prev[k] = i
		}
		parts--
		for _, b := range [2]int32{i, prev[i]} {
			if b < 0 {
				continue
			}
			if rank[b] = pair(b); rank[b] != noRank {
				h.push(candidate{rank[b], b})
			}
		}
	}
	return parts
}

type candidate struct {
	rank uint32
	off  int32
}

// pairHeap is a min-heap of candidates by rank, then offset.
type pairHeap []candidate

func (h pairHeap) less(a, b int) bool {
	if h[a].rank != h[b].rank {
		return h[a].rank < h[b].rank
	}
	return h[a].off < h[b].off
}

func (h pairHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c candidate) {
	*h = append(*h, c)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *pairHeap) pop() candidate {
	old := *h
	top := old[0]
	last := len(old) - 1
	old[0] = old[last]
	*h = old[:last]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h.less(r, c) {
			c = r
		}
		if !h.less(c, i) {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
