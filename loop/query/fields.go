package query

import (
	"fmt"
	"strings"
)

// Fields is a compiled `_fields` projection: a set of dot paths that
// together describe the object to keep of each item. It is immutable and
// safe for concurrent use.
//
// Paths nest: "customer.name" and "customer.email" give
// {"customer":{"name":…,"email":…}}. A path maps over every array it meets:
// "line_items.sku" on an array of line items gives
// {"line_items":[{"sku":…},…]}, through arrays of arrays too. Keys come out
// in the order the paths first name them, one per distinct key. A path that
// leads nowhere gives null where it stops: a missing key, or a key holding
// a scalar where the path wanted to go deeper. When one path is a prefix of
// another ("customer" and "customer.name"), the shorter one wins and the
// whole value is kept.
type Fields struct {
	paths []string
	root  *fieldNode
	nodes int // number of nodes below root, ids 0..nodes-1
}

type fieldNode struct {
	key      string
	member   []byte // `"key":`, encoded once
	id       int
	children []*fieldNode
	leaf     bool  // a path ends here: keep the whole value
	ends     []int // indexes of the paths that end here
	shadowed []shadowPath
}

// shadowPath is a path that continues below a leaf: its value is inside
// what the leaf keeps, and it matched if it resolves there.
type shadowPath struct {
	index int
	keys  []string
}

// CompileFields compiles projection paths. Every path must be a non-empty
// dot path (see SplitPath); duplicates are allowed and each is reported on.
func CompileFields(paths []string) (*Fields, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("query: _fields: no paths given")
	}
	f := &Fields{paths: append([]string(nil), paths...), root: &fieldNode{id: -1}}
	type pending struct {
		index int
		keys  []string
	}
	var all []pending
	for i, p := range paths {
		keys, err := SplitPath(strings.TrimSpace(p))
		if err != nil {
			pe := err.(*PathError)
			pe.Where = fmt.Sprintf("_fields[%d]", i)
			return nil, pe
		}
		if len(keys) == 0 {
			return nil, &PathError{Where: fmt.Sprintf("_fields[%d]", i), Path: p, Msg: "empty path"}
		}
		all = append(all, pending{i, keys})
	}
	for _, p := range all {
		n := f.root
		for _, k := range p.keys {
			var next *fieldNode
			for _, c := range n.children {
				if c.key == k {
					next = c
					break
				}
			}
			if next == nil {
				next = &fieldNode{key: k, member: append(appendQuoted(nil, k), ':'), id: f.nodes}
				f.nodes++
				n.children = append(n.children, next)
			}
			n = next
		}
		n.leaf = true
		n.ends = append(n.ends, p.index)
	}
	// A leaf keeps its whole value: paths below it are answered from
	// that value, and its subtree is not walked.
	var fold func(n *fieldNode)
	fold = func(n *fieldNode) {
		for _, c := range n.children {
			if c.leaf && len(c.children) > 0 {
				var collect func(d *fieldNode, rel []string)
				collect = func(d *fieldNode, rel []string) {
					for _, g := range d.children {
						r := append(append([]string(nil), rel...), g.key)
						for _, idx := range g.ends {
							c.shadowed = append(c.shadowed, shadowPath{idx, r})
						}
						collect(g, r)
					}
				}
				collect(c, nil)
				c.children = nil
				continue
			}
			fold(c)
		}
	}
	fold(f.root)
	return f, nil
}

// ParseFields decodes and compiles a `_fields` argument: an array of
// paths, or one string of comma-separated paths ("id,customer.name").
func ParseFields(raw []byte) (*Fields, error) {
	v, err := decodeArg(raw)
	if err != nil {
		return nil, fmt.Errorf("query: _fields must be an array of paths or a comma-separated string: %w", err)
	}
	paths, err := PathsOf(v)
	if err != nil {
		return nil, fmt.Errorf("query: _fields %w", err)
	}
	return CompileFields(paths)
}

// Paths returns the paths the projection was compiled from, in order.
// Project's matched flags are indexed like it.
func (f *Fields) Paths() []string { return append([]string(nil), f.paths...) }

type span struct{ s, e int }

// Project appends the projection of item (one JSON value, normally an
// object) to dst and returns the extended buffer. For each path that
// resolves to a value in item (null included), matched[i] is set to true;
// flags are only ever set, so passing one slice over many items collects
// which paths matched any item — what `_unmatchedFields` reports. matched
// may be nil, or must have len(f.Paths()).
//
// An object item gives an object, an array item is mapped element by
// element, a scalar item gives null. Values are copied from item with
// insignificant whitespace removed; everything copied is checked JSON, so
// the output is always valid. Values that are not kept are only skipped
// (by their strings and brackets), and Project stops reading item once
// every path is resolved: Elements is what checks whole arrays. On
// malformed input met on the way it returns dst unchanged and a
// *SyntaxError.
func (f *Fields) Project(item, dst []byte, matched []bool) ([]byte, error) {
	return f.project(item, dst, matched, false)
}

