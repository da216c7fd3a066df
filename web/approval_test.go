package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
)

// fakeListThenTrash is an OpenAI-compatible model that, answering a user
// message, lists the inbox and trashes messageID in one step; answering
// tool results, it says what it saw of the trash call.
func fakeListThenTrash(t *testing.T, messageID string) *httptest.Server {
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			fin := "null"
			if finish != "" {
				fin = fmt.Sprintf("%q", finish)
			}
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
		}
		last := body.Messages[len(body.Messages)-1]
		if last.Role == "user" {
			chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_list","type":"function","function":{"name":"MAIL_LIST_MESSAGES","arguments":"{\"maxResults\":3}"}},`+
				`{"index":1,"id":"call_trash","type":"function","function":{"name":"MAIL_TRASH_MESSAGE","arguments":"{\"messageId\":\"`+messageID+`\"}"}}]}`, "")
			chunk(`{}`, "tool_calls")
		} else {
			text := "Trashed it."
			if strings.Contains(last.Content, "did not approve") {
				text = "Left it alone."
			}
			b, _ := json.Marshal(text)
			chunk(`{"role":"assistant","content":`+string(b)+`}`, "")
			chunk(`{}`, "stop")
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func startApprovalDemo(t *testing.T) *testServer {
	probe := startDemo(t, nil)
	_, b := probe.do(t, "POST", "/v1/tools/mail.MAIL_LIST_MESSAGES/invoke", "", map[string]any{"args": map[string]any{"maxResults": 1}})
	var listed struct{ Messages []struct{ ID string } }
	if err := json.Unmarshal(b, &listed); err != nil || len(listed.Messages) == 0 {
		t.Fatalf("list: %s %v", b, err)
	}
	fake := fakeListThenTrash(t, listed.Messages[0].ID)
	ts := startDemo(t, func(c *Config) {
		c.Model = ModelConfig{Provider: "openai", BaseURL: fake.URL + "/v1", APIKey: "sk-test", Name: "gpt-test"}
	})
	st, b := ts.do(t, "PUT", "/v1/agents/cleaner", "", map[string]any{"system": "Tidy the inbox.", "agentTools": []any{
		map[string]any{"tool_id": "mail.MAIL_LIST_MESSAGES", "loop_responses": true},
		map[string]any{"tool_id": "mail.MAIL_TRASH_MESSAGE", "approval": "required"},
	}})
	if st != http.StatusOK {
		t.Fatalf("PUT agent: %d %s", st, b)
	}
	return ts
}

// TestApprovalOverHTTP: the trash waits; an altered approval is refused;
// the real answer runs it.
func TestApprovalOverHTTP(t *testing.T) {
	ts := startApprovalDemo(t)
	resp := ts.post(t, "/v1/agents/cleaner/chat", "", chatBody("c1", "u1", "Trash the first message."))
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	events := readSSE(t, resp.Body)
	all := strings.Join(chunkTypes(events), " ")
	if !strings.Contains(all, "tool-approval-request finish-step data-turn-changes finish") {
		t.Fatalf("stream: %s", all)
	}
	_, b := ts.do(t, "GET", "/v1/agents/cleaner/chats/c1", "", nil)
	var msgs []agent.UIMessage
	if err := json.Unmarshal(b, &msgs); err != nil {
		t.Fatal(err)
	}
	msg := msgs[len(msgs)-1]
	answer := func(id string) agent.UIMessage {
		m := msg
		m.Parts = append([]agent.Part(nil), msg.Parts...)
		yes := true
		for i, p := range m.Parts {
			if p.State == agent.StateApprovalRequested {
				if id == "" {
					id = p.Approval.ID
				}
				p.State, p.Approval = agent.StateApprovalResponded, &agent.PartApproval{ID: id, Approved: &yes}
				m.Parts[i] = p
			}
		}
		return m
	}
	body := func(m agent.UIMessage) map[string]any {
		return map[string]any{"id": "c1", "trigger": "submit-message", "messages": []any{m}}
	}
	st, b := ts.do(t, "POST", "/v1/agents/cleaner/chat", "", body(answer("apr_forged")))
	if st != http.StatusBadRequest || !strings.Contains(string(b), "approval_refused") {
		t.Fatalf("forged approval: %d %s", st, b)
	}
	resp = ts.post(t, "/v1/agents/cleaner/chat", "", body(answer("")))
	all = strings.Join(chunkTypes(readSSE(t, resp.Body)), " ")
	if !strings.HasPrefix(all, "start tool-input-available tool-output-available") || !strings.Contains(all, "text-delta") {
		t.Errorf("approved stream: %s", all)
	}
	// The same answer again is a replay.
	st, b = ts.do(t, "POST", "/v1/agents/cleaner/chat", "", body(answer("")))
	if st != http.StatusBadRequest || !strings.Contains(string(b), "approval_refused") {
		t.Errorf("replayed approval: %d %s", st, b)
	}
}

// TestApprovalConformance runs the approval round trip through the real
// AI SDK clients (ai 6 and 7): AbstractChat over DefaultChatTransport,
// addToolApprovalResponse and sendAutomaticallyWhen.
func TestApprovalConformance(t *testing.T) {
	dir, _ := filepath.Abs("../stream/testdata/conformance")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("conformance: node is not installed")
	}
	for _, pkg := range []string{"ai6", "ai7"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			t.Skipf("conformance: %s not installed; run stream/testdata/conformance/install.sh", pkg)
		}
	}
	ts := startApprovalDemo(t)
	for _, c := range []struct{ approve, expect, text string }{
		{"yes", "--expect-tool", "Trashed it."},
		{"no", "--expect-denied", "Left it alone."},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, node, "check.mjs", "--url", ts.URL+"/v1/agents/cleaner/chat",
			"--header", "Authorization: Bearer "+ts.AdminKey(), "--versions", "ai6,ai7", "--checks", "chat",
			"--message", "Trash the first message.", "--approve", c.approve,
			c.expect, "MAIL_TRASH_MESSAGE", "--expect-tool", "MAIL_LIST_MESSAGES", "--expect-text", c.text)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("check.mjs --approve %s: %v\n%s", c.approve, err, out)
		}
	}
}
