package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/agent"
)

// NewApprovals returns a fresh, empty approvals store for t alone.
type NewApprovals func(t *testing.T) agent.ApprovalStore

// RunApprovals is the conformance suite of agent.ApprovalStore, run
// through the agent.Inbox that uses it: the embedded, Redis and memory
// stores run it, so the inbox behaves the same on each.
func RunApprovals(t *testing.T, newStore NewApprovals) {
	t.Run("RoundTrip", func(t *testing.T) { approvalsRoundTrip(t, newStore) })
	t.Run("AnswerThenTakeOnce", func(t *testing.T) { answerThenTakeOnce(t, newStore) })
	t.Run("Denied", func(t *testing.T) { approvalDenied(t, newStore) })
	t.Run("Expiry", func(t *testing.T) { approvalExpiry(t, newStore) })
	t.Run("ConcurrentAnswersAndTakes", func(t *testing.T) { concurrentApprovals(t, newStore) })
	t.Run("Bound", func(t *testing.T) { approvalsBound(t, newStore) })
}

// clock is a test clock that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newClock starts at the real time (a Redis store's own key expiry
// follows the real clock), in whole milliseconds.
func newClock() *clock { return &clock{t: time.Now().UTC().Truncate(time.Millisecond)} }

func trashRequest(id string) agent.ApprovalRequest {
	return agent.ApprovalRequest{Source: "invoke", AgentID: "cleaner", ToolID: "mail.MAIL_TRASH_MESSAGE",
		ToolName: "MAIL_TRASH_MESSAGE", Effect: "destructive", Input: json.RawMessage(`{"messageId":"` + id + `"}`),
		Action: "POST /messages/{messageId}/trash"}
}

func approvalsRoundTrip(t *testing.T, newStore NewApprovals) {
	c := newClock()
	in := agent.NewInbox(agent.InboxOptions{Store: newStore(t), Now: c.now})
	ctx := context.Background()
	a, err := in.Request(ctx, trashRequest("m1"))
	if err != nil {
		t.Fatal(err)
	}
	c.add(time.Millisecond)
	b, err := in.Request(ctx, trashRequest("m2"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != agent.ApprovalPending || a.ID == b.ID || len(a.ID) != len("apr_")+32 || a.ArgsHash == "" ||
		!a.Expires.Equal(a.Created.Add(agent.DefaultApprovalTTL)) {
		t.Fatalf("request: %+v", a)
	}
	if a.Evidence.ApprovalID != a.ID || a.Evidence.Action == "" || string(a.Evidence.Input) != `{"messageId":"m1"}` {
		t.Errorf("evidence: %+v", a.Evidence)
	}
	got, err := in.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	list, err := in.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]agent.PendingApproval{a, b}, list); diff != "" {
		t.Errorf("List, oldest first (-want +got):\n%s", diff)
	}
	if _, err := in.Get(ctx, "apr_nope"); !errors.Is(err, agent.ErrApprovalNotFound) {
		t.Errorf("Get unknown: %v", err)
	}
}

func answerThenTakeOnce(t *testing.T, newStore NewApprovals) {
	c := newClock()
	in := agent.NewInbox(agent.InboxOptions{Store: newStore(t), Now: c.now})
	ctx := context.Background()
	req := trashRequest("m1")
	a, err := in.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Take(ctx, a.ID, req.AgentID, req.ToolID, req.Input); !errors.Is(err, agent.ErrApprovalPending) {
		t.Fatalf("Take while pending: %v", err)
	}
	c.add(time.Minute)
	ans, err := in.Answer(ctx, a.ID, true, "looks right")
	if err != nil {
		t.Fatal(err)
	}
	if ans.Status != agent.ApprovalApproved || ans.Reason != "looks right" || !ans.Answered.Equal(c.now()) ||
		!ans.Expires.Equal(c.now().Add(agent.DefaultApprovalTTL)) {
		t.Errorf("answered: %+v", ans)
	}
	if _, err := in.Answer(ctx, a.ID, false, ""); !errors.Is(err, agent.ErrApprovalAnswered) {
		t.Errorf("second answer: %v", err)
	}
	// Another call, another tool, other arguments: refused, the
	// approval kept.
	for name, bad := range map[string][3]string{
		"another agent":   {"other", req.ToolID, string(req.Input)},
		"another tool":    {req.AgentID, "mail.MAIL_SEND", string(req.Input)},
		"other arguments": {req.AgentID, req.ToolID, `{"messageId":"m2"}`},
	} {
		if _, err := in.Take(ctx, a.ID, bad[0], bad[1], json.RawMessage(bad[2])); !errors.Is(err, agent.ErrApproval) {
			t.Errorf("%s: Take %v, want ErrApproval", name, err)
		}
	}
	// The same arguments in another key order and spacing are the same.
	taken, err := in.Take(ctx, a.ID, req.AgentID, req.ToolID, json.RawMessage(`{ "messageId" : "m1" }`))
	if err != nil {
		t.Fatal(err)
	}
	if taken.Status != agent.ApprovalUsed || !taken.Used {
		t.Errorf("taken: %+v", taken)
	}
	if _, err := in.Take(ctx, a.ID, req.AgentID, req.ToolID, req.Input); !errors.Is(err, agent.ErrApproval) {
		t.Errorf("second Take: %v, want ErrApproval (used)", err)
	}
	if got, _ := in.Get(ctx, a.ID); got.Status != agent.ApprovalUsed {
		t.Errorf("stored status %q, want used", got.Status)
	}
}

