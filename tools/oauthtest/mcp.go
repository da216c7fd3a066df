package oauthtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
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
	var hello struct{ URL string }
	runNode(t, node, d, []string{"ISSUER=" + s.Issuer, "API_SECRET=" + s.APISecret}, "the MCP server", &hello)
	if hello.URL == "" {
		t.Fatal("the MCP server named no URL")
	}
	return hello.URL
}
