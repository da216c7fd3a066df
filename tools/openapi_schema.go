package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/getkin/kin-openapi/openapi3"
	"gopkg.in/yaml.v3"
)

// Bounds of schema conversion. Vendor documents (Stripe, GitHub) are deep
// and recursive; these keep an import fast and its output finite.
const (
	// maxSchemaDepth is how many property/items levels are converted; a
	// schema below it keeps only its type. Response envelopes put their
	// signals within three levels, so ten leaves room to spare.
	maxSchemaDepth = 10
	// maxCompositionDepth bounds allOf/oneOf/anyOf nested in one another
	// at the same level, which also cuts cycles made of compositions.
	maxCompositionDepth = 8
	// maxSchemaDescription caps a property's or parameter's description.
	maxSchemaDescription = 400
)

// anyOfMarker marks an allOf that stands for alternatives. Swagger 2.0 has
// no oneOf/anyOf, so normalizeDocument rewrites a Slack-style list of
// alternatives into an allOf carrying this extension, and the converter
// reads it back as anyOf.
const anyOfMarker = "x-trawl-any-of"

// schemaMode says which side of the exchange a schema describes:
// readOnly properties are left out of requests, writeOnly ones out of
// responses.
type schemaMode uint8

const (
	modeRequest schemaMode = iota
	modeResponse
)

type schemaKey struct {
	s     *openapi3.Schema
	depth int
	comp  int
	mode  schemaMode
}

// schemaConverter turns kin-openapi schemas into *Schema. It memoises by
// source schema and level, so a component referenced from a thousand
// places is converted once per level: work is bounded by the number of
// schemas times maxSchemaDepth, whatever the document's fan-out.
//
// Converted schemas are therefore shared between tools (and between
// parents) and must not be modified.
type schemaConverter struct {
	memo map[schemaKey]*Schema
	text map[string]string // cleaned, trimmed descriptions
}

func newSchemaConverter() *schemaConverter {
	return &schemaConverter{memo: map[schemaKey]*Schema{}, text: map[string]string{}}
}

// convert converts a top-level schema (a parameter's, a body's, a
// response's).
func (c *schemaConverter) convert(ref *openapi3.SchemaRef, mode schemaMode) *Schema {
	return c.schema(ref, 0, 0, mode)
}

func (c *schemaConverter) schema(ref *openapi3.SchemaRef, depth, comp int, mode schemaMode) *Schema {
	if ref == nil || ref.Value == nil {
		return nil
	}
	s := ref.Value
	key := schemaKey{s, depth, comp, mode}
	if out, ok := c.memo[key]; ok {
		return out
	}
	var out *Schema
	if depth >= maxSchemaDepth || comp >= maxCompositionDepth {
		out = &Schema{Type: shallowType(s), Nullable: isNullable(s)}
	} else {
		out = c.build(s, depth, comp, mode)
	}
	c.memo[key] = out
	return out
}

