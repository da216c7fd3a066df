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
// size, its compacted and whole texts — is read again from the new
// thread's part, and its verdict is kept only while that output has the
// size, head and tail it was read from (as the verdict cache tells
// results apart); the token counts stay, since countTokens reuses
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
// thread's previous turn (turns[i] was turn base+i there; nil: not kept),
// found by turnKey (find).
type keptTurns struct {
	compact bool
	model   string // what the turns were fitted and counted for
	seq     uint64
	base    int // the oldest turn converted: those before it never were
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
	at := t + k.shift - k.base // in turns
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
		at, k.shift = i, k.base+i-t
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
// they hold of o's thread (its parts) or of its results but for their
// verdicts (taken checks them against the new outputs).
func (c *olderKept) put(thread string, o *olderTurns) {
	if c == nil || o == nil {
		return
	}
	// Turns are converted newest first: those before o.left never were.
	k := &keptTurns{compact: o.compact, model: o.model, base: o.left, turns: make([]*olderTurn, len(o.turns)-o.left)}
	for t, ot := range o.turns[o.left:] {
		if ot == nil || !ot.keyed {
			continue
		}
		for i := range ot.e {
			e := &ot.e[i]
			if e.part != nil && e.counted != e.comp {
				e.counted, e.tokens = "", 0 // a result counted whole: its text is not kept
			}
			if v := e.verdict; v != nil {
				// Kept while the output is the same (taken); its texts,
				// by estimate: its arguments and note, and its renderings
				// (the text it is sent as, and the counted one).
				k.bytes += len(v.args) + len(v.note) + 2*len(e.comp)
			}
			e.part, e.whole, e.comp, e.compGen = nil, "", "", 0
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
// message is its role and part count, then each part: its fields'
// lengths, then their texts (a long one as its own hash), so that no two
// turns encode alike. The encoding is laid out in a buffer on the stack
// and hashed once; when a part might not fit, what the buffer holds is
// hashed and that hash starts it again.
func turnKey(seed maphash.Seed, msgs []UIMessage) (uint64, bool) {
	var buf [1024]byte
	b := buf[:0]
	for i := range msgs {
		m := &msgs[i]
		b = keyRoom(b, seed)
		b = binary.AppendUvarint(b, uint64(len(m.Role)))
		b = keyBody(b, seed, string(m.Role))
		b = binary.AppendUvarint(b, uint64(len(m.Parts)))
		for j := range m.Parts {
			p := &m.Parts[j]
			if len(p.Media) > 0 {
				return 0, false
			}
			b = keyRoom(b, seed)
			// Bytes are read in place: a conversion would copy them.
			input := unsafe.String(unsafe.SliceData(p.Input), len(p.Input))
			data := unsafe.String(unsafe.SliceData(p.Data), len(p.Data))
			if len(p.Type)|len(p.Text)|len(p.State)|len(p.ToolCallID)|len(p.ToolName)|len(input)|len(data) < 0x80 {
				// Each length one byte, as AppendUvarint writes it.
				b = append(b, byte(len(p.Type)), byte(len(p.Text)), byte(len(p.State)), byte(len(p.ToolCallID)), byte(len(p.ToolName)), byte(len(input)), byte(len(data)))
			} else {
				for _, n := range [...]int{len(p.Type), len(p.Text), len(p.State), len(p.ToolCallID), len(p.ToolName), len(input), len(data)} {
					b = binary.AppendUvarint(b, uint64(n))
				}
			}
			b = keyBody(b, seed, p.Type)
			b = keyBody(b, seed, p.Text)
			b = keyBody(b, seed, p.State)
			b = keyBody(b, seed, p.ToolCallID)
			b = keyBody(b, seed, p.ToolName)
			b = keyBody(b, seed, input)
			b = keyBody(b, seed, data)
		}
	}
	return maphash.Bytes(seed, b), true
}

const (
	// keyTextMax is the longest text a turn's key holds as itself; a
	// longer one is its hash.
	keyTextMax = 64
	// keyPartMax bounds what a turn's key takes of one part (or of a
	// message's role and part count).
	keyPartMax = 7 * (binary.MaxVarintLen64 + keyTextMax)
)

// keyRoom makes room in b, a turn's key so far, for one part: when its
// array might not hold it, b becomes the hash of what it holds.
func keyRoom(b []byte, seed maphash.Seed) []byte {
	if len(b)+keyPartMax > cap(b) {
		h := maphash.Bytes(seed, b)
		b = binary.LittleEndian.AppendUint64(b[:0], h)
	}
	return b
}

// keyBody appends s to a turn's key, after its length: s itself or, when
// long, its hash.
func keyBody(b []byte, seed maphash.Seed, s string) []byte {
	if len(s) > keyTextMax {
		return binary.LittleEndian.AppendUint64(b, maphash.String(seed, s))
	}
	return append(b, s...)
}
