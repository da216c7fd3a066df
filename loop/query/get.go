package query

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned by Replace and Delete when the path does not
// lead to a value (or, for Replace, to an object that could hold it).
var ErrNotFound = errors.New("query: path not found")

// PathError reports a path that cannot be parsed.
type PathError struct {
	Where string // the argument that held the path ("_fields[1]"), if known
	Path  string
	Msg   string
}

func (e *PathError) Error() string {
	if e.Where != "" {
		return fmt.Sprintf("query: %s: bad path %q: %s", e.Where, e.Path, e.Msg)
	}
	return fmt.Sprintf("query: bad path %q: %s", e.Path, e.Msg)
}

// SplitPath splits a dot path into its keys, undoing the `\.` and `\\`
// escapes. The empty path has no keys. An empty key ("a..b", ".a", "a.")
// or a dangling backslash is an error.
func SplitPath(path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	return splitPath(nil, path)
}

func splitPath(dst []string, path string) ([]string, error) {
	if strings.IndexByte(path, '\\') < 0 {
		full := path
		for {
			seg, rest, more := strings.Cut(path, ".")
			if seg == "" {
				return nil, &PathError{Path: full, Msg: "empty key (use `\\.` for a dot inside a key)"}
			}
			dst = append(dst, seg)
			if !more {
				return dst, nil
			}
			path = rest
		}
	}
	var cur strings.Builder
	full := path
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '\\':
			if i+1 >= len(path) || (path[i+1] != '.' && path[i+1] != '\\') {
				return nil, &PathError{Path: full, Msg: "a backslash must escape '.' or '\\'"}
			}
			cur.WriteByte(path[i+1])
			i++
		case '.':
			if cur.Len() == 0 {
				return nil, &PathError{Path: full, Msg: "empty key (use `\\.` for a dot inside a key)"}
			}
			dst = append(dst, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(c)
		}
	}
	if cur.Len() == 0 {
		return nil, &PathError{Path: full, Msg: "empty key (use `\\.` for a dot inside a key)"}
	}
	return append(dst, cur.String()), nil
}

// JoinPath is the inverse of SplitPath.
func JoinPath(keys ...string) string {
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('.')
		}
		for j := 0; j < len(k); j++ {
			if k[j] == '.' || k[j] == '\\' {
				b.WriteByte('\\')
			}
			b.WriteByte(k[j])
		}
	}
	return b.String()
}

// location is where a path led inside a document.
type location struct {
	vs, ve int // the value, when found
	found  bool

	// When found: where the member or element begins (its key's quote for
	// a member) and where the previous sibling's value ended (-1 when it
	// is the first), so Delete can take out the separator too.
	start, prevEnd int

	// When not found because the last key is missing from an object:
	// the index of that object's closing brace and whether it is empty.
	objClose int
	objEmpty bool
}

// locate walks doc along keys to the start of the value they name, fast-
// skipping the siblings it passes (the caller checks the value it uses). A
// key that is all digits indexes an array. When no member is named
// exactly keys[k], a member whose name is several keys joined by dots
// ("@odata.nextLink" for the path "@odata.nextLink") is taken instead, so
// paths copied from vendor docs work unescaped.
func locate(doc []byte, keys []string) (location, error) {
	loc := location{objClose: -1, prevEnd: -1}
	i := skipSpace(doc, 0)
	loc.start, loc.vs = i, i
	if i >= len(doc) {
		return loc, syntaxErr(doc, i, "value")
	}
	for k := 0; k < len(keys); {
		last := k == len(keys)-1 // the key whose absence Replace may fill in
		switch doc[i] {
		case '{':
			m := newMembers(doc, i, 0, false)
			prevEnd, objEmpty := -1, true
			var dotted location
			dottedN := 0
			exact := false
			for {
				key, esc, vs, ok := m.key()
				if !ok {
					break
				}
				objEmpty = false
				if keyEqual(key, esc, keys[k]) {
					loc.vs, loc.start, loc.prevEnd = vs, m.ks, prevEnd
					exact = true
					break
				}
				if dottedN == 0 && strings.IndexByte(keys[k], '.') < 0 {
					if n := joinedMatch(key, esc, keys[k:]); n > 0 {
						dotted = location{vs: vs, start: m.ks, prevEnd: prevEnd}
						dottedN = n
					}
				}
				if prevEnd, ok = m.skip(); !ok {
					break
				}
			}
			if m.err != nil {
				return loc, m.err
			}
			switch {
			case exact:
				k++
			case dottedN > 0:
				loc.vs, loc.start, loc.prevEnd = dotted.vs, dotted.start, dotted.prevEnd
				k += dottedN
			default:
				if last {
					loc.objClose, loc.objEmpty = m.i-1, objEmpty
				}
				return loc, nil
			}
		case '[':
			n, ok := arrayIndex(keys[k])
			if !ok {
				return loc, nil
			}
			e := newElems(doc, i, 0, false)
			prevEnd, found := -1, false
			for idx := 0; ; idx++ {
				vs, ve, ok := e.next()
				if !ok {
					break
				}
				if idx == n {
					loc.vs, loc.start, loc.prevEnd = vs, vs, prevEnd
					found = true
					break
				}
				prevEnd = ve
			}
			if e.err != nil {
				return loc, e.err
			}
			if !found {
				return loc, nil
			}
			k++
		default:
			return loc, nil
		}
		i = loc.vs
		if i >= len(doc) {
			return loc, syntaxErr(doc, i, "value")
		}
	}
	loc.found = true
	return loc, nil
}

