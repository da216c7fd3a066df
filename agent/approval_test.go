package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// approvalRig is a runner over an upstream with a list and a delete
// endpoint, whose deletes are counted.
type approvalRig struct {
	r       *Runner
	m       *scriptModel
	deletes atomic.Int32
}

func newApprovalRig(t *testing.T, steps ...func(ModelRequest) []ModelEvent) *approvalRig {
	rig := &approvalRig{m: &scriptModel{steps: steps}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodDelete {
			rig.deletes.Add(1)
			fmt.Fprint(w, `{"deleted":true}`)
			return
		}
		fmt.Fprint(w, `{"data":[{"id":1},{"id":2}],"total":2}`)
	}))
	t.Cleanup(srv.Close)
	cat := tools.NewCatalog()
	str := &tools.Schema{Type: "string"}
	if err := cat.Add(
		&tools.Tool{ID: "p.list_items", Provider: "p", Name: "list_items", Description: "List items.", Method: "GET", Path: "/items", Origin: srv.URL,
			Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{"data": {Type: "array"}, "total": {Type: "integer"}}}},
		&tools.Tool{ID: "p.delete_item", Provider: "p", Name: "delete_item", Description: "Delete an item.", Method: "DELETE", Path: "/items/{id}", Origin: srv.URL,
			Params: []tools.Param{{Name: "id", In: tools.InPath, Required: true, Schema: str}}},
	); err != nil {
		t.Fatal(err)
	}
	eng := loop.New(loop.Options{Caller: tools.NewInvoker(tools.InvokerOptions{}), Clock: paginate.NewFakeClock(time.Now())})
	rig.r = NewRunner(RunnerOptions{Model: rig.m, Engine: eng, Catalog: cat})
	return rig
}

