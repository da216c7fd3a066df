package query

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of arrays and objects the scanner accepts
// (the same bound as encoding/json), so hostile input cannot exhaust the
// stack.
const MaxDepth = 10000

// SyntaxError reports malformed JSON and where the scanner stopped.
type SyntaxError struct {
	Offset int    // byte offset in the input where the problem was found
	Msg    string // what was wrong
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("query: invalid JSON at offset %d: %s", e.Offset, e.Msg)
}

func syntaxErr(b []byte, i int, want string) error {
	if i >= len(b) {
		return &SyntaxError{Offset: len(b), Msg: "unexpected end of input, want " + want}
	}
	return &SyntaxError{Offset: i, Msg: fmt.Sprintf("unexpected %s, want %s", quoteByte(b[i]), want)}
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

// isSpace reports JSON insignificant whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && b[i] <= ' ' && isSpace(b[i]) {
		i++
	}
	return i
}

// trimSpace drops leading and trailing JSON whitespace.
func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

// SWAR constants: eight bytes examined per step while scanning strings,
// which dominate realistic payloads (descriptions, notes, addresses).
const (
	lsb    = 0x0101010101010101
	msb    = 0x8080808080808080
	quote  = '"' * lsb
	bslash = '\\' * lsb
)

// strStop returns a word whose high bit is set in every byte that is a
// quote, a backslash or a control character (< 0x20) — the bytes a string
// scan must stop at. Bytes >= 0x80 never flag (they are UTF-8 payload).
func strStop(x uint64) uint64 {
	// x^0x02 maps the quote (0x22) to 0x20 and the control characters
	// (0x00–0x1f) onto themselves, and no other byte below 0x21, so one
	// "less than 0x21" test finds both; the backslash has its own.
	t := x ^ 0x02*lsb
	s := x ^ bslash
	// (v - n·0x01..) & ^v & 0x80.. flags the bytes below n exactly for
	// the lowest one and may flag bytes above a true one (the borrow);
	// any flag means "stop somewhere in this word", and the lowest flag
	// is where.
	return ((t-0x21*lsb)&^t | (s-lsb)&^s) & msb
}

// escapeLen is the length of the escape sequence a backslash followed by
// the byte begins: 2, or 6 for \u (its four hex digits checked apart), or
// 0 when the byte cannot follow a backslash. A table rather than a switch:
// the escapes of free text come in no order a branch predictor learns.
var escapeLen = [256]uint8{'"': 2, '\\': 2, '/': 2, 'b': 2, 'f': 2, 'n': 2, 'r': 2, 't': 2, 'u': 6}

// shortString returns the index just past the string starting at b[i] ==
// '"' when its closing quote is among the next nine bytes, with no
// backslash or control character before it (a key, an id, an enum: most
// strings), else -1 and the index scanStringAt resumes at: every byte
// before it is known to be plain text, so a longer string's first eight
// bytes are not read twice. Small enough to be inlined, it spares the
// short strings a call.
func shortString(b []byte, i int) (end, resume int) {
	if i+9 >= len(b) {
		return -1, i + 1
	}
	// The lowest flagged byte is the first stop; none among the eight
	// (TrailingZeros64 is 64) puts k on the byte after them.
	k := i + 1 + bits.TrailingZeros64(strStop(binary.LittleEndian.Uint64(b[i+1:i+9])))>>3
	if b[k] != '"' {
		return -1, k
	}
	return k + 1, 0
}

// scanString validates the string starting at b[i] == '"' and returns
// the index just past its closing quote; esc reports whether it held any
// escape sequence (so the raw bytes are not already the decoded value).
func scanString(b []byte, i int) (end int, esc bool, err error) {
	return scanStringAt(b, i, i+1)
}

