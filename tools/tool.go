// Package tools is trawl's tool model: what a tool is, where it comes from
// (an OpenAPI document, a connected-app toolkit manifest, an MCP server),
// and how one call of it becomes an upstream HTTP request with credentials
// injected at request time. The invoker is the credential boundary: it
// follows redirects only within their origin and masks every secret it
// holds in every byte it returns (Scrubber). It also keeps the activity
// log of upstream calls.
//
// The package imports no other trawl package; everything above it (the
// looping engine, discovery, the agent runtime) consumes these types.
package tools

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
)

// Kind says where a tool comes from.
type Kind string

const (
	KindAPI Kind = "api" // imported from an OpenAPI document ("your own API")
	KindApp Kind = "app" // a connected-app toolkit manifest
	KindMCP Kind = "mcp" // listed by an MCP server
)

// Location says where an argument goes in the upstream request.
type Location string

const (
	InPath   Location = "path"
	InQuery  Location = "query"
	InHeader Location = "header"
	InBody   Location = "body"
)

// Param is one argument of a tool as the model sees it, with where it goes.
//
// Request bodies are flattened: each top-level property of an object body
// becomes a Param with In == InBody, so the model sees one flat argument
// list. A body that is not an object (or whose property names collide with
// other parameters) is offered as a single Param named "body" with
// Wire == "" meaning "the whole body".
type Param struct {
	Name        string   `json:"name"`           // argument name the model uses
	Wire        string   `json:"wire,omitempty"` // name on the wire when it differs from Name; "" for a whole body
	In          Location `json:"in"`
	Required    bool     `json:"required,omitempty"`
	Description string   `json:"description,omitempty"`
	Schema      *Schema  `json:"schema,omitempty"`
}

// WireName is the name the parameter carries in the request.
func (p Param) WireName() string {
	if p.Wire != "" {
		return p.Wire
	}
	return p.Name
}

// Type is the parameter's primary JSON type ("" when unknown).
func (p Param) Type() string {
	if p.Schema == nil {
		return ""
	}
	return p.Schema.Type
}

// UserConnected reports whether each user connects the tool's toolkit
// with their own account (connect_toolkit): a connected app's tool, or
// one of an MCP server each user connects.
func (t *Tool) UserConnected() bool { return t.Kind == KindApp || t.PerUser }

// Tool is one callable operation.
type Tool struct {
	ID          string `json:"id"`          // "<provider>.<name>", unique per deployment
	Provider    string `json:"provider"`    // provider id, toolkit id or MCP server id
	Name        string `json:"name"`        // the function name the model sees
	Description string `json:"description"` // written for a model
	Kind        Kind   `json:"kind"`
	// Effect is what a call may do to the data as the tool's source
	// says: read, write or destructive (DeriveEffect). It is set when
	// the tool is made and never rewritten; what trawl acts on is
	// paginate.Effect, which adds what paging detection knows and a
	// binding's override. EffectDeclared says the source declared it (a
	// vendor extension, MCP annotations, a manifest's effect field)
	// rather than it being derived from the method.
	Effect         Effect `json:"effect"`
	EffectDeclared bool   `json:"effectDeclared,omitempty"`

	// Toolkit metadata for connected apps (Kind == KindApp).
	Toolkit            string `json:"toolkit,omitempty"`
	ToolkitName        string `json:"toolkitName,omitempty"`
	ToolkitDescription string `json:"toolkitDescription,omitempty"`
	// PerUser: each user connects the tool's source with their own
	// account (an MCP server behind OAuth with flow authorization_code),
	// as they connect an app's toolkit.
	PerUser bool `json:"perUser,omitempty"`

	// HTTP shape (Kind api and app).
	Method      string `json:"method,omitempty"`
	Path        string `json:"path,omitempty"`   // path template, e.g. /orders/{order_id}
	Origin      string `json:"origin,omitempty"` // base URL the path is joined to
	OperationID string `json:"operationId,omitempty"`
	// ContentType is the media type the request body is sent as
	// (application/json, application/x-www-form-urlencoded,
	// multipart/form-data); "" means application/json.
	ContentType string `json:"contentType,omitempty"`

	Params []Param `json:"params"`
	// OpenArgs is where arguments no parameter declares go, when the
	// source admits them: InBody for a request body (or an MCP input
	// schema) that sets additionalProperties (true or a schema), the
	// location of a manifest tool's other arguments for a manifest schema
	// that does. "": the parameters are a closed list, and an argument
	// outside them is refused before any request.
	OpenArgs Location `json:"openArgs,omitempty"`

	// Response is the resolved schema of the success response body, when
	// the source declares one. Pagination detection reads it.
	Response *Schema `json:"-"`
	// ResponseHeaders are the names of the headers the success response
	// declares (Link, X-RateLimit-Remaining…), when the source declares
	// any. Pagination detection reads a declared Link header from it.
	ResponseHeaders []string `json:"-"`
	// Extensions are the operation's x- extensions (x-speakeasy-pagination…).
	Extensions map[string]any `json:"-"`
}

// Param returns the parameter named name.
func (t *Tool) Param(name string) (Param, bool) {
	for _, p := range t.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// Undeclared returns the names in args that no parameter of t declares,
// sorted. Where they go, if anywhere, is OpenArgs.
func (t *Tool) Undeclared(args map[string]any) []string {
	var out []string
	for k := range args {
		if _, ok := t.Param(k); !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// InputSchema is the JSON Schema of the tool's arguments as the model sees
// it, without any reserved argument, and without the idempotency key
// parameter (IdempotencyParam), which trawl fills.
func (t *Tool) InputSchema() map[string]any {
	props := make(map[string]any, len(t.Params))
	var required []string
	idem, _ := t.IdempotencyParam()
	for _, p := range t.Params {
		if p.Name == idem.Name {
			continue // trawl fills it on every write
		}
		s := p.Schema.JSON()
		if p.Description != "" {
			if _, ok := s["description"]; !ok {
				s["description"] = p.Description
			}
		}
		props[p.Name] = s
		if p.Required {
			required = append(required, p.Name)
		}
	}
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

var validName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether name follows the function-name rules of the
// OpenAI API (letters, digits, underscore and dash; at most 64 characters).
func ValidName(name string) bool { return validName.MatchString(name) }

// Validate checks the invariants every tool source must keep.
func (t *Tool) Validate() error {
	if !ValidName(t.Name) {
		return fmt.Errorf("tool %q: name %q is not a valid function name", t.ID, t.Name)
	}
	if t.ID == "" || t.Provider == "" {
		return fmt.Errorf("tool %q: id and provider are required", t.Name)
	}
	seen := map[string]bool{}
	for _, p := range t.Params {
		if seen[p.Name] {
			return fmt.Errorf("tool %q: duplicate parameter %q", t.ID, p.Name)
		}
		seen[p.Name] = true
	}
	return nil
}

// MarshalInputSchema is InputSchema as JSON.
func (t *Tool) MarshalInputSchema() json.RawMessage {
	b, _ := json.Marshal(t.InputSchema())
	return b
}
