package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// These tests run a turn in one "process" (a Runner whose emits and saves
// go to a shared log and journal), kill it at a point — from then on its
// writes are refused, as a dead replica's are fenced — and continue the
// turn in a second Runner from the journal's last checkpoint and the
// log's tail, as a surviving replica does.

var errDead = errors.New("this process is dead")

// durableWorld is what outlives a process: the run's log, the journal,
// the saved thread and the upstream.
type durableWorld struct {
	mu     sync.Mutex
	log    []stream.Chunk
	cp     Checkpoint
	cpSeq  int // len(log) when cp was saved
	saved  *Thread
	writes []string // idempotency keys ("" when none) of the writes the upstream received
	pages  int      // list pages the upstream served
}

// process is one runner's life: dead once killed.
type process struct {
	w      *durableWorld
	mu     sync.Mutex
	dead   bool
	cancel context.CancelFunc
	// killOn, when set, is asked before each chunk is appended: "before"
	// kills the process without appending, "after" appends, then kills.
	killOn func(c stream.Chunk) string
}

func (p *process) kill() {
	p.mu.Lock()
	p.dead = true
	p.mu.Unlock()
	p.cancel()
}

func (p *process) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.dead
}

func (p *process) emit(c stream.Chunk) error {
	if !p.alive() {
		return errDead
	}
	when := ""
	if p.killOn != nil {
		when = p.killOn(c)
	}
	if when == "before" {
		p.kill()
		return errDead
	}
	// Round-trip through the wire form, as a log stores it.
	b, err := stream.Encode(c)
	if err != nil {
		return err
	}
	back, err := stream.ParseChunk(b)
	if err != nil {
		return fmt.Errorf("the runner emitted a chunk no client parses: %s: %v", b, err)
	}
	p.w.mu.Lock()
	p.w.log = append(p.w.log, back)
	p.w.mu.Unlock()
	if when == "after" {
		p.kill()
	}
	return nil
}

func (p *process) Save(_ context.Context, cp Checkpoint) error {
	if !p.alive() {
		return errDead
	}
	b, _ := json.Marshal(cp)
	var c Checkpoint
	json.Unmarshal(b, &c)
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	p.w.cp, p.w.cpSeq = c, len(p.w.log)
	return nil
}

func (p *process) saveThread(_ context.Context, t *Thread) error {
	if !p.alive() {
		return errDead
	}
	b, _ := json.Marshal(t)
	var c Thread
	json.Unmarshal(b, &c)
	p.w.mu.Lock()
	defer p.w.mu.Unlock()
	p.w.saved = &c
	return nil
}

// durableTranscript: a walk of every page, a write, the answer.
const durableTranscript = `{"name": "durable", "turns": [{"user": "count, then record it", "steps": [
  {"text": "Let me count every item.", "tool_calls": [{"name": "list_items", "arguments": {"_all_pages": true}}]},
  {"text": "Now I record the count.", "tool_calls": [{"name": "%s", "arguments": {"name": "count", "value": 50}}]},
  {"text": "There are 50 items, and the count is recorded."}]}]}`

// durableSetup builds the world's upstream and catalog: /items (5 pages
// of 10), POST /records (a write) and POST /keyed (a write that takes an
// Idempotency-Key header). hook runs on every request before it is
// answered (nil: none).
func durableSetup(t *testing.T, w *durableWorld, hook func(r *http.Request)) *tools.Catalog {
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if hook != nil {
			hook(r)
		}
		rw.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/records", "/keyed":
			io.Copy(io.Discard, r.Body)
			w.mu.Lock()
			w.writes = append(w.writes, r.Header.Get("Idempotency-Key"))
			w.mu.Unlock()
			fmt.Fprint(rw, `{"id": "rec_1", "recorded": true}`)
			return
		}
		var page int
		fmt.Sscan(r.URL.Query().Get("page"), &page)
		page = max(page, 1)
		w.mu.Lock()
		w.pages++
		w.mu.Unlock()
		var items []string
		for i := range 10 {
			if page <= 5 {
				items = append(items, fmt.Sprintf(`{"id":%d}`, (page-1)*10+i))
			}
		}
		fmt.Fprintf(rw, `{"data":[%s],"total":50}`, strings.Join(items, ","))
	}))
	t.Cleanup(srv.Close)
	cat := testCatalog(t, srv.URL)
	str, intS := &tools.Schema{Type: "string"}, &tools.Schema{Type: "integer"}
	body := []tools.Param{{Name: "name", In: tools.InBody, Schema: str}, {Name: "value", In: tools.InBody, Schema: intS}}
	err := cat.Add(
		&tools.Tool{ID: "p.record", Provider: "p", Name: "record", Description: "Record a value.", Method: "POST", Path: "/records", Origin: srv.URL,
			Params: body, Effect: tools.EffectWrite},
		&tools.Tool{ID: "p.record_keyed", Provider: "p", Name: "record_keyed", Description: "Record a value.", Method: "POST", Path: "/keyed", Origin: srv.URL,
			Params: append(slices.Clone(body), tools.Param{Name: "Idempotency-Key", In: tools.InHeader, Required: true, Schema: str}), Effect: tools.EffectWrite},
	)
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func durableRunner(t *testing.T, cat *tools.Catalog, write string) *Runner {
	return transcriptRunner(t, cat, fmt.Sprintf(durableTranscript, write))
}

