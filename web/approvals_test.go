package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
)

// approvalAnswer is an error answer with its approval request beside it.
type approvalAnswer struct {
	Error struct {
		Code, Message string
	} `json:"error"`
	Approval agent.PendingApproval `json:"approval"`
}

// startInvokeApprovals is the demo with an agent whose binding of the
// mail trash needs approval (and a bulk binding without looping), and the
// id of the first message in the inbox.
func startInvokeApprovals(t *testing.T) (*testServer, string) {
	ts := startDemo(t, nil)
	st, b := ts.do(t, "PUT", "/v1/agents/cleaner", "", map[string]any{"system": "Tidy the inbox.", "agentTools": []any{
		map[string]any{"tool_id": "mail.MAIL_LIST_MESSAGES", "loop_responses": true},
		map[string]any{"tool_id": "mail.MAIL_TRASH_MESSAGE", "approval": "required", "bulk": true},
	}})
	if st != http.StatusOK {
		t.Fatalf("PUT agent: %d %s", st, b)
	}
	_, b = ts.do(t, "POST", "/v1/tools/mail.MAIL_LIST_MESSAGES/invoke", "", map[string]any{"args": map[string]any{"maxResults": 1}})
	var listed struct{ Messages []struct{ ID string } }
	if err := json.Unmarshal(b, &listed); err != nil || len(listed.Messages) == 0 {
		t.Fatalf("list: %s %v", b, err)
	}
	return ts, listed.Messages[0].ID
}

// writesUpstream counts the upstream calls that changed data.
func writesUpstream(t *testing.T, ts *testServer) int {
	_, b := ts.do(t, "GET", "/v1/activity?limit=1000", "", nil)
	return strings.Count(string(b), `"writes":true`)
}

