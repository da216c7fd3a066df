package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/trawl-dev/trawl/agent"
)

// TestStudioApprovalsInBrowser drives the Studio's Approvals page in
// headless Chromium: a write invoked with agent_id waits in the inbox;
// the page shows it with its evidence (what it would do, its arguments);
// Approve with a reason answers it on the server, and the same call then
// runs once; Deny makes it answer 403; the filters show approved, used and
// denied requests, on a desktop and a phone screen, without a console
// error.
func TestStudioApprovalsInBrowser(t *testing.T) {
	br := startBrowser(t, 120*time.Second)
	defer br.finish()
	ts, msgID := startInvokeApprovals(t)
	ask := func() agent.PendingApproval {
		t.Helper()
		st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"agent_id": "cleaner", "args": map[string]any{"messageId": msgID}})
		var ans approvalAnswer
		if err := json.Unmarshal(b, &ans); err != nil || st != http.StatusConflict {
			t.Fatalf("invoke: %d %s", st, b)
		}
		return ans.Approval
	}
	card := func(id string) string { return `article[data-approval-id="` + id + `"]` }

	br.login(ts, "/studio/#/approvals")
	br.run("the empty inbox",
		chromedp.WaitVisible(chromedp.ID("approvals-list")),
		jsTrue(`document.querySelector('#approvals-list').textContent.includes('Nothing waits for approval.')`))
	if !br.eval(`document.querySelector('[data-nav="approvals"]').getAttribute('aria-current') === 'page'`) {
		t.Error("the Approvals tab is not marked current")
	}

	first := ask()
	br.run("the request appears",
		chromedp.Click(chromedp.ID("approvals-refresh")),
		chromedp.WaitVisible(chromedp.CSS(card(first.ID)+` button[data-approve]`)),
		br.view("approvals"))
	got := br.text(card(first.ID))
	for _, want := range []string{"mail.MAIL_TRASH_MESSAGE", "Waits for approval", "agent cleaner", "via invoke", "POST /", msgID, first.ID} {
		if !strings.Contains(got, want) {
			t.Errorf("the card lacks %q:\n%s", want, got)
		}
	}
	var shownArgs map[string]any
	if err := json.Unmarshal([]byte(br.text(card(first.ID)+` .approval-args`)), &shownArgs); err != nil || shownArgs["messageId"] != msgID {
		t.Errorf("the arguments shown: %v %v", shownArgs, err)
	}
	br.run("approve with a reason",
		chromedp.SendKeys(chromedp.CSS(card(first.ID)+` .tc-approval input`), "it is spam"),
		chromedp.Click(chromedp.CSS(card(first.ID)+` button[data-approve]`)),
		jsTrue(`document.querySelector('#approvals-list').textContent.includes('Nothing waits for approval.')`))
	_, b := ts.do(t, "GET", "/v1/approvals/"+first.ID, "", nil)
	var answered agent.PendingApproval
	if err := json.Unmarshal(b, &answered); err != nil || answered.Status != agent.ApprovalApproved || answered.Reason != "it is spam" {
		t.Fatalf("on the server: %s", b)
	}
	br.run("approved, not run yet",
		chromedp.Navigate(ts.URL+"/studio/#/approvals/approved"),
		chromedp.WaitVisible(chromedp.CSS(card(first.ID)+`[data-status="approved"]`)))
	if got := br.text(card(first.ID)); !strings.Contains(got, "Approved, not run yet") || !strings.Contains(got, "Reason: it is spam") {
		t.Errorf("the approved card: %s", got)
	}
	if n := br.count(card(first.ID) + ` button`); n != 0 {
		t.Errorf("an answered card offers %d buttons", n)
	}
	// The call comes back with the approval: it runs, once.
	if st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"agent_id": "cleaner", "approval_id": first.ID, "args": map[string]any{"messageId": msgID}}); st != http.StatusOK {
		t.Fatalf("approved call: %d %s", st, b)
	}
	br.run("approved and run",
		chromedp.Navigate(ts.URL+"/studio/#/approvals/used"),
		chromedp.WaitVisible(chromedp.CSS(card(first.ID)+`[data-status="used"]`)),
		jsTrue(`document.querySelector('#approvals-status').value === 'used'`))

	second := ask()
	br.run("deny the second",
		chromedp.Navigate(ts.URL+"/studio/#/approvals"),
		chromedp.WaitVisible(chromedp.CSS(card(second.ID)+` button[data-deny]`)),
		chromedp.Click(chromedp.CSS(card(second.ID)+` button[data-deny]`)),
		jsTrue(`document.querySelector('#approvals-list').textContent.includes('Nothing waits for approval.')`))
	if st, b := ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"agent_id": "cleaner", "approval_id": second.ID, "args": map[string]any{"messageId": msgID}}); st != http.StatusForbidden {
		t.Errorf("denied call: %d %s", st, b)
	}
	br.run("every request",
		chromedp.SetValue(chromedp.ID("approvals-status"), "all"),
		jsTrue(`(document.querySelector('#approvals-status').dispatchEvent(new Event('change')), true)`),
		chromedp.WaitVisible(chromedp.CSS(card(second.ID)+`[data-status="denied"]`)),
		chromedp.WaitVisible(chromedp.CSS(card(first.ID)+`[data-status="used"]`)),
		br.view("approvals-all"))
	if got := br.text(`#approvals-count`); got != "2 requests" {
		t.Errorf("count: %q", got)
	}
}