// transcriptRunner is a runner over cat whose model replays transcript.
func transcriptRunner(t *testing.T, cat *tools.Catalog, transcript string) *Runner {
	tr, err := ParseTranscript([]byte(transcript))
	if err != nil {
		t.Fatal(err)
	}
	results := loop.NewRetrieval(loop.RetrievalOptions{})
	eng := loop.New(loop.Options{Caller: tools.NewInvoker(tools.InvokerOptions{}), Results: results, Clock: paginate.NewFakeClock(time.Now())})
	return NewRunner(RunnerOptions{Model: NewReplay(tr, ReplayOptions{ChunkSize: 4}), Engine: eng, Retrieval: results, Catalog: cat})
}

var durableDef = Definition{ID: "a", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}, {ToolID: "p.record"}, {ToolID: "p.record_keyed"}}}

// runUntilKilled runs a new turn in process p until it returns.
func runUntilKilled(t *testing.T, r *Runner, p *process) {
	th := &Thread{Key: ThreadKey("", "a", "c1"), Msgs: []UIMessage{{ID: "u1", Role: RoleUser, Parts: []Part{{Type: "text", Text: "count, then record it"}}}}}
	runThreadUntilKilled(t, r, p, durableDef, th)
}

// runThreadUntilKilled runs the next turn of th, as def, in process p
// until it returns.
func runThreadUntilKilled(t *testing.T, r *Runner, p *process, def Definition, th *Thread) {
	p.saveThread(context.Background(), th)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	err := r.Run(ctx, &Turn{Agent: func() (Definition, bool) { return def, true }, Thread: th, Org: "o",
		Emit: p.emit, Checkpoint: p.saveThread, Journal: p})
	if p.alive() {
		t.Fatalf("the turn ended (%v) before the process was killed", err)
	}
}

// takeOver continues the world's turn in a new process with a new
// runner, as a surviving replica does, and returns its thread.
func takeOver(t *testing.T, r *Runner, w *durableWorld, count int) *Thread {
	return takeOverAs(t, r, w, count, durableDef)
}

// takeOverAs is takeOver of a turn of agent def.
func takeOverAs(t *testing.T, r *Runner, w *durableWorld, count int, def Definition) *Thread {
	w.mu.Lock()
	cp, th := w.cp, w.saved
	tail := slices.Clone(w.log[w.cpSeq:])
	w.mu.Unlock()
	p := &process{w: w}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	defer cancel()
	err := r.Run(ctx, &Turn{Agent: func() (Definition, bool) { return def, true }, Thread: th, Org: "o",
		Emit: p.emit, Checkpoint: p.saveThread, Journal: p,
		Resume: &Resume{Checkpoint: cp, Tail: tail, By: "survivor", Reason: "takeover", Count: count}})
	if err != nil {
		t.Fatalf("the continued turn: %v", err)
	}
	p.saveThread(ctx, th)
	return th
}

