package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// refPrefix starts every ref.
const refPrefix = "$.steps."

// ref is a parsed "$.steps.<id>.<path>".
type ref struct {
	text string
	step string
	keys []string // the path inside the step's output
}

// parseRef parses a ref. Keys after the step id are dot-separated, with
// `\.` and `\\` escaping a dot or backslash inside a key, as in _fields.
func parseRef(s string) (ref, error) {
	if !strings.HasPrefix(s, refPrefix) {
		return ref{}, fmt.Errorf("%q is not a ref: refs have the form \"$.steps.<step id>.<path>\"", s)
	}
	keys, err := query.SplitPath(s[len(refPrefix):])
	if err != nil || len(keys) == 0 {
		return ref{}, fmt.Errorf("%q is not a ref: refs have the form \"$.steps.<step id>.<path>\" with no empty segment", s)
	}
	return ref{text: s, step: keys[0], keys: keys[1:]}, nil
}

// isRefString reports whether an input string is a ref.
func isRefString(s string) bool { return strings.HasPrefix(s, refPrefix) }

// refObject reports whether v is a ref object — {"ref": "$.…"} and
// nothing else — and returns its text.
func refObject(v any) (string, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", false
	}
	s, ok := m["ref"].(string)
	if !ok || !strings.HasPrefix(s, "$.") {
		return "", false
	}
	return s, true
}

// eachRef calls fn with every ref in an input value and the dotted path
// where it sits.
func eachRef(v any, at string, fn func(ref string, at string)) {
	if s, ok := refObject(v); ok {
		fn(s, at)
		return
	}
	switch x := v.(type) {
	case string:
		if isRefString(x) {
			fn(x, at)
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			eachRef(x[k], at+"."+k, fn)
		}
	case []any:
		for i, e := range x {
			eachRef(e, fmt.Sprintf("%s[%d]", at, i), fn)
		}
	}
}

// outputs are the outputs of the steps run so far, as JSON.
type outputs struct {
	raw map[string]json.RawMessage
}

func newOutputs() *outputs {
	return &outputs{raw: map[string]json.RawMessage{}}
}

func (o *outputs) set(step string, out json.RawMessage) {
	o.raw[step] = out
}

// resolveRaw returns the JSON ref resolves to, read by loop/query; nil
// when the step did not run or the path reaches nothing.
func (o *outputs) resolveRaw(r ref) ([]byte, error) {
	raw, ran := o.raw[r.step]
	if !ran {
		return nil, nil
	}
	if !query.Valid(raw) {
		return nil, fmt.Errorf("step %s's output is not JSON", r.step)
	}
	v, _ := query.Collect(raw, query.JoinPath(r.keys...))
	return v, nil
}

// resolve returns what ref resolves to: the value at its path in the
// step's output, read by loop/query (query.Collect: arrays along the way
// are mapped over, an all-digit key picks an element); nil (JSON null)
// when the step did not run or the path reaches nothing.
func (o *outputs) resolve(r ref) (any, error) {
	v, err := o.resolveRaw(r)
	if err != nil || v == nil {
		return nil, err
	}
	return decodeNumbers(v)
}

func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// resolveInput returns v with every ref replaced by its value. Object
// members whose ref resolves to null are dropped.
func (o *outputs) resolveInput(v any) (any, error) {
	text, isRef := refObject(v)
	if s, ok := v.(string); ok && isRefString(s) {
		text, isRef = s, true
	}
	if isRef {
		r, err := parseRef(text)
		if err != nil {
			return nil, err
		}
		return o.resolve(r)
	}
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := o.resolveInput(e)
			if err != nil {
				return nil, err
			}
			if r == nil && e != nil {
				continue // a ref that resolved to null: not given
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := o.resolveInput(e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}