// scanStringAt is scanString resuming at b[j], every byte of b[i+1:j]
// being known to be neither a quote, a backslash nor a control
// character.
func scanStringAt(b []byte, i, j int) (end int, esc bool, err error) {
	for {
		// Find the next quote, backslash or control character: eight
		// bytes at a time, then byte by byte for the tail. The lowest
		// flagged byte of strStop is always a true stop.
		for j+8 <= len(b) {
			if m := strStop(binary.LittleEndian.Uint64(b[j : j+8])); m != 0 {
				j += bits.TrailingZeros64(m) >> 3
				goto stop
			}
			j += 8
		}
		for j < len(b) && b[j] != '"' && b[j] != '\\' && b[j] >= 0x20 {
			j++
		}
		if j >= len(b) {
			return 0, esc, &SyntaxError{Offset: len(b), Msg: "unterminated string"}
		}
	stop:
		switch c := b[j]; {
		case c == '"':
			return j + 1, esc, nil
		case c == '\\':
			esc = true
			if j+1 >= len(b) {
				return 0, esc, &SyntaxError{Offset: len(b), Msg: "unterminated string"}
			}
			switch escapeLen[b[j+1]] {
			case 2:
				j += 2
			case 6:
				if j+6 > len(b) {
					return 0, esc, &SyntaxError{Offset: len(b), Msg: "unterminated \\u escape"}
				}
				for k := j + 2; k < j+6; k++ {
					if hexVal(b[k]) < 0 {
						return 0, esc, syntaxErr(b, k, "hexadecimal digit in \\u escape")
					}
				}
				j += 6
			default:
				return 0, esc, syntaxErr(b, j+1, "escape character")
			}
		default:
			return 0, esc, &SyntaxError{Offset: j, Msg: fmt.Sprintf("control character 0x%02x in string", c)}
		}
	}
}

func hexVal(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// scanNumber validates the number starting at b[i] and returns its end.
func scanNumber(b []byte, i int) (int, error) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case j < len(b) && '1' <= b[j] && b[j] <= '9':
		j++
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	default:
		return 0, syntaxErr(b, j, "digit")
	}
	if j < len(b) && b[j] == '.' {
		j++
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, syntaxErr(b, j, "digit after decimal point")
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if j >= len(b) || b[j] < '0' || b[j] > '9' {
			return 0, syntaxErr(b, j, "digit in exponent")
		}
		for j < len(b) && '0' <= b[j] && b[j] <= '9' {
			j++
		}
	}
	return j, nil
}

func scanLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	for k := 0; k < len(lit); k++ {
		if i+k >= len(b) || b[i+k] != lit[k] {
			return 0, syntaxErr(b, i+k, "literal "+lit)
		}
	}
	panic("unreachable")
}

// skipValue validates the JSON value starting at b[i] (no leading
// whitespace) and returns the index just past it. It is the one place the
// package checks syntax: everything Get returns, everything Project copies
// and everything Elements splits has been through it.
func skipValue(b []byte, i int) (int, error) {
	return skipValueDepth(b, i, 0)
}

func skipValueDepth(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return 0, syntaxErr(b, i, "value")
	}
	switch c := b[i]; c {
	case '"':
		end, j := shortString(b, i)
		if end > 0 {
			return end, nil
		}
		end, _, err := scanStringAt(b, i, j)
		return end, err
	case '{':
		return skipObject(b, i, depth+1)
	case '[':
		return skipArray(b, i, depth+1)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		if c == '-' || ('0' <= c && c <= '9') {
			return scanNumber(b, i)
		}
		return 0, syntaxErr(b, i, "value")
	}
}

func tooDeep(i int) error {
	return &SyntaxError{Offset: i, Msg: fmt.Sprintf("nesting deeper than %d", MaxDepth)}
}

func skipObject(b []byte, i, depth int) (int, error) {
	return skipObjectMemo(b, i, depth, nil)
}

