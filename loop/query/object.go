package query

import (
	"fmt"
	"unicode/utf8"
	"unsafe"
)

// Member is one object member to write: its name and its raw JSON value.
type Member struct {
	Key   string
	Value []byte
}

// SetMembers returns the JSON object obj with each member set: replaced
// in place when the object already has it, appended at the end otherwise.
// Values must each be one valid JSON value. obj is not modified.
func SetMembers(obj []byte, ms []Member) ([]byte, error) {
	var err error
	for _, m := range ms {
		if obj, err = Replace(obj, JoinPath(m.Key), m.Value); err != nil {
			return nil, fmt.Errorf("query: setting %s: %w", m.Key, err)
		}
	}
	return obj, nil
}

// EachMember calls fn with every member of the JSON object obj, in
// order: its key as written (quoted, escapes kept), the key decoded, and
// its raw value. It reads obj once and checks it as it goes; a malformed
// object is an error and fn is not called past the fault.
func EachMember(obj []byte, fn func(key []byte, name string, value []byte)) error {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return syntaxErr(obj, i, "'{'")
	}
	m := newMembers(obj, i, 0, true)
	var name []byte
	for {
		key, esc, vs, ok := m.key()
		if !ok {
			break
		}
		ve, ok := m.skip()
		if !ok {
			break
		}
		quoted := obj[m.ks : m.ks+len(key)+2]
		if esc {
			name = appendUnescaped(name[:0], key)
			fn(quoted, string(name), obj[vs:ve])
		} else {
			fn(quoted, string(key), obj[vs:ve])
		}
	}
	return m.err
}

// InsertFirst returns the JSON object obj with "key": value as its first
// member (whether or not obj already has key). obj is not modified.
func InsertFirst(obj []byte, key string, value []byte) []byte {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return obj
	}
	rest := obj[skipSpace(obj, i+1):]
	out := make([]byte, 0, len(obj)+len(key)+len(value)+4)
	out = append(out, '{')
	out = appendQuoted(out, key)
	out = append(out, ':')
	out = append(out, value...)
	if len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// AppendMember appends "key":value to an object being built without its
// closing brace (an empty dst starts one); CloseObject ends it.
func AppendMember(dst []byte, key string, value []byte) []byte {
	if len(dst) == 0 {
		dst = append(dst, '{')
	} else {
		dst = append(dst, ',')
	}
	dst = appendQuoted(dst, key)
	dst = append(dst, ':')
	return append(dst, value...)
}

// CloseObject closes an object AppendMember built ({} when it is empty).
func CloseObject(dst []byte) []byte {
	if len(dst) == 0 {
		return []byte("{}")
	}
	return append(dst, '}')
}

// AppendString appends s as a JSON string: encoding/json's escaping
// without its HTML escaping; invalid UTF-8 becomes U+FFFD.
func AppendString(dst []byte, s string) []byte { return appendQuoted(dst, s) }

// AppendStringPrefix appends, as one JSON string, the longest prefix of s
// whose quoted form takes at most max characters (both quotes included;
// max < 0: no limit). It never splits a rune or an escape, and reports how
// many bytes of s the prefix holds. Its escaping is AppendString's.
func AppendStringPrefix(dst, s []byte, max int) (out []byte, consumed int) {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	used := 2
	i := 0
	for i < len(s) {
		c := s[i]
		var buf [6]byte
		esc := buf[:0]
		size := 1
		switch {
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(s[i:])
			size = n
			switch {
			case r == utf8.RuneError && n == 1:
				esc = append(esc, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				esc = append(esc, '\\', 'u', '2', '0', '2', "89"[r-'\u2028'])
			}
		case c == '"' || c == '\\':
			esc = append(esc, '\\', c)
		case c == '\n':
			esc = append(esc, '\\', 'n')
		case c == '\r':
			esc = append(esc, '\\', 'r')
		case c == '\t':
			esc = append(esc, '\\', 't')
		case c < 0x20:
			esc = append(esc, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		w := 1
		if len(esc) > 0 {
			w = len(esc)
		}
		if max >= 0 && used+w > max {
			break
		}
		used += w
		if len(esc) > 0 {
			dst = append(dst, esc...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"'), i
}

// OffsetIn returns where sub begins in buf when sub is a sub-slice of buf
// (as Get's and Elements' results are); ok is false otherwise. Only the
// distance between the two is computed; it is checked by pointer equality
// before it is trusted.
func OffsetIn(buf, sub []byte) (int, bool) {
	if len(sub) == 0 || len(buf) == 0 {
		return 0, false
	}
	d := uintptr(unsafe.Pointer(unsafe.SliceData(sub))) - uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	if d >= uintptr(len(buf)) || uintptr(len(sub)) > uintptr(len(buf))-d {
		return 0, false
	}
	if &buf[d] != &sub[0] {
		return 0, false
	}
	return int(d), true
}

// FirstByte is the first byte of b that is not JSON white space; 0 when
// there is none.
func FirstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}
