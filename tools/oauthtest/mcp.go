package oauthtest

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// StartMCP runs, for t, the MCP server behind OAuth of the tests: the
// TypeScript MCP SDK's server with its bearer-auth middleware (pinned in
// testdata/mcpserver, installed by its install.sh), accepting only the
// tokens s issued for its URL and naming s in its protected-resource
// metadata. Its tool whoami answers the token's subject and client (and
// echoes the token, hostile). It returns the server's MCP endpoint.
// Without the installed SDK the test is skipped (in CI it fails).
func (s *Server) StartMCP(t testing.TB) string {
	t.Helper()
	d := filepath.Join(filepath.Dir(dir()), "mcpserver")
	node, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(d, "node_modules", "@modelcontextprotocol", "sdk")); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the MCP SDK is not installed (node: %v); run tools/oauthtest/testdata/mcpserver/install.sh", err)
		}
		t.Skip("the MCP SDK is not installed; run tools/oauthtest/testdata/mcpserver/install.sh")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "server.mjs")
	cmd.Dir = d
	cmd.Env = append(os.Environ(), "ISSUER="+s.Issuer, "API_SECRET="+s.APISecret)
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		var hello struct{ URL string }
		if err := json.Unmarshal([]byte(l), &hello); err != nil || hello.URL == "" {
			t.Fatalf("the MCP server said %q", l)
		}
		return hello.URL
	case <-time.After(30 * time.Second):
		t.Fatal("the MCP server did not start in 30 s")
	}
	return ""
}
