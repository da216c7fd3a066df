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
// base64 of a mixed escaping is not). A mix of escapes also changes the
// case of the letters choice's high bits say (a secret shorter than
// MinFoldSecretLen is then not promised).
func encodedForm(secret string, pre, post, choice []byte) (form string, promised bool) {
	pick := func(i int) byte {
		if len(choice) == 0 {
			return 0
		}
		return choice[i%len(choice)]
	}
	changed := false
	mixed := func() string {
		var b strings.Builder
		for i := range len(secret) {
			c := secret[i]
			k := pick(i + 1)
			if k&0x80 != 0 && ('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				c ^= 0x20 // the other case
				changed = true
			}
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
		m := mixed()
		return m, !changed || len(secret) >= MinFoldSecretLen
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
	// Letters in the other case, raw and escaped.
	f.Add("MCPQSecret/Zq+4444hh", []byte(""), []byte(""), []byte{0, 0x80, 0x81, 0x82, 0x83, 0, 0x84}, []byte{3, 1})
	f.Add("Short1", []byte(""), []byte(""), []byte{0, 0x80, 0x80}, []byte{2})
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
		if found := leaktest.New(got).FindAnyCase(secret); len(found) > 0 && len(secret) >= MinFoldSecretLen {
			t.Fatalf("%q recovered in another case from %q (scrubbed from %q): %v", secret, got, body, found)
		}
		if found := leaktest.Find(got, secret); len(found) > 0 {
			t.Fatalf("%q recovered from %q (scrubbed from %q): %v", secret, got, body, found)
		}
	})
}

// caseForms are secret lower-cased, upper-cased, with every letter's case
// swapped, and in a random mix (an upstream that echoes a token in
// another case).
func caseForms(secret string, rng *rand.Rand) map[string]string {
	swap := func(keep func(i int) bool) string {
		b := []byte(secret)
		for i, c := range b {
			if keep(i) {
				continue
			}
			switch {
			case 'a' <= c && c <= 'z':
				b[i] = c - 'a' + 'A'
			case 'A' <= c && c <= 'Z':
				b[i] = c - 'A' + 'a'
			}
		}
		return string(b)
	}
	return map[string]string{
		"lower":   strings.ToLower(secret),
		"upper":   strings.ToUpper(secret),
		"swapped": swap(func(int) bool { return false }),
		"mixed":   swap(func(int) bool { return rng.IntN(2) == 0 }),
	}
}

// The hostile review's case: an upstream that echoes a secret lower- or
// upper-cased, or in any mix of cases, in every form the scrubber reads
// (raw, JSON-escaped, percent-encoded, any mix of those) gets it masked
// like the secret as written — one Mask, and nothing of it left for the
// hunter to find in any case.
func TestScrubberCaseChanged(t *testing.T) {
	const secret = "MCPQSecret/Zq+4444hh-tok"
	s := NewScrubber("unrelated-secret-0", secret)
	rng := rand.New(rand.NewPCG(5, 6))
	for name, c := range caseForms(secret, rng) {
		goJSON, _ := json.Marshal(c)
		forms := map[string]string{
			"raw":                  c,
			"go json":              string(goJSON[1 : len(goJSON)-1]),
			"php json":             strings.ReplaceAll(c, "/", `\/`),
			"every character \\u":  allEscaped(c, `\u%04X`),
			"query escaped":        url.QueryEscape(c),
			"query escaped, lower": lowerHex(url.QueryEscape(c)),
			"path escaped":         url.PathEscape(c),
			"every character %":    allEscaped(c, "%%%02x"),
		}
		var mixed strings.Builder // a random mix of raw, percent- and \u-escaped characters
		for i := range len(c) {
			switch rng.IntN(3) {
			case 0:
				mixed.WriteByte(c[i])
			case 1:
				fmt.Fprintf(&mixed, "%%%02X", c[i])
			default:
				fmt.Fprintf(&mixed, `\u%04x`, c[i])
			}
		}
		forms["mixed escapes"] = mixed.String()
		for form, f := range forms {
			body := `{"url":"https://x/?k=` + f + `&page=2"}`
			want := `{"url":"https://x/?k=` + Mask + `&page=2"}`
			got := s.String(body)
			if got != want {
				t.Errorf("%s, %s: %q → %q", name, form, body, got)
			}
			if found := leaktest.New([]byte(got)).FindAnyCase(secret); len(found) > 0 {
				t.Errorf("%s, %s: %v", name, form, found)
			}
		}
	}
}

// What case-insensitive matching leaves alone: a secret shorter than
// MinFoldSecretLen in another case (a 6-letter password would mask the
// word it spells), a non-ASCII letter's other case (only ASCII is
// folded: not the Kelvin sign for k), and the base64 of a case-changed
// secret, which is another string (the base64 of the secret as written is
// still masked).
func TestScrubberCaseLimits(t *testing.T) {
	s := NewScrubber("Summer", "Kelvin-token-9", "Ünïcode-Secret-1")
	for body, want := range map[string]string{
		"Summer summer SUMMER":                  Mask + " summer SUMMER",
		"kELVIN-TOKEN-9 \u212aelvin-token-9":    Mask + " \u212aelvin-token-9",
		"Ünïcode-secret-1 üNÏCODE-SECRET-1 ÜnÏ": Mask + " üNÏCODE-SECRET-1 ÜnÏ",
		"ÜNïCODE-SECRET-1":                      Mask,
	} {
		if got := s.String(body); got != want {
			t.Errorf("%q → %q, want %q", body, got, want)
		}
	}
	b64 := base64.StdEncoding.EncodeToString
	if got := s.String(b64([]byte("kelvin-token-9"))); strings.Contains(got, Mask) {
		t.Errorf("the base64 of a case-changed secret was masked: %q", got)
	}
	if got := s.String(b64([]byte("Kelvin-token-9"))); !strings.Contains(got, Mask) {
		t.Errorf("the base64 of the secret was not masked: %q", got)
	}
}

// A case-changed secret, raw or escaped, straddling every cut of a
// streamed body is masked like one written whole, by the streaming
// writer and by the model's text scrubber.
func TestScrubWriterCaseChangedSplits(t *testing.T) {
	const secret = "Split-Me/Please+42"
	s := NewScrubber(secret)
	body := []byte("head split-me/please+42 mid SPLIT-ME%2FPLEASE%2B42 sPlIt-mE\\/pLeAsE+42\\u0073PLIT-ME/PLEASE+42 tail SPLIT-ME/PLEAS")
	want := "head " + Mask + " mid " + Mask + " " + Mask + " tail SPLIT-ME/PLEAS"
	if got := string(s.Bytes(body)); got != want {
		t.Fatalf("Bytes: %q, want %q", got, want)
	}
	if got := naiveScrub([]string{secret}, body); string(got) != want {
		t.Fatalf("the oracle: %q, want %q", got, want)
	}
	for size := 1; size <= len(body); size++ {
		if got := writeChunks(t, s, body, []byte{byte(size - 1)}); string(got) != want {
			t.Fatalf("chunks of %d: %q, want %q", size, got, want)
		}
		ts := s.Text()
		var out strings.Builder
		for i := 0; i < len(body); i += size {
			out.WriteString(ts.Next(string(body[i:min(i+size, len(body))])))
		}
		if out.WriteString(ts.Flush()); out.String() != want {
			t.Fatalf("deltas of %d: %q, want %q", size, out.String(), want)
		}
	}
}
