package stream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// ErrBadChunk is wrapped by every error ParseChunk returns.
var ErrBadChunk = errors.New("bad chunk")

// ParseChunk decodes one chunk from its JSON as strictly as ai@5.0.60's
// schema checks it, and more strictly where this package is narrower: the
// type must be one this package emits, every required field must be
// present, no field may be unknown, and no field but a free JSON value
// (input, output, data, messageMetadata) may be null. Free JSON values come
// back as [json.RawMessage].
func ParseChunk(data []byte) (Chunk, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadChunk, err)
	}
	if fields == nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrBadChunk)
	}
	var typ string
	if raw, ok := fields["type"]; !ok {
		return nil, fmt.Errorf(`%w: no "type"`, ErrBadChunk)
	} else if err := json.Unmarshal(raw, &typ); err != nil {
		return nil, fmt.Errorf(`%w: "type" is not a string`, ErrBadChunk)
	}
	delete(fields, "type")

	key := typ
	if isData(typ) {
		key = dataKey
	}
	s, ok := shapes[key]
	if !ok {
		return nil, fmt.Errorf("%w: unknown type %q", ErrBadChunk, typ)
	}
	for name, raw := range fields {
		f, ok := s.fields[name]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s chunk has no field %q", ErrBadChunk, typ, name)
		case !f.free && bytes.Equal(bytes.TrimSpace(raw), []byte("null")):
			return nil, fmt.Errorf("%w: %s chunk field %q is null", ErrBadChunk, typ, name)
		}
	}
	for _, name := range s.required {
		if _, ok := fields[name]; !ok {
			return nil, fmt.Errorf("%w: %s chunk lacks %q", ErrBadChunk, typ, name)
		}
	}

	ptr := reflect.New(s.typ)
	for name, raw := range fields {
		f := s.fields[name]
		dst := ptr.Elem().Field(f.index)
		if f.free {
			dst.Set(reflect.ValueOf(slices.Clone(json.RawMessage(raw))))
			continue
		}
		if err := json.Unmarshal(raw, dst.Addr().Interface()); err != nil {
			return nil, fmt.Errorf("%w: %s chunk field %q: %v", ErrBadChunk, typ, name, err)
		}
	}
	c := ptr.Elem().Interface().(Chunk)
	if d, ok := c.(Data); ok {
		d.Name = strings.TrimPrefix(typ, dataPrefix)
		c = d
	}
	return c, nil
}

// shape is what ParseChunk knows of one chunk type, read from the struct
// tags so that the Go types stay the only statement of the wire format.
type shape struct {
	typ      reflect.Type
	fields   map[string]field
	required []string
}

type field struct {
	index int
	free  bool // an `any` field: any JSON value, null included
}

var shapes = shapesOf(
	Start{}, StartStep{}, TextStart{}, TextDelta{}, TextEnd{},
	ReasoningStart{}, ReasoningDelta{}, ReasoningEnd{},
	ToolInputStart{}, ToolInputDelta{}, ToolInputAvailable{}, ToolInputError{},
	ToolOutputAvailable{}, ToolOutputError{}, ToolApprovalRequest{}, ToolOutputDenied{},
	SourceURL{}, SourceDocument{}, File{}, Data{},
	FinishStep{}, Finish{}, Abort{}, Error{}, MessageMetadata{},
)

func shapesOf(chunks ...Chunk) map[string]shape {
	m := make(map[string]shape, len(chunks))
	for _, c := range chunks {
		t := reflect.TypeOf(c)
		s := shape{typ: t, fields: map[string]field{}}
		for i := range t.NumField() {
			name, opts, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			s.fields[name] = field{index: i, free: t.Field(i).Type.Kind() == reflect.Interface}
			if opts != "omitempty" {
				s.required = append(s.required, name)
			}
		}
		key := c.Type()
		if _, ok := c.(Data); ok {
			key = dataKey
		}
		m[key] = s
	}
	return m
}

// dataKey is the key of every data chunk in shapes; "data-" alone is no
// type.
const dataKey = dataPrefix + "*"
