package paginate

import "sync"

// idSet holds the hashes of the item ids a walk received. Ids are
// compared by their raw JSON (1 and "1" differ) through a 64-bit hash: a
// false duplicate needs a collision, about 1 in 10^12 for 5,000 items.
// Open addressing over a flat slice keeps each check to one or two cache
// lines, several times cheaper than a map for this one job.
type idSet struct {
	slots []uint64 // 0 is an empty slot; a zero hash is stored as 1
	n     int
	sink  uint64 // what warm read, kept so that its loads are not dropped
}

func newIDSet(expected int) idSet {
	size := 16
	for size < 2*expected {
		size <<= 1
	}
	if p, ok := idSlots.Get().(*[]uint64); ok && cap(*p) >= size && cap(*p) <= 4*size {
		slots := (*p)[:size]
		clear(slots)
		return idSet{slots: slots}
	}
	return idSet{slots: make([]uint64, size)}
}

// idSlots keeps the tables of walks that ended, so that the next walk's
// table is memory already mapped and warm rather than a fresh 128 KiB
// (the default budget of 5,000 items) for the collector to clear and
// sweep.
var idSlots sync.Pool

// release hands the table back for another walk; s is empty after.
func (s *idSet) release() {
	if cap(s.slots) >= 1024 {
		slots := s.slots[:0]
		idSlots.Put(&slots)
	}
	s.slots, s.n = nil, 0
}

// idHash is the hash add stores for h: never 0, which marks an empty
// slot (and, in collect's list of a page's hashes, a row without an id).
func idHash(h uint64) uint64 {
	if h == 0 {
		return 1
	}
	return h
}

// warm reads the slot each of hs (idHash values, 0 skipped) starts its
// probe at, all before any add: the loads do not depend on one another,
// so their cache misses overlap instead of coming one row at a time (the
// table is 128 KiB at the default budget, and a page's own bytes evict it
// between pages). It changes nothing in the set.
func (s *idSet) warm(hs []uint64) {
	if len(s.slots) == 0 {
		return
	}
	mask := uint64(len(s.slots) - 1)
	var x uint64
	for _, h := range hs {
		x ^= s.slots[h&mask]
	}
	s.sink = x
}

// add stores h and reports whether it was new.
func (s *idSet) add(h uint64) bool {
	h = idHash(h)
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = h
			s.n++
			return true
		case h:
			return false
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	s.slots, s.n = make([]uint64, max(16, 2*len(old))), 0
	for _, h := range old {
		if h != 0 {
			s.add(h)
		}
	}
}
