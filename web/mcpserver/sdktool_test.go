package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
)

// The tool the SDK is given (sdkTool) gets the SDK's checks of
// parameters sent as headers exactly as the tool itself would: every
// request is answered alike by a server holding the tools as they are and
// one holding what sdkTool makes of them, and a schema that marks a
// parameter x-mcp-header is given as it is.
func TestSDKToolKeepsParamHeaderChecks(t *testing.T) {
	regional := &mcp.Tool{Name: "regional", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer"}}}`)}
	plain := &mcp.Tool{Name: "plain", Description: "a tool", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"status":{"type":"string","description":"which"},"_thread":{"type":"string"}}}`)}
	if sdkTool(regional) != regional {
		t.Fatal("a schema with x-mcp-header was not given to the SDK as it is")
	}
	if got := sdkTool(plain); got.Name != plain.Name || got.Description != plain.Description ||
		string(got.InputSchema.(json.RawMessage)) != `{"type":"object"}` || string(plain.InputSchema.(json.RawMessage)) == `{"type":"object"}` {
		t.Fatalf("sdkTool(plain) = %+v (plain now %+v)", got, plain)
	}

	serve := func(wrap func(*mcp.Tool) *mcp.Tool) string {
		srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v"}, nil)
		for _, tool := range []*mcp.Tool{regional, plain} {
			srv.AddTool(wrap(tool), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
			})
		}
		ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	asIs := serve(func(t *mcp.Tool) *mcp.Tool { return t })
	given := serve(sdkTool)

	b64 := func(s string) string { return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=" }
	cases := []struct {
		tool, args string
		headers    map[string]string
		ok         bool // answered with the call's result
	}{
		{"regional", `{"region":"eu","n":1}`, map[string]string{"Mcp-Param-Region": "eu"}, true},
		{"regional", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": "us"}, false},
		{"regional", `{"region":"eu"}`, nil, false},
		{"regional", `{"region":"eu"}`, map[string]string{"Mcp-Param-Region": b64("eu")}, true},
		{"regional", `{"n":2}`, map[string]string{"Mcp-Param-Region": "eu"}, false},
		{"plain", `{"status":"open"}`, nil, true},
		{"plain", `{"status":"open"}`, map[string]string{"Mcp-Param-Status": "paid"}, true},
		{"plain", `{"status":"open"}`, map[string]string{"Mcp-Param-Region": "eu"}, true},
	}
	answer := func(url string, i int) string {
		c := cases[i]
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,`+
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`, i, c.tool, c.args)
		return postCall(t, url, c.tool, body, c.headers)
	}
	for i, c := range cases {
		want, got := answer(asIs, i), answer(given, i)
		if got != want {
			t.Errorf("%s %s %v: answered\n%s\nwant (the tool as it is)\n%s", c.tool, c.args, c.headers, got, want)
		}
		if ran := strings.HasPrefix(got, "200 ") && strings.Contains(got, `"ran"`); ran != c.ok {
			t.Errorf("%s %s %v: answered %s; want the call run: %v", c.tool, c.args, c.headers, got, c.ok)
		}
	}
}

// A tool whose schema marks parameters x-mcp-header where MCP does not
// allow it (a schema passed on as trawl was given it) is offered without those marks,
// and the SDK takes it (it panics on such a mark); the allowed marks stay
// and work, and of two marks naming one header the first parameter's by
// name keeps it.
func TestDescribeDropsBadParamHeaders(t *testing.T) {
	o := agent.OfferedTool{Kind: agent.ToolBound}
	o.Name = "list_things"
	o.Parameters = json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"region_again":{"type":"string","x-mcp-header":"REGION"},
		"filter":{"type":"object","x-mcp-header":"Filter","properties":{
			"tenant":{"type":"integer","x-mcp-header":"Tenant"},
			"spaced":{"type":"string","x-mcp-header":"Bad Name"}}},
		"tags":{"type":"array","items":{"type":"string"},"x-mcp-header":"Tags"},
		"count":{"type":"integer","x-mcp-header":7},
		"open":{"type":"boolean","x-mcp-header":"Open"},
		"empty":{"type":"string","x-mcp-header":""}}}`)
	tool, dropped, err := describe(o, 1000)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"count (7)", "empty ()", "filter (Filter)", "filter.spaced (Bad Name)", "region_again (REGION)", "tags (Tags)"}
	if !slices.Equal(dropped, want) {
		t.Errorf("dropped %q, want %q", dropped, want)
	}
	var schema struct {
		Properties map[string]struct {
			Mark       any `json:"x-mcp-header"`
			Properties map[string]struct {
				Mark any `json:"x-mcp-header"`
			} `json:"properties"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(tool.InputSchema.(json.RawMessage), &schema); err != nil {
		t.Fatal(err)
	}
	marks := map[string]any{}
	for name, p := range schema.Properties {
		if p.Mark != nil {
			marks[name] = p.Mark
		}
		for sub, q := range p.Properties {
			if q.Mark != nil {
				marks[name+"."+sub] = q.Mark
			}
		}
	}
	if fmt.Sprint(marks) != "map[filter.tenant:Tenant open:Open region:Region]" {
		t.Errorf("marks kept: %v", marks)
	}

	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "v"}, nil)
	func() { // what the marks would do unchecked
		defer func() {
			if recover() == nil {
				t.Error("the SDK took the tool with every mark: this test no longer shows what the check is for")
			}
		}()
		raw := *tool
		raw.InputSchema = o.Parameters
		srv.AddTool(&raw, nil)
	}()
	srv.AddTool(sdkTool(tool), func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true}))
	defer ts.Close()
	call := func(region string) string {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_things","arguments":{"region":"eu","region_again":"x","open":true},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		return postCall(t, ts.URL, "list_things", body, map[string]string{"Mcp-Param-Region": region, "Mcp-Param-Open": "true"})
	}
	if got := call("eu"); !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"ran"`) {
		t.Errorf("the call with its kept header marks: %s", got)
	}
	if got := call("us"); strings.Contains(got, `"ran"`) {
		t.Errorf("a header that disagrees with its argument was taken: %s", got)
	}
}

// postCall posts a 2026-07-28 tools/call body for tool to url with its
// protocol headers and these, and answers the status and body.
func postCall(t *testing.T, url, tool, body string, headers map[string]string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	for k, v := range map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": tool, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Protocol-Version": "2026-07-28"} {
		req.Header.Set(k, v)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}
