package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mapMCPTools turns a server's tool list into trawl tools. Names are made
// valid function names and unique: a name that is already valid keeps
// itself; another is sanitised, and when that collides, suffixed with a
// hash of the server's name (so it stays the same as tools come and go).
// Tools the server lists twice, or whose input schema cannot be read, are
// left out and logged.
func mapMCPTools(serverID string, list []*mcp.Tool, logger *slog.Logger) ([]*Tool, map[string]string) {
	type entry struct {
		src  *mcp.Tool
		base string
	}
	var entries []entry
	seen := map[string]bool{}
	for _, t := range list {
		if t == nil {
			continue
		}
		if seen[t.Name] {
			logger.Warn("mcp server lists a tool twice; keeping the first", "tool", t.Name)
			continue
		}
		seen[t.Name] = true
		entries = append(entries, entry{src: t, base: mcpBaseName(t.Name)})
	}

	// Who keeps each base name: the tool whose name it is unchanged, else
	// the alphabetically first of those that sanitise to it.
	keeper := map[string]string{}
	for _, e := range entries {
		k, ok := keeper[e.base]
		switch {
		case !ok, e.src.Name == e.base, k != e.base && e.src.Name < k:
			keeper[e.base] = e.src.Name
		}
	}
	taken := map[string]bool{}
	for base := range keeper {
		taken[base] = true
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		if keeper[e.base] == e.src.Name {
			names[i] = e.base
			continue
		}
		stem := e.base
		if len(stem) > 57 {
			stem = stem[:57]
		}
		key := e.src.Name
		for n := 1; ; n++ {
			name := stem + "_" + shortHash(key)
			if !taken[name] {
				names[i], taken[name] = name, true
				break
			}
			key = fmt.Sprintf("%s#%d", e.src.Name, n)
		}
	}

	conv := newSchemaConverter()
	out := make([]*Tool, 0, len(entries))
	remote := make(map[string]string, len(entries))
	for i, e := range entries {
		params, open, err := mcpParams(conv, e.src.InputSchema)
		if err != nil {
			logger.Warn("mcp tool left out: its input schema cannot be read", "tool", e.src.Name, "error", err)
			continue
		}
		desc := e.src.Description
		if strings.TrimSpace(desc) == "" {
			desc = e.src.Title
		}
		if strings.TrimSpace(desc) == "" && e.src.Annotations != nil {
			desc = e.src.Annotations.Title
		}
		t := &Tool{
			ID:          serverID + "." + names[i],
			Provider:    serverID,
			Name:        names[i],
			Description: trimText(cleanText(desc), maxToolDescription),
			Kind:        KindMCP,
			Params:      params,
			OpenArgs:    open,
			Effect:      EffectDestructive, EffectDeclared: true,
		}
		if a := e.src.Annotations; a != nil {
			t.Effect = mcpEffect(a.ReadOnlyHint, a.DestructiveHint)
		}
		if err := t.Validate(); err != nil {
			logger.Warn("mcp tool left out", "tool", e.src.Name, "error", err)
			continue
		}
		out = append(out, t)
		remote[t.ID] = e.src.Name
	}
	return out, remote
}

// mcpBaseName is a server's tool name sanitised to a function name.
func mcpBaseName(name string) string {
	n := strings.Trim(invalidNameRun.ReplaceAllString(name, "_"), "_-")
	if n == "" {
		n = "tool"
	}
	return fitName(n)
}

// mcpParams turns a tool's input schema (an object) into parameters, one
// per top-level property, all In body. Local $refs are inlined first. It
// also says where other arguments go: InBody when the schema admits
// them (no schema, the schema true, additionalProperties true or a
// schema), "" when its properties are a closed list.
func mcpParams(conv *schemaConverter, inputSchema any) ([]Param, Location, error) {
	if inputSchema == nil {
		return []Param{}, InBody, nil // nothing declared: the server judges
	}
	raw, err := json.Marshal(inputSchema)
	if err != nil {
		return nil, "", err
	}
	var tree any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&tree); err != nil {
		return nil, "", err
	}
	root, ok := tree.(map[string]any)
	if !ok {
		if b, isBool := tree.(bool); isBool && b {
			return []Param{}, InBody, nil // "true": any object
		}
		return nil, "", errors.New("input schema is not a JSON Schema object")
	}
	inl := &refInliner{root: root, budget: maxInlineNodes}
	inlined := inl.schema(root, 0)
	rewriteTupleItems(inlined, false)
	raw, err = json.Marshal(inlined)
	if err != nil {
		return nil, "", err
	}
	var s openapi3.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, "", err
	}
	if typ := primaryType(s.Type); typ != "" && typ != "object" {
		return nil, "", fmt.Errorf("input schema has type %q; it must describe an object", typ)
	}
	cs := conv.convert(&openapi3.SchemaRef{Value: &s}, modeRequest)
	var open Location
	if cs != nil && cs.AdditionalProperties {
		open = InBody
	}
	if cs == nil || len(cs.Properties) == 0 {
		return []Param{}, open, nil
	}
	props := make([]string, 0, len(cs.Properties))
	for name := range cs.Properties {
		props = append(props, name)
	}
	slices.Sort(props)
	out := make([]Param, 0, len(props))
	taken := map[string]bool{}
	for _, prop := range props {
		ps := cs.Properties[prop]
		name := uniqueName(taken, paramName(prop), string(InBody))
		wire := wireName(name, prop)
		if name == wholeBody {
			wire = prop // a property named "body", not the whole body
		}
		p := Param{
			Name:     name,
			Wire:     wire,
			In:       InBody,
			Required: slices.Contains(cs.Required, prop),
			Schema:   ps,
		}
		if ps != nil {
			p.Description = ps.Description
		}
		out = append(out, p)
	}
	return out, open, nil
}

