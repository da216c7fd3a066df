package agent

import (
	"fmt"
	"hash/maphash"
	"strings"
)

// rankTable maps an encoding's tokens to their ranks without a pointer
// per token: the tokens' bytes are one string, the table one slice of
// integers, so the garbage collector never scans it (a map of 200,000
// strings costs every collection of the process a walk over them) and a
// lookup reads one slot, then the bytes only when the slot's hash tag and
// length agree.
//
// A slot packs, from the low bits: the rank (20 bits), the token's offset
// in blob (24), its length (8) and the top 12 bits of its hash; 0 is an
// empty slot (a token is never empty). Collisions probe linearly.
type rankTable struct {
	seed  maphash.Seed
	mix   uint64 // the seed of short tokens' hash
	blob  string
	slots []uint64
	mask  uint64
}

const (
	rankBits   = 20
	offBits    = 24
	lenBits    = 8
	tagShift   = rankBits + offBits + lenBits
	lenShift   = rankBits + offBits
	maxRankTok = 1<<lenBits - 1 // the longest token the table holds
)

// build fills t with toks[i] at rank ids[i]; a token given twice keeps
// its last rank.
func (t *rankTable) build(toks []string, ids []uint32) error {
	size := 1
	for size < 2*len(toks) {
		size <<= 1
	}
	var blob strings.Builder
	for _, tok := range toks {
		blob.WriteString(tok)
	}
	seed := maphash.MakeSeed()
	*t = rankTable{seed: seed, mix: maphash.String(seed, "short tokens"), blob: blob.String(), slots: make([]uint64, size), mask: uint64(size - 1)}
	if len(t.blob) >= 1<<offBits {
		return fmt.Errorf("the tokens take %d bytes, over the rank table's %d", len(t.blob), 1<<offBits)
	}
	off := 0
	for i, tok := range toks {
		if len(tok) == 0 || len(tok) > maxRankTok || ids[i] >= 1<<rankBits {
			return fmt.Errorf("token %d (%d bytes) is outside the rank table's bounds", ids[i], len(tok))
		}
		x := uint64(ids[i]) | uint64(off)<<rankBits | uint64(len(tok))<<lenShift
		off += len(tok)
		h := t.hash(tok)
		x |= h >> tagShift << tagShift
		j := t.find(tok, h)
		t.slots[j] = x // empty, or the same token given again
	}
	return nil
}

// find is the slot of s with hash h: the one holding it, or the empty
// one where it would go.
func (t *rankTable) find(s string, h uint64) uint64 {
	want := h>>tagShift<<tagShift | uint64(len(s))<<lenShift
	for i := h & t.mask; ; i = (i + 1) & t.mask {
		x := t.slots[i]
		if x == 0 {
			return i
		}
		if x&^(1<<lenShift-1) == want {
			if off := x >> rankBits & (1<<offBits - 1); t.blob[off:off+uint64(len(s))] == s {
				return i
			}
		}
	}
}

// rank is the rank of s, or noRank when s is not a token.
func (t *rankTable) rank(s string) uint32 {
	if len(s) == 0 || len(s) > maxRankTok {
		return noRank
	}
	x := t.slots[t.find(s, t.hash(s))]
	if x == 0 {
		return noRank
	}
	return uint32(x & (1<<rankBits - 1))
}

// hash is s's hash in t: for up to 8 bytes (most lookups, and every
// pair a merge tries first) its bytes and length mixed inline, which
// costs a fraction of a call to maphash; longer texts through maphash.
func (t *rankTable) hash(s string) uint64 {
	n := len(s)
	var x uint64
	switch {
	case n > 8:
		return maphash.String(t.seed, s)
	case n >= 4: // the first four bytes and the last four, overlapping
		x = uint64(uint32(s[0])|uint32(s[1])<<8|uint32(s[2])<<16|uint32(s[3])<<24) |
			uint64(uint32(s[n-4])|uint32(s[n-3])<<8|uint32(s[n-2])<<16|uint32(s[n-1])<<24)<<32
	case n > 0:
		x = uint64(s[0]) | uint64(s[n/2])<<8 | uint64(s[n-1])<<16
	}
	// The finalizer of MurmurHash3: every bit of the input reaches the low
	// bits (the slot) and the high ones (the tag).
	h := x ^ t.mix ^ uint64(n)<<59
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