// end checks the value locate found and records where it ends.
func (loc *location) end(doc []byte) error {
	ve, err := skipValue(doc, loc.vs)
	loc.ve = ve
	return err
}

// joinedMatch reports how many of keys (at least two) the member name
// spells when joined with dots, or 0.
func joinedMatch(raw []byte, esc bool, keys []string) int {
	if len(keys) < 2 {
		return 0
	}
	var buf [64]byte
	name := raw
	if esc {
		name = appendUnescaped(buf[:0], raw)
	}
	if len(name) <= len(keys[0]) || string(name[:len(keys[0])]) != keys[0] {
		return 0
	}
	rest := name[len(keys[0]):]
	for n := 1; n < len(keys); n++ {
		if len(rest) == 0 || rest[0] != '.' {
			return 0
		}
		rest = rest[1:]
		if len(rest) < len(keys[n]) || string(rest[:len(keys[n])]) != keys[n] {
			return 0
		}
		rest = rest[len(keys[n]):]
		if len(rest) == 0 {
			return n + 1
		}
	}
	return 0
}

func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// keysOf splits path into buf when it can, so Get does not allocate for
// ordinary paths.
func keysOf(buf []string, path string) ([]string, error) {
	if path == "" {
		return nil, nil
	}
	return splitPath(buf, path)
}

// Get returns the raw bytes of the value at path in doc ("" is the whole
// document), skipping every other value without decoding it. Leading and
// trailing whitespace is not part of the result. Object keys are compared
// after unescaping; the first member with the name wins; a key that is
// all digits indexes an array ("data.0.id"); a member whose own name
// contains dots is found by the plain dotted path ("@odata.nextLink").
// ok is false when the path is absent or malformed, or when the value
// found is not valid JSON. Only the returned value is checked: the values
// Get passes by are skipped by their strings and brackets alone, and bytes
// after the returned value are not looked at.
func Get(doc []byte, path string) (raw []byte, ok bool) {
	var buf [16]string
	keys, err := keysOf(buf[:0], path)
	if err != nil {
		return nil, false
	}
	loc, err := locate(doc, keys)
	if err != nil || !loc.found || loc.end(doc) != nil {
		return nil, false
	}
	return doc[loc.vs:loc.ve], true
}

// Elements returns the elements of the JSON array arr as sub-slices of it
// (no copies, no surrounding whitespace). The whole array is checked.
func Elements(arr []byte) ([][]byte, error) {
	return AppendElements(nil, arr)
}

// AppendElements is Elements appending to dst, so the items of many pages
// can be gathered into one slice.
func AppendElements(dst [][]byte, arr []byte) ([][]byte, error) {
	return appendElements(dst, arr, nil)
}