// memberMemo is what the objects of one array told skipObjectMemo about
// one member place (the first member, the second, …): the bytes its key
// ran to, from the opening quote through the colon, and the length of
// its value when that was a string without escapes. An array's objects
// mostly spell their keys alike and many of their values (ids, dates,
// enums) at the same length, and then the scan need not find where each
// ends before it can read on: the next position is known, and the bytes
// are only checked.
type memberMemo struct {
	w0, w1 uint64 // the key's bytes (up to sixteen), little-endian
	m0, m1 uint64 // which bytes of w0, w1 are the key's
	kn     int    // how many bytes; 0: none remembered
	vn     int    // the string value's length, quotes included; 0: none
}

// objMemo holds the first sixteen member places of an array's objects.
type objMemo [16]memberMemo

// remember keeps b[ks:end], a key checked just now with the colon after
// it, when it fits the memo's sixteen bytes.
func (mm *memberMemo) remember(b []byte, ks, end int) {
	n := end - ks
	if n > 16 || ks+16 > len(b) {
		mm.kn = 0
		return
	}
	mm.m0, mm.m1 = byteMask(min(n, 8)), byteMask(max(n-8, 0))
	mm.w0 = binary.LittleEndian.Uint64(b[ks:]) & mm.m0
	mm.w1 = binary.LittleEndian.Uint64(b[ks+8:]) & mm.m1
	mm.kn = n
}

// byteMask has the low n bytes (n ≤ 8) of a word set.
func byteMask(n int) uint64 {
	if n >= 8 {
		return ^uint64(0)
	}
	return 1<<(8*n) - 1
}

// plainStringAt reports whether b[j:j+n] (b[j] being a quote) is a whole
// string without escapes: n-2 bytes none of which is a quote, a
// backslash or a control character, then the closing quote. It wants
// eight bytes past the string to read its last word whole.
func plainStringAt(b []byte, j, n int) bool {
	end := j + n - 1 // the closing quote
	if n < 2 || end+9 > len(b) || b[end] != '"' {
		return false
	}
	k := j + 1
	for ; k+8 <= end; k += 8 {
		if strStop(binary.LittleEndian.Uint64(b[k:])) != 0 {
			return false
		}
	}
	return strStop(binary.LittleEndian.Uint64(b[k:]))&byteMask(end-k) == 0
}

// maxMemoString bounds the string values memberMemo remembers: past it a
// wrong guess (a value of another length) costs more than it saves.
const maxMemoString = 48

// skipObjectMemo is skipObject reading the object's member places
// against memo (nil: none) and keeping in it what this object spelt. A
// key taken from the memo is the very bytes of one checked before, so
// it is as valid; a value taken from it is checked in full, only its
// end being known in advance.
func skipObjectMemo(b []byte, i, depth int, memo []memberMemo) (int, error) {
	if depth > MaxDepth {
		return 0, tooDeep(i)
	}
	j := skipSpace(b, i+1)
	if j < len(b) && b[j] == '}' {
		return j + 1, nil
	}
	for place := 0; ; place++ {
		var mm *memberMemo
		if place < len(memo) {
			mm = &memo[place]
		}
		var err error
		if mm != nil && mm.kn > 0 && j+16 <= len(b) &&
			(binary.LittleEndian.Uint64(b[j:])^mm.w0)&mm.m0|(binary.LittleEndian.Uint64(b[j+8:])^mm.w1)&mm.m1 == 0 {
			j += mm.kn // past the colon
		} else {
			if j >= len(b) || b[j] != '"' {
				return 0, syntaxErr(b, j, "object key")
			}
			ks := j
			if k, r := shortString(b, j); k > 0 {
				j = k
			} else if j, _, err = scanStringAt(b, j, r); err != nil {
				return 0, err
			}
			j = skipSpace(b, j)
			if j >= len(b) || b[j] != ':' {
				return 0, syntaxErr(b, j, "':' after object key")
			}
			j++
			if mm != nil {
				mm.remember(b, ks, j)
			}
		}
		j = skipSpace(b, j)
		// A string value (most are) is read here rather than through a
		// call to skipValueDepth, which reads it the same way.
		switch {
		case j < len(b) && b[j] == '"':
			if mm != nil && mm.vn > 0 && plainStringAt(b, j, mm.vn) {
				j += mm.vn
				break
			}
			vs := j
			esc := false
			if k, r := shortString(b, j); k > 0 {
				j = k
			} else if j, esc, err = scanStringAt(b, j, r); err != nil {
				return 0, err
			}
			if mm != nil {
				if mm.vn = j - vs; esc || mm.vn > maxMemoString {
					mm.vn = 0
				}
			}
		default:
			if j, err = skipValueDepth(b, j, depth); err != nil {
				return 0, err
			}
		}
		j = skipSpace(b, j)
		if j >= len(b) {
			return 0, syntaxErr(b, j, "',' or '}'")
		}
		switch b[j] {
		case ',':
			j = skipSpace(b, j+1)
		case '}':
			return j + 1, nil
		default:
			return 0, syntaxErr(b, j, "',' or '}'")
		}
	}
}

