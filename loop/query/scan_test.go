package query

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
)

// The stop masks a word at a time against a byte at a time: strStop's
// lowest flag is the first quote, backslash or control character, and
// none is flagged without one; stringEnd's one "&^ x" for its two tests
// flags what masking each test apart flags (a xor with a byte below 0x80
// keeps every byte's high bit, so each ^v has ^x's high bits).
func TestStopMasks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	special := []byte{'"', '\\', 0, 0x1f, 0x20, 0x21, 0x22 ^ 0x02, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff, 0x01, 0x23}
	var w [8]byte
	for n := 0; n < 2_000_000; n++ {
		for k := range w {
			if r.IntN(3) == 0 {
				w[k] = special[r.IntN(len(special))]
			} else {
				w[k] = byte(r.Uint32())
			}
		}
		x := binary.LittleEndian.Uint64(w[:])
		first := 8
		for k, c := range w {
			if c == '"' || c == '\\' || c < 0x20 {
				first = k
				break
			}
		}
		m := strStop(x)
		if got := bits.TrailingZeros64(m) >> 3; got != first || m&^msb != 0 {
			t.Fatalf("strStop(% x) = %#x: first stop at %d, want %d", w, m, got, first)
		}
		q, s := x^quote, x^bslash
		if got, want := (((x^quote)-lsb)|((x^bslash)-lsb))&^x&msb, ((q-lsb)&^q|(s-lsb)&^s)&msb; got != want {
			t.Fatalf("stringEnd's mask of %#x = %#x, want %#x", x, got, want)
		}
	}
}

// Every byte after a backslash, read by the table, is what JSON allows.
func TestScanStringEscapes(t *testing.T) {
	for c := 0; c < 256; c++ {
		for _, tail := range []string{`1234"`, `12g4"`, `12`} {
			s := []byte(`"ab\` + string([]byte{byte(c)}) + tail)
			end, esc, err := scanString(s, 0)
			var wantErr string
			switch {
			case strings.IndexByte(`"\/bfnrt`, byte(c)) >= 0:
				if !strings.HasSuffix(tail, `"`) {
					wantErr = "unterminated string"
				}
			case c == 'u':
				switch tail {
				case `12g4"`:
					wantErr = "hexadecimal digit"
				case `12`:
					wantErr = `unterminated \u escape`
				}
			default:
				wantErr = "want escape character"
			}
			if !esc {
				t.Fatalf("%q: no escape reported", s)
			}
			if wantErr == "" {
				if err != nil || end != len(s) {
					t.Fatalf("%q: end %d err %v, want %d", s, end, err, len(s))
				}
				continue
			}
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Fatalf("%q: err %v, want %q", s, err, wantErr)
			}
		}
	}
}