// Invoke with agent_id applies the binding's approval: the write waits
// (409 approval_required with the request), is listed in the inbox, runs
// once when the same call comes back with the approved id, and never
// with other arguments, twice, after a denial or after expiry. Without
// agent_id the admin invoke runs it as before.
func TestInvokeAppliesApprovals(t *testing.T) {
	ts, msgID := startInvokeApprovals(t)
	invoke := func(args map[string]any, approvalID string) (int, []byte) {
		body := map[string]any{"agent_id": "cleaner", "args": args}
		if approvalID != "" {
			body["approval_id"] = approvalID
		}
		return ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", body)
	}
	args := map[string]any{"messageId": msgID}
	st, b := invoke(args, "")
	var asked approvalAnswer
	if err := json.Unmarshal(b, &asked); err != nil || st != http.StatusConflict || asked.Error.Code != agent.CodeApprovalRequired {
		t.Fatalf("first call: %d %s", st, b)
	}
	a := asked.Approval
	if !strings.HasPrefix(a.ID, "apr_") || a.ToolID != "mail.MAIL_TRASH_MESSAGE" || a.AgentID != "cleaner" || a.ArgsHash == "" ||
		a.Status != agent.ApprovalPending || a.Source != "invoke" || a.Effect == "read" {
		t.Errorf("approval request: %+v", a)
	}
	if ev := a.Evidence; ev.ApprovalID != a.ID || !strings.Contains(string(ev.Input), msgID) || !strings.HasPrefix(ev.Action, "POST /") {
		t.Errorf("evidence: %+v", ev)
	}
	if !strings.Contains(asked.Error.Message, "approval_id") || !strings.Contains(asked.Error.Message, "/v1/approvals/"+a.ID) {
		t.Errorf("message does not say what to do: %s", asked.Error.Message)
	}
	if n := writesUpstream(t, ts); n != 0 {
		t.Fatalf("%d writes before any approval", n)
	}

	// The inbox lists it, pending.
	_, b = ts.do(t, "GET", "/v1/approvals", "", nil)
	var inbox struct{ Approvals []agent.PendingApproval }
	if err := json.Unmarshal(b, &inbox); err != nil || len(inbox.Approvals) != 1 || inbox.Approvals[0].ID != a.ID {
		t.Fatalf("inbox: %s", b)
	}
	// Coming back before the answer: still waiting, the same request.
	st, b = invoke(args, a.ID)
	var again approvalAnswer
	_ = json.Unmarshal(b, &again)
	if st != http.StatusConflict || again.Approval.ID != a.ID || !strings.Contains(again.Error.Message, "not been answered") {
		t.Errorf("before the answer: %d %s", st, b)
	}

	// The human approves, with the evidence in view.
	st, b = ts.do(t, "POST", "/v1/approvals/"+a.ID, "", map[string]any{"approved": true, "reason": "checked"})
	var answered agent.PendingApproval
	if err := json.Unmarshal(b, &answered); err != nil || st != http.StatusOK || answered.Status != agent.ApprovalApproved ||
		answered.Reason != "checked" || !strings.Contains(string(answered.Evidence.Input), msgID) {
		t.Fatalf("answer: %d %s", st, b)
	}
	if st, b := ts.do(t, "POST", "/v1/approvals/"+a.ID, "", map[string]any{"approved": false}); st != http.StatusConflict || errorCode(t, b) != "approval_answered" {
		t.Errorf("second answer: %d %s", st, b)
	}
	// Other arguments under that approval: refused, nothing sent.
	if st, b := invoke(map[string]any{"messageId": msgID + "x"}, a.ID); st != http.StatusBadRequest || errorCode(t, b) != agent.CodeApprovalRefused {
		t.Errorf("other arguments: %d %s", st, b)
	}
	if n := writesUpstream(t, ts); n != 0 {
		t.Fatalf("%d writes after a refused approval", n)
	}
	// The same call: it runs, once.
	if st, b := invoke(args, a.ID); st != http.StatusOK || !strings.Contains(string(b), msgID) {
		t.Fatalf("approved call: %d %s", st, b)
	}
	if n := writesUpstream(t, ts); n != 1 {
		t.Errorf("%d writes after the approved call, want 1", n)
	}
	if st, b := invoke(args, a.ID); st != http.StatusBadRequest || errorCode(t, b) != agent.CodeApprovalRefused || !strings.Contains(string(b), "already used") {
		t.Errorf("approval used twice: %d %s", st, b)
	}
	if n := writesUpstream(t, ts); n != 1 {
		t.Errorf("%d writes after the replay, want still 1", n)
	}

	// Denied: 403, not run.
	_, b = invoke(args, "")
	var denied approvalAnswer
	_ = json.Unmarshal(b, &denied)
	if st, b := ts.do(t, "POST", "/v1/approvals/"+denied.Approval.ID, "", map[string]any{"approved": false, "reason": "wrong message"}); st != http.StatusOK {
		t.Fatalf("deny: %d %s", st, b)
	}
	if st, b := invoke(args, denied.Approval.ID); st != http.StatusForbidden || errorCode(t, b) != agent.CodeApprovalDenied || !strings.Contains(string(b), "wrong message") {
		t.Errorf("denied call: %d %s", st, b)
	}

	// Expired: gone from the inbox, and its id no longer runs anything.
	_, b = invoke(args, "")
	var late approvalAnswer
	_ = json.Unmarshal(b, &late)
	if st, b := ts.do(t, "POST", "/v1/approvals/"+late.Approval.ID, "", map[string]any{"approved": true}); st != http.StatusOK {
		t.Fatalf("approve: %d %s", st, b)
	}
	ts.clock.set(func() time.Time { return time.Now().Add(agent.DefaultApprovalTTL + time.Minute) })
	if st, _ := ts.do(t, "GET", "/v1/approvals/"+late.Approval.ID, "", nil); st != http.StatusNotFound {
		t.Errorf("expired request: %d, want 404", st)
	}
	if st, b := invoke(args, late.Approval.ID); st != http.StatusBadRequest || errorCode(t, b) != agent.CodeApprovalRefused {
		t.Errorf("expired approval: %d %s", st, b)
	}
	ts.clock.set(nil)
	if n := writesUpstream(t, ts); n != 1 {
		t.Errorf("%d writes, want still 1", n)
	}

	// A streamed invoke waits the same way, before any stream begins.
	raw, _ := json.Marshal(map[string]any{"agent_id": "cleaner", "args": args})
	req, _ := http.NewRequest("POST", ts.URL+"/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(sb), agent.CodeApprovalRequired) {
		t.Errorf("streamed invoke: %d %s", resp.StatusCode, sb)
	}

	// Without agent_id, the admin invoke runs tools as before.
	if st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"args": args}); st != http.StatusOK {
		t.Errorf("admin invoke: %d %s", st, b)
	}
	if st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"args": args, "approval_id": a.ID}); st != http.StatusBadRequest {
		t.Errorf("approval_id without agent_id: %d %s", st, b)
	}
	// A call that needs no approval refuses an approval id.
	if st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_LIST_MESSAGES/invoke", "", map[string]any{"agent_id": "cleaner", "args": map[string]any{}, "approval_id": a.ID}); st != http.StatusBadRequest || errorCode(t, b) != agent.CodeApprovalRefused {
		t.Errorf("approval for a call that needs none: %d %s", st, b)
	}
}

