package tools

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCPEffects lists tools from a real MCP server (the official SDK)
// with and without annotations: absent annotations mean what the MCP
// specification says (readOnlyHint false, destructiveHint true).
func TestMCPEffects(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "effects", Version: "1"}, nil)
	no, yes := false, true
	obj := map[string]any{"type": "object"}
	cases := map[string]struct {
		ann  *mcp.ToolAnnotations
		want Effect
	}{
		"bare":             {nil, EffectDestructive},
		"empty":            {&mcp.ToolAnnotations{}, EffectDestructive},
		"read_only":        {&mcp.ToolAnnotations{ReadOnlyHint: true}, EffectRead},
		"read_only_hinted": {&mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, EffectRead},
		"additive":         {&mcp.ToolAnnotations{DestructiveHint: &no}, EffectWrite},
		"destructive":      {&mcp.ToolAnnotations{DestructiveHint: &yes}, EffectDestructive},
		"titled_only":      {&mcp.ToolAnnotations{Title: "Only a title"}, EffectDestructive},
	}
	for name, c := range cases {
		srv.AddTool(&mcp.Tool{Name: name, Description: name, InputSchema: obj, Annotations: c.ann},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	src := connectTest(t, MCPConfig{ID: "fx", URL: serveMCP(t, srv)}, MCPOptions{})
	if got := len(src.Tools()); got != len(cases) {
		t.Fatalf("%d tools, want %d", got, len(cases))
	}
	for name, c := range cases {
		tool := toolByName(t, src.Tools(), name)
		if tool.Effect != c.want || !tool.EffectDeclared {
			t.Errorf("%s: effect %q (declared %v), want %q declared", name, tool.Effect, tool.EffectDeclared, c.want)
		}
		if DeriveEffect(tool) != c.want {
			t.Errorf("%s: DeriveEffect = %q, want %q", name, DeriveEffect(tool), c.want)
		}
	}
}

func TestImportEffects(t *testing.T) {
	spec := []byte(`openapi: 3.0.0
info: {title: t, version: "1"}
paths:
  /items:
    get: {operationId: getItems, responses: {"200": {description: ok}}}
    post: {operationId: createItem, responses: {"200": {description: ok}}}
  /items/{id}:
    parameters: [{name: id, in: path, required: true, schema: {type: string}}]
    delete: {operationId: deleteItem, responses: {"204": {description: gone}}}
    put: {operationId: replaceItem, responses: {"200": {description: ok}}}
    patch: {operationId: updateItem, x-destructive: true, responses: {"200": {description: ok}}}
  /items/search:
    post: {operationId: searchItems, responses: {"200": {description: ok}}}
  /reports:
    post: {operationId: runReport, summary: "List the reports of a period", responses: {"200": {description: ok}}}
  /reports/run:
    post: {operationId: makeReport, x-readonly: true, responses: {"200": {description: ok}}}
  /purge:
    post: {operationId: purge, x-trawl-effect: destructive, responses: {"200": {description: ok}}}
  /accounts/get:
    post: {operationId: accountsGet, responses: {"200": {description: ok}}}
`)
	ts, err := ImportOpenAPIData(spec, ImportOptions{ProviderID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Effect{
		"getItems": EffectRead, "createItem": EffectWrite, "deleteItem": EffectDestructive,
		"replaceItem": EffectWrite, "updateItem": EffectDestructive, "searchItems": EffectRead,
		"runReport": EffectRead, "makeReport": EffectRead, "purge": EffectDestructive, "accountsGet": EffectRead,
	}
	declared := map[string]bool{"updateItem": true, "makeReport": true, "purge": true}
	for _, tool := range ts {
		if w := want[tool.OperationID]; tool.Effect != w {
			t.Errorf("%s %s: effect %q, want %q", tool.Method, tool.Path, tool.Effect, w)
		}
		if tool.EffectDeclared != declared[tool.OperationID] {
			t.Errorf("%s: declared = %v", tool.OperationID, tool.EffectDeclared)
		}
	}
	if len(ts) != len(want) {
		t.Errorf("%d tools, want %d", len(ts), len(want))
	}
}

func TestParseEffect(t *testing.T) {
	for in, want := range map[string]Effect{"read": EffectRead, " Write ": EffectWrite, "DESTRUCTIVE": EffectDestructive} {
		if got, err := ParseEffect(in); err != nil || got != want {
			t.Errorf("ParseEffect(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "delete", "readonly"} {
		if _, err := ParseEffect(in); err == nil {
			t.Errorf("ParseEffect(%q): no error", in)
		}
	}
}

// A query word counts only as a whole word that leads or ends the name,
// or as a whole path segment: a subscribe on /lists/{id}/members or a
// create on /value_lists is a write (found by a hostile review).
func TestQueryNamedWholeWords(t *testing.T) {
	for _, c := range []struct {
		name, op, path string
		want           bool
	}{
		{"add_member", "addMember", "/lists/{id}/members", false},
		{"create_saved_search", "", "/saved_searches", false},
		{"PostRadarValueLists", "PostRadarValueLists", "/v1/radar/value_lists", false},
		{"CreateSipCredential", "", "/Accounts/{Sid}/SIP/CredentialLists/{Id}/Credentials.json", false},
		{"search_users", "", "/users", true},
		{"listInvoices", "", "/invoices", true},
		{"conversations.list", "", "/conversations.list", true},
		{"invoices", "", "/invoices/search", true},
		{"accounts", "", "/accounts/get", true},
	} {
		tl := &Tool{Name: c.name, OperationID: c.op, Path: c.path, Method: "POST"}
		if got := QueryNamed(tl); got != c.want {
			t.Errorf("QueryNamed(%s %s) = %v, want %v", c.name, c.path, got, c.want)
		}
	}
}