// appendElements is AppendElements, handing each element to pg (when not
// nil) right after checking it.
func appendElements(dst [][]byte, arr []byte, pg *Page) ([][]byte, error) {
	i := skipSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return dst, syntaxErr(arr, i, "'[' (an array)")
	}
	var memo objMemo
	e := newElems(arr, i, 0, true)
	for {
		vs, ve, ok := e.nextMemo(memo[:])
		if !ok {
			break
		}
		dst = append(dst, arr[vs:ve:ve])
		if pg != nil {
			pg.add(arr[vs:ve:ve], len(arr)-ve)
		}
	}
	if e.err != nil {
		return dst, e.err
	}
	if j := skipSpace(arr, e.i); j < len(arr) {
		return dst, syntaxErr(arr, j, "end of input after the array")
	}
	return dst, nil
}

// AppendElementsAt appends the elements of the array at path in doc (see
// Get for paths) to dst: what the engine does with each page's primary
// array, in one checking pass over it instead of Get's plus Elements'.
// An absent path is ErrNotFound; a value there that is not an array is a
// *SyntaxError.
func AppendElementsAt(dst [][]byte, doc []byte, path string) ([][]byte, error) {
	return appendElementsAt(dst, doc, path, nil)
}

// appendElementsAt is AppendElementsAt, handing each element to pg (when
// not nil) right after checking it.
func appendElementsAt(dst [][]byte, doc []byte, path string, pg *Page) ([][]byte, error) {
	var buf [16]string
	keys, err := keysOf(buf[:0], path)
	if err != nil {
		return dst, err
	}
	loc, err := locate(doc, keys)
	if err != nil {
		return dst, err
	}
	if !loc.found {
		return dst, fmt.Errorf("%w: %q", ErrNotFound, path)
	}
	i := loc.vs
	if i >= len(doc) || doc[i] != '[' {
		return dst, syntaxErr(doc, i, "'[' (an array)")
	}
	var memo objMemo
	e := newElems(doc, i, 0, true)
	for {
		vs, ve, ok := e.nextMemo(memo[:])
		if !ok {
			break
		}
		dst = append(dst, doc[vs:ve:ve])
		if pg != nil {
			pg.add(doc[vs:ve:ve], len(doc)-ve)
		}
	}
	return dst, e.err
}

// Keys returns the top-level member names of the JSON object obj, decoded,
// in document order (duplicates included). The whole object is checked.
func Keys(obj []byte) ([]string, error) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return nil, syntaxErr(obj, i, "'{' (an object)")
	}
	var keys []string
	m := newMembers(obj, i, 0, true)
	for {
		key, esc, _, _, ok := m.next()
		if !ok {
			break
		}
		if esc {
			keys = append(keys, string(appendUnescaped(nil, key)))
		} else {
			keys = append(keys, string(key))
		}
	}
	if m.err != nil {
		return nil, m.err
	}
	if j := skipSpace(obj, m.i); j < len(obj) {
		return nil, syntaxErr(obj, j, "end of input after the object")
	}
	return keys, nil
}

// Valid reports whether b is exactly one JSON value (surrounding
// whitespace allowed). It is the package's own scanner, so what it
// accepts is what the rest of the package accepts.
func Valid(b []byte) bool {
	return validErr(b) == nil
}

func validErr(b []byte) error {
	i := skipSpace(b, 0)
	end, err := skipValue(b, i)
	if err != nil {
		return err
	}
	if j := skipSpace(b, end); j < len(b) {
		return syntaxErr(b, j, "end of input")
	}
	return nil
}

// Replace returns a new document: doc with the value at path replaced by
// value, or — when only the last key is missing and its parent is an
// object — with that member added at the end of the object. The path ""
// replaces the whole document. value must be one valid JSON value. doc is
// not modified.
func Replace(doc []byte, path string, value []byte) ([]byte, error) {
	value = trimSpace(value)
	if err := validErr(value); err != nil {
		return nil, fmt.Errorf("query: replacement value: %w", err)
	}
	keys, err := SplitPath(path)
	if err != nil {
		return nil, err
	}
	loc, err := locate(doc, keys)
	if err != nil {
		return nil, err
	}
	if loc.found {
		if err := loc.end(doc); err != nil {
			return nil, err
		}
	}
	switch {
	case loc.found:
		out := make([]byte, 0, len(doc)-(loc.ve-loc.vs)+len(value))
		out = append(out, doc[:loc.vs]...)
		out = append(out, value...)
		return append(out, doc[loc.ve:]...), nil
	case loc.objClose >= 0:
		name := keys[len(keys)-1]
		out := make([]byte, 0, len(doc)+len(name)+len(value)+4)
		out = append(out, doc[:loc.objClose]...)
		if !loc.objEmpty {
			out = append(out, ',')
		}
		out = appendQuoted(out, name)
		out = append(out, ':')
		out = append(out, value...)
		return append(out, doc[loc.objClose:]...), nil
	}
	return nil, fmt.Errorf("%w: %q", ErrNotFound, path)
}

