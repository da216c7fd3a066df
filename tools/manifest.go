package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"
)

// Manifest is a connected-app toolkit: a named set of HTTP tools sharing a
// base URL and an auth scheme (DESIGN.md §9). Manifests are JSON; YAML
// with the same keys is read too.
//
//	{"toolkit": "mail", "name": "Mail", "description": "…", "base_url": "https://mail.example",
//	 "auth": {"type": "bearer"},
//	 "tools": [{"name": "MAIL_LIST_MESSAGES", "description": "…",
//	            "inputSchema": {"type": "object", "properties": {…}},
//	            "http": {"method": "GET", "path": "/messages"}}]}
type Manifest struct {
	Toolkit     string   `json:"toolkit"` // id; tool ids are toolkit + "." + tool name
	Name        string   `json:"name"`    // display name
	Description string   `json:"description,omitempty"`
	BaseURL     string   `json:"base_url"`
	Auth        AuthSpec `json:"auth"`
	// RateLimit paces the toolkit's requests across the deployment (see
	// RateLimit). Zero: only what the app reports.
	RateLimit RateLimit `json:"rate_limit,omitzero"`
	// ToolSpecs are the manifest's "tools" entries; the Tools method
	// turns them into *Tool values.
	ToolSpecs []ManifestTool `json:"tools"`
}

// ManifestTool is one tool of a toolkit manifest.
type ManifestTool struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the arguments: an object whose
	// properties become the tool's parameters. Empty: no arguments.
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	HTTP        ManifestHTTP    `json:"http"`
	// Effect is what a call does: read, write or destructive. Empty: the
	// HTTP method's (GET and HEAD read, DELETE destructive, others write).
	Effect string `json:"effect,omitempty"`
}

// ManifestHTTP is the request a manifest tool makes. Arguments named in
// the path ({id}) fill it; the others go to the query string for GET,
// HEAD and DELETE and into a JSON body otherwise.
type ManifestHTTP struct {
	Method string `json:"method"`
	Path   string `json:"path"`
}

// manifestKeys lists the keys each object of a manifest may hold;
// ParseManifest rejects any other.
var manifestKeys = struct{ top, auth, tool, http []string }{
	top: []string{"toolkit", "name", "description", "base_url", "auth", "rate_limit", "tools"},
	auth: []string{"type", "header", "query", "token", "username", "password",
		"flow", "issuer", "authorize_url", "token_url", "revoke_url", "client_id", "client_secret", "scopes", "audience", "pkce", "token_auth_method", "authorize_params"},
	tool: []string{"name", "description", "inputSchema", "http", "effect"},
	http: []string{"method", "path"},
}

// LoadManifest reads and parses the manifest at path.
func LoadManifest(path string) (*Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// ParseManifest parses a manifest strictly: unknown keys are rejected,
// required fields checked, tool names must be valid function names and
// unique, and every path placeholder must be an input property.
func ParseManifest(data []byte) (*Manifest, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		if _, ok := v.(map[string]any); !ok {
			return nil, errors.New("manifest: not an object")
		}
		js, err := json.Marshal(jsonCompatible(v))
		if err != nil {
			return nil, fmt.Errorf("manifest: %w", err)
		}
		data = js
	}
	if err := checkManifestKeys(data); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}

// checkManifestKeys rejects keys the manifest format does not define,
// naming the key and where it is. The input schemas are JSON Schema and
// are not checked here.
func checkManifestKeys(data []byte) error {
	top, err := objectKeys(data, "the manifest", manifestKeys.top)
	if err != nil {
		return err
	}
	if raw, ok := top["auth"]; ok {
		if _, err := objectKeys(raw, "auth", manifestKeys.auth); err != nil {
			return err
		}
	}
	raw, ok := top["tools"]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return errors.New("tools must be a list")
	}
	for i, t := range list {
		where := fmt.Sprintf("tools[%d]", i)
		fields, err := objectKeys(t, where, manifestKeys.tool)
		if err != nil {
			return err
		}
		if h, ok := fields["http"]; ok {
			if _, err := objectKeys(h, where+".http", manifestKeys.http); err != nil {
				return err
			}
		}
	}
	return nil
}

