package tools

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// naiveScrub is the oracle: every occurrence of every pattern (a folding
// one in any ASCII case, by foldEqual), found by
// brute force in the raw bytes and in the bytes as a plain left-to-right
// escape decoder reads them (mapped back to the bytes that spelled them),
// overlapping ones included, widened by a base64 core's lead and trail
// characters when they are base64 characters, merged with its neighbours when they overlap or touch, each
// merged range replaced by Mask.
func naiveScrub(secrets []string, body []byte) []byte {
	type iv struct{ s, e int }
	var ivs []iv
	pats := secretPatterns(secrets)
	for _, p := range pats {
		for i := 0; i+len(p.text) <= len(body); i++ {
			if foldEqual(body[i:i+len(p.text)], p) {
				s, e := i, i+len(p.text)
				if p.lead && s > 0 && isBase64(body[s-1]) {
					s--
				}
				if p.trail && e < len(body) && isBase64(body[e]) {
					e++
				}
				ivs = append(ivs, iv{s, e})
			}
		}
	}
	dec, from := naiveDecode(body)
	for _, p := range pats {
		for i := 0; i+len(p.text) <= len(dec); i++ {
			if foldEqual(dec[i:i+len(p.text)], p) {
				j := i + len(p.text)
				s, e := from[i].s, from[j-1].e
				if p.lead && i > 0 && isBase64(dec[i-1]) {
					s = from[i-1].s
				}
				if p.trail && j < len(dec) && isBase64(dec[j]) {
					e = from[j].e
				}
				ivs = append(ivs, iv{s, e})
			}
		}
	}
	if len(ivs) == 0 {
		return body
	}
	sort.Slice(ivs, func(a, b int) bool { return ivs[a].s < ivs[b].s })
	var merged []iv
	for _, x := range ivs {
		if n := len(merged); n > 0 && merged[n-1].e >= x.s {
			merged[n-1].e = max(merged[n-1].e, x.e)
			continue
		}
		merged = append(merged, x)
	}
	var out []byte
	prev := 0
	for _, m := range merged {
		out = append(out, body[prev:m.s]...)
		out = append(out, Mask...)
		prev = m.e
	}
	return append(out, body[prev:]...)
}

// foldEqual reports whether w spells p: byte for byte, and for a
// folding pattern with ASCII letters compared by strings.EqualFold (one
// byte at a time: the scrubber folds ASCII only, not the Kelvin sign).
func foldEqual(w []byte, p pattern) bool {
	if !p.fold {
		return string(w) == p.text
	}
	for i := range len(w) {
		a, b := w[i], p.text[i]
		if a != b && (a >= utf8.RuneSelf || b >= utf8.RuneSelf || !strings.EqualFold(string(rune(a)), string(rune(b)))) {
			return false
		}
	}
	return true
}

// naiveDecode decodes %XX and JSON's backslash escapes left to right,
// anything else being itself, and says which bytes of b spelled each
// decoded byte.
func naiveDecode(b []byte) ([]byte, []struct{ s, e int }) {
	var out []byte
	var from []struct{ s, e int }
	hex := func(c byte) bool { return strings.IndexByte("0123456789abcdefABCDEF", c) >= 0 }
	put := func(s, e int, x ...byte) {
		for _, c := range x {
			out = append(out, c)
			from = append(from, struct{ s, e int }{s, e})
		}
	}
	for i := 0; i < len(b); {
		switch {
		case b[i] == '%' && i+2 < len(b) && hex(b[i+1]) && hex(b[i+2]):
			v, _ := strconv.ParseUint(string(b[i+1:i+3]), 16, 8)
			put(i, i+3, byte(v))
			i += 3
		case b[i] == '\\' && i+5 < len(b) && b[i+1] == 'u' && hex(b[i+2]) && hex(b[i+3]) && hex(b[i+4]) && hex(b[i+5]):
			v, _ := strconv.ParseUint(string(b[i+2:i+6]), 16, 32)
			put(i, i+6, []byte(string(rune(v)))...)
			i += 6
		case b[i] == '\\' && i+1 < len(b) && strings.IndexByte(`"\\/bfnrt`, b[i+1]) >= 0:
			x := map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[b[i+1]]
			put(i, i+2, x)
			i += 2
		default:
			put(i, i+1, b[i])
			i++
		}
	}
	return out, from
}

// allEscaped is s with every character written as a \uXXXX escape (an
// encoder that escapes everything, or an upstream hiding a value).
func allEscaped(s, format string) string {
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		fmt.Fprintf(&b, format, u)
	}
	return b.String()
}