// Delete returns a new document without the object member or array
// element at path, separators mended. Deleting what is not there is
// ErrNotFound; the path "" cannot be deleted.
func Delete(doc []byte, path string) ([]byte, error) {
	keys, err := SplitPath(path)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, &PathError{Path: path, Msg: "cannot delete the whole document"}
	}
	loc, err := locate(doc, keys)
	if err != nil {
		return nil, err
	}
	if !loc.found {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, path)
	}
	if err := loc.end(doc); err != nil {
		return nil, err
	}
	from, to := loc.start, loc.ve
	if loc.prevEnd >= 0 {
		from = loc.prevEnd // take ", member" out
	} else if j := skipSpace(doc, loc.ve); j < len(doc) && doc[j] == ',' {
		to = skipSpace(doc, j+1) // first member: take "member, " out
	}
	out := make([]byte, 0, len(doc)-(to-from))
	out = append(out, doc[:from]...)
	return append(out, doc[to:]...), nil
}

// Collect returns the JSON of what path reaches in doc, mapping over
// arrays the way workflow refs read step outputs: an object member is
// followed by name; on an array, a key that is all digits picks that
// element, and any other key maps over the elements — the result is then
// the JSON array of every value reached (arrays met while mapping are
// mapped over too, so it is flat; elements that reach nothing add
// nothing). ok is false when the path reaches nothing, is malformed, or
// doc is not valid JSON. The path "" is the whole document.
func Collect(doc []byte, path string) (raw []byte, ok bool) {
	keys, err := SplitPath(path)
	if err != nil {
		return nil, false
	}
	doc = trimSpace(doc)
	if validErr(doc) != nil {
		return nil, false
	}
	return collectKeys(doc, keys)
}

func collectKeys(v []byte, keys []string) ([]byte, bool) {
	if len(keys) == 0 {
		return v, true
	}
	switch v[0] {
	case '{':
		if c, ok := memberValue(v, keys[0]); ok {
			return collectKeys(c, keys[1:])
		}
	case '[':
		if i, ok := arrayIndex(keys[0]); ok {
			if e, ok := elementAt(v, i); ok {
				return collectKeys(e, keys[1:])
			}
			return nil, false
		}
		out, _ := appendReached([]byte{'['}, 0, v, keys)
		return append(out, ']'), true
	}
	return nil, false
}

// appendReached appends, comma-separated after n values already written,
// every value keys reach from v, mapping over arrays.
func appendReached(dst []byte, n int, v []byte, keys []string) ([]byte, int) {
	if len(keys) == 0 {
		if n > 0 {
			dst = append(dst, ',')
		}
		return append(dst, v...), n + 1
	}
	switch v[0] {
	case '{':
		if c, ok := memberValue(v, keys[0]); ok {
			return appendReached(dst, n, c, keys[1:])
		}
	case '[':
		if i, ok := arrayIndex(keys[0]); ok {
			if e, ok := elementAt(v, i); ok {
				return appendReached(dst, n, e, keys[1:])
			}
			return dst, n
		}
		e := newElems(v, 0, 0, false)
		for {
			vs, ve, ok := e.next()
			if !ok {
				break
			}
			dst, n = appendReached(dst, n, v[vs:ve], keys)
		}
	}
	return dst, n
}

// memberValue is the value of obj's first member named name.
func memberValue(obj []byte, name string) ([]byte, bool) {
	m := newMembers(obj, 0, 0, false)
	for {
		key, esc, vs, ve, ok := m.next()
		if !ok {
			return nil, false
		}
		if keyEqual(key, esc, name) {
			return obj[vs:ve], true
		}
	}
}

// elementAt is arr's i-th element.
func elementAt(arr []byte, i int) ([]byte, bool) {
	e := newElems(arr, 0, 0, false)
	for k := 0; ; k++ {
		vs, ve, ok := e.next()
		if !ok {
			return nil, false
		}
		if k == i {
			return arr[vs:ve], true
		}
	}
}