func (c *schemaConverter) build(s *openapi3.Schema, depth, comp int, mode schemaMode) *Schema {
	out := &Schema{
		Type:        primaryType(s.Type),
		Format:      s.Format,
		Description: c.describe(s.Description),
		Enum:        s.Enum,
		Default:     s.Default,
		Minimum:     s.Min,
		Maximum:     s.Max,
		Nullable:    isNullable(s),
		Extensions:  extensions(s.Extensions),
		AdditionalProperties: s.AdditionalProperties.Schema != nil ||
			s.AdditionalProperties.Has != nil && *s.AdditionalProperties.Has,
	}
	if s.Const != nil {
		if out.Enum == nil {
			out.Enum = []any{s.Const}
		}
		if out.Type == "" {
			out.Type = jsonType(s.Const)
		}
	}
	if len(s.Properties) > 0 {
		out.Properties = make(map[string]*Schema, len(s.Properties))
		for name, p := range s.Properties {
			if p == nil || p.Value == nil || skipProperty(p.Value, mode) {
				continue
			}
			out.Properties[name] = c.schema(p, depth+1, 0, mode)
		}
	}
	out.Required = slices.Clone(s.Required)
	if s.Items != nil {
		out.Items = c.schema(s.Items, depth+1, 0, mode)
	}

	allOf, alternatives := s.AllOf, append(slices.Clip(s.OneOf), s.AnyOf...)
	if _, ok := s.Extensions[anyOfMarker]; ok {
		allOf, alternatives = nil, append(alternatives, s.AllOf...)
	}
	for _, part := range allOf {
		mergeInto(out, c.schema(part, depth, comp+1, mode))
	}
	if len(alternatives) > 0 {
		mergeInto(out, c.alternatives(alternatives, depth, comp+1, mode))
	}

	if len(out.Properties) > 0 {
		// Required names may come from allOf parts; the properties left
		// out above (readOnly in requests) are no longer required.
		out.Required = presentRequired(out.Required, out.Properties)
	}
	if out.Type == "" {
		switch {
		case len(out.Properties) > 0:
			out.Type = "object"
		case out.Items != nil:
			out.Type = "array"
		}
	}
	return out
}

// alternatives folds oneOf/anyOf into one schema: when every non-null
// alternative is an object, their properties are merged (so a reader sees
// every field that may appear) and only properties required by all stay
// required; otherwise the first non-null alternative stands for the rest.
// A null alternative makes the result nullable.
func (c *schemaConverter) alternatives(refs openapi3.SchemaRefs, depth, comp int, mode schemaMode) *Schema {
	var alts []*Schema
	nullable := false
	for _, ref := range refs {
		if ref == nil || ref.Value == nil {
			continue
		}
		if isNullOnly(ref.Value) {
			nullable = true
			continue
		}
		if a := c.schema(ref, depth, comp, mode); a != nil {
			alts = append(alts, a)
			nullable = nullable || a.Nullable
		}
	}
	if len(alts) == 0 {
		return &Schema{Nullable: nullable}
	}
	objects := true
	for _, a := range alts {
		if a.Type != "object" {
			objects = false
			break
		}
	}
	if !objects || len(alts) == 1 {
		out := *alts[0]
		out.Nullable = out.Nullable || nullable
		return &out
	}
	out := &Schema{Type: "object", Nullable: nullable, Properties: map[string]*Schema{}}
	required := map[string]int{}
	for _, a := range alts {
		for name, p := range a.Properties {
			if _, ok := out.Properties[name]; !ok {
				out.Properties[name] = p
			}
		}
		for _, r := range a.Required {
			required[r]++
		}
	}
	for _, r := range alts[0].Required {
		if required[r] == len(alts) {
			out.Required = append(out.Required, r)
		}
	}
	return out
}

// mergeInto folds src (an allOf part, or folded alternatives) into dst;
// dst's own values win and required lists are united. It never aliases
// src's maps or slices into dst's where dst could later be changed, as
// src may be shared.
func mergeInto(dst, src *Schema) {
	if src == nil {
		return
	}
	if dst.Type == "" {
		dst.Type = src.Type
	}
	if dst.Format == "" {
		dst.Format = src.Format
	}
	if dst.Description == "" {
		dst.Description = src.Description
	}
	if dst.Enum == nil {
		dst.Enum = src.Enum
	}
	if dst.Default == nil {
		dst.Default = src.Default
	}
	if dst.Minimum == nil {
		dst.Minimum = src.Minimum
	}
	if dst.Maximum == nil {
		dst.Maximum = src.Maximum
	}
	if dst.Items == nil {
		dst.Items = src.Items
	}
	dst.Nullable = dst.Nullable || src.Nullable
	// A part that admits more properties admits them for the whole.
	dst.AdditionalProperties = dst.AdditionalProperties || src.AdditionalProperties
	if len(src.Properties) > 0 {
		props := make(map[string]*Schema, len(dst.Properties)+len(src.Properties))
		maps.Copy(props, src.Properties)
		maps.Copy(props, dst.Properties)
		dst.Properties = props
	}
	if len(src.Required) > 0 {
		req := slices.Clone(dst.Required)
		for _, r := range src.Required {
			if !slices.Contains(req, r) {
				req = append(req, r)
			}
		}
		dst.Required = req
	}
	if len(src.Extensions) > 0 {
		ext := make(map[string]any, len(dst.Extensions)+len(src.Extensions))
		maps.Copy(ext, src.Extensions)
		maps.Copy(ext, dst.Extensions)
		dst.Extensions = ext
	}
}

