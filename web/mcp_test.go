package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools"
)

// TestMCPToolsThroughTheEngine: an MCP server from config (streamable
// HTTP) lends its tools to the catalog; a call goes through the looping
// engine and the size guard like any tool; a tool added at run time
// appears once the server announces it.
func TestMCPToolsThroughTheEngine(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, &mcp.ServerOptions{PageSize: 1})
	srv.AddTool(&mcp.Tool{Name: "list_files", Description: "List every file in the workspace.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var files []map[string]any
			for i := range 3000 {
				files = append(files, map[string]any{"path": fmt.Sprintf("/docs/file-%04d.md", i), "size": i * 10})
			}
			return &mcp.CallToolResult{StructuredContent: map[string]any{"files": files}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "stat", Description: "Describe one file.", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []any{"path"}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"path":"x","size":1}`}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close) // after trawl's own cleanup has closed the MCP session

	ts := startDemo(t, func(c *Config) {
		c.MCPServers = []tools.MCPConfig{{ID: "files", URL: hs.URL}}
		c.Limits.ViewChars = 4000
	})
	if st, b := ts.do(t, "GET", "/v1/tools/files.stat", "", nil); st != 200 || !strings.Contains(string(b), `"kind":"mcp"`) {
		t.Fatalf("mcp tool listed: %d %s", st, b)
	}
	st, b := ts.do(t, "POST", "/v1/tools/files.list_files/invoke", "", map[string]any{"args": map[string]any{"_fields": []string{"path"}}})
	var env map[string]any
	json.Unmarshal(b, &env)
	if st != 200 || env["_truncated"] != true || env["_totalItems"] != 3000.0 || env["_resultId"] == nil {
		t.Errorf("guarded mcp result: %d %.400s", st, b)
	}
	// A binding to the whole server follows its tool list.
	srv.AddTool(&mcp.Tool{Name: "search", Description: "Search file contents.", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{StructuredContent: map[string]any{"hits": []any{}}}, nil
		})
	waitFor(t, func() bool { _, ok := ts.catalog.Get("files.search"); return ok })
	names, err := agent.ToolNames(agent.Definition{ID: "x", AgentTools: []agent.Binding{{Toolkit: "files"}}}, ts.catalog)
	if err != nil || len(names) != 3 {
		t.Errorf("tools of the bound server: %v %v", names, err)
	}
}
