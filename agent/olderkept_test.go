package agent

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tiktoken-go/tokenizer"
)

// decoded is thread as a store gives it back: every string and slice
// new.
func decoded(thread []UIMessage) []UIMessage {
	out := make([]UIMessage, len(thread))
	for i, m := range thread {
		m.ID, m.Role, m.Metadata = strings.Clone(m.ID), Role(strings.Clone(string(m.Role))), slices.Clone(m.Metadata)
		m.Parts = slices.Clone(m.Parts)
		for j := range m.Parts {
			p := &m.Parts[j]
			p.Type, p.Text, p.State, p.ToolCallID, p.ToolName = strings.Clone(p.Type), strings.Clone(p.Text), strings.Clone(p.State), strings.Clone(p.ToolCallID), strings.Clone(p.ToolName)
			p.Input, p.Output, p.ErrorText, p.Data = slices.Clone(p.Input), slices.Clone(p.Output), strings.Clone(p.ErrorText), slices.Clone(p.Data)
		}
		out[i] = m
	}
	return out
}

// TestFitKeptTurns: a turn fitted from the turns its thread's previous
// turn converted (olderKept) sends exactly what the plain implementation
// sends and counts exactly the tokens of its request, whatever changed in
// between: nothing; a turn added; an older user text, assistant text,
// call input or result output edited in place under the same ids; the
// oldest turns dropped (retention); stored results expiring; the thread
// decoded anew each time.
func TestFitKeptTurns(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	tokens := NewTokenMemo(bpeCounter(tokenizer.O200kBase), 0)
	specs := []ToolSpec{{Name: "list_orders", Description: "List orders", Parameters: []byte(`{"type":"object"}`)}}
	kept := newOlderKept()
	var reused, changes int
	seeds := uint64(150)
	if testing.Short() {
		seeds = 30
	}
	for seed := range seeds {
		rng := mrand.New(mrand.NewPCG(seed, 27))
		thread, current := randThread(rng)
		limit := 2000 + rng.IntN(60_000)
		live := map[string]bool{}
		cache := newVerdictCache(64)
		key := fmt.Sprint("thread", seed%7) // threads meet their keys' other threads' turns too
		for turn := range 4 {
			th := decoded(thread)
			in := fitInput{system: []Message{{Role: RoleSystem, Content: "You help."}}, toolChars: 500, thread: th, current: current,
				budget: budget{model: "m", keepRecent: rng.IntN(4), cpt: DefaultCharsPerToken, limit: limit},
				expiry: func(id string) (time.Time, bool) {
					if _, ok := live[id]; !ok {
						live[id] = rng.IntN(2) == 0
					}
					return now.Add(time.Minute), live[id]
				},
				verdict: cache.get, memo: &olderMemo{}, compact: seed%5 == 0, kept: kept, threadKey: key}
			name := fmt.Sprintf("seed %d, turn %d", seed, turn)
			fresh := in // the same fit with nothing kept
			fresh.memo, fresh.kept = &olderMemo{}, nil
			for step := range 2 {
				ref, refErr := refFit(in)
				if in.compact { // the plain implementation has the stored layout only
					ref, refErr = fit(fresh)
				}
				got, err := fit(in)
				if (err == nil) != (refErr == nil) || err != nil && err.Error() != refErr.Error() {
					t.Fatalf("%s, step %d: fit: %v; the plain implementation: %v", name, step, err, refErr)
				}
				if err != nil {
					break
				}
				if diff := cmp.Diff(ref, got, cmp.AllowUnexported(fitted{}), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(fitted{}, "fixed", "history", "olderAt", "olderTurns")); diff != "" {
					t.Fatalf("%s, step %d: fit differs from the plain implementation (-plain +fit):\n%s", name, step, diff)
				}
				want := RequestTokens(bpeCounter(tokenizer.O200kBase), &ModelRequest{Messages: got.msgs, Tools: specs})
				if n := got.countTokens(tokens, specs); n != want {
					t.Fatalf("%s, step %d: counted %d tokens, the request has %d", name, step, n, want)
				}
				in.budget.limit = in.budget.limit*3/4 + 1 // the next step has less room
				fresh.budget = in.budget
			}
			if in.memo.conv != nil && in.memo.conv.kept != nil {
				reused++
			}
			kept.put(key, in.memo.conv)
			// What the next turn finds.
			switch rng.IntN(6) {
			case 0: // nothing changed
			case 1: // a turn added
				thread = append(thread, UIMessage{ID: fmt.Sprint("n", turn), Role: RoleUser, Parts: []Part{{Type: "text", Text: "and then?"}}})
			case 2: // retention dropped the oldest turns
				for len(thread) > 1 {
					thread = thread[1:]
					if thread[0].Role == RoleUser {
						break
					}
				}
			case 3: // stored results expired
				for id := range live {
					live[id] = false
				}
			default: // an older part edited in place, ids kept
				thread = slices.Clone(thread)
				if len(thread) == 0 {
					break
				}
				i := rng.IntN(len(thread))
				m := thread[i]
				m.Parts = slices.Clone(m.Parts)
				for j := range m.Parts {
					p := &m.Parts[j]
					switch {
					case p.Type == "text":
						p.Text += " (edited)"
					case p.IsTool() && rng.IntN(2) == 0:
						p.Input = json.RawMessage(`{"status":"closed"}`)
					case p.IsTool() && len(p.Output) > 10 && rng.IntN(2) == 0:
						out := slices.Clone(p.Output)
						out[len(out)/2] = ' ' // same length, other text
						p.Output = out
					case p.IsTool() && len(p.Output) > 0:
						p.Output = append(slices.Clone(p.Output), "  "...) // longer
					}
				}
				thread[i] = m
				changes++
			}
		}
	}
	t.Logf("%d turns fitted from kept turns, %d edits", reused, changes)
	if reused == 0 || changes == 0 {
		t.Errorf("%d turns fitted from kept turns, %d edits: the paths are not taken", reused, changes)
	}
}

