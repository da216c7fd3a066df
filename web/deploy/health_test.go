package deploy

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawl-dev/trawl/tools"
)

// TestReadyReportsEachPart: the readiness lists the store and each MCP
// server with its state: a gone MCP server degrades it (the cause is
// logged, not shown), a store that does not answer makes it unavailable.
func TestReadyReportsEachPart(t *testing.T) {
	msrv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	msrv.AddTool(&mcp.Tool{Name: "stat", Description: "Describe one file.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return msrv }, nil))
	t.Cleanup(hs.Close)
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.MCPServers = []tools.MCPConfig{{ID: "files", URL: hs.URL}}
	var logs bytes.Buffer
	d, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	if r := d.Ready(ctx); r.Status != "ready" || r.Stores["bolt"] != stateOK || r.MCPServers["files"] != stateOK {
		t.Fatalf("ready: %+v", r)
	}
	d.MCP("files").Close()
	if r := d.Ready(ctx); r.Status != "degraded" || r.MCPServers["files"] != stateUnreachable || r.Stores["bolt"] != stateOK {
		t.Errorf("with the mcp server gone: %+v", r)
	}
	if !bytes.Contains(logs.Bytes(), []byte("readiness check failed")) {
		t.Errorf("cause not logged:\n%s", logs.String())
	}
	d.stores.db.Close()
	if r := d.Ready(ctx); r.Status != "unavailable" || r.Stores["bolt"] != stateUnreachable {
		t.Errorf("with the store closed: %+v", r)
	}
}
