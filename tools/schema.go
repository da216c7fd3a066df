package tools

// Schema is a resolved, reference-free subset of JSON Schema: what trawl
// needs to describe arguments to a model and to find a response's primary
// array and continuation fields. Cycles in the source are cut: a schema
// nested deeper than the importer's limit is left with only its Type.
type Schema struct {
	Type        string             `json:"type,omitempty"` // object, array, string, integer, number, boolean; "" when unknown
	Format      string             `json:"format,omitempty"`
	Description string             `json:"description,omitempty"`
	Enum        []any              `json:"enum,omitempty"`
	Default     any                `json:"default,omitempty"`
	Minimum     *float64           `json:"minimum,omitempty"`
	Maximum     *float64           `json:"maximum,omitempty"`
	Properties  map[string]*Schema `json:"properties,omitempty"`
	Required    []string           `json:"required,omitempty"`
	Items       *Schema            `json:"items,omitempty"`
	Nullable    bool               `json:"nullable,omitempty"`
	// AdditionalProperties says an object admits properties it does not
	// list: its schema sets additionalProperties to true or to a schema.
	// False when it is absent or false.
	AdditionalProperties bool `json:"additionalProperties,omitempty"`
	// Extensions holds x- keys of the schema, when present.
	Extensions map[string]any `json:"-"`
}

// JSON renders the schema as a JSON Schema object for a model. A nil
// schema renders as {} (any value).
func (s *Schema) JSON() map[string]any {
	out := map[string]any{}
	if s == nil {
		return out
	}
	if s.Type != "" {
		out["type"] = s.Type
	}
	if s.Format != "" {
		out["format"] = s.Format
	}
	if s.Description != "" {
		out["description"] = s.Description
	}
	if len(s.Enum) > 0 {
		out["enum"] = s.Enum
	}
	if s.Default != nil {
		out["default"] = s.Default
	}
	if s.Minimum != nil {
		out["minimum"] = *s.Minimum
	}
	if s.Maximum != nil {
		out["maximum"] = *s.Maximum
	}
	if len(s.Properties) > 0 {
		props := make(map[string]any, len(s.Properties))
		for k, v := range s.Properties {
			props[k] = v.JSON()
		}
		out["properties"] = props
	}
	if len(s.Required) > 0 {
		out["required"] = s.Required
	}
	if s.Items != nil {
		out["items"] = s.Items.JSON()
	} else if s.Type == "array" {
		out["items"] = map[string]any{}
	}
	return out
}