func approvalDenied(t *testing.T, newStore NewApprovals) {
	in := agent.NewInbox(agent.InboxOptions{Store: newStore(t), Now: newClock().now})
	ctx := context.Background()
	req := trashRequest("m1")
	a, err := in.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Answer(ctx, a.ID, false, "wrong message"); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Take(ctx, a.ID, req.AgentID, req.ToolID, req.Input); !errors.Is(err, agent.ErrApprovalDenied) {
		t.Errorf("Take denied: %v", err)
	}
	pending, err := in.List(ctx, agent.ApprovalPending)
	if err != nil || len(pending) != 0 {
		t.Errorf("pending after the answer: %v %v", pending, err)
	}
	denied, err := in.List(ctx, agent.ApprovalDenied)
	if err != nil || len(denied) != 1 || denied[0].Reason != "wrong message" {
		t.Errorf("denied: %+v %v", denied, err)
	}
}

func approvalExpiry(t *testing.T, newStore NewApprovals) {
	c := newClock()
	in := agent.NewInbox(agent.InboxOptions{Store: newStore(t), Now: c.now, TTL: time.Minute})
	ctx := context.Background()
	req := trashRequest("m1")
	unanswered, err := in.Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	approved, err := in.Request(ctx, trashRequest("m2"))
	if err != nil {
		t.Fatal(err)
	}
	c.add(50 * time.Second)
	if _, err := in.Answer(ctx, approved.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	c.add(10 * time.Second) // the unanswered one's minute is up
	if _, err := in.Get(ctx, unanswered.ID); !errors.Is(err, agent.ErrApprovalNotFound) {
		t.Errorf("Get expired: %v", err)
	}
	if _, err := in.Answer(ctx, unanswered.ID, true, ""); !errors.Is(err, agent.ErrApprovalNotFound) {
		t.Errorf("Answer expired: %v", err)
	}
	list, err := in.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != approved.ID {
		t.Errorf("List: %+v %v; want only the approved one (its TTL restarted at the answer)", list, err)
	}
	c.add(time.Minute) // and now the approved one's
	if _, err := in.Take(ctx, approved.ID, req.AgentID, req.ToolID, json.RawMessage(`{"messageId":"m2"}`)); !errors.Is(err, agent.ErrApprovalNotFound) {
		t.Errorf("Take expired: %v", err)
	}
	if list, err := in.List(ctx); err != nil || len(list) != 0 {
		t.Errorf("List after expiry: %+v %v", list, err)
	}
}

// Replicas (goroutines here, sharing the store) answering and taking one
// request at once: exactly one answer and one take win.
func concurrentApprovals(t *testing.T, newStore NewApprovals) {
	store := newStore(t)
	c := newClock()
	ctx := context.Background()
	req := trashRequest("m1")
	a, err := agent.NewInbox(agent.InboxOptions{Store: store, Now: c.now}).Request(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	race := func(f func(in *agent.Inbox) error) int {
		var wg sync.WaitGroup
		var mu sync.Mutex
		won := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if f(agent.NewInbox(agent.InboxOptions{Store: store, Now: c.now})) == nil {
					mu.Lock()
					won++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		return won
	}
	if n := race(func(in *agent.Inbox) error { _, err := in.Answer(ctx, a.ID, true, ""); return err }); n != 1 {
		t.Errorf("%d answers taken, want 1", n)
	}
	if n := race(func(in *agent.Inbox) error {
		_, err := in.Take(ctx, a.ID, req.AgentID, req.ToolID, req.Input)
		return err
	}); n != 1 {
		t.Errorf("%d takes succeeded, want 1", n)
	}
}

func approvalsBound(t *testing.T, newStore NewApprovals) {
	in := agent.NewInbox(agent.InboxOptions{Store: newStore(t), Now: newClock().now, Max: 2})
	ctx := context.Background()
	a, err := in.Request(ctx, trashRequest("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.Request(ctx, trashRequest("m2")); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Request(ctx, trashRequest("m3")); !errors.Is(err, agent.ErrInboxFull) {
		t.Errorf("third request: %v, want ErrInboxFull", err)
	}
	if _, err := in.Answer(ctx, a.ID, false, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Request(ctx, trashRequest("m3")); err != nil {
		t.Errorf("after an answer: %v", err)
	}
}