func listThenDelete(ModelRequest) []ModelEvent {
	return []ModelEvent{
		{Kind: EventToolCallStart, Index: 0, ToolCallID: "c_list", ToolName: "list_items"},
		{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"_all_pages":true}`},
		{Kind: EventToolCallStart, Index: 1, ToolCallID: "c_del", ToolName: "delete_item"},
		{Kind: EventToolCallDelta, Index: 1, ArgsDelta: `{"id":"1"}`},
		{Kind: EventFinish, FinishReason: "tool_calls"},
	}
}

var approvalDef = Definition{ID: "a", AgentTools: []Binding{
	{ToolID: "p.list_items", LoopResponses: true},
	{ToolID: "p.delete_item", LoopResponses: true, Approval: ApprovalRequired},
}}

func chunksOf(rec *recorder, typ string) []stream.Chunk {
	var out []stream.Chunk
	for _, c := range rec.chunks {
		if c.Type() == typ {
			out = append(out, c)
		}
	}
	return out
}

func TestApprovalStopsTheWrite(t *testing.T) {
	rig := newApprovalRig(t, listThenDelete)
	rec := &recorder{}
	tr := turn(approvalDef, rec)
	if err := rig.r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	if n := rig.deletes.Load(); n != 0 {
		t.Fatalf("the delete ran %d times before approval", n)
	}
	if len(rig.m.reqs) != 1 {
		t.Errorf("%d model calls; the turn must end at the approval request", len(rig.m.reqs))
	}
	// The guidance for agents that can write is there.
	found := false
	for _, m := range rig.m.reqs[0].Messages {
		found = found || m.Content == prompts.Text("writing")
	}
	if !found {
		t.Error("an agent holding a destructive tool got no writing guidance")
	}
	if !strings.Contains(rig.m.reqs[0].Tools[1].Description, "[destructive]") {
		t.Errorf("delete_item description %q lacks its marker", rig.m.reqs[0].Tools[1].Description)
	}
	reqs := chunksOf(rec, "tool-approval-request")
	if len(reqs) != 1 {
		t.Fatalf("chunks: %v", rec.types())
	}
	ar := reqs[0].(stream.ToolApprovalRequest)
	if ar.ToolCallID != "c_del" || !strings.HasPrefix(ar.ApprovalID, "apr_") || len(ar.ApprovalID) < 20 {
		t.Errorf("approval request %+v", ar)
	}
	if types := strings.Join(rec.types(), " "); !strings.HasSuffix(types, "tool-approval-request finish-step data-turn-changes finish") {
		t.Errorf("chunks: %s", types)
	}
	// Evidence: the arguments and the list's verdict.
	ev := chunksOf(rec, "data-approval-evidence")
	if len(ev) != 1 {
		t.Fatalf("no evidence chunk: %v", rec.types())
	}
	b, _ := json.Marshal(ev[0])
	if !strings.Contains(string(b), `"input":{"id":"1"}`) || !strings.Contains(string(b), "list_items: single_response: 2 rows") {
		t.Errorf("evidence %s", b)
	}
	// The thread is saved waiting.
	th := tr.Thread
	last := th.Msgs[len(th.Msgs)-1]
	var del *Part
	for i := range last.Parts {
		if last.Parts[i].ToolCallID == "c_del" {
			del = &last.Parts[i]
		}
	}
	if del == nil || del.State != StateApprovalRequested || del.Approval == nil || del.Approval.ID != ar.ApprovalID || del.Effect != "destructive" {
		t.Fatalf("stored delete part %+v", del)
	}
	if ch := TurnChanges(last); len(ch) != 1 || ch[0] != (TurnChange{ToolCallID: "c_del", Tool: "delete_item", Effect: "destructive", Outcome: "waiting"}) {
		t.Errorf("turn changes %+v", ch)
	}
	if len(th.Approvals) != 1 || th.Approvals[0].ID != ar.ApprovalID || th.Approvals[0].Used {
		t.Errorf("issued approvals %+v", th.Approvals)
	}
}

// answer is the client's copy of the last assistant message with the
// delete part answered.
func answer(th *Thread, id string, approved bool, input string) UIMessage {
	m := th.Msgs[len(th.Msgs)-1]
	m.Parts = append([]Part(nil), m.Parts...)
	for i, p := range m.Parts {
		if p.State == StateApprovalRequested {
			p.State = StateApprovalResponded
			p.Approval = &PartApproval{ID: id, Approved: &approved, Reason: "not that one"}
			if input != "" {
				p.Input = json.RawMessage(input)
			}
			m.Parts[i] = p
		}
	}
	return m
}

func TestApprovalRoundTrip(t *testing.T) {
	for _, approved := range []bool{true, false} {
		t.Run(fmt.Sprint("approved=", approved), func(t *testing.T) {
			rig := newApprovalRig(t, listThenDelete)
			rec := &recorder{}
			tr := turn(approvalDef, rec)
			if err := rig.r.Run(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			id := tr.Thread.Approvals[0].ID
			if _, err := ApplyApprovals(tr.Thread, answer(tr.Thread, id, approved, "")); err != nil {
				t.Fatal(err)
			}
			msgID := tr.Thread.Msgs[len(tr.Thread.Msgs)-1].ID
			rec2 := &recorder{}
			tr.Emit = rec2.emit
			if err := rig.r.Run(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			if start := rec2.chunks[0].(stream.Start); start.MessageID != msgID {
				t.Errorf("the answer's turn starts message %q, want the same %q", start.MessageID, msgID)
			}
			want := int32(0)
			if approved {
				want = 1
			}
			if n := rig.deletes.Load(); n != want {
				t.Errorf("%d deletes, want %d", n, want)
			}
			denied := len(chunksOf(rec2, "tool-output-denied"))
			if approved && denied != 0 || !approved && denied != 1 {
				t.Errorf("chunks: %v", rec2.types())
			}
			// The model went on and read the outcome.
			last := rig.m.reqs[len(rig.m.reqs)-1].Messages
			tool := last[len(last)-1]
			if approved && !strings.Contains(tool.Content, "deleted") || !approved && !strings.Contains(tool.Content, "did not approve") {
				t.Errorf("the model read %q", tool.Content)
			}
			msgs := tr.Thread.Msgs
			outcome := map[bool]string{true: "done", false: "denied"}[approved]
			if ch := TurnChanges(msgs[len(msgs)-1]); len(ch) != 1 || ch[0].Outcome != outcome {
				t.Errorf("turn changes %+v, want one %s", ch, outcome)
			}
			if n := len(chunksOf(rec2, "data-turn-changes")); n != 1 {
				t.Errorf("%d data-turn-changes chunks", n)
			}
			if len(msgs) != 2 {
				t.Errorf("%d messages; the answer continues the assistant message", len(msgs))
			}
			// A replay of the same answer is refused.
			tr.Thread.Msgs[len(msgs)-1].Parts = append(tr.Thread.Msgs[len(msgs)-1].Parts, Part{Type: "dynamic-tool", ToolCallID: "c_del", State: StateApprovalRequested})
			if _, err := ApplyApprovals(tr.Thread, answer(tr.Thread, id, true, "")); !errors.Is(err, ErrApproval) || !strings.Contains(err.Error(), "already answered") {
				t.Errorf("replayed approval: %v", err)
			}
		})
	}
}

func TestApprovalRefusesAlteredAnswers(t *testing.T) {
	rig := newApprovalRig(t, listThenDelete)
	tr := turn(approvalDef, &recorder{})
	if err := rig.r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	id := tr.Thread.Approvals[0].ID
	for name, c := range map[string]struct {
		id, input, want string
	}{
		"unknown id":   {"apr_0000", "", "was not issued"},
		"altered id":   {id + "0", "", "was not issued"},
		"changed args": {id, `{"id":"2"}`, "arguments"},
	} {
		_, err := ApplyApprovals(tr.Thread, answer(tr.Thread, c.id, true, c.input))
		if !errors.Is(err, ErrApproval) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Same arguments in another key order and spacing hash the same.
	if _, err := ApplyApprovals(tr.Thread, answer(tr.Thread, id, true, `{ "id" : "1" }`)); err != nil {
		t.Errorf("the same arguments: %v", err)
	}
	if n := rig.deletes.Load(); n != 0 {
		t.Errorf("%d deletes", n)
	}
}

// An agent per effect: destructive required, write auto.
func TestApprovalPerEffect(t *testing.T) {
	def := Definition{Approval: &ApprovalPolicy{Destructive: ApprovalRequired, Write: ApprovalAuto}}
	if !def.Requires(Binding{}, tools.EffectDestructive) || def.Requires(Binding{}, tools.EffectWrite) || def.Requires(Binding{}, tools.EffectRead) {
		t.Error("per-effect policy")
	}
	if def.Requires(Binding{Approval: ApprovalAuto}, tools.EffectDestructive) || !def.Requires(Binding{Approval: ApprovalRequired}, tools.EffectRead) {
		t.Error("the binding's approval wins")
	}
	bad := Definition{ID: "x", Approval: &ApprovalPolicy{Write: "sometimes"}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "approval.write") {
		t.Errorf("Validate: %v", err)
	}
}

// A call that can never run is refused before anyone is asked to approve
// it, with its real cause: _for_each on a write whose binding sets bulk
// but not loop_responses names looping, and no approval is requested.
func TestImpossibleCallIsRefusedBeforeApproval(t *testing.T) {
	rig := newApprovalRig(t, func(ModelRequest) []ModelEvent {
		return []ModelEvent{
			{Kind: EventToolCallStart, Index: 0, ToolCallID: "c_del", ToolName: "delete_item"},
			{Kind: EventToolCallDelta, Index: 0, ArgsDelta: `{"_for_each":{"key":"id","values":["1","2"]}}`},
			{Kind: EventFinish, FinishReason: "tool_calls"},
		}
	}, func(ModelRequest) []ModelEvent {
		return []ModelEvent{{Kind: EventTextDelta, Text: "It cannot be done in one call."}, {Kind: EventFinish, FinishReason: "stop"}}
	})
	def := Definition{ID: "a", AgentTools: []Binding{{ToolID: "p.delete_item", Bulk: true, Approval: ApprovalRequired}}}
	rec := &recorder{}
	if err := rig.r.Run(context.Background(), turn(def, rec)); err != nil {
		t.Fatal(err)
	}
	if n := len(chunksOf(rec, "tool-approval-request")); n != 0 {
		t.Errorf("%d approval requests for a call that can never run", n)
	}
	errs := chunksOf(rec, "tool-output-error")
	if len(errs) != 1 {
		t.Fatalf("chunks: %v", rec.types())
	}
	if msg := errs[0].(stream.ToolOutputError).ErrorText; !strings.Contains(msg, "not_for_writes") || !strings.Contains(msg, "loop_responses") {
		t.Errorf("the refusal says %q; want not_for_writes naming loop_responses", msg)
	}
	if rig.deletes.Load() != 0 {
		t.Error("the delete ran")
	}
	if len(rig.m.reqs) != 2 {
		t.Errorf("%d model calls; the model reads the refusal and answers", len(rig.m.reqs))
	}
}