// A call that can never run is refused before anyone is asked to approve
// it, for its real cause: _for_each under bulk: true but looping off
// blames loop_responses, and nothing waits in the inbox.
func TestImpossibleCallIsRefusedBeforeApproval(t *testing.T) {
	ts, msgID := startInvokeApprovals(t)
	for name, args := range map[string]map[string]any{
		"for_each without looping": {"_for_each": map[string]any{"key": "messageId", "values": []any{msgID, "m2"}}},
		"a misspelt argument":      {"mesageId": msgID},
	} {
		st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"agent_id": "cleaner", "args": args})
		if st != http.StatusBadRequest || errorCode(t, b) == agent.CodeApprovalRequired {
			t.Errorf("%s: %d %s, want the call's own 400", name, st, b)
		}
		if name == "for_each without looping" && (!strings.Contains(string(b), "loop_responses") || strings.Contains(string(b), "unless the agent's binding sets bulk")) {
			t.Errorf("%s: %s; want loop_responses named as the cause", name, b)
		}
	}
	_, b := ts.do(t, "GET", "/v1/approvals?status=all", "", nil)
	if !strings.Contains(string(b), `"approvals":[]`) {
		t.Errorf("the inbox holds requests for calls that can never run: %s", b)
	}
	if st, b := ts.do(t, "GET", "/v1/approvals?status=bogus", "", nil); st != http.StatusBadRequest {
		t.Errorf("bad status filter: %d %s", st, b)
	}
	if st, b := ts.do(t, "POST", "/v1/approvals/apr_nope", "", map[string]any{"approved": true}); st != http.StatusNotFound {
		t.Errorf("unknown approval: %d %s", st, b)
	}
	if st, b := ts.do(t, "POST", "/v1/approvals/apr_nope", "", map[string]any{}); st != http.StatusBadRequest {
		t.Errorf("answer without approved: %d %s", st, b)
	}
}

// On Redis the inbox is one for every replica: a request issued on one
// is listed and answered on the other, and its approval is taken once
// whichever replica the call comes back to.
func TestApprovalsAcrossReplicas(t *testing.T) {
	r := startReplicas(t, `  - id: guarded
    max_steps: 2
    agentTools: [{tool_id: up.list_items, provider_id: up, approval: required}]
`)
	call := map[string]any{"agent_id": "guarded", "args": map[string]any{}}
	st, b := r.a.do(t, "POST", "/v1/tools/up.list_items/invoke", "", call)
	var asked approvalAnswer
	if err := json.Unmarshal(b, &asked); err != nil || st != http.StatusConflict {
		t.Fatalf("on A: %d %s", st, b)
	}
	id := asked.Approval.ID
	_, b = r.b.do(t, "GET", "/v1/approvals", "", nil)
	if !strings.Contains(string(b), id) {
		t.Fatalf("B's inbox lacks A's request: %s", b)
	}
	if st, b := r.b.do(t, "POST", "/v1/approvals/"+id, "", map[string]any{"approved": true}); st != http.StatusOK {
		t.Fatalf("approve on B: %d %s", st, b)
	}
	if st, b := r.a.do(t, "POST", "/v1/approvals/"+id, "", map[string]any{"approved": false}); st != http.StatusConflict {
		t.Errorf("a second answer on A: %d %s", st, b)
	}
	call["approval_id"] = id
	type result struct {
		st int
		b  []byte
	}
	res := make(chan result, 2)
	for _, s := range []*testServer{r.a, r.b} {
		go func() {
			st, b := s.do(t, "POST", "/v1/tools/up.list_items/invoke", "", call)
			res <- result{st, b}
		}()
	}
	ran := 0
	for range 2 {
		got := <-res
		switch got.st {
		case http.StatusOK:
			ran++
		case http.StatusBadRequest:
			if !strings.Contains(string(got.b), agent.CodeApprovalRefused) {
				t.Errorf("the other take: %s", got.b)
			}
		default:
			t.Errorf("take: %d %s", got.st, got.b)
		}
	}
	if ran != 1 {
		t.Errorf("the approval ran %d calls across the replicas, want 1", ran)
	}
}
