package loop

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The compact row layout (an agent's `rows: compact`): what the model
// reads of a tool result, with each array of uniform rows written as a
// header of field names and one array of values per row, so that the
// keys are paid once instead of once a row (the model is told the layout
// by prompts' compact_rows). The stored result, the stream's tool output
// and the Studio keep the objects.

// CompactRows rewrites a tool result in the compact row layout: every
// member of the top-level object whose value is an array of at least two
// objects that all have the same fields in the same order becomes
// {"fields": [...], "rows": [[...], ...]}. Nested objects are flattened
// to dotted names, as _fields names them; arrays and scalars stay values.
// A result that is not an object, or holds no such array, comes back
// unchanged with ok false; so does an array whose rows cannot be told
// back exactly (a field name with a dot, an empty nested object).
func CompactRows(view []byte) (out []byte, ok bool) {
	top, err := orderedFields(view, "", false)
	if err != nil {
		return view, false
	}
	var b bytes.Buffer
	b.Grow(len(view))
	b.WriteByte('{')
	for i, f := range top {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		if table, done := compactTable(f.raw); done {
			b.Write(table)
			ok = true
			continue
		}
		b.Write(f.raw)
	}
	b.WriteByte('}')
	if !ok {
		return view, false
	}
	return b.Bytes(), true
}

// compactTable is raw, an array of uniform rows, in the compact layout.
func compactTable(raw json.RawMessage) ([]byte, bool) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	var rows []json.RawMessage
	if json.Unmarshal(raw, &rows) != nil || len(rows) < 2 {
		return nil, false
	}
	var header []string
	var b bytes.Buffer
	b.Grow(len(raw))
	for i, r := range rows {
		if len(r) == 0 || r[0] != '{' {
			return nil, false
		}
		fs, err := orderedFields(r, "", true)
		if err != nil || len(fs) == 0 {
			return nil, false
		}
		if i == 0 {
			for _, f := range fs {
				header = append(header, f.key)
			}
			h, _ := json.Marshal(header)
			b.WriteString(`{"fields":`)
			b.Write(h)
			b.WriteString(`,"rows":[`)
		} else {
			if len(fs) != len(header) {
				return nil, false
			}
			b.WriteByte(',')
		}
		b.WriteByte('[')
		for j, f := range fs {
			if f.key != header[j] {
				return nil, false
			}
			if j > 0 {
				b.WriteByte(',')
			}
			b.Write(f.raw)
		}
		b.WriteByte(']')
	}
	b.WriteString(`]}`)
	return b.Bytes(), true
}

// orderedField is one member of a JSON object, in the order written.
type orderedField struct {
	key string
	raw json.RawMessage
}

// orderedFields reads raw's members in order; with flat, nested objects
// become dotted names ("customer.name"). A name with a dot, or an empty
// nested object, cannot be flattened and back: an error.
func orderedFields(raw []byte, prefix string, flat bool) ([]orderedField, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errNotObject
	}
	var out []orderedField
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		k := prefix + t.(string)
		if flat {
			if strings.Contains(t.(string), ".") {
				return nil, errNotFlat
			}
			if len(v) > 0 && v[0] == '{' {
				sub, err := orderedFields(v, k+".", true)
				if err != nil {
					return nil, err
				}
				if len(sub) == 0 {
					return nil, errNotFlat
				}
				out = append(out, sub...)
				continue
			}
		}
		out = append(out, orderedField{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errNotObject
	}
	return out, nil
}

var (
	errNotObject = jsonError("not a JSON object")
	errNotFlat   = jsonError("a row that cannot be flattened")
)

type jsonError string

func (e jsonError) Error() string { return string(e) }