func objectKeys(data json.RawMessage, where string, allowed []string) (map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("%s must be an object", where)
	}
	for k := range fields {
		if !slices.Contains(allowed, k) {
			return nil, fmt.Errorf("unknown key %q in %s (allowed: %s)", k, where, strings.Join(allowed, ", "))
		}
	}
	return fields, nil
}

// Validate checks the manifest's required fields and tools.
func (m *Manifest) Validate() error {
	if !ValidName(m.Toolkit) {
		return fmt.Errorf("manifest: toolkit %q must be 1-64 letters, digits, '_' or '-'", m.Toolkit)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("manifest %s: %s", m.Toolkit, fmt.Sprintf(format, args...))
	}
	if strings.TrimSpace(m.Name) == "" {
		return fail("name is required")
	}
	u, err := url.Parse(m.BaseURL)
	if m.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fail("base_url %q must be an absolute http(s) URL", m.BaseURL)
	}
	if err := m.RateLimit.Validate(); err != nil {
		return fail("rate_limit: %s", err)
	}
	if err := m.Auth.Validate(); err != nil {
		return fail("%v", err)
	}
	if len(m.ToolSpecs) == 0 {
		return fail("tools: at least one tool is required")
	}
	seen := map[string]int{}
	for i, t := range m.ToolSpecs {
		where := fmt.Sprintf("tools[%d]", i)
		if t.Name != "" {
			where += " (" + t.Name + ")"
		}
		if err := t.validate(); err != nil {
			return fail("%s: %v", where, err)
		}
		if j, dup := seen[t.Name]; dup {
			return fail("%s: name is also used by tools[%d]", where, j)
		}
		seen[t.Name] = i
	}
	return nil
}

var manifestMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead}

func (t ManifestTool) validate() error {
	if !ValidName(t.Name) {
		return fmt.Errorf("name %q must be 1-64 letters, digits, '_' or '-'", t.Name)
	}
	if strings.TrimSpace(t.Description) == "" {
		return errors.New("description is required")
	}
	if !slices.Contains(manifestMethods, strings.ToUpper(t.HTTP.Method)) {
		return fmt.Errorf("http.method %q must be one of %s", t.HTTP.Method, strings.Join(manifestMethods, ", "))
	}
	if t.Effect != "" {
		if _, err := ParseEffect(t.Effect); err != nil {
			return err
		}
	}
	if !strings.HasPrefix(t.HTTP.Path, "/") {
		return fmt.Errorf("http.path %q must start with /", t.HTTP.Path)
	}
	placeholders, err := pathPlaceholders(t.HTTP.Path)
	if err != nil {
		return err
	}
	schema, err := t.inputSchema()
	if err != nil {
		return err
	}
	for _, p := range placeholders {
		if schema == nil || schema.Properties[p] == nil {
			return fmt.Errorf("http.path names {%s}, which is not an inputSchema property", p)
		}
	}
	return nil
}

// inputSchema decodes the tool's input schema; nil when there is none.
func (t ManifestTool) inputSchema() (*openapi3.Schema, error) {
	raw := bytes.TrimSpace(t.InputSchema)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	var generic any
	if err := json.Unmarshal(raw, &generic); err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	obj, ok := generic.(map[string]any)
	if !ok {
		return nil, errors.New("inputSchema must be a JSON Schema object")
	}
	if at := findRef(obj, "inputSchema"); at != "" {
		return nil, fmt.Errorf("%s: $ref is not supported in a manifest; write the schema inline", at)
	}
	var s openapi3.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("inputSchema: %w", err)
	}
	if typ := primaryType(s.Type); typ != "" && typ != "object" {
		return nil, fmt.Errorf("inputSchema has type %q; it must describe an object", typ)
	}
	return &s, nil
}

