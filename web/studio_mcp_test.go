package web

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestStudioMCPPanel: the agent page shows the agent's MCP URL and the
// client configurations (Claude Desktop, Claude Code, VS Code, generic,
// curl) with the token step; the URL and configurations it shows work:
// an initialize sent to the URL it gives answers with a session.
func TestStudioMCPPanel(t *testing.T) {
	br := startBrowser(t, 90*time.Second)
	defer br.finish()
	ts := startDemo(t, nil)
	br.login(ts, "/studio/#/agents/demo")
	panel := `details[data-mcp="demo"]`
	br.run("open the MCP panel",
		chromedp.WaitVisible(chromedp.CSS(panel+` > summary`)),
		chromedp.Click(chromedp.CSS(panel+` > summary`)),
		chromedp.WaitVisible(chromedp.CSS(panel+` .mcp-url`)),
		br.view("agents-mcp"))
	url := br.text(panel + ` .mcp-url`)
	if url != ts.URL+"/v1/agents/demo/mcp" {
		t.Errorf("the MCP URL shown: %q, want %q", url, ts.URL+"/v1/agents/demo/mcp")
	}
	if got := br.text(panel); !strings.Contains(got, "session token") || !strings.Contains(got, "/v1/sessions") {
		t.Errorf("the panel lacks the token step: %s", got)
	}
	config := func(key string) string {
		t.Helper()
		text, err := chromedp.Run(br.ctx, chromedp.Evaluate[string](`document.querySelector('`+panel+` pre[data-config="`+key+`"]').textContent`))
		if err != nil {
			t.Fatalf("config %s: %v", key, err)
		}
		return text
	}
	var desktop struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(config("claude-desktop")), &desktop); err != nil || desktop.MCPServers["trawl-demo"].Args[0] != "mcp" {
		t.Errorf("the Claude Desktop config: %v %s", err, config("claude-desktop"))
	}
	var vscode struct {
		Servers map[string]struct{ Type, URL string } `json:"servers"`
	}
	if err := json.Unmarshal([]byte(config("vscode")), &vscode); err != nil || vscode.Servers["trawl-demo"].URL != url || vscode.Servers["trawl-demo"].Type != "http" {
		t.Errorf("the VS Code config: %v %s", err, config("vscode"))
	}
	if code := config("claude-code"); !strings.Contains(code, "claude mcp add --transport http trawl-demo "+url) {
		t.Errorf("the Claude Code line: %s", code)
	}
	curl := config("curl")
	start := strings.Index(curl, "-d '")
	if start < 0 {
		t.Fatalf("the curl line: %s", curl)
	}
	body := strings.TrimSuffix(curl[start+4:], "'")
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(string(b), `"protocolVersion":"2025-11-25"`) {
		t.Errorf("the curl initialize: %d %s", resp.StatusCode, b)
	}
}