// checkStream checks the whole stream as one client saw it: one start,
// one finish at the end, no error; every delta inside its part; a tool's
// end after its start, once.
func checkStream(t *testing.T, log []stream.Chunk) {
	t.Helper()
	open := map[string]bool{}
	started, ended := map[string]bool{}, map[string]bool{}
	var types []string
	for i, c := range log {
		types = append(types, c.Type())
		switch c := c.(type) {
		case stream.Start:
			if i != 0 {
				t.Errorf("start at %d", i)
			}
		case stream.Finish:
			if i != len(log)-1 {
				t.Errorf("finish at %d of %d", i, len(log))
			}
		case stream.Error:
			t.Errorf("an error chunk: %s", c.ErrorText)
		case stream.TextStart:
			if open["t"+c.ID] {
				t.Errorf("text %s started twice", c.ID)
			}
			open["t"+c.ID] = true
		case stream.TextDelta:
			if !open["t"+c.ID] {
				t.Errorf("a delta of text %s outside it", c.ID)
			}
		case stream.TextEnd:
			delete(open, "t"+c.ID)
		case stream.ToolInputStart:
			if started[c.ToolCallID] {
				t.Errorf("call %s started twice", c.ToolCallID)
			}
			started[c.ToolCallID] = true
		case stream.ToolInputAvailable:
			// A call whose input-start an earlier turn's stream showed
			// (an approved call) opens with its input.
			started[c.ToolCallID] = true
		case stream.ToolOutputAvailable, stream.ToolOutputError, stream.ToolInputError:
			id := map[bool]string{}[true]
			switch c := c.(type) {
			case stream.ToolOutputAvailable:
				id = c.ToolCallID
			case stream.ToolOutputError:
				id = c.ToolCallID
			case stream.ToolInputError:
				id = c.ToolCallID
			}
			if !started[id] || ended[id] {
				t.Errorf("call %s ended without its start, or twice", id)
			}
			ended[id] = true
		}
	}
	if len(log) == 0 || log[len(log)-1].Type() != "finish" {
		t.Errorf("the stream does not end with finish: %v", types)
	}
	if len(open) > 0 {
		t.Errorf("parts left open: %v", open)
	}
	if n := strings.Count(strings.Join(types, " "), "data-turn-resumed"); n != 1 {
		t.Errorf("%d data-turn-resumed chunks; want 1: %v", n, types)
	}
}

// modelSteps are the assistant steps the model would be shown of th's
// turn: each tool call once.
func modelSteps(t *testing.T, th *Thread) []string {
	t.Helper()
	var out []string
	seen := map[string]bool{}
	for _, m := range ModelMessages(th.Msgs) {
		if m.Role != RoleAssistant {
			continue
		}
		s := m.Content
		for _, c := range m.ToolCalls {
			if seen[c.ID] {
				t.Errorf("call %s is shown to the model twice", c.ID)
			}
			seen[c.ID] = true
			s += " → " + c.Name
		}
		out = append(out, s)
	}
	return out
}

