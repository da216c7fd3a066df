package paginate

import (
	"strings"

	"github.com/trawl-dev/trawl/tools"
)

// ---- shapes: a response read the same way from a schema or a body ----

type shapeKind uint8

const (
	shapeUnknown shapeKind = iota
	shapeObject
	shapeArray
	shapeString
	shapeNumber
	shapeBool
	shapeNull
)

// shape is one node of a response, declared (a schema) or actual (a raw
// JSON value), so Detect and Refine find arrays and signals alike.
type shape interface {
	kind() shapeKind
	fields() []shapeField // object members, in a stable order
	elem() shape          // an array's element; nil when unknown
	isURL() bool          // a string that names a URL
	// opaque reports a declared node that may hide members it does not
	// list (an untyped schema, an object without properties).
	opaque() bool
	// hint is free text about the node (a schema's description).
	hint() string
}

type shapeField struct {
	name, fold string
	val        shape
}

func memberOf(s shape, fold string) (shapeField, bool) {
	if s == nil || s.kind() != shapeObject {
		return shapeField{}, false
	}
	for _, f := range s.fields() {
		if f.fold == fold {
			return f, true
		}
	}
	return shapeField{}, false
}

// schemaShape is a declared response node. Its members are listed once
// per detection (memo is shared by every node of one response), since
// each signal name looks them up again.
type schemaShape struct {
	s    *tools.Schema
	memo map[*tools.Schema][]shapeField
}

func newSchemaShape(s *tools.Schema) schemaShape {
	return schemaShape{s: s, memo: map[*tools.Schema][]shapeField{}}
}

func (s schemaShape) kind() shapeKind {
	if s.s == nil {
		return shapeUnknown
	}
	switch s.s.Type {
	case "object":
		return shapeObject
	case "array":
		return shapeArray
	case "string":
		return shapeString
	case "integer", "number":
		return shapeNumber
	case "boolean":
		return shapeBool
	case "null":
		return shapeNull
	case "":
		switch {
		case len(s.s.Properties) > 0:
			return shapeObject
		case s.s.Items != nil:
			return shapeArray
		}
	}
	return shapeUnknown
}

func (s schemaShape) fields() []shapeField {
	if s.s == nil {
		return nil
	}
	if out, ok := s.memo[s.s]; ok {
		return out
	}
	out := make([]shapeField, 0, len(s.s.Properties))
	for _, k := range sortedNames(s.s.Properties) {
		out = append(out, shapeField{name: k, fold: foldName(k), val: schemaShape{s.s.Properties[k], s.memo}})
	}
	if s.memo != nil {
		s.memo[s.s] = out
	}
	return out
}

func (s schemaShape) elem() shape {
	if s.s == nil || s.s.Items == nil {
		return nil
	}
	return schemaShape{s.s.Items, s.memo}
}

func (s schemaShape) isURL() bool {
	if s.s == nil || (s.s.Type != "string" && s.s.Type != "") {
		return false
	}
	switch strings.ToLower(s.s.Format) {
	case "uri", "url", "uri-reference", "iri", "iri-reference":
		return true
	}
	return false
}

func (s schemaShape) opaque() bool {
	k := s.kind()
	return k == shapeUnknown || (k == shapeObject && len(s.s.Properties) == 0)
}

func (s schemaShape) hint() string {
	if s.s == nil {
		return ""
	}
	return s.s.Description
}
