package mcpserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/web/deploy"
)

// fixture is a demo deployment served over MCP by a real HTTP server.
type fixture struct {
	dep *deploy.Deployment
	srv *Server
	url string
	// caller is who the test HTTP server authenticates every request as.
	mu     sync.Mutex
	caller Caller
}

func newFixture(t *testing.T, opt Options, edit func(*deploy.Config)) *fixture {
	t.Helper()
	cfg := deploy.DemoConfig()
	cfg.DataDir = t.TempDir()
	if edit != nil {
		edit(cfg)
	}
	d, err := deploy.Open(context.Background(), cfg, deploy.Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dep: d, srv: New(d, opt)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		c := f.caller
		f.mu.Unlock()
		f.srv.ServeHTTP(w, r.WithContext(WithRequest(r.Context(), "demo", c)))
	}))
	t.Cleanup(func() {
		hs.Close()
		f.srv.Close()
		d.Close()
	})
	f.url = hs.URL
	return f
}

// bearer adds an Authorization header (the SDK's bearer check wants one;
// the fixture's caller is who it authenticates as).
type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer test")
	return b.rt.RoundTrip(r)
}

// connect opens a Go SDK client session at protocol version v ("" : the
// SDK's newest, 2026-07-28).
func (f *fixture) connect(t *testing.T, v string, opt *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "trawl-test", Version: "v0"}, opt)
	tr := &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listAll(t *testing.T, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	var out []*mcp.Tool
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tool)
	}
	return out
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %v", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent is not an object: %s", b)
	}
	return m
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The tools a client lists are the agent's tools as a chat step offers
// them, over both revisions: reserved arguments on looping tools, the
// effect as annotations, the envelope's output schema, the view budget
// in _meta, search_tools/load_tool for the pooled toolkits.
func TestListTools(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			cs := f.connect(t, v, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s, want %s", got, v)
			}
			if !strings.Contains(cs.InitializeResult().Instructions, "_all_pages") {
				t.Errorf("instructions lack the looping guidance: %q", cs.InitializeResult().Instructions)
			}
			byName := map[string]*mcp.Tool{}
			var names []string
			for _, tool := range listAll(t, cs) {
				byName[tool.Name] = tool
				names = append(names, tool.Name)
			}
			for _, want := range []string{"list_orders", "search_tools", "load_tool", "queryToolResult", "fetchToolResult"} {
				if byName[want] == nil {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			orders := byName["list_orders"]
			if orders == nil {
				return
			}
			props := orders.InputSchema.(map[string]any)["properties"].(map[string]any)
			for _, arg := range []string{"_all_pages", "_fields", "_for_each", "_refresh", "_thread", "_max_chars", "status"} {
				if props[arg] == nil {
					t.Errorf("list_orders lacks %s: %v", arg, slices.Sorted(mapsKeys(props)))
				}
			}
			if a := orders.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
				t.Errorf("list_orders annotations = %+v", a)
			}
			if orders.OutputSchema == nil || !strings.Contains(orders.Description, "_all_pages") {
				t.Errorf("a looping tool has no output schema or no looping line: %q", orders.Description)
			}
			if got := orders.Meta[MetaMaxResultSize]; got != 32000.0 {
				t.Errorf("maxResultSizeChars = %v, want the view budget 32000", got)
			}
		})
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A walk over MCP is the engine's walk: the same verdict and rows as a
// direct call of the engine, as structuredContent and as text.
func TestCallWalksLikeChat(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	args := map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total"}}
	direct, err := f.dep.CallTool(context.Background(), "acme.list_orders", args, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(direct.View, &want); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			cs := f.connect(t, v, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			got := structured(t, res)
			b := got["_boundary"].(map[string]any)
			if got["_pagingComplete"] != true || b["completion"] != "complete" || b["records"] != want["_boundary"].(map[string]any)["records"] {
				t.Errorf("verdict = %v %v", got["_pagingComplete"], b)
			}
			if diff := cmp.Diff(want["data"], got["data"]); diff != "" {
				t.Errorf("rows differ from a direct call (-direct +mcp):\n%s", diff)
			}
			var fromText map[string]any
			if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || fromText["_note"] != got["_note"] {
				t.Errorf("text content is not the envelope: %v", err)
			}
			if res.Meta[MetaThread] != DefaultThread {
				t.Errorf("_meta = %v", res.Meta)
			}
		})
	}
}
