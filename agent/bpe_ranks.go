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
	*t = rankTable{seed: maphash.MakeSeed(), blob: blob.String(), slots: make([]uint64, size), mask: uint64(size - 1)}
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
		h := maphash.String(t.seed, tok)
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
	x := t.slots[t.find(s, maphash.String(t.seed, s))]
	if x == 0 {
		return noRank
	}
	return uint32(x & (1<<rankBits - 1))
}