// Bounds of $ref inlining: references nested deeper than the converter
// reads are not expanded, and a schema whose expansion would pass
// maxInlineNodes (a diamond of references doubling at each level) has its
// remaining references cut to their type.
const (
	maxInlineDepth = maxSchemaDepth + 2
	maxInlineNodes = 20000
)

// refInliner copies a JSON Schema with its local references ("#/$defs/x",
// "#/definitions/x", any pointer into the document) replaced by what they
// point to. A reference that forms a cycle, or lies past the bounds, is
// replaced by the target's type alone; one that cannot be resolved (or
// points outside the document) by an unconstrained schema.
type refInliner struct {
	root   map[string]any
	budget int
	stack  []string
}

// Keywords whose value is one schema, a list of schemas, or a map of them.
var (
	schemaKeywords    = []string{"items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"}
	schemaListKeyword = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMapKeywords = []string{"properties", "patternProperties", "dependentSchemas"}
)

func (r *refInliner) schema(v any, depth int) any {
	r.budget--
	x, ok := v.(map[string]any)
	if !ok {
		if list, isList := v.([]any); isList { // draft-4 tuple items
			return r.list(list, depth)
		}
		return v // true, false, or not a schema at all
	}
	if ref, isRef := x["$ref"].(string); isRef {
		return r.ref(ref, x, depth)
	}
	out := make(map[string]any, len(x))
	for k, child := range x {
		switch {
		case k == "$defs" || k == "definitions":
			// Inlined where used.
		case slices.Contains(schemaKeywords, k):
			out[k] = r.schema(child, depth+1)
		case slices.Contains(schemaListKeyword, k):
			if list, isList := child.([]any); isList {
				out[k] = r.list(list, depth)
			}
		case slices.Contains(schemaMapKeywords, k):
			if m, isMap := child.(map[string]any); isMap {
				cm := make(map[string]any, len(m))
				for name, ps := range m {
					cm[name] = r.schema(ps, depth+1)
				}
				out[k] = cm
			}
		default:
			out[k] = child
		}
	}
	return out
}

func (r *refInliner) list(list []any, depth int) []any {
	out := make([]any, len(list))
	for i, s := range list {
		out[i] = r.schema(s, depth)
	}
	return out
}

func (r *refInliner) ref(ref string, at map[string]any, depth int) any {
	var target any
	if strings.HasPrefix(ref, "#") {
		target = jsonPointer(r.root, ref[1:])
	}
	// Keywords beside $ref (2020-12) apply too; they win over the target's.
	siblings := make(map[string]any, len(at))
	for k, v := range at {
		if k != "$ref" {
			siblings[k] = v
		}
	}
	var resolved map[string]any
	switch t := target.(type) {
	case nil:
		resolved = map[string]any{}
	case map[string]any:
		if slices.Contains(r.stack, ref) || depth >= maxInlineDepth || r.budget <= 0 {
			resolved = map[string]any{}
			if typ, ok := t["type"]; ok {
				resolved["type"] = typ
			}
		} else {
			r.stack = append(r.stack, ref)
			resolved, _ = r.schema(t, depth).(map[string]any)
			r.stack = r.stack[:len(r.stack)-1]
			if resolved == nil {
				resolved = map[string]any{}
			}
		}
	default:
		return target // a boolean schema
	}
	if len(siblings) == 0 {
		return resolved
	}
	merged, _ := r.schema(siblings, depth).(map[string]any)
	for k, v := range resolved {
		if _, own := merged[k]; !own {
			merged[k] = v
		}
	}
	return merged
}

// jsonPointer resolves an RFC 6901 pointer (as in a URI fragment) in doc;
// nil when it does not resolve.
func jsonPointer(doc any, pointer string) any {
	if p, err := url.PathUnescape(pointer); err == nil {
		pointer = p
	}
	if pointer == "" {
		return doc
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch x := cur.(type) {
		case map[string]any:
			cur = x[tok]
		case []any:
			var i int
			if _, err := fmt.Sscanf(tok, "%d", &i); err != nil || i < 0 || i >= len(x) {
				return nil
			}
			cur = x[i]
		default:
			return nil
		}
		if cur == nil {
			return nil
		}
	}
	return cur
}