func TestTakeover(t *testing.T) {
	wantSteps := func(write string) []string {
		return []string{"Let me count every item. → list_items", "Now I record the count. → " + write, "There are 50 items, and the count is recorded."}
	}
	cases := []struct {
		name  string
		write string
		// kill arranges the death: on a request (hook) or on a chunk.
		hook   func(p func() *process) func(r *http.Request)
		killOn func(c stream.Chunk) string
		// writes are the idempotency keys the upstream must have received.
		wantWrites   int
		sameKey      bool
		wantUnknown  bool
		wantResumeAt string // the chunk type that follows data-turn-resumed
	}{
		{name: "mid-walk", write: "record", wantWrites: 1,
			hook: func(p func() *process) func(r *http.Request) {
				return func(r *http.Request) {
					if r.URL.Query().Get("page") == "3" && p().alive() {
						p().kill()
					}
				}
			}},
		{name: "write sent, no answer", write: "record", wantWrites: 1, wantUnknown: true,
			hook: func(p func() *process) func(r *http.Request) {
				return func(r *http.Request) {
					if r.URL.Path == "/records" && p().alive() {
						p().kill()
					}
				}
			}},
		{name: "write sent, no answer, idempotency key", write: "record_keyed", wantWrites: 2, sameKey: true,
			hook: func(p func() *process) func(r *http.Request) {
				return func(r *http.Request) {
					if r.URL.Path == "/keyed" && p().alive() {
						p().kill()
					}
				}
			}},
		{name: "write answered, not shown", write: "record", wantWrites: 1,
			killOn: func(c stream.Chunk) string {
				if o, ok := c.(stream.ToolOutputAvailable); ok && strings.Contains(fmt.Sprintf("%s", o.Output), "rec_1") {
					return "before"
				}
				return ""
			}},
		{name: "mid-answer", write: "record", wantWrites: 1,
			killOn: func() func(c stream.Chunk) string {
				n := 0
				return func(c stream.Chunk) string {
					if d, ok := c.(stream.TextDelta); ok && strings.HasPrefix(d.ID, "txt_2") {
						if n++; n == 3 {
							return "after"
						}
					}
					return ""
				}
			}()},
		{name: "between steps", write: "record", wantWrites: 1,
			killOn: func(c stream.Chunk) string {
				if _, ok := c.(stream.FinishStep); ok {
					return "after"
				}
				return ""
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &durableWorld{}
			var owner *process
			var hook func(r *http.Request)
			if tc.hook != nil {
				hook = tc.hook(func() *process { return owner })
			}
			cat := durableSetup(t, w, hook)
			owner = &process{w: w, killOn: tc.killOn}
			runUntilKilled(t, durableRunner(t, cat, tc.write), owner)
			th := takeOver(t, durableRunner(t, cat, tc.write), w, 1)

			checkStream(t, w.log)
			got := modelSteps(t, th)
			if tc.wantUnknown && len(got) == 3 && strings.Contains(got[2], "`record` was refused or failed (outcome_unknown") {
				// The replayed answer says the write's outcome is unknown
				// rather than claim the recorded one.
				got[2] = wantSteps(tc.write)[2]
			}
			if diff := cmp.Diff(wantSteps(tc.write), got); diff != "" {
				t.Errorf("the steps the model is shown (-want +got):\n%s", diff)
			}
			if len(w.writes) != tc.wantWrites {
				t.Errorf("the upstream received %d writes; want %d", len(w.writes), tc.wantWrites)
			}
			if tc.sameKey && (len(w.writes) != 2 || w.writes[0] == "" || w.writes[0] != w.writes[1]) {
				t.Errorf("the write was sent again with keys %q; want the same key twice", w.writes)
			}
			changes := TurnChanges(th.Msgs[len(th.Msgs)-1])
			wantOutcome := "done"
			if tc.wantUnknown {
				wantOutcome = "unknown"
			}
			if len(changes) != 1 || changes[0].Outcome != wantOutcome {
				t.Errorf("turn changes %+v; want one write, %s", changes, wantOutcome)
			}
			if tc.wantUnknown {
				var tool Message
				for _, m := range ModelMessages(th.Msgs) {
					if m.Role == RoleTool && strings.Contains(m.Content, loop.CodeOutcomeUnknown) {
						tool = m
					}
				}
				if !strings.Contains(tool.Content, `\"value\":50`) {
					t.Errorf("the model was not told outcome_unknown with what was sent: %q", tool.Content)
				}
			}
			// The continuation is announced once, and says from where.
			for _, p := range th.Msgs[len(th.Msgs)-1].Parts {
				if p.Type == "data-turn-resumed" {
					var info TurnResumed
					json.Unmarshal(p.Data, &info)
					if info.By != "survivor" || info.Count != 1 {
						t.Errorf("data-turn-resumed %s", p.Data)
					}
				}
			}
		})
	}
}

