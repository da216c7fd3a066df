package agent

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"maps"
	mrand "math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tiktoken-go/tokenizer"

	"github.com/trawl-dev/trawl/tools"
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

// A kept turn keeps its results' verdicts for the thread's next turn
// while each output has the size, head and tail it was read from, and
// reads a result's verdict again once its output is longer, or begins or
// ends otherwise: the next turn, decoded anew and with a verdict cache of
// its own, finds the same verdicts for the outputs left alone (one of
// them edited in its middle, as the verdict cache would not tell), new
// ones for the others, and fits as a fit with nothing kept does.
func TestKeptTurnsKeepVerdicts(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var thread []UIMessage
	for i := range 6 {
		var rows []string
		for j := range 40 {
			rows = append(rows, fmt.Sprintf(`{"id":"ord_%d_%d","total":%d}`, i, j, 100+j))
		}
		out := fmt.Sprintf(`{"data":[%s],"_note":"Every page.","_boundary":{"scope":"list_orders","completion":"complete","records":40}}`, strings.Join(rows, ","))
		thread = append(thread,
			UIMessage{ID: fmt.Sprint("u", i), Role: RoleUser, Parts: []Part{{Type: "text", Text: fmt.Sprint("question ", i)}}},
			UIMessage{ID: fmt.Sprint("a", i), Role: RoleAssistant, Parts: []Part{{Type: "step-start"},
				{Type: "dynamic-tool", State: "output-available", ToolCallID: fmt.Sprint("call_", i), ToolName: "list_orders",
					Input: json.RawMessage(`{"status":"open"}`), Output: json.RawMessage(out)},
				{Type: "text", Text: "answer", State: "done"}}})
	}
	thread = append(thread, UIMessage{ID: "u6", Role: RoleUser, Parts: []Part{{Type: "text", Text: "and now?"}}})
	kept := newOlderKept()
	input := func(th []UIMessage, kept *olderKept) fitInput {
		return fitInput{system: []Message{{Role: RoleSystem, Content: "You help."}}, toolChars: 100, thread: th,
			budget:  budget{model: "m", keepRecent: 0, cpt: DefaultCharsPerToken, limit: 1 << 20},
			expiry:  func(string) (time.Time, bool) { return now, false },
			verdict: newVerdictCache(64).get, memo: &olderMemo{}, kept: kept, threadKey: "k"}
	}
	verdicts := func(in fitInput) map[string]*verdict {
		out := map[string]*verdict{}
		for _, ot := range in.memo.conv.turns {
			for i := range ot.e {
				if p := ot.e[i].part; p != nil {
					if ot.e[i].verdict == nil {
						t.Fatalf("%s: no verdict read", p.ToolCallID)
					}
					out[p.ToolCallID] = ot.e[i].verdict
				}
			}
		}
		return out
	}
	first := input(decoded(thread), kept)
	if _, err := fit(first); err != nil {
		t.Fatal(err)
	}
	before := verdicts(first)
	kept.put("k", first.memo.conv)

	next := decoded(thread)
	edit := func(i int, f func(out []byte) []byte) {
		p := &next[2*i+1].Parts[1]
		p.Output = f(slices.Clone(p.Output))
	}
	edit(0, func(out []byte) []byte { return append(out, ' ') })                      // longer
	edit(1, func(out []byte) []byte { return append([]byte(`{"rows"`), out[7:]...) }) // another head
	edit(2, func(out []byte) []byte { out[len(out)-2] = ' '; return out })            // another tail
	edit(3, func(out []byte) []byte {                                                 // the middle: a total's digit
		i := len(out) / 2
		for out[i] < '0' || out[i] > '9' {
			i++
		}
		out[i] = '7'
		return out
	})
	second := input(next, kept)
	got, err := fit(second)
	if err != nil {
		t.Fatal(err)
	}
	if second.memo.conv.kept == nil {
		t.Fatal("the second turn took no kept turns")
	}
	after := verdicts(second)
	for i := range 6 {
		id := fmt.Sprint("call_", i)
		if same := after[id] == before[id]; same != (i >= 3) {
			t.Errorf("%s: verdict kept %v, want %v", id, same, i >= 3)
		}
		if want := newVerdict(&next[2*i+1].Parts[1]).render(time.Time{}); after[id].render(time.Time{}) != want {
			t.Errorf("%s: the verdict renders %q, the output's own %q", id, after[id].render(time.Time{}), want)
		}
	}
	want, err := fit(input(next, nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(fitted{}), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(fitted{}, "olderTurns")); diff != "" {
		t.Fatalf("the fit with kept turns differs from one with none (-none +kept):\n%s", diff)
	}
	if got.compacted != 6 {
		t.Fatalf("%d results compacted, want all 6", got.compacted)
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
		o := newOlderTurns(thread, false, "m")
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
	k := c.take(last, false, "m")
	if k == nil || k.n != 40 {
		t.Fatalf("the newest thread's turns: %v", k)
	}
	if c.take(last, false, "m") != nil || c.take("t0", false, "m") != nil {
		t.Error("turns taken twice, or the oldest thread's kept past the bound")
	}
	c.put("x", convert())
	if c.take("x", true, "m") != nil {
		t.Error("turns converted in the stored layout taken for the compact one")
	}
	c.put("x", convert())
	if c.take("x", false, "m2") != nil {
		t.Error("turns fitted and counted for one model taken for another")
	}
}

// A kept turn is found where the thread's previous turn had it, or
// where retention moved it, or anywhere by its key; it is taken once, and
// a key kept nowhere finds none — with every turn of the previous turn
// converted, and with its oldest never converted (base: only the newer
// turns are kept, at their places).
func TestKeptTurnsFind(t *testing.T) {
	for _, base := range []int{0, 3} {
		k := &keptTurns{base: base, turns: make([]*olderTurn, 11-base)}
		for i := range k.turns {
			if at := base + i; at != 8 {
				k.turns[i] = &olderTurn{key: uint64(100 + at), keyed: true}
				k.n++
			}
		}
		want := func(got *olderTurn, key uint64) {
			t.Helper()
			if got == nil || got.key != key {
				t.Fatalf("base %d: found %v, want the turn keyed %d", base, got, key)
			}
		}
		want(k.find(10, 110), 110) // in place
		if k.byKey != nil {
			t.Errorf("base %d: a turn in place was looked for by key", base)
		}
		if k.find(10, 110) != nil {
			t.Errorf("base %d: a turn taken twice", base)
		}
		// Retention dropped the two oldest turns: turn t was turn t+2.
		want(k.find(7, 109), 109)
		want(k.find(5, 107), 107)
		if k.shift != 2 {
			t.Errorf("base %d: shift %d after the turns moved by 2", base, k.shift)
		}
		want(k.find(0, 103), 103) // out of place: by key
		if k.shift != 3 {
			t.Errorf("base %d: shift %d after turn 3 was found at 0", base, k.shift)
		}
		want(k.find(1, 104), 104) // where that shift says
		if k.find(6, 108) != nil || k.find(1, 999) != nil || k.find(0, 102) != nil && base > 0 {
			t.Errorf("base %d: a turn found that was never kept", base)
		}
		want(k.find(12, 106), 106) // past the end of what was kept
	}
}

// A turn's key is the same for a decoded copy of the turn and differs
// when anything conversion reads differs: any one field of any part, a
// byte moved from one field to the next, a role, a part added; in a turn
// long enough that its key is hashed in several runs (keyRoom), in its
// first part and its last; and a turn with media has none.
func TestTurnKeyCoversWhatConversionReads(t *testing.T) {
	seed := maphash.MakeSeed()
	long := strings.Repeat("a long text, over what the key holds as itself. ", 3)
	base := func(parts int) []UIMessage {
		turn := []UIMessage{{ID: "u", Role: RoleUser, Parts: []Part{{Type: "text", Text: "Which items are open?"}}}}
		a := UIMessage{ID: "a", Role: RoleAssistant}
		for i := range parts {
			a.Parts = append(a.Parts, Part{Type: "step-start"},
				Part{Type: "dynamic-tool", State: "output-available", ToolCallID: fmt.Sprint("call_", i), ToolName: "list_items",
					Input: json.RawMessage(`{"status":"open"}`), Output: json.RawMessage(`{"data":[]}`)},
				Part{Type: "text", Text: long + fmt.Sprint(i), State: "done"},
				Part{Type: "data-note", Data: json.RawMessage(`{"n":1}`)})
		}
		return append(turn, a)
	}
	for _, parts := range []int{1, 12} {
		key := func(turn []UIMessage) uint64 {
			k, ok := turnKey(seed, turn)
			if !ok {
				t.Fatal("a turn without media has no key")
			}
			return k
		}
		want := key(base(parts))
		if got := key(decoded(base(parts))); got != want {
			t.Fatalf("%d parts: a decoded copy's key differs", parts)
		}
		out := base(parts)
		out[1].Parts[1].Output = json.RawMessage(`{"data":[1]}`)
		out[1].Parts[1].ErrorText = "x"
		if key(out) != want {
			t.Errorf("%d parts: an output changed the key (conversion leaves outputs to fitting)", parts)
		}
		edits := map[string]func(m []UIMessage){
			"role":      func(m []UIMessage) { m[0].Role = RoleSystem },
			"part made": func(m []UIMessage) { m[0].Parts = append(m[0].Parts, Part{Type: "text"}) },
		}
		last := len(base(parts)[1].Parts) - 1
		for _, at := range []int{1, last - 2} { // a tool part: the first, the last
			for f, edit := range map[string]func(p *Part){
				"type": func(p *Part) { p.Type = "tool-list_items" }, "state": func(p *Part) { p.State = "output-error" },
				"call id": func(p *Part) { p.ToolCallID += "x" }, "tool name": func(p *Part) { p.ToolName = "list_item" },
				"input": func(p *Part) { p.Input = json.RawMessage(`{"status":"shut"}`) },
				"text":  func(p *Part) { p.Text = "t" }, "data": func(p *Part) { p.Data = json.RawMessage(`1`) },
				// A byte moved from one field to its neighbour.
				"moved": func(p *Part) { p.ToolCallID, p.ToolName = p.ToolCallID+"l", p.ToolName[1:] },
			} {
				edits[fmt.Sprint(f, " of part ", at)] = func(m []UIMessage) { edit(&m[1].Parts[at]) }
			}
		}
		edits["middle of a long text"] = func(m []UIMessage) {
			p := &m[1].Parts[last-1]
			p.Text = p.Text[:60] + "A" + p.Text[61:]
		}
		edits["last data"] = func(m []UIMessage) { m[1].Parts[last].Data = json.RawMessage(`{"n":2}`) }
		for name, edit := range edits {
			turn := decoded(base(parts))
			edit(turn)
			if key(turn) == want {
				t.Errorf("%d parts: the key is the same with the %s changed", parts, name)
			}
		}
		media := base(parts)
		media[1].Parts[last].Media = []tools.Media{{Type: "image", MIMEType: "image/png"}}
		if _, ok := turnKey(seed, media); ok {
			t.Errorf("%d parts: a turn with media has a key", parts)
		}
	}
}

// TestFitReusesLeastFit: a turn's later step that takes its previous
// step's decisions (leastFit) sends exactly what a fit made anew sends,
// and counts exactly its request's tokens, whatever changed in between:
// this turn's calls and results added (the fixed part grows), the budget,
// the live stored results (one expired; one kept anew; one an older turn
// names made live, or living longer), the model, the system messages.
func TestFitReusesLeastFit(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	tokens := NewTokenMemo(bpeCounter(tokenizer.O200kBase), 0)
	resultID := regexp.MustCompile(`"_resultId":"(r_[0-9a-f]+)"`)
	var reused, refused int
	changed := map[string]int{} // the changes made with a least fit to reuse, by kind
	seeds := uint64(300)
	if testing.Short() {
		seeds = 60
	}
	for seed := range seeds {
		rng := mrand.New(mrand.NewPCG(seed, 31))
		thread, current := randThread(rng)
		live := map[string]time.Time{}
		var ids []string // the stored results the thread names
		for _, m := range thread {
			for _, p := range m.Parts {
				for _, id := range resultID.FindAllStringSubmatch(string(p.Output), -1) {
					ids = append(ids, id[1])
					if rng.IntN(2) == 0 {
						live[id[1]] = now.Add(time.Duration(1+rng.IntN(60)) * time.Minute)
					}
				}
			}
		}
		size := 0
		for _, m := range ModelMessages(thread) {
			size += messageSize(&m)
		}
		b := budget{model: "m", keepRecent: rng.IntN(4), cpt: DefaultCharsPerToken, limit: 1500 + rng.IntN(size/2+2000)}
		cache := newVerdictCache(64)
		memo := &olderMemo{}
		calls := 0
		system := []Message{{Role: RoleSystem, Content: "You help."}}
		for step := range 8 {
			stepLive := maps.Clone(live) // as fitStep builds it, a map a step
			in := fitInput{system: system, toolChars: 500, thread: thread, current: current, budget: b,
				expiry: func(id string) (time.Time, bool) {
					e, ok := stepLive[id]
					return e, ok
				},
				live: stepLive, verdict: cache.get, memo: memo}
			anew := in
			anew.memo, anew.live = nil, nil
			name := fmt.Sprintf("seed %d, step %d", seed, step)
			var last *leastFit
			if memo.conv != nil {
				last = memo.conv.last
			}
			want, wantErr := fit(anew)
			got, err := fit(in)
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("%s: fit: %v; anew: %v", name, err, wantErr)
			}
			if last != nil && memo.conv.last == last {
				reused++
			} else if last != nil {
				refused++
			}
			if err == nil {
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(fitted{}), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(fitted{}, "olderTurns")); diff != "" {
					t.Fatalf("%s: fit differs from a fit made anew (-anew +fit):\n%s", name, diff)
				}
				if n, want := got.countTokens(tokens, nil), RequestTokens(bpeCounter(tokenizer.O200kBase), &ModelRequest{Messages: got.msgs}); n != want {
					t.Fatalf("%s: counted %d tokens, the request has %d", name, n, want)
				}
			}
			// What the next step finds.
			kind := []string{"calls", "calls", "calls", "budget", "expired", "stored", "model", "system", "named", "extended"}[rng.IntN(10)]
			if (kind == "named" || kind == "extended") && len(ids) == 0 {
				kind = "stored"
			}
			if memo.conv != nil && memo.conv.last != nil {
				changed[kind]++
			}
			switch kind {
			case "calls": // this turn called a tool: its call and result are sent whole
				c := UIMessage{ID: "current", Role: RoleAssistant}
				if current != nil {
					c.Parts = slices.Clone(current.Parts)
				}
				calls++
				c.Parts = append(c.Parts, Part{Type: "step-start"}, Part{Type: "dynamic-tool", ToolName: "list_orders", ToolCallID: fmt.Sprint("now_", calls),
					State: "output-available", Input: json.RawMessage(`{}`), Output: json.RawMessage(strings.Repeat(`{"id":1},`, rng.IntN(200)) + `{"id":2}`)})
				current = &c
			case "budget":
				b.limit += rng.IntN(2000) - 1000
			case "expired":
				for id := range live {
					delete(live, id)
					break
				}
			case "stored": // a new result kept: no older turn names it
				live[fmt.Sprintf("r_%032x", rng.Uint64())] = now.Add(time.Hour)
			case "named": // a result an older turn names is live (again)
				live[ids[rng.IntN(len(ids))]] = now.Add(2 * time.Hour)
			case "extended": // or lives longer
				id := ids[rng.IntN(len(ids))]
				if e, ok := live[id]; ok {
					live[id] = e.Add(time.Minute)
				}
			case "model":
				b.model = fmt.Sprint("m", step)
			case "system": // the guidance changed: the fixed part shrinks or grows
				system = []Message{{Role: RoleSystem, Content: strings.Repeat("Walk every page. ", rng.IntN(120))}}
			}
		}
	}
	t.Logf("%d steps took their previous step's decisions, %d made them again; changes made with a fit to reuse: %v", reused, refused, changed)
	if reused == 0 || refused == 0 || len(changed) < 8 {
		t.Errorf("%d steps reused, %d refused, changes %v: the paths are not taken", reused, refused, changed)
	}
}

