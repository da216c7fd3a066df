package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// The invoke endpoint has no binding: a write takes _for_each only with
// "bulk": true in the body, and GET /v1/tools says every tool's effect.
func TestInvokeWriteNeedsBulk(t *testing.T) {
	ts := startDemo(t, nil)
	st, b := ts.do(t, "GET", "/v1/tools", "", nil)
	if st != http.StatusOK {
		t.Fatalf("GET /v1/tools: %d %s", st, b)
	}
	var body struct {
		Tools []struct {
			ID, Effect  string
			InputSchema struct {
				Properties map[string]any `json:"properties"`
			} `json:"inputSchema"`
		}
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	list := body.Tools
	effects := map[string]string{}
	for _, tool := range list {
		effects[tool.ID] = tool.Effect
		if tool.Effect == "" {
			t.Errorf("%s has no effect", tool.ID)
		}
		if tool.Effect != "read" {
			for _, r := range []string{"_all_pages", "_refresh", "_for_each"} {
				if _, ok := tool.InputSchema.Properties[r]; ok {
					t.Errorf("%s (%s) advertises %s", tool.ID, tool.Effect, r)
				}
			}
		}
	}
	for id, want := range map[string]string{"mail.MAIL_LIST_MESSAGES": "read", "mail.MAIL_TRASH_MESSAGE": "write",
		"mail.MAIL_DELETE_MESSAGE": "destructive", "mail.MAIL_BATCH_DELETE_MESSAGES": "destructive", "crm.CRM_SEARCH_CONTACTS": "read"} {
		if effects[id] != want {
			t.Errorf("%s: effect %q, want %q", id, effects[id], want)
		}
	}
	st, b = ts.do(t, "POST", "/v1/tools/mail.MAIL_LIST_MESSAGES/invoke", "", map[string]any{"args": map[string]any{"maxResults": 2}})
	var listed struct{ Messages []struct{ ID string } }
	if err := json.Unmarshal(b, &listed); err != nil || len(listed.Messages) != 2 {
		t.Fatalf("list: %d %s %v", st, b, err)
	}
	args := map[string]any{"_for_each": map[string]any{"key": "messageId", "values": []any{listed.Messages[0].ID, listed.Messages[1].ID}}}
	st, b = ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"args": args})
	if st != http.StatusBadRequest || !strings.Contains(string(b), "not_for_writes") || !strings.Contains(string(b), "bulk") {
		t.Errorf("_for_each on a write without bulk: %d %s", st, b)
	}
	st, b = ts.do(t, "POST", "/v1/tools/mail.MAIL_TRASH_MESSAGE/invoke", "", map[string]any{"args": args, "bulk": true})
	if st != http.StatusOK || !strings.Contains(string(b), "may have changed data: POST /messages/{messageId}/trash (2 requests)") {
		t.Errorf("bulk write: %d %s", st, b)
	}
	// The activity log marks the writes.
	st, b = ts.do(t, "GET", "/v1/activity?limit=3", "", nil)
	if st != http.StatusOK || strings.Count(string(b), `"effect":"write","writes":true`) != 2 || !strings.Contains(string(b), `"effect":"read"`) {
		t.Errorf("activity: %d %s", st, b)
	}
}

// PATCH on a binding sets its effect, bulk and approval, and rejects bad
// values.
func TestPatchBindingEffect(t *testing.T) {
	ts := startDemo(t, nil)
	path := "/v1/agents/demo/tools/acme.list_orders"
	st, b := ts.do(t, "PATCH", path, "", map[string]any{"effect": "write", "bulk": true, "approval": "required"})
	if st != http.StatusOK || !strings.Contains(string(b), `"effect":"write"`) || !strings.Contains(string(b), `"approval":"required"`) {
		t.Fatalf("patch: %d %s", st, b)
	}
	for _, bad := range []map[string]any{{"effect": "sometimes"}, {"approval": "maybe"}, {"bulk_values": 500}} {
		if st, b := ts.do(t, "PATCH", path, "", bad); st != http.StatusBadRequest {
			t.Errorf("patch %v: %d %s", bad, st, b)
		}
	}
}
