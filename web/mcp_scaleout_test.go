package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Two replicas on one Redis serve one MCP client: a conversation's
// stored results and loaded tools are in Redis, so a 2026-07-28 client
// (stateless: its requests land on any replica) reads on B the
// _resultId a walk on A kept, and B lists and offers the tool load_tool
// loaded on A; another caller's conversation is out of reach from both.
// A 2025-11-25 session lives on the replica that opened it: B answers
// 404 for it (a client then opens a new session), and the conversation
// is the same through the new one.
func TestScaleOutMCPConversation(t *testing.T) {
	dir := t.TempDir()
	kit := filepath.Join(dir, "kit.json")
	manifest := `{"toolkit": "kit", "name": "Kit", "description": "A pooled toolkit.", "base_url": "http://127.0.0.1:9", "auth": {"type": "bearer"},
	  "tools": [{"name": "KIT_FIND_WIDGETS", "description": "Find widgets by name.", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
	             "http": {"method": "GET", "path": "/widgets"}}]}`
	if err := os.WriteFile(kit, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startReplicas(t, fmt.Sprintf("  - id: pooled\n    agentTools: [{tool_id: up.list_items, provider_id: up, loop_responses: true}, {toolkit: kit, discovery: true}]\ntoolkits: [%s]\n", kit))
	connect := func(ts *testServer, token, v string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: "scale", Version: "v0"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/v1/agents/pooled/mcp",
			HTTPClient: &http.Client{Transport: tokenTransport{token}}}, &mcp.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	onA, onB := connect(r.a, scaleAdminKey, "2026-07-28"), connect(r.b, scaleAdminKey, "2026-07-28")
	res := mcpCall(t, onA, "list_items", map[string]any{"_all_pages": true, "_fields": []any{"id"}, "_thread": "shared"})
	var env map[string]any
	if err := json.Unmarshal([]byte(mcpText(res)), &env); err != nil || res.IsError || env["_resultId"] == nil {
		t.Fatalf("the walk on A: %v %s", err, mcpText(res))
	}
	q := map[string]any{"resultId": env["_resultId"], "limit": 2, "_thread": "shared"}
	if res := mcpCall(t, onB, "queryToolResult", q); res.IsError {
		t.Errorf("B cannot read the result A kept: %s", mcpText(res))
	}
	other := connect(r.b, mintSession(t, r.a, "eve"), "2026-07-28")
	if res := mcpCall(t, other, "queryToolResult", q); !res.IsError {
		t.Errorf("another user read the conversation's result: %s", mcpText(res))
	}

	if res := mcpCall(t, onA, "load_tool", map[string]any{"toolName": "KIT_FIND_WIDGETS", "_thread": "shared"}); res.IsError {
		t.Fatalf("load_tool on A: %s", mcpText(res))
	}
	list, err := onB.ListTools(context.Background(), &mcp.ListToolsParams{Meta: mcp.Meta{"trawl/thread": "shared"}})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range list.Tools {
		found = found || tool.Name == "KIT_FIND_WIDGETS"
	}
	if !found {
		t.Errorf("B does not list the tool loaded on A")
	}
	// The loaded tool is callable on B: the call reaches the tool (which
	// then asks for the kit's credential), not "no tool".
	if res := mcpCall(t, onB, "KIT_FIND_WIDGETS", map[string]any{"q": "x", "_thread": "shared"}); strings.Contains(mcpText(res), "no tool") {
		t.Errorf("B does not offer the tool loaded on A: %s", mcpText(res))
	}

	// A 2025-11-25 session is the replica's own.
	legacy := connect(r.a, scaleAdminKey, "2025-11-25")
	req, _ := http.NewRequest("POST", r.b.URL+"/v1/agents/pooled/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+scaleAdminKey)
	req.Header.Set("Mcp-Session-Id", legacy.ID())
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("A's 2025-11-25 session on B: %d, want 404", resp.StatusCode)
	}
	again := connect(r.b, scaleAdminKey, "2025-11-25")
	if res := mcpCall(t, again, "queryToolResult", q); res.IsError {
		t.Errorf("a new session on B does not reach the conversation: %s", mcpText(res))
	}
}
