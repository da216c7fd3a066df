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
// the output is always valid. Project stops reading item once every path
// is resolved: bytes after that are not checked (Elements checks whole
// arrays). On malformed input it returns dst unchanged and a *SyntaxError.
func (f *Fields) Project(item, dst []byte, matched []bool) ([]byte, error) {
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
	out, err := f.projectValue(dst, item, i, f.root, spans, matched, 0)
	if err != nil {
		return dst[:start], err
	}
	return out, nil
}

// projectValue projects the value at b[i] through node n.
func (f *Fields) projectValue(dst, b []byte, i int, n *fieldNode, spans []span, matched []bool, depth int) ([]byte, error) {
	switch b[i] {
	case '{':
		return f.projectObject(dst, b, i, n, spans, matched, depth)
	case '[':
		dst = append(dst, '[')
		e := newElems(b, i, depth)
		for k := 0; ; k++ {
			vs, _, ok := e.next()
			if !ok {
				break
			}
			if k > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = f.projectValue(dst, b, vs, n, spans, matched, depth+1); err != nil {
				return dst, err
			}
		}
		if e.err != nil {
			return dst, e.err
		}
		return append(dst, ']'), nil
	default:
		// A scalar where the paths go deeper: nothing to keep. Check it
		// all the same, so malformed input is reported consistently.
		if _, err := skipValueDepth(b, i, depth); err != nil {
			return dst, err
		}
		return append(dst, "null"...), nil
	}
}

func (f *Fields) projectObject(dst, b []byte, i int, n *fieldNode, spans []span, matched []bool, depth int) ([]byte, error) {
	for _, c := range n.children {
		spans[c.id] = span{-1, -1}
	}
	found := 0
	m := newMembers(b, i, depth)
	for found < len(n.children) {
		key, esc, vs, ve, ok := m.next()
		if !ok {
			break
		}
		for _, c := range n.children {
			if spans[c.id].s < 0 && keyEqual(key, esc, c.key) {
				spans[c.id] = span{vs, ve}
				found++
				break
			}
		}
	}
	if m.err != nil {
		return dst, m.err
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
			dst = appendCompact(dst, b[sp.s:sp.e])
			continue
		}
		var err error
		if dst, err = f.projectValue(dst, b, sp.s, c, spans, matched, depth+1); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// resolves reports whether keys lead to a value in v (a checked JSON
// value), mapping over arrays.
func resolves(v []byte, keys []string) bool {
	if len(keys) == 0 {
		return true
	}
	switch v[0] {
	case '{':
		m := newMembers(v, 0, 0)
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
		e := newElems(v, 0, 0)
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