// The runner keeps at most maxKeptTurns converted turns over all threads,
// dropping the threads put longest ago; a thread's turns are taken once.
func TestOlderKeptBound(t *testing.T) {
	c := newOlderKept()
	var thread []UIMessage
	for i := range 40 {
		thread = append(thread, UIMessage{ID: fmt.Sprint("u", i), Role: RoleUser, Parts: []Part{{Type: "text", Text: fmt.Sprint("question ", i)}}},
			UIMessage{ID: fmt.Sprint("a", i), Role: RoleAssistant, Parts: []Part{{Type: "text", Text: "answer"}}})
	}
	convert := func() *olderTurns {
		o := newOlderTurns(thread, false)
		o.keys, o.seed = true, c.seed
		o.turn(0)
		return o
	}
	threads := 2*maxKeptTurns/40 + 3
	for i := range threads {
		c.put(fmt.Sprint("t", i), convert())
		if c.turns > maxKeptTurns {
			t.Fatalf("after %d threads, %d turns kept", i+1, c.turns)
		}
	}
	if len(c.order) > 2*len(c.threads)+64 {
		t.Errorf("%d puts remembered for %d threads", len(c.order), len(c.threads))
	}
	// Long texts: the bound on bytes drops threads before the one on turns.
	for i := range thread {
		thread[i].Parts[0].Text = strings.Repeat("x", 4096) + fmt.Sprint(i)
	}
	for i := range 200 {
		c.put(fmt.Sprint("t", threads+i), convert())
		if c.bytes > maxKeptBytes || c.turns > maxKeptTurns {
			t.Fatalf("after %d threads of long texts, %d turns and %d bytes kept", i+1, c.turns, c.bytes)
		}
	}
	if c.turns > maxKeptTurns/2 {
		t.Errorf("%d turns of long texts kept (%d bytes): the bound on bytes does not bind", c.turns, c.bytes)
	}
	threads += 200
	last := fmt.Sprint("t", threads-1)
	k := c.take(last, false)
	if k == nil || k.n != 40 {
		t.Fatalf("the newest thread's turns: %v", k)
	}
	if c.take(last, false) != nil || c.take("t0", false) != nil {
		t.Error("turns taken twice, or the oldest thread's kept past the bound")
	}
	c.put("x", convert())
	if c.take("x", true) != nil {
		t.Error("turns converted in the stored layout taken for the compact one")
	}
}

// A kept turn is found where the thread's previous turn had it, or
// where retention moved it, or anywhere by its key; it is taken once, and
// a key kept nowhere finds none.
func TestKeptTurnsFind(t *testing.T) {
	k := &keptTurns{turns: make([]*olderTurn, 8)}
	for i := range k.turns {
		if i != 5 {
			k.turns[i] = &olderTurn{key: uint64(100 + i), keyed: true}
			k.n++
		}
	}
	want := func(got *olderTurn, key uint64) {
		t.Helper()
		if got == nil || got.key != key {
			t.Fatalf("found %v, want the turn keyed %d", got, key)
		}
	}
	want(k.find(7, 107), 107) // in place
	if k.byKey != nil {
		t.Error("a turn in place was looked for by key")
	}
	if k.find(7, 107) != nil {
		t.Error("a turn taken twice")
	}
	// Retention dropped the two oldest turns: turn t was turn t+2.
	want(k.find(4, 106), 106)
	want(k.find(2, 104), 104)
	if k.shift != 2 {
		t.Errorf("shift %d after the turns moved by 2", k.shift)
	}
	want(k.find(0, 100), 100) // out of place: by key
	if k.find(3, 105) != nil || k.find(1, 999) != nil {
		t.Error("a turn found that was never kept")
	}
	want(k.find(9, 103), 103) // past the end of what was kept
}
