package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/trawl-dev/trawl/tools/leaktest"
)

// The case: an upstream base64-encodes the whole header it
// received. The characters that carry any bit of the secret are masked —
// the core and the one character on each side shared with a neighbour —
// and those that carry none are kept, at every alignment, in both
// alphabets, padded or not.
func TestScrubberBase64AtOffset(t *testing.T) {
	const secret = "ORGBEARER/Zq+7781aa"
	s := NewScrubber(secret)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		for pre := range 7 {
			for post := range 4 {
				plain := make([]byte, 0, pre+len(secret)+post)
				for range pre {
					plain = append(plain, byte(rng.IntN(256)))
				}
				plain = append(plain, secret...)
				for range post {
					plain = append(plain, byte(rng.IntN(256)))
				}
				e := enc.EncodeToString(plain)
				lo := pre * 8 / 6                   // first character with a bit of the secret
				hi := ((pre+len(secret))*8 + 5) / 6 // one past the last
				want := "x " + e[:lo] + Mask + e[hi:] + " y"
				if got := s.String("x " + e + " y"); got != want {
					t.Errorf("%d bytes before, %d after (%q): %q, want %q", pre, post, e, got, want)
				}
			}
		}
	}
	if e := base64.StdEncoding.EncodeToString([]byte("Bearer ORGBEARER/Zq+7781aa")); e != "QmVhcmVyIE9SR0JFQVJFUi9acSs3NzgxYWE=" ||
		s.String(e) != "QmVhcmVyI"+Mask+"=" {
		t.Errorf("the issue's header: %q → %q", e, s.String(e))
	}
}

// A URL secret written in any mix of raw and percent-encoded characters
// (either hex case), or of raw and JSON-escaped ones, is matched on its
// decoded form: every mix is masked, and only the secret.
func TestScrubberMixedEscapes(t *testing.T) {
	const secret = "MCPQSECRET/Zq+4444hh"
	s := NewScrubber(secret)
	rng := rand.New(rand.NewPCG(3, 4))
	spell := []func(c byte) string{
		func(c byte) string { return string(c) },
		func(c byte) string { return fmt.Sprintf("%%%02X", c) },
		func(c byte) string { return fmt.Sprintf("%%%02x", c) },
		func(c byte) string { return fmt.Sprintf(`\u%04x`, c) },
		func(c byte) string { return fmt.Sprintf(`\u%04X`, c) },
	}
	for i := range 300 {
		var b strings.Builder
		for j := range len(secret) {
			c := secret[j]
			switch {
			case i == 0: // the issue's: a raw '/' beside an encoded '+'
				if c == '+' {
					b.WriteString("%2B")
				} else {
					b.WriteByte(c)
				}
			case c == '/' && rng.IntN(3) == 0:
				b.WriteString(`\/`)
			default:
				b.WriteString(spell[rng.IntN(len(spell))](c))
			}
		}
		body := `{"url":"https://mcp.example/x?key=` + b.String() + `&page=2"}`
		want := `{"url":"https://mcp.example/x?key=` + Mask + `&page=2"}`
		if got := s.String(body); got != want {
			t.Fatalf("%q → %q", body, got)
		}
	}
}

// Whole headers and JSON dumps of headers, base64-encoded by an echoing
// upstream (Go's and PHP's JSON, query strings escaped), in both
// alphabets: no secret can be recovered from what is left.
func TestScrubberEncodedDumps(t *testing.T) {
	secrets := []string{"ORGBEARER/Zq+7781aa", "HDRKEY&<tok>+8e7d6c5b4a", "alice:pa55/word"}
	s := NewScrubber(secrets...)
	headers := map[string][]string{"Authorization": {"Bearer " + secrets[0]}, "X-Key": {secrets[1]},
		"X-Basic": {"Basic " + base64.StdEncoding.EncodeToString([]byte(secrets[2]))}}
	goDump, _ := json.Marshal(headers)
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	enc.Encode(headers)
	php := strings.ReplaceAll(plain.String(), "/", `\/`)
	query := "/v1/items?k=" + url.QueryEscape(secrets[1]) + "&a=" + url.QueryEscape(secrets[0]) + "&b=" + strings.ToLower(url.QueryEscape(secrets[0]))
	for name, text := range map[string]string{"go json": string(goDump), "plain json": plain.String(), "php json": php, "query": query} {
		for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawURLEncoding} {
			body := `{"echo":"` + e.EncodeToString([]byte(text)) + `"}`
			out := s.Bytes([]byte(body))
			if found := leaktest.FindAny(out, secrets...); len(found) > 0 {
				t.Errorf("%s: %v in %s", name, found, out)
			}
			if !json.Valid(out) {
				t.Errorf("%s: the scrubbed body is no longer JSON: %s", name, out)
			}
		}
	}
}

// The model's deltas, three characters at a time: a key split across
// them is masked, text that is no secret's prefix comes out at once
// (held back at most one byte), and characters are never cut.
func TestTextScrubberDeltas(t *testing.T) {
	const key = "MODELKEY/tok+5d4c3b2a1f"
	s := NewScrubber(key)
	text := "my key header is Bearer " + key + ", also é→ü " + url.QueryEscape(key) + " done"
	ts := s.Text()
	var out strings.Builder
	in := 0
	for i := 0; i < len(text); i += 3 {
		piece := text[i:min(i+3, len(text))]
		in += len(piece)
		got := ts.Next(piece)
		if !utf8.ValidString(got) {
			t.Fatalf("piece %q came out as %q: a character was cut", piece, got)
		}
		out.WriteString(got)
		if held := ts.w.Held(); i+3 < len("my key header is Bearer ")-len("MODE") && held > 1 {
			t.Errorf("after %q, %d bytes held back of clean text", text[:in], held)
		}
	}
	out.WriteString(ts.Flush())
	want := "my key header is Bearer " + Mask + ", also é→ü " + Mask + " done"
	if out.String() != want {
		t.Errorf("streamed %q, want %q", out.String(), want)
	}
}