func TestScrubberForms(t *testing.T) {
	const tok = "tok/en+Secret&1<2>"
	user, pass := "alice", "pa55:word/x"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	s := NewScrubber(tok, pass, user+":"+pass, basic, "short")
	goJSON, _ := json.Marshal(tok)
	cases := map[string]string{
		"raw":                  "key " + tok + " end",
		"go json":              `{"echo":` + string(goJSON) + `}`,
		"php json":             `{"echo":"` + strings.ReplaceAll(tok, "/", `\/`) + `"}`,
		"query escaped":        "https://x/?api_key=" + url.QueryEscape(tok) + "&page=2",
		"query escaped, lower": "https://x/?api_key=" + lowerHex(url.QueryEscape(tok)) + "&page=2",
		"path escaped":         "/v1/" + url.PathEscape(tok) + "/x",
		"base64":               "X-Echo: " + base64.StdEncoding.EncodeToString([]byte(tok)),
		"base64 url":           "X-Echo: " + base64.URLEncoding.EncodeToString([]byte(tok)),
		"basic header":         "Authorization: Basic " + basic,
		"password":             "pass=" + pass,
		"json-escaped pass":    `"pass":"` + strings.ReplaceAll(pass, "/", `\/`) + `"`,
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			got := string(s.Bytes([]byte(body)))
			if !strings.Contains(got, Mask) {
				t.Errorf("nothing masked in %q: %q", body, got)
			}
			for _, f := range []string{tok, pass, basic, url.QueryEscape(tok), strings.ReplaceAll(tok, "/", `\/`)} {
				if strings.Contains(got, f) {
					t.Errorf("%q survives in %q", f, got)
				}
			}
		})
	}
	// A secret shorter than MinSecretLen is not masked on its own.
	if got := s.String("a short word"); got != "a short word" {
		t.Errorf("short secret masked: %q", got)
	}
}

func TestScrubberNoMatchIsNoCopy(t *testing.T) {
	s := NewScrubber("0123456789abcdef")
	b := []byte(strings.Repeat(`{"id":1,"name":"x"},`, 100))
	if got := s.Bytes(b); &got[0] != &b[0] {
		t.Error("a body without secrets was copied")
	}
	var nilS *Scrubber
	if got := nilS.String("x"); got != "x" {
		t.Errorf("nil scrubber: %q", got)
	}
}

func TestScrubberOverlapsMerge(t *testing.T) {
	s := NewScrubber("abcdefgh", "efghijkl", "xyzxyzxyz")
	for body, want := range map[string]string{
		"..abcdefghijkl..":    ".." + Mask + "..",
		"abcdefgh" + "efghij": Mask + "efghij",
		"abcdefghabcdefgh":    Mask,
		"xyzxyzxyzxyz":        Mask,
		"abcdefg":             "abcdefg",
	} {
		if got := s.String(body); got != want {
			t.Errorf("%q → %q, want %q", body, got, want)
		}
	}
}

func TestScrubberHeader(t *testing.T) {
	s := NewScrubber("sekret-token-1")
	h := http.Header{"Link": {`<https://x/?k=sekret-token-1&p=2>; rel="next"`}, "Content-Length": {"10"}, "X-Ok": {"fine"}}
	got := s.Header(h)
	if strings.Contains(got.Get("Link"), "sekret") || got.Get("Content-Length") != "" || got.Get("X-Ok") != "fine" {
		t.Errorf("scrubbed header = %v", got)
	}
	if h.Get("Link") == got.Get("Link") {
		t.Error("the input header was modified or not scrubbed")
	}
	clean := http.Header{"X-Ok": {"fine"}}
	if got := s.Header(clean); got.Get("X-Ok") != "fine" {
		t.Errorf("clean header = %v", got)
	}
}

func TestScrubberWith(t *testing.T) {
	base := NewScrubber("org-token-123")
	per := base.With("user-token-456")
	body := "org-token-123 user-token-456"
	if got := base.String(body); got != Mask+" user-token-456" {
		t.Errorf("base: %q", got)
	}
	if got := per.String(body); got != Mask+" "+Mask {
		t.Errorf("derived: %q", got)
	}
	if got := base.With().String(body); got != Mask+" user-token-456" {
		t.Errorf("With() changed the scrubber: %q", got)
	}
}

