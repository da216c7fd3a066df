package web

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/leaktest"
)

// everythingServer is the entry point of the pinned, published MCP
// server-everything (tools/testdata/mcp-everything/install.sh installs
// it); the test is skipped when it or node is missing.
func everythingServer(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("mcp-everything: node is not installed; install Node.js (>= 20) and run tools/testdata/mcp-everything/install.sh")
	}
	entry, err := filepath.Abs("../tools/testdata/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(entry); err != nil {
		t.Skip("mcp-everything: server-everything is not installed; run tools/testdata/mcp-everything/install.sh")
	}
	return entry
}

// TestStdioMCPServerGetsOnlyItsEnv starts the real server-everything over
// stdio from a deployment whose own environment holds its keys, the
// Redis password and a cloud credential, and reads the server's get-env
// tool through invoke: the server has PATH, HOME and its own env — a
// secret value masked, a value marked not secret as it is — and none of
// trawl's variables, in any form, in the answer or the logs.
func TestStdioMCPServerGetsOnlyItsEnv(t *testing.T) {
	entry := everythingServer(t)
	const (
		admin    = "admin-key-of-the-env-test-0123456789"
		secret   = "5ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7e75ec7"
		redisPW  = "redis-pass/word+42"
		openai   = "sk-proj-env-test-0123456789"
		aws      = "AWSSECRETenvtest/0123456789+abc"
		token    = "server-only-token/42+abc"
		notValue = "plain-visible-mode"
	)
	for k, v := range map[string]string{"TRAWL_ADMIN_KEY": admin, "TRAWL_SECRET_KEY": secret, "REDIS_PASSWORD": redisPW,
		"OPENAI_API_KEY": openai, "AWS_SECRET_ACCESS_KEY": aws, "EVERYTHING_TOKEN": token} {
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "trawl.yaml")
	yaml := fmt.Sprintf(`data_dir: %s
admin_key: ${TRAWL_ADMIN_KEY}
secret_key: ${TRAWL_SECRET_KEY}
model: {provider: openai, base_url: "http://127.0.0.1:1/v1", api_key: "${OPENAI_API_KEY}"}
mcp_servers:
  - id: everything
    command: [node, %q, stdio]
    env:
      EVERYTHING_TOKEN: ${EVERYTHING_TOKEN}
      EVERYTHING_MODE: {value: %s, secret: false}
`, filepath.Join(dir, "data"), entry, notValue)
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv, err := New(context.Background(), cfg, Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Stdout: &syncBuffer{}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv), logs: logs}
	var getEnv string
	for _, tl := range ts.catalog.Provider("everything") {
		if strings.Contains(tl.ID, "env") {
			getEnv = tl.ID
		}
	}
	if getEnv == "" {
		t.Fatalf("no get-env tool among %v", ts.catalog.Provider("everything"))
	}
	st, body := ts.do(t, "POST", "/v1/tools/"+getEnv+"/invoke", "", map[string]any{"args": map[string]any{}})
	if st != 200 {
		t.Fatalf("invoke %s: %d %s", getEnv, st, body)
	}
	// The answer is the child's process.env (JSON text, read as the
	// envelope's object).
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("%s", body)
	}
	text := string(body)
	for _, name := range []string{"PATH", "HOME"} {
		if env[name] == nil {
			t.Errorf("the server's environment has no %s: %s", name, text)
		}
	}
	if env["EVERYTHING_MODE"] != notValue || env["EVERYTHING_TOKEN"] != tools.Mask {
		t.Errorf("want EVERYTHING_MODE as it is and EVERYTHING_TOKEN masked: %s", text)
	}
	for name := range env {
		switch {
		case strings.HasPrefix(name, "_"), strings.HasPrefix(name, "EVERYTHING_"), strings.HasPrefix(name, "LC_"):
		case slices.Contains([]string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE"}, name):
		default:
			t.Errorf("trawl's %s reached the server: %s", name, text)
		}
	}
	for name, channel := range map[string]string{"the answer": text, "the logs": logs.String()} {
		if found := leaktest.FindAny([]byte(channel), admin, secret, redisPW, openai, aws, token); len(found) > 0 {
			t.Errorf("%s: %v", name, found)
		}
	}
}
