package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func mailTools() []*Tool {
	tool := func(name, desc, method, path string, params ...Param) *Tool {
		if params == nil {
			params = []Param{}
		}
		return &Tool{
			ID: "mail." + name, Provider: "mail", Name: name, Description: desc, Kind: KindApp,
			Toolkit: "mail", ToolkitName: "Mail", ToolkitDescription: "Read and send mail.",
			Method: method, Path: path, Origin: "https://mail.example/api", Params: params,
			Effect: MethodEffect(method),
		}
	}
	strs := &Schema{Type: "array", Items: str}
	return []*Tool{
		tool("MAIL_LIST_MESSAGES", "List the messages of a folder, newest first.", "GET", "/folders/{folder}/messages",
			Param{Name: "folder", In: InPath, Required: true, Description: "Folder id.", Schema: &Schema{Type: "string", Description: "Folder id."}},
			Param{Name: "filter_unread", Wire: "filter[unread]", In: InQuery, Schema: &Schema{Type: "boolean"}},
			Param{Name: "max_results", In: InQuery, Schema: &Schema{Type: "integer", Minimum: ptr(1.0), Maximum: ptr(500.0)}},
			Param{Name: "page_token", In: InQuery, Schema: str},
		),
		tool("MAIL_SEND", "Send a message.", "POST", "/messages",
			Param{Name: "body", Wire: "body", In: InBody, Description: "Plain text.", Schema: &Schema{Type: "string", Description: "Plain text."}},
			Param{Name: "cc", In: InBody, Schema: &Schema{Type: "array", Items: str, Nullable: true}},
			Param{Name: "subject", In: InBody, Required: true, Schema: str},
			Param{Name: "to", In: InBody, Required: true, Schema: strs},
		),
		tool("MAIL_DELETE", "Delete a message.", "DELETE", "/messages/{id}",
			Param{Name: "id", In: InPath, Required: true, Schema: str},
			Param{Name: "permanent", In: InQuery, Schema: &Schema{Type: "boolean"}},
		),
		tool("MAIL_PROFILE", "The mailbox owner's profile.", "GET", "/me"),
	}
}

