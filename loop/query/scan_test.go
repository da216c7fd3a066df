package query

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"testing"
)

// strStopRef is strStop as it was first written, one mask a test: the
// shared mask must flag the very same bytes.
func strStopRef(x uint64) uint64 {
	q := x ^ quote
	s := x ^ bslash
	return ((q-lsb)&^q | (s-lsb)&^s | (x-0x20*lsb)&^x) & msb
}

func TestStrStopSharedMask(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	special := []byte{'"', '\\', 0, 0x1f, 0x20, 0x21, 0x5b, 0x5d, 0x7f, 0x80, 0xa2, 0xdc, 0xff, 0x01, 0x23}
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
		if got, want := strStop(x), strStopRef(x); got != want {
			t.Fatalf("strStop(%#x) = %#x, the three masks give %#x", x, got, want)
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