// findRef returns where the first $ref in a decoded schema is, or "".
func findRef(v any, at string) string {
	switch x := v.(type) {
	case map[string]any:
		if _, ok := x["$ref"]; ok {
			return at
		}
		ks := make([]string, 0, len(x))
		for k := range x {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for _, k := range ks {
			switch k {
			case "enum", "const", "default", "example", "examples":
				continue
			}
			if found := findRef(x[k], at+"."+k); found != "" {
				return found
			}
		}
	case []any:
		for i, child := range x {
			if found := findRef(child, fmt.Sprintf("%s[%d]", at, i)); found != "" {
				return found
			}
		}
	}
	return ""
}

// pathPlaceholders lists the {names} of a path template in order.
func pathPlaceholders(path string) ([]string, error) {
	var out []string
	rest := path
	for {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			return out, nil
		}
		if rest[open] == '}' {
			return nil, fmt.Errorf("http.path %q has an unmatched }", path)
		}
		end := strings.IndexAny(rest[open+1:], "{}")
		if end < 0 || rest[open+1+end] != '}' {
			return nil, fmt.Errorf("http.path %q has an unclosed {", path)
		}
		name := rest[open+1 : open+1+end]
		if name == "" {
			return nil, fmt.Errorf("http.path %q has an empty {}", path)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
		rest = rest[open+1+end+1:]
	}
}

// Tools returns the manifest's tools, Kind app: each one's ID is the
// toolkit and its name, its Origin the base URL, and its Params the input
// schema's properties (path placeholders in the path, the others in the
// query for GET, HEAD and DELETE, in the body otherwise).
func (m *Manifest) Tools() ([]*Tool, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	conv := newSchemaConverter()
	out := make([]*Tool, 0, len(m.ToolSpecs))
	for _, mt := range m.ToolSpecs {
		schema, _ := mt.inputSchema() // validated above
		method := strings.ToUpper(mt.HTTP.Method)
		t := &Tool{
			ID:                 m.Toolkit + "." + mt.Name,
			Provider:           m.Toolkit,
			Name:               mt.Name,
			Description:        strings.TrimSpace(mt.Description),
			Kind:               KindApp,
			Toolkit:            m.Toolkit,
			ToolkitName:        m.Name,
			ToolkitDescription: m.Description,
			Method:             method,
			Path:               mt.HTTP.Path,
			Origin:             strings.TrimRight(m.BaseURL, "/"),
			Params:             []Param{},
		}
		if schema != nil {
			t.Params, t.OpenArgs = manifestParams(conv, schema, mt.HTTP.Path, method)
		}
		if mt.Effect != "" {
			t.Effect, _ = ParseEffect(mt.Effect) // validated above
			t.EffectDeclared = true
		} else {
			t.Effect = DeriveEffect(t)
		}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("manifest %s: %w", m.Toolkit, err)
		}
		out = append(out, t)
	}
	return out, nil
}

// manifestParams are a manifest tool's parameters from its input schema:
// path placeholders in the path, the other properties in the query (GET,
// HEAD, DELETE) or the body. It also says where arguments the schema
// does not list go: that same location when the schema admits them
// (additionalProperties true or a schema), else "".
func manifestParams(conv *schemaConverter, schema *openapi3.Schema, path, method string) ([]Param, Location) {
	s := conv.convert(&openapi3.SchemaRef{Value: schema}, modeRequest)
	rest := InBody
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		rest = InQuery
	}
	var open Location
	if s != nil && s.AdditionalProperties {
		open = rest
	}
	if s == nil || len(s.Properties) == 0 {
		return []Param{}, open
	}
	inPath, _ := pathPlaceholders(path) // validated by the caller
	props := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		if !slices.Contains(inPath, name) {
			props = append(props, name)
		}
	}
	slices.Sort(props)
	props = append(slices.Clone(inPath), props...)

	out := make([]Param, 0, len(props))
	taken := map[string]bool{}
	for _, prop := range props {
		in := rest
		if slices.Contains(inPath, prop) {
			in = InPath
		}
		ps := s.Properties[prop]
		name := uniqueName(taken, paramName(prop), string(in))
		wire := wireName(name, prop)
		if name == wholeBody && in == InBody {
			wire = prop // a property named "body", not the whole body
		}
		p := Param{
			Name:     name,
			Wire:     wire,
			In:       in,
			Required: in == InPath || slices.Contains(s.Required, prop),
			Schema:   ps,
		}
		if ps != nil {
			p.Description = ps.Description
		}
		out = append(out, p)
	}
	return out, open
}