// At the edges of the budget — where one character more lets every older
// turn be sent with its results compacted and nothing left out, or lets
// one more turn in — a step after one that left turns out sends what a
// fit made anew sends, whether or not it reuses that fit's decisions.
func TestFitReuseAtTheEdge(t *testing.T) {
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var thread []UIMessage
	live := map[string]time.Time{}
	for i := range 3 {
		id := fmt.Sprintf("r_%032x", i)
		live[id] = now.Add(time.Hour)
		rows := strings.Repeat(`{"id":"ord_1","total":5},`, 40) + `{"id":"ord_2","total":6}`
		thread = append(thread,
			UIMessage{ID: fmt.Sprint("u", i), Role: RoleUser, Parts: []Part{{Type: "text", Text: strings.Repeat("which orders are open? ", 17)}}},
			UIMessage{ID: fmt.Sprint("a", i), Role: RoleAssistant, Parts: []Part{{Type: "step-start"},
				{Type: "dynamic-tool", ToolName: "list_orders", ToolCallID: fmt.Sprint("call_", i), State: "output-available", Input: json.RawMessage(`{}`),
					Output: json.RawMessage(fmt.Sprintf(`{"data":[%s],"_pagingComplete":true,"_boundary":{"scope":"list_orders","completion":"complete","records":41},"_resultId":%q}`, rows, id))},
				{Type: "step-start"}, {Type: "text", Text: "Done.", State: "done"}}})
	}
	thread = append(thread, UIMessage{ID: "u3", Role: RoleUser, Parts: []Part{{Type: "text", Text: "and now?"}}})
	in := fitInput{system: []Message{{Role: RoleSystem, Content: "You help."}}, toolChars: 100, thread: thread,
		budget: budget{model: "m", cpt: DefaultCharsPerToken},
		expiry: func(id string) (time.Time, bool) {
			e, ok := live[id]
			return e, ok
		},
		live: live, verdict: newVerdictCache(64).get}
	// The least limit at which nothing is left out.
	all := 0
	for in.budget.limit = 1000; ; in.budget.limit++ {
		if f, err := fit(in); err == nil && f.dropped == 0 && f.shortened == 0 && f.compacted == 3 {
			all = in.budget.limit
			break
		}
	}
	var reused int
	for limit := 1000; limit < all+5; limit++ { // from where turns are left out to where none is
		in.memo = &olderMemo{}
		in.budget.limit = limit
		if _, err := fit(in); err != nil {
			continue
		}
		last := in.memo.conv.last
		for _, next := range []int{limit + 1, limit + 3, limit + 400, limit - 1, limit - 3, limit - 400} {
			in.budget.limit = next
			anew := in
			anew.memo, anew.live = nil, nil
			want, wantErr := fit(anew)
			got, err := fit(in)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("limit %d then %d: fit: %v; anew: %v", limit, next, err, wantErr)
			}
			if err == nil {
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(fitted{}), cmpopts.EquateEmpty(), cmpopts.IgnoreFields(fitted{}, "olderTurns")); diff != "" {
					t.Fatalf("limit %d then %d: fit differs from a fit made anew (-anew +fit):\n%s", limit, next, diff)
				}
			}
			if last != nil && in.memo.conv.last == last {
				reused++
			}
			in.budget.limit = limit
		}
	}
	if reused == 0 {
		t.Error("no step reused its previous step's decisions")
	}
}
