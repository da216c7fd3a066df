package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The official TypeScript MCP clients — @modelcontextprotocol/client 2.x
// (2026-07-28) and @modelcontextprotocol/sdk 1.x (2025-11-25), pinned in
// testdata/mcpclients — against the real binary, over Streamable HTTP
// (trawl serve) and stdio (trawl mcp): the checks of
// testdata/mcpclients/check.mjs, each printed as it runs.

const mcpClientsDir = "testdata/mcpclients"

// mcpHarness returns the node binary, or skips when node or the pinned
// clients are missing.
func mcpHarness(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("MCP clients: node is not installed; install Node.js (>= 20) and run cmd/trawl/testdata/mcpclients/install.sh")
	}
	for _, pkg := range []string{"@modelcontextprotocol/client", "@modelcontextprotocol/sdk"} {
		if _, err := os.Stat(filepath.Join(mcpClientsDir, "node_modules", pkg, "package.json")); err != nil {
			t.Skipf("MCP clients: %s is not installed; run cmd/trawl/testdata/mcpclients/install.sh", pkg)
		}
	}
	return node
}

func runClientChecks(t *testing.T, node string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"check.mjs"}, args...)...)
	cmd.Dir = mcpClientsDir
	out, err := cmd.CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		t.Log(line)
	}
	if err != nil {
		t.Errorf("check.mjs %s: %v", strings.Join(args[:4], " "), err)
	}
}

func TestMCPOfficialClients(t *testing.T) {
	node := mcpHarness(t)
	bin := buildTrawl(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	const pageSize = 5
	// Writes wait for approval: the approval checks need it, the others
	// only read.
	demo := "demo: {latency_ms: 100, approval: {write: required}}\n"
	cfg := fmt.Sprintf("listen: %s\nadmin_key: %s\ndata_dir: %s\n%smcp: {page_size: %d}\n",
		addr, lifecycleKey, filepath.Join(dir, "data"), demo, pageSize)
	cfgPath := filepath.Join(dir, "trawl.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startTrawl(t, bin, cfgPath, addr)
	stdioCfg := filepath.Join(dir, "stdio.yaml")
	if err := os.WriteFile(stdioCfg, []byte(demo), 0o600); err != nil {
		t.Fatal(err)
	}

	// The rows a direct invoke walks: what every client must get.
	resp, err := p.request("POST", "/v1/tools/acme.list_orders/invoke", map[string]any{"args": map[string]any{"status": "open", "_all_pages": true}})
	if err != nil {
		t.Fatal(err)
	}
	var direct struct {
		Boundary struct {
			Records int `json:"records"`
		} `json:"_boundary"`
	}
	json.NewDecoder(resp.Body).Decode(&direct)
	resp.Body.Close()
	if direct.Boundary.Records == 0 {
		t.Fatal("the direct invoke walked no rows")
	}
	records := strconv.Itoa(direct.Boundary.Records)
	alice, bob := sessionToken(t, p, "alice"), sessionToken(t, p, "bob")
	url := "http://" + addr + "/v1/agents/demo/mcp"
	for _, sdk := range []string{"client2", "sdk1"} {
		t.Run(sdk+"/http", func(t *testing.T) {
			runClientChecks(t, node, "--sdk", sdk, "--transport", "http", "--url", url, "--token", lifecycleKey,
				"--records", records, "--page-size", strconv.Itoa(pageSize),
				"--admin-token", lifecycleKey, "--checks", "connect,list,walk,query,progress,cancel,load,approval,unauthorized")
		})
		t.Run(sdk+"/http/session", func(t *testing.T) {
			runClientChecks(t, node, "--sdk", sdk, "--transport", "http", "--url", url, "--token", alice, "--other-token", bob,
				"--records", records, "--checks", "walk,isolation")
		})
		t.Run(sdk+"/stdio", func(t *testing.T) {
			// trawl mcp with no config serves the demo (README's one line).
			runClientChecks(t, node, "--sdk", sdk, "--transport", "stdio", "--bin", bin, "--args", "mcp --demo-latency 100",
				"--cwd", t.TempDir(), "--records", records, "--checks", "connect,list,walk,query,progress,cancel,load")
		})
		t.Run(sdk+"/stdio/approval", func(t *testing.T) {
			runClientChecks(t, node, "--sdk", sdk, "--transport", "stdio", "--bin", bin, "--args", "mcp --config "+stdioCfg,
				"--cwd", t.TempDir(), "--checks", "approval")
		})
	}
}

// sessionToken mints a session token for user on a running trawl.
func sessionToken(t *testing.T, p *process, user string) string {
	t.Helper()
	resp, err := p.request("POST", "/v1/sessions", map[string]any{"user_id": user})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Token string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Token == "" {
		t.Fatalf("minting a session: %d %v", resp.StatusCode, err)
	}
	return out.Token
}

// TestMCPOfficialClientsUpstream: the same clients, over HTTP and stdio,
// on an agent bound to the pinned server-everything: its resources,
// templates, prompts and pictures reach them through trawl.
func TestMCPOfficialClientsUpstream(t *testing.T) {
	node := mcpHarness(t)
	entry, err := filepath.Abs("../../tools/testdata/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Skip("server-everything is not installed; run tools/testdata/mcp-everything/install.sh")
	}
	bin := buildTrawl(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	body := fmt.Sprintf(`model: {provider: openai, base_url: "http://127.0.0.1:1/v1", api_key: unused, name: m}
mcp_servers:
  - {id: everything, command: [%q, %q, stdio]}
agents:
  - id: pics
    system: Use the tools.
    agentTools:
      - {toolkit: everything}
`, node, entry)
	cfgPath := filepath.Join(dir, "trawl.yaml")
	cfg := fmt.Sprintf("listen: %s\nadmin_key: %s\ndata_dir: %s\n%s", addr, lifecycleKey, filepath.Join(dir, "data"), body)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	startTrawl(t, bin, cfgPath, addr)
	stdioCfg := filepath.Join(dir, "stdio.yaml")
	if err := os.WriteFile(stdioCfg, []byte(fmt.Sprintf("data_dir: %s\n%s", filepath.Join(dir, "stdio-data"), body)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, sdk := range []string{"client2", "sdk1"} {
		t.Run(sdk+"/http", func(t *testing.T) {
			runClientChecks(t, node, "--sdk", sdk, "--transport", "http", "--url", "http://"+addr+"/v1/agents/pics/mcp", "--token", lifecycleKey,
				"--checks", "upstream")
		})
		t.Run(sdk+"/stdio", func(t *testing.T) {
			runClientChecks(t, node, "--sdk", sdk, "--transport", "stdio", "--bin", bin, "--args", "mcp --agent pics --config "+stdioCfg,
				"--cwd", t.TempDir(), "--checks", "upstream")
		})
	}
}