// primaryType is the schema's type, the first non-null one of an OpenAPI
// 3.1 type list.
func primaryType(t *openapi3.Types) string {
	if t == nil {
		return ""
	}
	for _, name := range *t {
		if name != openapi3.TypeNull {
			return name
		}
	}
	return ""
}

// jsonType is the JSON Schema type of a decoded value ("" for null).
func jsonType(v any) string {
	switch v := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case int, int64, uint64:
		return "integer"
	case json.Number:
		if _, err := v.Int64(); err == nil {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return ""
}

// shallowType is the type of a schema cut by the depth limit, found
// without descending.
func shallowType(s *openapi3.Schema) string {
	if t := primaryType(s.Type); t != "" {
		return t
	}
	switch {
	case len(s.Properties) > 0:
		return "object"
	case s.Items != nil:
		return "array"
	}
	return ""
}

// isNullable covers OpenAPI 3.0's nullable, 3.1's type lists holding
// "null", and Swagger's x-nullable (which openapi2conv already maps).
func isNullable(s *openapi3.Schema) bool {
	return s.Nullable || (s.Type != nil && s.Type.Includes(openapi3.TypeNull))
}

// isNullOnly reports a {type: null} schema, as used among alternatives.
func isNullOnly(s *openapi3.Schema) bool {
	return s.Type != nil && len(*s.Type) == 1 && (*s.Type)[0] == openapi3.TypeNull
}

func skipProperty(s *openapi3.Schema, mode schemaMode) bool {
	if mode == modeRequest {
		return s.ReadOnly
	}
	return s.WriteOnly
}

// presentRequired keeps the required names that are still properties.
func presentRequired(required []string, props map[string]*Schema) []string {
	var out []string
	for _, r := range required {
		if _, ok := props[r]; ok {
			out = append(out, r)
		}
	}
	return out
}

// extensions copies the x- keys of a kin-openapi extension map (which
// also collects unknown keys); nil when there are none. Keys that only
// carry conversion bookkeeping are left out.
func extensions(in map[string]any) map[string]any {
	var out map[string]any
	for k, v := range in {
		if !strings.HasPrefix(k, "x-") || k == anyOfMarker || k == "x-formData-name" {
			continue
		}
		if out == nil {
			out = map[string]any{}
		}
		out[k] = v
	}
	return out
}

// describe cleans and trims a schema or parameter description, caching
// the result: vendor documents repeat the same long descriptions many
// times over.
func (c *schemaConverter) describe(s string) string {
	if s == "" {
		return ""
	}
	if out, ok := c.text[s]; ok {
		return out
	}
	out := trimText(cleanText(s), maxSchemaDescription)
	c.text[s] = out
	return out
}

var htmlTag = regexp.MustCompile(`(?i)</?(?:p|br|hr|div|span|code|pre|strong|em|b|i|u|a|ul|ol|li|h[1-6]|table|tr|td|th|thead|tbody|blockquote)(?:\s[^<>]*)?/?>`)

// cleanText makes documentation text plain for a model: the HTML tags
// vendor documents embed (Stripe's <p>) are dropped, entities decoded and
// whitespace collapsed.
func cleanText(s string) string {
	if strings.IndexByte(s, '<') >= 0 {
		s = htmlTag.ReplaceAllString(s, " ")
	}
	if strings.IndexByte(s, '&') >= 0 {
		s = html.UnescapeString(s)
	}
	return strings.Join(strings.Fields(s), " ")
}

// trimText cuts s to at most limit characters: at the end of a sentence
// when one ends in the second half, else at a word, marked with "…".
func trimText(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	cut, n := s, 0
	for i := range s {
		if n == limit-1 { // room for the ellipsis
			cut = s[:i]
			break
		}
		n++
	}
	end := -1
	for _, stop := range []string{". ", "! ", "? "} {
		if i := strings.LastIndex(cut, stop); i+1 > end && i >= 0 {
			end = i + 1
		}
	}
	if end >= len(cut)/2 {
		return cut[:end]
	}
	if sp := strings.LastIndexByte(cut, ' '); sp >= len(cut)/2 {
		cut = cut[:sp]
	}
	return strings.TrimRight(cut, " ,;:") + "…"
}

// normalizeDocument rewrites the construct kin-openapi rejects that real
// documents use: "items" holding a list of schemas. Draft-4 tuple syntax
// in form, it means "one of these" in documents such as Slack's (an item
// or null; one of three conversation shapes), so the list becomes anyOf
// (for Swagger 2.0, which lacks anyOf, an allOf marked with anyOfMarker).
// On "type: array" the alternatives describe the items; elsewhere the
// value itself. Examples, enums, defaults and extensions are left alone.
// It reports false when nothing was rewritten or the data does not parse.
func normalizeDocument(data []byte, swagger bool) ([]byte, bool) {
	root, err := decodeDocument(data)
	if err != nil {
		return nil, false
	}
	root = jsonCompatible(root)
	if !rewriteTupleItems(root, swagger) {
		return nil, false
	}
	out, err := json.Marshal(root)
	return out, err == nil
}

// decodeDocument decodes a JSON or YAML document into plain values
// (numbers in JSON kept as json.Number); YAML mappings with non-string
// keys stay map[any]any.
func decodeDocument(data []byte) (any, error) {
	var root any
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		dec.UseNumber()
		if err := dec.Decode(&root); err != nil {
			return nil, err
		}
		return root, nil
	}
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, err
	}
	return root, nil
}