// Every log record is scrubbed: the message, string and error attributes,
// groups and attributes given to With.
func TestScrubHandler(t *testing.T) {
	const key = "LOGKEY/tok+0123456789"
	var buf bytes.Buffer
	var s *Scrubber // not yet known when the logger is made
	log := slog.New(ScrubHandler(slog.NewJSONHandler(&buf, nil), func() *Scrubber { return s }))
	log.Info("before " + key)
	s = NewScrubber(key)
	log.With("url", "https://x/?k="+url.QueryEscape(key)).Info("key "+key, "err", fmt.Errorf("wrapped: %s", key),
		slog.Group("g", "v", base64.StdEncoding.EncodeToString([]byte("Bearer "+key))), "n", 7)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], key) {
		t.Fatalf("logs: %s", buf.String())
	}
	if found := leaktest.Find([]byte(lines[1]), key); len(found) > 0 || strings.Count(lines[1], Mask) != 4 || !strings.Contains(lines[1], `"n":7`) {
		t.Errorf("scrubbed line: %s (%v)", lines[1], found)
	}
}

// encodedForm spells secret as choice says, in one of the classes the
// scrubber masks, and reports whether the class is one it promises (a
// base64 of a mixed escaping is not).
func encodedForm(secret string, pre, post, choice []byte) (form string, promised bool) {
	pick := func(i int) byte {
		if len(choice) == 0 {
			return 0
		}
		return choice[i%len(choice)]
	}
	mixed := func() string {
		var b strings.Builder
		for i := range len(secret) {
			c := secret[i]
			k := pick(i + 1)
			if c == '%' || c == '\\' || c >= 0x80 { // what every encoder escapes; non-ASCII as percent-encoded UTF-8
				k = 1 + k%2
			}
			switch k % 5 {
			case 0:
				b.WriteByte(c)
			case 1:
				fmt.Fprintf(&b, "%%%02X", c)
			case 2:
				fmt.Fprintf(&b, "%%%02x", c)
			case 3:
				fmt.Fprintf(&b, `\u%04x`, c)
			default:
				if c == '/' {
					b.WriteString(`\/`)
				} else {
					fmt.Fprintf(&b, `\u%04X`, c)
				}
			}
		}
		return b.String()
	}
	wires := wireForms(secret)
	encs := []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding}
	switch pick(0) % 3 {
	case 0:
		return mixed(), true
	case 1:
		w := wires[int(pick(1))%len(wires)]
		return encs[int(pick(2))%len(encs)].EncodeToString(append(append(append([]byte{}, pre...), w...), post...)), true
	default:
		return base64.StdEncoding.EncodeToString(append(append(append([]byte{}, pre...), mixed()...), post...)), false
	}
}

// FuzzScrubberEncodings checks the scrubber against the naive oracle (and
// the streaming writer, cut anywhere, against the one-shot result) on
// secrets in the encoded forms: any mix of raw, percent- and JSON-escaped
// characters, and base64 of the secret's wire spellings inside a longer
// string at any alignment. Where the form is one the scrubber promises to
// mask, the independent hunter must recover nothing from the result.
func FuzzScrubberEncodings(f *testing.F) {
	f.Add("ORGBEARER/Zq+7781aa", []byte("Bearer "), []byte(""), []byte{1, 0, 0}, []byte{3})
	f.Add("MCPQSECRET/Zq+4444hh", []byte(""), []byte(""), []byte{0, 0, 1, 0, 0, 0, 2}, []byte{1, 2})
	f.Add("tok/en+Secret&1<2>", []byte(`{"X":["`), []byte(`"]}`), []byte{1, 3, 1}, []byte{0})
	f.Add("pa55%word\\x", []byte("ab"), []byte("c"), []byte{0, 4, 3, 2, 1}, []byte{5, 5})
	f.Add("é-unicode-secret", []byte("x"), []byte("yz"), []byte{2, 1, 1}, []byte{2})
	f.Fuzz(func(t *testing.T, secret string, pre, post, choice, cuts []byte) {
		if len(secret) > 64 || len(pre) > 16 || len(post) > 16 {
			return
		}
		form, promised := encodedForm(secret, pre, post, choice)
		body := []byte("<" + form + ">")
		s := NewScrubber(secret)
		want := naiveScrub([]string{secret}, body)
		got := s.Bytes(body)
		if !bytes.Equal(got, want) {
			t.Fatalf("Bytes(%q) for %q = %q, want %q", body, secret, got, want)
		}
		if streamed := writeChunks(t, s, body, cuts); !bytes.Equal(streamed, want) {
			t.Fatalf("streamed in %v: %q, want %q", cuts, streamed, want)
		}
		// (The hunter joins decoded runs with NULs: a secret holding one is
		// checked against the oracle only.)
		if !promised || len(secret) < MinSecretLen || !utf8.ValidString(secret) || strings.ContainsAny(secret, "[]\x00") {
			return
		}
		if found := leaktest.Find(got, secret); len(found) > 0 {
			t.Fatalf("%q recovered from %q (scrubbed from %q): %v", secret, got, body, found)
		}
	})
}
