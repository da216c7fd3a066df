package web

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCredentialsNeverLeak plants unique credentials — the organization's
// provider token and a user's runtime credential — runs every kind of call
// (success and failure, invoke and chat), and asserts neither appears in
// any output channel: HTTP responses, the stream, threads, the activity
// log, stored results, the server's logs and banner, and the store file.
func TestCredentialsNeverLeak(t *testing.T) {
	ts := startDemo(t, nil)
	orgToken := ts.cfg.Providers[0].Auth.Token
	const userCanary = "USERCANARY-9b1e77f0"
	if orgToken == "" {
		t.Fatal("the demo provider has no token")
	}
	var seen []string
	record := func(_ int, b []byte) { seen = append(seen, string(b)) }

	record(ts.do(t, "GET", "/v1/tools", "", nil))
	record(ts.do(t, "GET", "/v1/tools/acme.list_orders", "", nil))
	record(ts.do(t, "POST", "/v1/tools/acme.list_tickets/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}, "thread_id": "leak"}))
	record(ts.do(t, "POST", "/v1/tools/acme.get_order/invoke", "", map[string]any{"args": map[string]any{"order_id": "missing"}}))
	st, b := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}, "thread_id": "leak"})
	record(st, b)
	var env struct {
		ResultID string `json:"_resultId"`
	}
	json.Unmarshal(b, &env)
	for off := 0; off < 200_000; off += 16000 {
		record(ts.do(t, "POST", "/v1/tools/fetchToolResult/invoke", "", map[string]any{"args": map[string]any{"resultId": env.ResultID, "offset": off, "length": 16000}, "thread_id": "leak"}))
	}
	// A user session with a runtime credential: the upstream refuses it,
	// and the failure must not quote it.
	_, sb := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "u", "runtime_credentials": map[string]string{"acme": userCanary}})
	var sess struct{ Token string }
	json.Unmarshal(sb, &sess)
	for _, tok := range []string{"", sess.Token} {
		resp := ts.post(t, "/v1/agents/demo/chat", tok, chatBody("leak-chat", "u1", "How many open orders?"))
		for _, e := range readSSE(t, resp.Body) {
			seen = append(seen, e.Data)
		}
		resp.Body.Close()
		record(ts.do(t, "GET", "/v1/agents/demo/chats/leak-chat", tok, nil))
	}
	record(ts.do(t, "GET", "/v1/activity?limit=1000", "", nil))
	record(ts.do(t, "GET", "/v1/agents", "", nil))
	seen = append(seen, ts.logs.String(), ts.out.String())
	all := strings.Join(seen, "\n")
	if !strings.Contains(all, "401") {
		t.Errorf("the runtime credential was never refused upstream; the test lost its failure path")
	}
	ts.Close()
	db, err := os.ReadFile(filepath.Join(ts.cfg.DataDir, "trawl.db"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"responses, stream, logs": all, "store file": string(db)} {
		for _, secret := range []string{orgToken, userCanary} {
			if strings.Contains(text, secret) {
				i := strings.Index(text, secret)
				t.Errorf("%s leak a credential: …%s…", name, text[max(0, i-80):min(len(text), i+80)])
			}
		}
	}
}