// writeChunks scrubs body through a ScrubWriter, cut at the given sizes.
func writeChunks(t testing.TB, s *Scrubber, body []byte, cuts []byte) []byte {
	var out bytes.Buffer
	w := s.Writer(&out)
	rest := body
	for i := 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(cuts) > 0 {
			n = min(n, int(cuts[i%len(cuts)])%7+1)
		}
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestScrubWriterSplitsSecrets(t *testing.T) {
	s := NewScrubber("split-me-please", "other-secret-99")
	body := []byte("head split-me-please mid other-secret-99other-secret-99 tail split-me-plea")
	want := naiveScrub([]string{"split-me-please", "other-secret-99"}, body)
	for size := 1; size <= len(body); size++ {
		if got := writeChunks(t, s, body, []byte{byte(size - 1)}); !bytes.Equal(got, want) {
			t.Fatalf("chunks of %d: %q, want %q", size, got, want)
		}
	}
}

// FuzzScrubber checks the automaton against the naive oracle, and the
// streaming writer (cut anywhere) against the one-shot result, on
// overlapping secrets, their encoded forms and bodies built from them.
func FuzzScrubber(f *testing.F) {
	f.Add("abcdefgh", "efghijkl", []byte("xxabcdefghijklyy"), []byte{3, 1, 4})
	f.Add("tok/en+1", "user:pa55word", []byte(`{"a":"tok\/en+1","b":"dXNlcjpwYTU1d29yZA=="}`), []byte{0})
	f.Add("aaaaaa", "aaaaab", []byte("aaaaaaaaaaaaab"), []byte{5, 0, 2})
	f.Add("s3cr3t%value", "x", []byte("q=s3cr3t%25value&b=s3cr3t%2525value"), []byte{1})
	f.Add("\x00\xff\x80binary", "é-unicode-é", []byte("\x00\xff\x80binary é-unicode-é \\u00e9-unicode"), []byte{6, 6})
	// Base64 inside a longer string, a mixed escaping, escapes of escapes.
	f.Add("ORGBEARER/Zq+7781aa", "MCPQSECRET/Zq+4444hh", []byte("QmVhcmVyIE9SR0JFQVJFUi9acSs3NzgxYWE= ?key=MCPQSECRET/Zq%2B4444hh&x"), []byte{2, 5})
	f.Add("abc%41defgh", "x\\y\"z12345", []byte(`abc%2541defgh "x\\y\"z12345" x\u005cy\u0022z12345 %%41 \\u0041`), []byte{1, 1})
	f.Add("AAAAAAAAAA", "AAAAAAAAAB", []byte("QUFBQUFBQUFBQUFB QUFBQUFBQUFBQg== %41%41AAAAAAAAB"), []byte{0, 3})
	// Secrets echoed in another case, raw, escaped and straddling cuts; a
	// short one (matched as written only) and one in the other's case.
	f.Add("Tok/En+Secret-1", "Abc123", []byte("x tok/en+secret-1 TOK%2FEN%2BSECRET-1 tOk\\/eN+sEcReT-1 abc123 ABC123 Abc123"), []byte{2, 5, 1})
	f.Add("CaseToken-01", "casetoken-01x", []byte("CASETOKEN-01X casetoken-01 \\u0043aseToken-01"), []byte{0, 6})
	f.Fuzz(func(t *testing.T, a, b string, body []byte, cuts []byte) {
		secrets := []string{a, b}
		s := NewScrubber(a).With(b)
		want := naiveScrub(secrets, body)
		got := s.Bytes(body)
		if !bytes.Equal(got, want) {
			t.Fatalf("Bytes(%q) with %q = %q, want %q", body, secrets, got, want)
		}
		if one := NewScrubber(a, b).Bytes(body); !bytes.Equal(one, want) {
			t.Fatalf("one automaton: %q, want %q", one, want)
		}
		if streamed := writeChunks(t, s, body, cuts); !bytes.Equal(streamed, want) {
			t.Fatalf("streamed in %v: %q, want %q", cuts, streamed, want)
		}
		for _, sec := range secrets {
			if len(sec) < MinSecretLen || strings.Contains(Mask, sec) || strings.ContainsAny(sec, "[]") {
				continue
			}
			if bytes.Contains(got, []byte(sec)) {
				t.Fatalf("%q survives in %q", sec, got)
			}
		}
	})
}

// A long secret (a kilobyte-long JWT as a runtime credential) costs
// memory linear in its length, not a table of states × bytes.
func TestScrubberSizeIsLinear(t *testing.T) {
	jwt := strings.Repeat("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.", 60) // 2.2 KB
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := NewScrubber(jwt)
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2<<20 {
		t.Errorf("a 2.2 KB secret's scrubber allocated %d bytes", grew)
	}
	if got := s.String("x " + jwt + " y"); got != "x "+Mask+" y" {
		t.Errorf("long secret: %.80q", got)
	}
}

// A secret written with every character as a \uXXXX escape (either hex
// case) decodes to the secret in any JSON parser, so it is masked too —
// and so stays masked when a client decodes and re-encodes the body
// (found by a hostile review through trawl call).
func TestScrubberFullyEscapedJSON(t *testing.T) {
	secret := "PLANTEDsecret/Tok+en=9xyz"
	s := NewScrubber(secret)
	for _, format := range []string{`\u%04x`, `\u%04X`} {
		body := []byte(`{"u":"` + allEscaped(secret, format) + `"}`)
		out := s.Bytes(body)
		var v map[string]string
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s: scrubbed body is not JSON: %v (%s)", format, err, out)
		}
		if strings.Contains(v["u"], secret) || strings.Contains(string(out), allEscaped(secret, format)) {
			t.Errorf("%s: the escaped secret passed: %s", format, out)
		}
	}
}
