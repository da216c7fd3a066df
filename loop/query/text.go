package query

import (
	"unicode/utf16"
	"unicode/utf8"
)

// keyEqual reports whether the raw key bytes (between the quotes) spell
// name once unescaped.
func keyEqual(raw []byte, esc bool, name string) bool {
	if !esc {
		return string(raw) == name
	}
	var buf [64]byte
	return string(appendUnescaped(buf[:0], raw)) == name
}

// appendUnescaped appends the decoded form of the raw string content
// (between the quotes, already validated by scanString). Invalid UTF-8 and
// unpaired surrogates become U+FFFD, as encoding/json does.
func appendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c == '\\' && i+1 < len(raw) {
			switch raw[i+1] {
			case '"', '\\', '/':
				dst = append(dst, raw[i+1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if r2 := utf16.DecodeRune(r, hex4(raw[i+2:])); r2 != utf8.RuneError {
							dst = utf8.AppendRune(dst, r2)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			}
			i += 2
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(raw[i:])
		if r == utf8.RuneError && size == 1 {
			dst = utf8.AppendRune(dst, utf8.RuneError)
		} else {
			dst = append(dst, raw[i:i+size]...)
		}
		i += size
	}
	return dst
}

func hex4(b []byte) rune {
	if len(b) < 4 {
		return utf8.RuneError
	}
	var r rune
	for _, c := range b[:4] {
		v := hexVal(c)
		if v < 0 {
			return utf8.RuneError
		}
		r = r<<4 | rune(v)
	}
	return r
}

// appendQuoted appends s as a JSON string (the same escaping as
// encoding/json without HTML escaping).
func appendQuoted(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
				i++
				start = i
				continue
			}
			if r == '\u2028' || r == '\u2029' {
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, "89"[r-'\u2028'])
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendCompact appends the valid JSON value v without insignificant
// whitespace. v has been through skipValue.
func appendCompact(dst, v []byte) []byte {
	// Fast path: containers without any whitespace outside strings are
	// copied whole; finding out costs one pass over structure bytes only.
	start := 0
	for i := 0; i < len(v); {
		c := v[i]
		switch {
		case c == '"':
			end, _, err := scanString(v, i)
			if err != nil { // cannot happen on validated input; copy as is
				return append(dst, v[start:]...)
			}
			i = end
		case isSpace(c):
			dst = append(dst, v[start:i]...)
			for i < len(v) && isSpace(v[i]) {
				i++
			}
			start = i
		default:
			i++
		}
	}
	return append(dst, v[start:]...)
}
