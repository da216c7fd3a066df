// Package leaktest hunts secrets in text, for the tests that plant
// secrets and search every channel for them. It recovers a secret from
// every form README's Security section says trawl masks — raw; JSON
// escapes (\/, \uXXXX, any mix); percent-encoding in any mix of raw and
// encoded characters, either hex case; base64 and base64url, padded or
// not, standalone or inside a longer encoded string at any alignment, of
// the secret or of its JSON- or percent-escaped spelling — by decoding
// the text, not by spelling the secret's forms, so it shares nothing with
// the scrubber it checks. It does not look for what trawl does not mask
// (reversal, hex, encryption).
package leaktest

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"regexp"
	"strconv"
	"unicode/utf8"
)

// Find returns where secret can be recovered from text (one line per
// finding, naming the reading and the encoding); none when it cannot.
func Find(text []byte, secret string) []string {
	if secret == "" {
		return nil
	}
	var out []string
	for _, v := range readings(text) {
		if bytes.Contains(v.text, []byte(secret)) {
			out = append(out, "as "+v.name)
		}
		for _, run := range base64Run.FindAll(v.text, -1) {
			for off := range 4 {
				dec, ok := decodeBase64(run[min(off, len(run)):])
				if !ok {
					continue
				}
				for _, d := range readings(dec) {
					if bytes.Contains(d.text, []byte(secret)) {
						out = append(out, fmt.Sprintf("base64 at offset %d of %q (in %s), read %s", off, clip(run), v.name, d.name))
					}
				}
			}
		}
	}
	return out
}

// FindAny is Find for each secret, the findings prefixed with the secret.
func FindAny(text []byte, secrets ...string) []string {
	var out []string
	for _, s := range secrets {
		for _, f := range Find(text, s) {
			out = append(out, fmt.Sprintf("%q %s", s, f))
		}
	}
	return out
}

type reading struct {
	name string
	text []byte
}

// readings are the ways a consumer may read text: as it is, with its JSON
// escapes decoded, percent-decoded, and both in either order.
func readings(text []byte) []reading {
	j, p := jsonUnescape(text), percentDecode(text)
	return []reading{{"raw text", text}, {"JSON-unescaped text", j}, {"percent-decoded text", p},
		{"JSON-unescaped, then percent-decoded text", percentDecode(j)}, {"percent-decoded, then JSON-unescaped text", jsonUnescape(p)}}
}

var (
	base64Run = regexp.MustCompile(`[A-Za-z0-9+/_-]{8,}`)
	percent   = regexp.MustCompile(`%[0-9a-fA-F]{2}`)
)

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
	norm := bytes.Map(func(r rune) rune {
		switch r {
		case '-':
			return '+'
		case '_':
			return '/'
		}
		return r
	}, s[:n])
	out := make([]byte, base64.RawStdEncoding.DecodedLen(n))
	k, err := base64.RawStdEncoding.Decode(out, norm)
	if err != nil && k == 0 {
		return nil, false
	}
	return out[:k], true
}

func percentDecode(b []byte) []byte {
	return percent.ReplaceAllFunc(b, func(m []byte) []byte {
		v, _ := strconv.ParseUint(string(m[1:]), 16, 8)
		return []byte{byte(v)}
	})
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

func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
