package web

import (
	"net/http"
	"strings"
	"testing"
)

// A misspelt argument is refused before any request through the invoke
// API, on an imported operation and on a connected app's manifest tool
// alike, with what it most likely meant; nothing reaches the upstream.
func TestInvokeRefusesMisspeltArguments(t *testing.T) {
	ts := startDemo(t, nil)
	_, before := ts.do(t, "GET", "/v1/activity?limit=1000", "", nil)
	for tool, c := range map[string]struct {
		args map[string]any
		want string
	}{
		"acme.list_orders":        {map[string]any{"stauts": "open", "_all_pages": true}, `argument \"stauts\" is not a parameter of list_orders (did you mean \"status\"?)`},
		"mail.MAIL_LIST_MESSAGES": {map[string]any{"maxResult": 3}, `argument \"maxResult\" is not a parameter of MAIL_LIST_MESSAGES (did you mean \"maxResults\"?)`},
	} {
		st, b := ts.do(t, "POST", "/v1/tools/"+tool+"/invoke", "", map[string]any{"args": c.args})
		if st != http.StatusBadRequest || errorCode(t, b) != "invalid_argument" || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s", tool, st, b)
		}
	}
	if _, after := ts.do(t, "GET", "/v1/activity?limit=1000", "", nil); string(after) != string(before) {
		t.Errorf("refused calls reached the upstream: %s", after)
	}
}