// project is Project; checked says item has been through the strict
// scanner (Elements), so that a value the projection reads itself need
// not be skipped first to learn where it ends: on checked JSON the fast
// skip and the projection find the same bytes, and on unchecked input
// the skip is what reports a malformed value past what is kept.
func (f *Fields) project(item, dst []byte, matched []bool, checked bool) ([]byte, error) {
	if matched != nil && len(matched) != len(f.paths) {
		return dst, fmt.Errorf("query: Project: matched has %d flags for %d paths", len(matched), len(f.paths))
	}
	var stack [32]span
	spans := stack[:]
	if f.nodes > len(stack) {
		spans = make([]span, f.nodes)
	}
	start := len(dst)
	i := skipSpace(item, 0)
	if i >= len(item) {
		return dst, syntaxErr(item, i, "value")
	}
	out, _, err := f.projectValue(dst, item, i, f.root, spans, matched, 0, false, checked)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

// projectValue projects the value at b[i] through node n. With needEnd
// it also returns the index just past the value (array elements need it
// to find the next one, and finding it while projecting saves skipping
// each element twice); without, end is -1 and reading may stop early.
func (f *Fields) projectValue(dst, b []byte, i int, n *fieldNode, spans []span, matched []bool, depth int, needEnd, checked bool) (_ []byte, end int, err error) {
	switch b[i] {
	case '{':
		return f.projectObject(dst, b, i, n, spans, matched, depth, needEnd, checked)
	case '[':
		if depth >= MaxDepth {
			return dst, 0, tooDeep(i)
		}
		dst = append(dst, '[')
		j := skipSpace(b, i+1)
		if j < len(b) && b[j] == ']' {
			return append(dst, ']'), j + 1, nil
		}
		for {
			if j >= len(b) {
				return dst, 0, syntaxErr(b, j, "value")
			}
			if dst, j, err = f.projectValue(dst, b, j, n, spans, matched, depth+1, true, checked); err != nil {
				return dst, 0, err
			}
			j = skipSpace(b, j)
			if j >= len(b) {
				return dst, 0, syntaxErr(b, j, "',' or ']'")
			}
			switch b[j] {
			case ',':
				dst = append(dst, ',')
				j = skipSpace(b, j+1)
			case ']':
				return append(dst, ']'), j + 1, nil
			default:
				return dst, 0, syntaxErr(b, j, "',' or ']'")
			}
		}
	default:
		// A scalar where the paths go deeper: nothing to keep.
		if end = skipFast(b, i); end < 0 {
			return dst, 0, syntaxErr(b, i, "value")
		}
		return append(dst, "null"...), end, nil
	}
}

func (f *Fields) projectObject(dst, b []byte, i int, n *fieldNode, spans []span, matched []bool, depth int, needEnd, checked bool) (_ []byte, end int, err error) {
	for _, c := range n.children {
		spans[c.id] = span{-1, -1}
	}
	found := 0
	m := newMembers(b, i, depth, false)
	for found < len(n.children) {
		key, esc, vs, ok := m.key()
		if !ok {
			break
		}
		var child *fieldNode
		for _, c := range n.children {
			if spans[c.id].s < 0 && keyEqual(key, esc, c.key) {
				child = c
				break
			}
		}
		if child != nil && checked && !needEnd && !child.leaf && found+1 == len(n.children) {
			// The last member needed, projected where it is read below:
			// its end is not needed (its span's end is unused).
			spans[child.id] = span{vs, -1}
			break
		}
		ve, ok := m.skip()
		if !ok {
			break
		}
		if child != nil {
			spans[child.id] = span{vs, ve}
			found++
		}
	}
	if m.err != nil {
		return dst, 0, m.err
	}
	if needEnd {
		if end = m.i; !m.done {
			// Stopped early: the rest is only skipped.
			if end = skipNested(b, m.i, 1); end < 0 {
				return dst, 0, syntaxErr(b, len(b), "'}'")
			}
		}
	}
	dst = append(dst, '{')
	for k, c := range n.children {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, c.member...)
		sp := spans[c.id]
		if sp.s < 0 {
			dst = append(dst, "null"...)
			continue
		}
		if c.leaf {
			// Only what is copied is checked, and it must be exactly
			// the value the fast skip delimited.
			ve, err := skipValueDepth(b, sp.s, depth+1)
			if err != nil {
				return dst, 0, err
			}
			if ve != sp.e {
				return dst, 0, syntaxErr(b, ve, "',' or '}'")
			}
			if matched != nil {
				for _, idx := range c.ends {
					matched[idx] = true
				}
				for _, sh := range c.shadowed {
					if !matched[sh.index] && resolves(b[sp.s:sp.e], sh.keys) {
						matched[sh.index] = true
					}
				}
			}
			if v := b[sp.s]; v == '{' || v == '[' {
				dst = appendCompact(dst, b[sp.s:sp.e])
			} else {
				dst = append(dst, b[sp.s:sp.e]...)
			}
			continue
		}
		if dst, _, err = f.projectValue(dst, b, sp.s, c, spans, matched, depth+1, false, checked); err != nil {
			return dst, 0, err
		}
	}
	return append(dst, '}'), end, nil
}

// resolves reports whether keys lead to a value in v (a checked JSON
// value), mapping over arrays.
func resolves(v []byte, keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	switch v[0] {
	case '{':
		m := newMembers(v, 0, 0, false)
		for {
			key, esc, vs, ve, ok := m.next()
			if !ok {
				return false
			}
			if keyEqual(key, esc, keys[0]) {
				return resolves(v[vs:ve], keys[1:])
			}
		}
	case '[':
		e := newElems(v, 0, 0, false)
		for {
			vs, ve, ok := e.next()
			if !ok {
				return false
			}
			if resolves(v[vs:ve], keys) {
				return true
			}
		}
	}
	return false
}
