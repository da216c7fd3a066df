package tools

import (
	"encoding/json"
	"testing"
)

// Where a tool's undeclared arguments may go is read from its source:
// a request body, an MCP input schema or a manifest schema that sets
// additionalProperties (true or a schema) admits them; one that does not
// set it, or sets it false, keeps its parameters a closed list.
func TestOpenArgsFromSchemas(t *testing.T) {
	doc := func(body string) []byte {
		return []byte(`{"openapi":"3.0.3","info":{"title":"x","version":"1"},"paths":{"/contacts":{"post":{"operationId":"create",
"requestBody":{"content":{"application/json":{"schema":` + body + `}}},"responses":{"200":{"description":"ok"}}}}}}`)
	}
	for _, c := range []struct {
		name, body string
		want       Location
	}{
		{"additionalProperties true", `{"type":"object","properties":{"email":{"type":"string"}},"additionalProperties":true}`, InBody},
		{"additionalProperties a schema", `{"type":"object","properties":{"email":{"type":"string"}},"additionalProperties":{"type":"string"}}`, InBody},
		{"in an allOf part", `{"allOf":[{"type":"object","properties":{"email":{"type":"string"}}},{"type":"object","additionalProperties":true}]}`, InBody},
		{"unset", `{"type":"object","properties":{"email":{"type":"string"}}}`, ""},
		{"false", `{"type":"object","properties":{"email":{"type":"string"}},"additionalProperties":false}`, ""},
		{"a whole-body argument", `{"type":"array","items":{"type":"string"}}`, ""},
	} {
		ts, err := ImportOpenAPIData(doc(c.body), ImportOptions{ProviderID: "crm", BaseURL: "https://crm.example"})
		if err != nil || len(ts) != 1 {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := ts[0].OpenArgs; got != c.want {
			t.Errorf("OpenAPI body %s: OpenArgs %q, want %q", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name, schema string
		want         Location
	}{
		{"additionalProperties true", `{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":true}`, InBody},
		{"additionalProperties a schema", `{"type":"object","additionalProperties":{"type":"number"}}`, InBody},
		{"the schema true", `true`, InBody},
		{"unset", `{"type":"object","properties":{"path":{"type":"string"}}}`, ""},
		{"false", `{"type":"object","properties":{"path":{"type":"string"}},"additionalProperties":false}`, ""},
	} {
		var v any
		if err := json.Unmarshal([]byte(c.schema), &v); err != nil {
			t.Fatal(err)
		}
		_, got, err := mcpParams(newSchemaConverter(), v)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("MCP input schema %s: %q, want %q", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		method, schema string
		want           Location
	}{
		{"GET", `{"type":"object","properties":{"q":{"type":"string"}},"additionalProperties":true}`, InQuery},
		{"POST", `{"type":"object","properties":{"to":{"type":"string"}},"additionalProperties":true}`, InBody},
		{"POST", `{"type":"object","properties":{"to":{"type":"string"}}}`, ""},
		{"GET", ``, ""},
	} {
		m := &Manifest{Toolkit: "mail", Name: "Mail", BaseURL: "https://mail.example", ToolSpecs: []ManifestTool{
			{Name: "T", Description: "t", InputSchema: json.RawMessage(c.schema), HTTP: ManifestHTTP{Method: c.method, Path: "/t"}}}}
		ts, err := m.Tools()
		if err != nil {
			t.Fatal(err)
		}
		if got := ts[0].OpenArgs; got != c.want {
			t.Errorf("manifest %s %s: %q, want %q", c.method, c.schema, got, c.want)
		}
	}
}
