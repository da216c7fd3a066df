// Package leaktest hunts secrets in text, for the tests that plant
// secrets and search every channel for them. It recovers a secret from
// every form README's Security section says trawl masks — raw; JSON
// escapes (\/, \uXXXX, any mix); percent-encoding in any mix of raw and
// encoded characters, either hex case; base64 and base64url, padded or
// not, standalone or inside a longer encoded string at any alignment, of
// the secret or of its JSON- or percent-escaped spelling — by decoding
// the text, not by spelling the secret's forms, so it shares nothing with
// the scrubber it checks. Find does not look for what trawl does not mask
// (reversal, hex, base32, encryption); FindTransformed looks for those
// spellings trawl could only have made itself.
package leaktest

import (
	"bytes"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Find returns where secret can be recovered from text (one line per
// finding, naming the reading and the encoding); none when it cannot.
func Find(text []byte, secret string) []string {
	return New(text).Find(secret)
}

// FindAny is Find for each secret, the findings prefixed with the secret.
func FindAny(text []byte, secrets ...string) []string {
	h := New(text)
	var out []string
	for _, s := range secrets {
		for _, f := range h.Find(s) {
			out = append(out, fmt.Sprintf("%q %s", s, f))
		}
	}
	return out
}

// Hunt is a text decoded every way Find reads it, to search for many
// secrets: build it once with New.
type Hunt struct {
	views []reading // every reading of the text, and of its base64 runs
	lower [][]byte  // the views ASCII-lower-cased, once FindAnyCase needs them
}

// New decodes text every way Find reads it: each reading of the text,
// and for each, its base64 runs decoded at each character offset (the
// runs of one reading and offset joined by two NULs, so a secret that
// holds NULs may be found across two runs), read every way again.
func New(text []byte) *Hunt {
	h := &Hunt{}
	for _, v := range readings(text) {
		h.views = append(h.views, v)
		runs := base64Runs(v.text)
		for off := range 4 {
			var joined []byte
			for _, run := range runs {
				if dec, ok := decodeBase64(run[min(off, len(run)):]); ok {
					joined = append(append(joined, dec...), 0, 0)
				}
			}
			for _, d := range readings(joined) {
				d.name = fmt.Sprintf("base64 (from character %d of a run) in %s, read as %s", off, v.name, d.name)
				h.views = append(h.views, d)
			}
		}
	}
	return h
}

// Find returns where secret can be recovered from the text, with what
// surrounds it there.
func (h *Hunt) Find(secret string) []string {
	if secret == "" {
		return nil
	}
	var out []string
	for _, v := range h.views {
		if i := bytes.Index(v.text, []byte(secret)); i >= 0 {
			at := v.text[max(0, i-20):min(len(v.text), i+len(secret)+20)]
			out = append(out, fmt.Sprintf("as %s: …%q…", v.name, at))
		}
	}
	return out
}

// FindAnyCase is Find with ASCII letters compared case-insensitively: it
// also finds the secret lower-cased, upper-cased or in any mix of cases,
// in every reading (trawl masks those spellings of a secret of 8
// characters or more, but not the base64 of one: a base64 reading finds
// only what was encoded in that case).
func (h *Hunt) FindAnyCase(secret string) []string {
	if secret == "" {
		return nil
	}
	if h.lower == nil {
		for _, v := range h.views {
			h.lower = append(h.lower, asciiLower(v.text))
		}
	}
	want := asciiLower([]byte(secret))
	var out []string
	for k, v := range h.views {
		if i := bytes.Index(h.lower[k], want); i >= 0 {
			at := v.text[max(0, i-20):min(len(v.text), i+len(secret)+20)]
			out = append(out, fmt.Sprintf("as %s, in any case: …%q…", v.name, at))
		}
	}
	return out
}

// asciiLower is a copy of b with its ASCII letters lower-cased.
func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// FindTransformed returns where a spelling of secret that trawl does not
// mask stands in the text, in any of the readings Find searches: the
// secret reversed, in hex (either case), in base32 (the standard and the
// extended-hex alphabets; the whole groups of the secret's own encoding,
// so also at the start of a longer one). An upstream can send these and
// they pass, as README says; a hunt whose hostile servers never write
// them finds one only where trawl encoded a secret it holds itself (a
// hashed key that is not a hash, a credential stored in hex).
func (h *Hunt) FindTransformed(secret string) []string {
	var out []string
	for _, sp := range transformed(secret) {
		for _, v := range h.views {
			if i := bytes.Index(v.text, sp.text); i >= 0 {
				at := v.text[max(0, i-20):min(len(v.text), i+len(sp.text)+20)]
				out = append(out, fmt.Sprintf("%s, as %s: …%q…", sp.name, v.name, at))
			}
		}
	}
	return out
}

// transformed are secret's spellings FindTransformed looks for.
func transformed(secret string) []reading {
	if secret == "" {
		return nil
	}
	b := []byte(secret)
	rev := make([]byte, len(b))
	for i, c := range b {
		rev[len(b)-1-i] = c
	}
	h := hex.EncodeToString(b)
	out := []reading{{"reversed", rev}, {"hex", []byte(h)}, {"upper-case hex", bytes.ToUpper([]byte(h))}}
	if whole := len(b) / 5 * 8; whole > 0 {
		for _, enc := range []struct {
			name string
			e    *base32.Encoding
		}{{"base32", base32.StdEncoding}, {"base32 (extended hex)", base32.HexEncoding}} {
			out = append(out, reading{enc.name, []byte(enc.e.EncodeToString(b)[:whole])})
		}
	}
	return out
}

type reading struct {
	name string
	text []byte
}

// readings are the ways a consumer may read text: as it is, with its JSON
// escapes decoded, percent-decoded, and both in either order — those that
// differ from the ones before them.
func readings(text []byte) []reading {
	out := []reading{{"raw text", text}}
	add := func(name string, b []byte) {
		for _, r := range out {
			if bytes.Equal(r.text, b) {
				return
			}
		}
		out = append(out, reading{name, b})
	}
	hasJSON, hasPct := bytes.IndexByte(text, '\\') >= 0, bytes.IndexByte(text, '%') >= 0
	if hasJSON {
		j := jsonUnescape(text)
		add("JSON-unescaped text", j)
		if bytes.IndexByte(j, '%') >= 0 {
			add("JSON-unescaped, then percent-decoded text", percentDecode(j))
		}
	}
	if hasPct {
		p := percentDecode(text)
		add("percent-decoded text", p)
		if bytes.IndexByte(p, '\\') >= 0 {
			add("percent-decoded, then JSON-unescaped text", jsonUnescape(p))
		}
	}
	return out
}

// base64Runs are the runs of at least 8 characters of either base64
// alphabet in b.
func base64Runs(b []byte) [][]byte {
	var out [][]byte
	start := -1
	for i := 0; i <= len(b); i++ {
		if i < len(b) && isBase64[b[i]] {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start >= 8 {
			out = append(out, b[start:i])
		}
		start = -1
	}
	return out
}

var isBase64 = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_-") {
		t[c] = true
	}
	return t
}()

// decodeBase64 decodes s in either alphabet, ignoring the last characters
// that do not make a whole byte.
func decodeBase64(s []byte) ([]byte, bool) {
	n := len(s)
	if n%4 == 1 {
		n--
	}
	if n < 2 {
		return nil, false
	}
	norm := s[:n]
	if bytes.ContainsAny(norm, "-_") {
		norm = bytes.Clone(norm)
		for i, c := range norm {
			switch c {
			case '-':
				norm[i] = '+'
			case '_':
				norm[i] = '/'
			}
		}
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(n))
	k, err := base64.RawStdEncoding.Decode(out, norm)
	if err != nil && k == 0 {
		return nil, false
	}
	return out[:k], true
}

// percentDecode decodes every %XX (either hex case); anything else is
// kept.
func percentDecode(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '%' && i+2 < len(b) {
			if v, err := strconv.ParseUint(string(b[i+1:i+3]), 16, 8); err == nil {
				out = append(out, byte(v))
				i += 2
				continue
			}
		}
		out = append(out, b[i])
	}
	return out
}

// jsonUnescape decodes JSON string escapes wherever they stand, left to
// right; anything else is kept.
func jsonUnescape(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		switch c := b[i+1]; c {
		case '"', '\\', '/':
			out = append(out, c)
			i++
		case 'b', 'f', 'n', 'r', 't':
			out = append(out, map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[c])
			i++
		case 'u':
			if i+5 < len(b) {
				if v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16); err == nil {
					out = utf8.AppendRune(out, rune(v))
					i += 5
					continue
				}
			}
			out = append(out, b[i])
		default:
			out = append(out, b[i])
		}
	}
	return out
}
