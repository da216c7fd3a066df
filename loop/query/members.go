package query

import "bytes"

// members iterates an object's members without allocating. Start it with
// the index of '{'. key advances to the next member and returns its raw
// key (between the quotes), whether the key holds escapes, and where its
// value starts; skip then finds where that value ends (key does it itself
// if the caller did not). A strict iterator checks everything it passes;
// a fast one checks the punctuation between members but skips values with
// skipFast.
type members struct {
	b       []byte
	i       int // next unread byte
	depth   int
	strict  bool
	first   bool
	pending bool // the current value has not been skipped yet
	done    bool // the closing brace has been read
	ks      int  // index of the current member's opening quote
	err     error
}

func newMembers(b []byte, i, depth int, strict bool) members {
	return members{b: b, i: i + 1, depth: depth + 1, strict: strict, first: true}
}

func (m *members) fail(err error) bool {
	m.err = err
	return false
}

func (m *members) key() (key []byte, esc bool, vs int, ok bool) {
	if m.err != nil || m.done {
		return nil, false, 0, false
	}
	if m.pending {
		if _, ok := m.skip(); !ok {
			return nil, false, 0, false
		}
	}
	if m.depth > MaxDepth {
		return nil, false, 0, m.fail(tooDeep(m.i))
	}
	b := m.b
	j := skipSpace(b, m.i)
	if m.first {
		m.first = false
		if j < len(b) && b[j] == '}' {
			m.i, m.done = j+1, true
			return nil, false, 0, false
		}
	} else {
		if j >= len(b) {
			return nil, false, 0, m.fail(syntaxErr(b, j, "',' or '}'"))
		}
		switch b[j] {
		case '}':
			m.i, m.done = j+1, true
			return nil, false, 0, false
		case ',':
			j = skipSpace(b, j+1)
		default:
			return nil, false, 0, m.fail(syntaxErr(b, j, "',' or '}'"))
		}
	}
	if j >= len(b) || b[j] != '"' {
		return nil, false, 0, m.fail(syntaxErr(b, j, "object key"))
	}
	m.ks = j
	var ke int
	if m.strict {
		var err error
		if k, r := shortString(b, j); k > 0 {
			ke = k
		} else if ke, esc, err = scanStringAt(b, j, r); err != nil {
			return nil, false, 0, m.fail(err)
		}
	} else {
		if ke = stringEnd(b, j); ke < 0 {
			return nil, false, 0, m.fail(&SyntaxError{Offset: len(b), Msg: "unterminated string"})
		}
		esc = bytes.IndexByte(b[j+1:ke-1], '\\') >= 0
	}
	key = b[j+1 : ke-1]
	j = skipSpace(b, ke)
	if j >= len(b) || b[j] != ':' {
		return nil, false, 0, m.fail(syntaxErr(b, j, "':' after object key"))
	}
	vs = skipSpace(b, j+1)
	m.i, m.pending = vs, true
	return key, esc, vs, true
}

// skip finds the end of the current member's value.
func (m *members) skip() (ve int, ok bool) {
	m.pending = false
	if m.strict {
		var err error
		if ve, err = skipValueDepth(m.b, m.i, m.depth); err != nil {
			return 0, m.fail(err)
		}
	} else if ve = skipFast(m.b, m.i); ve < 0 {
		return 0, m.fail(syntaxErr(m.b, m.i, "value"))
	}
	m.i = ve
	return ve, true
}

// next is key followed by skip.
func (m *members) next() (key []byte, esc bool, vs, ve int, ok bool) {
	if key, esc, vs, ok = m.key(); !ok {
		return nil, false, 0, 0, false
	}
	if ve, ok = m.skip(); !ok {
		return nil, false, 0, 0, false
	}
	return key, esc, vs, ve, true
}

// elems iterates an array's elements the same way: value starts and
// ends, strict or fast.
type elems struct {
	b      []byte
	i      int
	depth  int
	strict bool
	first  bool
	done   bool // the closing bracket has been read
	err    error
}

func newElems(b []byte, i, depth int, strict bool) elems {
	return elems{b: b, i: i + 1, depth: depth + 1, strict: strict, first: true}
}

func (e *elems) next() (vs, ve int, ok bool) { return e.nextMemo(nil) }

// nextMemo is next reading object elements, when strict, against memo
// (see skipObjectMemo); nil keeps none.
func (e *elems) nextMemo(memo []memberMemo) (vs, ve int, ok bool) {
	if e.err != nil || e.done {
		return 0, 0, false
	}
	if e.depth > MaxDepth {
		e.err = tooDeep(e.i)
		return 0, 0, false
	}
	b := e.b
	j := skipSpace(b, e.i)
	if e.first {
		e.first = false
		if j < len(b) && b[j] == ']' {
			e.i, e.done = j+1, true
			return 0, 0, false
		}
	} else {
		if j >= len(b) {
			e.err = syntaxErr(b, j, "',' or ']'")
			return 0, 0, false
		}
		switch b[j] {
		case ']':
			e.i, e.done = j+1, true
			return 0, 0, false
		case ',':
			j = skipSpace(b, j+1)
		default:
			e.err = syntaxErr(b, j, "',' or ']'")
			return 0, 0, false
		}
	}
	if e.strict {
		var err error
		if memo != nil && j < len(b) && b[j] == '{' {
			ve, err = skipObjectMemo(b, j, e.depth+1, memo)
		} else {
			ve, err = skipValueDepth(b, j, e.depth)
		}
		if err != nil {
			e.err = err
			return 0, 0, false
		}
	} else if ve = skipFast(b, j); ve < 0 {
		e.err = syntaxErr(b, j, "value")
		return 0, 0, false
	}
	e.i = ve
	return j, ve, true
}