func skipArray(b []byte, i, depth int) (int, error) {
	if depth > MaxDepth {
		return 0, tooDeep(i)
	}
	j := skipSpace(b, i+1)
	if j < len(b) && b[j] == ']' {
		return j + 1, nil
	}
	for {
		var err error
		if j, err = skipValueDepth(b, j, depth); err != nil {
			return 0, err
		}
		j = skipSpace(b, j)
		if j >= len(b) {
			return 0, syntaxErr(b, j, "',' or ']'")
		}
		switch b[j] {
		case ',':
			j = skipSpace(b, j+1)
		case ']':
			return j + 1, nil
		default:
			return 0, syntaxErr(b, j, "',' or ']'")
		}
	}
}

// Two ways over a value. The strict scanner (skipValue and friends)
// checks every byte against the JSON grammar; it runs over everything the
// package returns, copies or compares, and over whole arrays in Elements.
// The fast skipper (skipFast) only follows strings and bracket depth, at
// memchr speed over string contents; it runs over the siblings a lookup
// passes by. It never reads out of bounds and always terminates, so
// malformed input costs at worst a wrong guess about where a value we do
// not use ends — never an invalid result, since results go through the
// strict scanner.

// stringEnd returns the index just past the string starting at b[i] ==
// '"', or -1 if it is unterminated. Escapes are honoured, not checked.
func stringEnd(b []byte, i int) int {
	j := i + 1
	// Keys, ids and enums are short: a word at a time first.
	for n := 0; n < 2 && j+8 <= len(b); n++ {
		x := binary.LittleEndian.Uint64(b[j : j+8])
		if m := (((x ^ quote) - lsb) | ((x ^ bslash) - lsb)) &^ x & msb; m != 0 { // strStop's tests, less control characters
			j += bits.TrailingZeros64(m) >> 3
			if b[j] == '"' {
				return j + 1
			}
			break // an escape: the general loop handles it
		}
		j += 8
	}
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0 // backslashes right before the quote
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipFast returns the index just past the value starting at b[i] (no
// leading whitespace), or -1 when it cannot find one.
func skipFast(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		return skipNested(b, i+1, 1)
	case '}', ']', ',', ':':
		return -1
	default:
		j := i
		for j < len(b) {
			c := b[j]
			if c == ',' || c == '}' || c == ']' || c == ':' || c == '"' || isSpace(c) {
				break
			}
			j++
		}
		if j == i {
			return -1
		}
		return j
	}
}

// skipNested returns the index just past the bracket that closes the
// container b[j] is inside of, depth levels down, or -1.
func skipNested(b []byte, j, depth int) int {
	for ; j < len(b); j++ {
		switch b[j] {
		case '"':
			e := stringEnd(b, j)
			if e < 0 {
				return -1
			}
			j = e - 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1
			}
		}
	}
	return -1
}