func rewriteTupleItems(v any, swagger bool) bool {
	changed := false
	switch x := v.(type) {
	case map[string]any:
		if list, ok := x["items"].([]any); ok {
			changed = true
			if isArrayType(x["type"]) {
				x["items"] = alternativesOf(list, swagger)
			} else {
				delete(x, "items")
				key := "anyOf"
				if swagger {
					key = "allOf"
				}
				if _, busy := x[key]; busy || (!swagger && x["oneOf"] != nil) {
					parts, _ := x["allOf"].([]any)
					x["allOf"] = append(parts, alternativesOf(list, swagger))
				} else {
					x[key] = list
					if swagger {
						x[anyOfMarker] = true
					}
				}
			}
		}
		for k, child := range x {
			switch k {
			case "example", "examples", "enum", "default", "const":
				continue
			}
			if strings.HasPrefix(k, "x-") {
				continue
			}
			changed = rewriteTupleItems(child, swagger) || changed
		}
	case []any:
		for _, child := range x {
			changed = rewriteTupleItems(child, swagger) || changed
		}
	}
	return changed
}

func alternativesOf(list []any, swagger bool) map[string]any {
	if swagger {
		return map[string]any{"allOf": list, anyOfMarker: true}
	}
	return map[string]any{"anyOf": list}
}

func isArrayType(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "array"
	case []any:
		return slices.Contains(t, any("array"))
	}
	return false
}

// jsonCompatible turns the map[any]any yaml.v3 makes of mappings with
// non-string keys (response codes) into map[string]any.
func jsonCompatible(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			x[k] = jsonCompatible(child)
		}
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, child := range x {
			m[fmt.Sprint(k)] = jsonCompatible(child)
		}
		return m
	case []any:
		for i, child := range x {
			x[i] = jsonCompatible(child)
		}
	}
	return v
}
