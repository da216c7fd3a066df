package agent

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"unsafe"
)

// Keeping a thread's converted older turns from one turn to the next.
//
// A turn converts the thread's older turns it may send (olderTurns) and
// counts their tokens. The next turn of the thread sends nearly the same
// turns again, from a thread decoded anew, so the runner keeps each
// converted turn by a hash of everything conversion reads of its
// messages (turnKey: roles, and each part's type, text, state, call id,
// tool name, input and data — not the outputs, which conversion leaves
// to fitting) and takes it back when the next turn's thread holds a turn
// with the same hash. What depends on a result's output — the message's
// size, its verdict, its compacted and whole texts — is read again from
// the new thread's part; the token counts stay, since countTokens reuses
// one only for the very text it was counted with. A turn whose parts
// carry media is never kept (their images are part of the message).

// maxKeptTurns and maxKeptBytes bound the converted turns a runner keeps
// over all threads, and the text they hold; past either, the threads
// kept longest ago are dropped first.
const (
	maxKeptTurns = 8192
	maxKeptBytes = 16 << 20
)

// olderKept is a runner's kept turns, by thread key. Safe for concurrent
// use; a turn takes its thread's turns (they are its own until it puts
// them back), so two turns never share one.
type olderKept struct {
	seed maphash.Seed

	mu      sync.Mutex
	threads map[string]*keptTurns
	order   []keptAt // the puts, oldest first
	seq     uint64   // counts the puts
	turns   int      // kept over all threads
	bytes   int      // the text they hold (keptTurns.bytes)
}

// keptAt is one put: the thread and its sequence number (an entry whose
// thread was put again since, or taken, is stale).
type keptAt struct {
	thread string
	seq    uint64
}

// keptTurns are one thread's converted turns, by their place in the
// thread's previous turn (nil: not kept), found by turnKey (find).
type keptTurns struct {
	compact bool
	model   string // what the turns were fitted and counted for
	seq     uint64
	turns   []*olderTurn
	n       int // the turns kept: those of turns not nil
	bytes   int // the texts of their messages
	// shift is what the place of the last turn found was over its
	// place in the new thread; byKey indexes turns by key, built the
	// first time a turn is not where shift says.
	shift int
	byKey map[uint64]int
}

// find removes and returns the kept turn keyed key, looked for first
// where turn t of the new thread was in the previous one (the place of
// the last turn found, shifted as much: a thread grows at its end and
// retention drops its oldest turns), then by key; nil: none. Two turns
// with one key are the same to conversion, so either may be taken.
func (k *keptTurns) find(t int, key uint64) *olderTurn {
	at := t + k.shift
	if at < 0 || at >= len(k.turns) || k.turns[at] == nil || k.turns[at].key != key {
		if k.byKey == nil {
			k.byKey = make(map[uint64]int, k.n)
			for i, ot := range k.turns {
				if ot != nil {
					k.byKey[ot.key] = i
				}
			}
		}
		i, ok := k.byKey[key]
		if !ok || k.turns[i] == nil || k.turns[i].key != key {
			return nil
		}
		at, k.shift = i, i-t
	}
	ot := k.turns[at]
	k.turns[at] = nil
	return ot
}

func newOlderKept() *olderKept {
	return &olderKept{seed: maphash.MakeSeed(), threads: map[string]*keptTurns{}}
}

// take removes and returns thread's kept turns (nil: none, or kept for
// another layout or model).
func (c *olderKept) take(thread string, compact bool, model string) *keptTurns {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.threads[thread]
	if k == nil {
		return nil
	}
	delete(c.threads, thread)
	c.turns, c.bytes = c.turns-k.n, c.bytes-k.bytes
	if k.compact != compact || k.model != model {
		return nil
	}
	return k
}

// put keeps o's converted turns for thread's next turn, without what
// they hold of o's thread (its parts) or of its results.
func (c *olderKept) put(thread string, o *olderTurns) {
	if c == nil || o == nil {
		return
	}
	k := &keptTurns{compact: o.compact, model: o.model, turns: make([]*olderTurn, len(o.turns))}
	for t, ot := range o.turns {
		if ot == nil || !ot.keyed {
			continue
		}
		for i := range ot.e {
			e := &ot.e[i]
			if e.part != nil && e.counted != e.comp {
				e.counted, e.tokens = "", 0 // a result counted whole: its text is not kept
			}
			e.part, e.verdict, e.whole, e.comp, e.compGen = nil, nil, "", "", 0
			m := &ot.msgs[i]
			k.bytes += len(m.Content) + len(e.counted)
			for _, tc := range m.ToolCalls {
				k.bytes += len(tc.Arguments)
			}
		}
		k.turns[t] = ot
		k.n++
	}
	if k.n == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.threads[thread]; old != nil {
		c.turns, c.bytes = c.turns-old.n, c.bytes-old.bytes
	}
	c.seq++
	k.seq = c.seq
	c.threads[thread] = k
	c.order = append(c.order, keptAt{thread, k.seq})
	c.turns, c.bytes = c.turns+k.n, c.bytes+k.bytes
	for (c.turns > maxKeptTurns || c.bytes > maxKeptBytes) && len(c.order) > 0 {
		at := c.order[0]
		c.order = c.order[1:]
		if old := c.threads[at.thread]; old != nil && old.seq == at.seq {
			c.turns, c.bytes = c.turns-old.n, c.bytes-old.bytes
			delete(c.threads, at.thread)
		}
	}
	if len(c.order) > 2*len(c.threads)+64 { // entries of threads taken or put again since
		live := c.order[:0]
		for _, at := range c.order {
			if old := c.threads[at.thread]; old != nil && old.seq == at.seq {
				live = append(live, at)
			}
		}
		c.order = live
	}
}

// turnKey is the hash of what conversion reads of msgs (one turn), and
// false when the turn is not to be kept (a part carries media). Each
// message is its role and part count, then each part's fields, each its
// length and its text (a long one's own hash): no two turns encode
// alike.
func turnKey(seed maphash.Seed, msgs []UIMessage) (uint64, bool) {
	var buf [512]byte
	b := buf[:0]
	for i := range msgs {
		m := &msgs[i]
		b = keyText(b, seed, string(m.Role))
		b = binary.AppendUvarint(b, uint64(len(m.Parts)))
		for j := range m.Parts {
			p := &m.Parts[j]
			if len(p.Media) > 0 {
				return 0, false
			}
			// Bytes are read in place: a conversion would copy them.
			input := unsafe.String(unsafe.SliceData(p.Input), len(p.Input))
			data := unsafe.String(unsafe.SliceData(p.Data), len(p.Data))
			for _, s := range [...]string{p.Type, p.Text, p.State, p.ToolCallID, p.ToolName, input, data} {
				b = keyText(b, seed, s)
			}
		}
	}
	return maphash.Bytes(seed, b), true
}

// keyText appends s to a turn's key: its length, then s itself or, when
// long, its hash.
func keyText(b []byte, seed maphash.Seed, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	if len(s) <= 64 {
		return append(b, s...)
	}
	return binary.LittleEndian.AppendUint64(b, maphash.String(seed, s))
}