// TestTakeoverTwice: the survivor dies too, mid-answer of the step it
// asked again; a third process finishes the turn from the second's
// checkpoint.
func TestTakeoverTwice(t *testing.T) {
	w := &durableWorld{}
	cat := durableSetup(t, w, nil)
	midAnswer := func(step string) func(c stream.Chunk) string {
		return func(c stream.Chunk) string {
			if d, ok := c.(stream.TextDelta); ok && strings.HasPrefix(d.ID, step) {
				return "after"
			}
			return ""
		}
	}
	owner := &process{w: w, killOn: midAnswer("txt_1")}
	runUntilKilled(t, durableRunner(t, cat, "record"), owner)

	// The second process dies in the same step, asked again.
	w.mu.Lock()
	cp, th := w.cp, w.saved
	tail := slices.Clone(w.log[w.cpSeq:])
	w.mu.Unlock()
	second := &process{w: w, killOn: midAnswer("txt_1_r1")}
	ctx, cancel := context.WithCancel(context.Background())
	second.cancel = cancel
	r2 := durableRunner(t, cat, "record")
	r2.Run(ctx, &Turn{Agent: func() (Definition, bool) { return durableDef, true }, Thread: th, Org: "o",
		Emit: second.emit, Checkpoint: second.saveThread, Journal: second,
		Resume: &Resume{Checkpoint: cp, Tail: tail, By: "second", Reason: "takeover", Count: 1}})
	if second.alive() {
		t.Fatal("the second process finished the turn")
	}
	final := takeOver(t, durableRunner(t, cat, "record"), w, 2)
	want := []string{"Let me count every item. → list_items", "Now I record the count. → record", "There are 50 items, and the count is recorded."}
	if diff := cmp.Diff(want, modelSteps(t, final)); diff != "" {
		t.Errorf("the steps the model is shown (-want +got):\n%s", diff)
	}
	if len(w.writes) != 1 {
		t.Errorf("%d writes; want 1", len(w.writes))
	}
	var types []string
	for _, c := range w.log {
		types = append(types, c.Type())
	}
	if n := strings.Count(strings.Join(types, " "), "data-turn-resumed"); n != 2 {
		t.Errorf("%d data-turn-resumed; want 2: %v", n, types)
	}
	if types[len(types)-1] != "finish" || slices.Contains(types, "error") {
		t.Errorf("stream: %v", types)
	}
}

// approvalTranscript: a walk, a write that needs approval (the turn ends
// there), then, once it was approved and run, the same write again.
const approvalTranscript = `{"name": "durable-approval", "turns": [{"user": "count, then record it", "steps": [
  {"text": "Let me count every item.", "tool_calls": [{"name": "list_items", "arguments": {"_all_pages": true}}]},
  {"text": "Now I record the count.", "tool_calls": [{"name": "record", "arguments": {"name": "count", "value": 50}}]},
  {"text": "Once more, to be sure.", "tool_calls": [{"name": "record", "arguments": {"name": "count", "value": 50}}]},
  {"text": "There are 50 items, and the count is recorded."}]}]}`

var approvalDurableDef = Definition{ID: "a", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}, {ToolID: "p.record", Approval: ApprovalRequired}}}