func TestLoadManifest(t *testing.T) {
	for _, file := range []string{"mail.json", "mail.yaml"} {
		t.Run(file, func(t *testing.T) {
			m, err := LoadManifest(filepath.Join("testdata", "manifests", file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Toolkit != "mail" || m.Name != "Mail" || m.BaseURL != "https://mail.example/api/" || m.Auth != (AuthSpec{Type: AuthBearer}) || len(m.ToolSpecs) != 4 {
				t.Errorf("manifest %+v", m)
			}
			ts, err := m.Tools()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(mailTools(), ts); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
			for _, tool := range ts {
				if err := tool.Validate(); err != nil {
					t.Error(err)
				}
			}
		})
	}

	m, err := LoadManifest(filepath.Join("testdata", "manifests", "crm-api-key.json"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Auth != (AuthSpec{Type: AuthAPIKey, Header: "X-CRM-Key"}) {
		t.Errorf("auth %v", m.Auth)
	}
	ts, err := m.Tools()
	if err != nil {
		t.Fatal(err)
	}
	want := []Param{
		{Name: "page", In: InBody, Schema: &Schema{Type: "integer", Default: 1.0}},
		{Name: "q", In: InBody, Required: true, Schema: str},
	}
	if diff := cmp.Diff(want, ts[0].Params); diff != "" {
		t.Errorf("POST params go to the body (-want +got):\n%s", diff)
	}
	if got := string(ts[0].MarshalInputSchema()); got != `{"properties":{"page":{"default":1,"type":"integer"},"q":{"type":"string"}},"required":["q"],"type":"object"}` {
		t.Errorf("input schema as the model sees it: %s", got)
	}

	if _, err := LoadManifest(filepath.Join("testdata", "manifests", "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: %v", err)
	}
}

func TestParseManifestErrors(t *testing.T) {
	valid := map[string]any{
		"toolkit": "mail", "name": "Mail", "base_url": "https://mail.example", "auth": map[string]any{"type": "bearer"},
		"tools": []any{map[string]any{
			"name": "MAIL_GET", "description": "Get a message.",
			"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"id": map[string]any{"type": "string"}}},
			"http":        map[string]any{"method": "GET", "path": "/messages/{id}"},
		}},
	}
	// with returns valid with the value at the dotted path replaced
	// (nil deletes it); a number steps into a list.
	with := func(path string, v any) []byte {
		var doc any
		b, _ := json.Marshal(valid)
		_ = json.Unmarshal(b, &doc)
		steps := strings.Split(path, ".")
		cur := doc
		for _, step := range steps[:len(steps)-1] {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[step]
			case []any:
				i, _ := strconv.Atoi(step)
				cur = c[i]
			}
		}
		m, last := cur.(map[string]any), steps[len(steps)-1]
		if v == nil {
			delete(m, last)
		} else {
			m[last] = v
		}
		out, _ := json.Marshal(doc)
		return out
	}
	if _, err := ParseManifest(with("name", "Mail")); err != nil {
		t.Fatalf("the valid manifest: %v", err)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"unknown key", with("tool", "x"), `unknown key "tool" in the manifest`},
		{"unknown auth key", with("auth.secret", "x"), `unknown key "secret" in auth`},
		{"unknown tool key", with("tools.0.input_schema", map[string]any{}), `unknown key "input_schema" in tools[0]`},
		{"unknown http key", with("tools.0.http.url", "x"), `unknown key "url" in tools[0].http`},
		{"tools not a list", with("tools", "x"), "tools must be a list"},
		{"wrong type", with("name", 3), "cannot unmarshal number"},
		{"no toolkit", with("toolkit", nil), `toolkit ""`},
		{"bad toolkit", with("toolkit", "my mail"), `toolkit "my mail"`},
		{"no name", with("name", nil), "name is required"},
		{"no base url", with("base_url", nil), "base_url"},
		{"relative base url", with("base_url", "/api"), `base_url "/api"`},
		{"bad auth", with("auth.type", "oauth"), `auth type "oauth"`},
		{"api key without name", with("auth.type", "api_key"), "header or a query parameter name"},
		{"no tools", with("tools", []any{}), "at least one tool"},
		{"bad tool name", with("tools.0.name", "mail.get"), `tools[0] (mail.get): name "mail.get"`},
		{"no description", with("tools.0.description", " "), "tools[0] (MAIL_GET): description is required"},
		{"bad method", with("tools.0.http.method", "FETCH"), `http.method "FETCH"`},
		{"relative path", with("tools.0.http.path", "messages"), `must start with /`},
		{"unclosed placeholder", with("tools.0.http.path", "/m/{id"), "unclosed {"},
		{"stray brace", with("tools.0.http.path", "/m/id}"), "unmatched }"},
		{"empty placeholder", with("tools.0.http.path", "/m/{}"), "empty {}"},
		{"placeholder without property", with("tools.0.http.path", "/m/{msg}"), "{msg}, which is not an inputSchema property"},
		{"schema not an object", with("tools.0.inputSchema", []any{}), "must be a JSON Schema object"},
		{"schema of a string", with("tools.0.inputSchema", map[string]any{"type": "string"}), `type "string"`},
		{"schema with a ref", with("tools.0.inputSchema", map[string]any{"properties": map[string]any{"id": map[string]any{"$ref": "#/$defs/id"}}}), "inputSchema.properties.id: $ref"},
		{"broken YAML", []byte("toolkit: [\n"), "manifest: yaml"},
		{"YAML list", []byte("- a\n"), "not an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseManifest(tc.data)
			if err == nil {
				t.Fatalf("no error for %s", tc.data)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	dup, _ := json.Marshal(map[string]any{
		"toolkit": "mail", "name": "Mail", "base_url": "https://mail.example",
		"tools": []any{
			map[string]any{"name": "A", "description": "a", "http": map[string]any{"method": "GET", "path": "/a"}},
			map[string]any{"name": "A", "description": "b", "http": map[string]any{"method": "GET", "path": "/b"}},
		},
	})
	if _, err := ParseManifest(dup); err == nil || !strings.Contains(err.Error(), "tools[1] (A): name is also used by tools[0]") {
		t.Errorf("duplicate names: %v", err)
	}
}

// TestManifestToolsValidates checks that a manifest built in code is
// checked as strictly as a parsed one.
func TestManifestToolsValidates(t *testing.T) {
	m := &Manifest{Toolkit: "x", Name: "X", BaseURL: "https://x.example", ToolSpecs: []ManifestTool{
		{Name: "get", Description: "Get.", HTTP: ManifestHTTP{Method: "GET", Path: "/items/{id}"}},
	}}
	if _, err := m.Tools(); err == nil || !strings.Contains(err.Error(), "{id}") {
		t.Errorf("Tools: %v", err)
	}
}

func TestAuthSpec(t *testing.T) {
	tests := []struct {
		spec AuthSpec
		want string // "" for valid
	}{
		{AuthSpec{}, ""},
		{AuthSpec{Type: AuthNone}, ""},
		{AuthSpec{Type: AuthBearer, Token: "t"}, ""},
		{AuthSpec{Type: AuthBasic, Username: "u", Password: "p"}, ""},
		{AuthSpec{Type: AuthAPIKey, Header: "X-Api-Key"}, ""},
		{AuthSpec{Type: AuthAPIKey, Query: "api_key"}, ""},
		{AuthSpec{Type: "oauth"}, "not one of"},
		{AuthSpec{Type: AuthAPIKey}, "needs a header or a query"},
		{AuthSpec{Type: AuthAPIKey, Header: "X", Query: "y"}, "not both"},
		{AuthSpec{Type: AuthAPIKey, Header: "X Key"}, "not a valid HTTP header name"},
		{AuthSpec{Type: AuthBearer, Header: "X-Token"}, "takes no header"},
	}
	for _, tc := range tests {
		err := tc.spec.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.spec, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want %q", tc.spec, err, tc.want)
		}
	}

	secret := AuthSpec{Type: AuthBasic, Username: "ann", Password: "hunter2-secret", Token: "tok-secret"}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("auth", "spec", secret)
	for _, out := range []string{fmt.Sprint(secret), fmt.Sprintf("%+v", secret), fmt.Sprintf("%#v", secret), logged.String()} {
		if strings.Contains(out, "secret") {
			t.Errorf("secret printed: %s", out)
		}
		if !strings.Contains(out, "type=basic") || !strings.Contains(out, "redacted") {
			t.Errorf("description missing: %s", out)
		}
	}

	var fromJSON AuthSpec
	if err := json.Unmarshal([]byte(`{"type":"api_key","header":"X-Key","query":"","token":"t","username":"u","password":"p"}`), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if fromJSON != (AuthSpec{Type: AuthAPIKey, Header: "X-Key", Token: "t", Username: "u", Password: "p"}) {
		t.Errorf("lower-snake json keys: %v", fromJSON)
	}
}

func FuzzParseManifest(f *testing.F) {
	for _, name := range []string{"mail.json", "mail.yaml", "crm-api-key.json"} {
		data, err := os.ReadFile(filepath.Join("testdata", "manifests", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"toolkit":"a","name":"A","base_url":"http://a","tools":[{"name":"b","description":"c","http":{"method":"GET","path":"/{x}/{x}"},"inputSchema":{"properties":{"x":{}}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseManifest(data)
		if err != nil {
			return
		}
		ts, err := m.Tools()
		if err != nil {
			t.Fatalf("parsed manifest gives no tools: %v", err)
		}
		for _, tool := range ts {
			if err := tool.Validate(); err != nil {
				t.Error(err)
			}
		}
	})
}

func ExampleParseManifest() {
	m, err := ParseManifest([]byte(`{
  "toolkit": "tickets", "name": "Tickets", "base_url": "https://tickets.example",
  "auth": {"type": "api_key", "header": "X-Tickets-Key"},
  "tools": [{
    "name": "TICKETS_LIST", "description": "List tickets of a queue.",
    "inputSchema": {"type": "object", "required": ["queue"],
                    "properties": {"queue": {"type": "string"}, "status": {"type": "string"}}},
    "http": {"method": "GET", "path": "/queues/{queue}/tickets"}}]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	ts, err := m.Tools()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range ts {
		fmt.Println(t.ID, t.Kind, t.Method, t.Origin+t.Path)
		for _, p := range t.Params {
			fmt.Printf("  %s in %s, required=%v\n", p.Name, p.In, p.Required)
		}
	}
	fmt.Println(m.Auth)
	// Output:
	// tickets.TICKETS_LIST app GET https://tickets.example/queues/{queue}/tickets
	//   queue in path, required=true
	//   status in query, required=false
	// auth{type=api_key header=X-Tickets-Key}
}
