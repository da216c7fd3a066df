package loop

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// The compact row layout (an agent's `rows: compact`): what the model
// reads of a tool result, with each array of uniform rows written as a
// line of field names and one text of the rows, each row's values
// comma-separated as in CSV and the rows separated by semicolons, so that
// the keys are paid once instead of once a row, and the quotes and
// brackets of most values not at all (the model is told the layout by
// prompts' compact_rows). One text rather than an array of one text a
// row: a semicolon costs a token less a row than the quotes and comma
// between two strings of an array. The stored result, the stream's tool
// output and the Studio keep the objects.
//
// A value is written bare — a number, true, false, null or a string's
// text — unless that could be read back as something else: a string that
// is empty, holds a comma, a semicolon, a quote, a backslash or a control
// character, has a space at either end, starts with '[' or '{', or reads
// as a number (JSON's, or one a reader might take for a number: NaN,
// Infinity, +1, .5, 007, 0x10), true, false or null is written as its
// JSON text (in quotes), and so are arrays and objects. Every row is thereby told back
// exactly.

// CompactRows rewrites a tool result in the compact row layout: every
// member of the top-level object whose value is an array of at least two
// objects that all have the same fields in the same order becomes
// {"fields": "id,total,customer.name", "rows": "1,120.5,Ann;2,300,Bo;…"}.
// Nested objects are flattened to dotted names, as _fields names them;
// arrays and scalars stay values. A result that is not an object, or holds
// no such array, comes back unchanged with ok false; so does an array
// whose rows cannot be told back exactly (a field name with a dot or a
// comma, an empty nested object).
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
		b.Write(query.AppendString(nil, f.key))
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
	b := make([]byte, 0, len(raw))
	var text []byte // the rows
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
				if f.key == "" || strings.Contains(f.key, ",") {
					return nil, false
				}
				header = append(header, f.key)
			}
			b = append(b, `{"fields":`...)
			b = query.AppendString(b, strings.Join(header, ","))
			b = append(b, `,"rows":`...)
		} else {
			if len(fs) != len(header) {
				return nil, false
			}
			text = append(text, ';')
		}
		for j, f := range fs {
			if f.key != header[j] {
				return nil, false
			}
			if j > 0 {
				text = append(text, ',')
			}
			text = appendCell(text, f.raw)
		}
	}
	b = query.AppendString(b, string(text))
	return append(b, '}'), true
}

// appendCell appends the value raw as a cell of a compact row: bare when
// it reads back as itself, else as its compact JSON text.
func appendCell(dst []byte, raw json.RawMessage) []byte {
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil && bareString(s) {
			return append(dst, s...)
		}
	}
	var c bytes.Buffer
	if json.Compact(&c, raw) != nil {
		return append(dst, raw...)
	}
	return append(dst, c.Bytes()...)
}

// bareString reports whether s can be written without quotes in a
// compact row and still be read back as the string s.
func bareString(s string) bool {
	if s == "" || s[0] == ' ' || s[len(s)-1] == ' ' || s[0] == '[' || s[0] == '{' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == ';' || c == '"' || c == '\\' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	switch s {
	case "true", "false", "null":
		return false
	}
	var n json.Number
	if json.Unmarshal([]byte(s), &n) == nil {
		return false
	}
	// Not JSON's numbers, but what a reader takes for one all the same
	// (NaN, Infinity, +1, .5, 1., 007, 0x10, 1_000): quoted, so that no
	// text is read as a number.
	if _, err := strconv.ParseFloat(s, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return false
	}
	if _, err := strconv.ParseInt(s, 0, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		return false
	}
	return true
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