// TestTakeoverKeepsApproval: a write a human approved, whose turn's
// owner dies before the write's request left (or, in the last case,
// before its answer came), is run by the survivor without asking again
// — sent once (in the last case: not again, outcome_unknown) — and the
// approval is spent: the model's second, identical write asks anew, and
// the first approval cannot answer for it.
func TestTakeoverKeepsApproval(t *testing.T) {
	const approvedCall, secondCall = "call_0_1_0", "call_0_2_0"
	cases := []struct {
		name        string
		killOn      func(c stream.Chunk) string
		onWrite     bool // kill when the write reaches the upstream
		wantUnknown bool
	}{
		{name: "after the turn started", killOn: func(c stream.Chunk) string {
			if _, ok := c.(stream.Start); ok {
				return "after"
			}
			return ""
		}},
		{name: "approved call begun, not sent", killOn: func(c stream.Chunk) string {
			if a, ok := c.(stream.ToolInputAvailable); ok && a.ToolCallID == approvedCall {
				return "before"
			}
			return ""
		}},
		{name: "approved call answered, not shown", killOn: func(c stream.Chunk) string {
			if o, ok := c.(stream.ToolOutputAvailable); ok && o.ToolCallID == approvedCall {
				return "before"
			}
			return ""
		}},
		{name: "approved write sent, no answer", onWrite: true, wantUnknown: true},
		{name: "mid the next step", killOn: func(c stream.Chunk) string {
			if _, ok := c.(stream.TextDelta); ok {
				return "after"
			}
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := &durableWorld{}
			var owner *process
			var hook func(r *http.Request)
			if tc.onWrite {
				hook = func(r *http.Request) {
					if r.URL.Path == "/records" && owner != nil && owner.alive() {
						owner.kill()
					}
				}
			}
			cat := durableSetup(t, w, hook)

			// The first turn ends asking approval for the write.
			th := &Thread{Key: ThreadKey("", "a", "c1"), Msgs: []UIMessage{{ID: "u1", Role: RoleUser, Parts: []Part{{Type: "text", Text: "count, then record it"}}}}}
			first := &process{w: w, cancel: func() {}}
			err := transcriptRunner(t, cat, approvalTranscript).Run(context.Background(), &Turn{Agent: func() (Definition, bool) { return approvalDurableDef, true },
				Thread: th, Org: "o", Emit: first.emit, Checkpoint: first.saveThread, Journal: first})
			if err != nil {
				t.Fatal(err)
			}
			if len(th.Approvals) != 1 || th.Approvals[0].ToolCallID != approvedCall || len(w.writes) != 0 {
				t.Fatalf("the first turn: approvals %+v, %d writes; want one approval for %s, no write", th.Approvals, len(w.writes), approvedCall)
			}
			approval := th.Approvals[0].ID

			// The human approves; the answer's turn (a new run, a new log)
			// dies in the owner.
			if _, err := ApplyApprovals(th, answer(th, approval, true, "")); err != nil {
				t.Fatal(err)
			}
			w.mu.Lock()
			w.log, w.cp, w.cpSeq = nil, Checkpoint{}, 0
			w.mu.Unlock()
			owner = &process{w: w, killOn: tc.killOn}
			runThreadUntilKilled(t, transcriptRunner(t, cat, approvalTranscript), owner, approvalDurableDef, th)
			final := takeOverAs(t, transcriptRunner(t, cat, approvalTranscript), w, 1, approvalDurableDef)

			checkStream(t, w.log)
			if len(w.writes) != 1 {
				t.Errorf("the upstream received %d writes; want 1", len(w.writes))
			}
			// The stream asks approval once: for the second call, with a
			// new id.
			var asked []stream.ToolApprovalRequest
			for _, c := range w.log {
				if a, ok := c.(stream.ToolApprovalRequest); ok {
					asked = append(asked, a)
				}
			}
			if len(asked) != 1 || asked[0].ToolCallID != secondCall || asked[0].ApprovalID == approval {
				t.Errorf("approval requests %+v; want one, for %s, with a new id", asked, secondCall)
			}
			// The model read the approved write's outcome, not a request
			// for approval.
			var read string
			for _, m := range ModelMessages(final.Msgs) {
				if m.Role == RoleTool && m.ToolCallID == approvedCall {
					read = m.Content
				}
			}
			switch {
			case tc.wantUnknown && !strings.Contains(read, loop.CodeOutcomeUnknown):
				t.Errorf("the model read %q of the approved write; want outcome_unknown", read)
			case !tc.wantUnknown && !strings.Contains(read, "rec_1"):
				t.Errorf("the model read %q of the approved write; want its answer", read)
			}
			want := []string{"Let me count every item. → list_items", "Now I record the count. → record", "Once more, to be sure. → record"}
			if diff := cmp.Diff(want, modelSteps(t, final)); diff != "" {
				t.Errorf("the steps the model is shown (-want +got):\n%s", diff)
			}
			wantOutcome := map[bool]string{false: "done", true: "unknown"}[tc.wantUnknown]
			changes := TurnChanges(final.Msgs[len(final.Msgs)-1])
			if len(changes) != 2 || changes[0].ToolCallID != approvedCall || changes[0].Outcome != wantOutcome ||
				changes[1].ToolCallID != secondCall || changes[1].Outcome != "waiting" {
				t.Errorf("turn changes %+v; want %s %s, then %s waiting", changes, approvedCall, wantOutcome, secondCall)
			}
			// Single use: the first approval is spent, the second is new.
			if len(final.Approvals) != 2 || final.Approvals[0].ID != approval || !final.Approvals[0].Used ||
				final.Approvals[1].ToolCallID != secondCall || final.Approvals[1].Used {
				t.Errorf("issued approvals %+v", final.Approvals)
			}
			if _, err := ApplyApprovals(final, answer(final, approval, true, "")); !errors.Is(err, ErrApproval) {
				t.Errorf("the spent approval answered the second write: %v", err)
			}
			if len(w.writes) != 1 {
				t.Errorf("%d writes after the refused answer", len(w.writes))
			}
		})
	}
}
