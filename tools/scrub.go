package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Mask replaces every secret the scrubber finds.
const Mask = "[redacted]"

// MinSecretLen is the shortest secret a Scrubber masks. Shorter values
// (a 4-character password) would mask ordinary words everywhere; their
// encoded forms (a basic credential's base64) are still masked when long
// enough.
const MinSecretLen = 6

// MinFoldSecretLen is the shortest secret masked in any ASCII case (an
// upstream that echoes a token lower- or upper-cased). A shorter one is
// masked only as written: a 6- or 7-letter password matched in any case
// would mask the word it spells wherever it stands.
const MinFoldSecretLen = 8

// Scrubber masks secrets in bytes: every occurrence of a secret, in any
// form an upstream realistically echoes it in, becomes Mask. It is the
// deployment's one redactor: upstream and MCP answers, the model's errors
// and streamed output, the embeddings client's errors, the walker's error
// snippets and the logs all pass through it.
//
// The forms are the classes README's Security section lists:
//
//   - the secret itself, in any ASCII case (all lower, all upper, any
//     mix: letters are compared case-insensitively, other bytes exactly)
//     when it is at least MinFoldSecretLen long, else as written;
//   - escaped, in any mix of raw and escaped characters: percent-encoding
//     (%2F or %2f) and JSON escapes (\/, \", \\, \n…, \uXXXX in either
//     hex case). The input is matched twice in the same pass: as it is,
//     and as an escape decoder reads it (%XX and \-escapes decoded, left to
//     right), with matches mapped back to the bytes that spelled them —
//     in any ASCII case too, as the secret itself;
//   - base64 and base64url (padded or not) of the secret and of its JSON-
//     and URL-escaped spellings, standing alone or inside a longer encoded
//     string at any of the three byte alignments: what is matched is the
//     run of characters that encode the secret's bits alone, and the one
//     character on each side that mixes its bits with a neighbour's is
//     masked with it (the way secret scanners find base64 at an offset).
//     Base64 is matched exactly: the base64 of a case-changed secret is
//     another string, and is not recognised.
//
// Deliberate transformations (reversal, hex, encryption, base64 broken
// across lines, an escape of an escape) are not recognised.
// Overlapping and adjacent occurrences become one Mask, so no part of any
// secret survives.
//
// Matching is one pass over the input for all secrets at once, linear in
// its length whatever it holds (Aho–Corasick automata: one for the
// base64 cores, matched exactly, and one for the secrets themselves,
// read with ASCII letters lower-cased; runs of bytes
// that can start no secret are skipped with a two-byte filter, and the
// decoded reading costs nothing until an escape appears). A Scrubber is
// immutable and safe for concurrent use; With derives one that also masks
// more secrets.
type Scrubber struct {
	ms     []*matcher
	pairs  *pairFilter // union of the matchers' filters and the escapes
	window int         // longest pattern plus its leading character, in decoded bytes
}

// NewScrubber returns a scrubber for secrets (empty and shorter than
// MinSecretLen ones are skipped).
func NewScrubber(secrets ...string) *Scrubber {
	return (&Scrubber{}).With(secrets...)
}

// With returns a scrubber that masks s's secrets and these. The new
// secrets get an automaton of their own, run in the same pass, so
// deriving a per-call scrubber (a user's runtime credential) costs
// only the new secrets' size.
func (s *Scrubber) With(secrets ...string) *Scrubber {
	if s == nil {
		s = &Scrubber{}
	}
	var exact, fold []pattern
	for _, p := range secretPatterns(secrets) {
		if p.fold {
			fold = append(fold, p)
		} else {
			exact = append(exact, p)
		}
	}
	out := &Scrubber{ms: slices.Clip(s.ms), window: s.window, pairs: &pairFilter{}}
	for _, m := range []*matcher{newMatcher(exact, false), newMatcher(fold, true)} {
		if m != nil {
			out.ms = append(out.ms, m)
			out.window = max(out.window, m.window)
		}
	}
	if len(out.ms) == len(s.ms) {
		return s
	}
	out.pairs.setEscapes()
	for _, x := range out.ms {
		for i := range out.pairs {
			out.pairs[i] |= x.pairs[i]
		}
	}
	return out
}

// Empty reports whether s masks nothing.
func (s *Scrubber) Empty() bool { return s == nil || len(s.ms) == 0 }

// Bytes returns b with every secret masked. When b holds none, b itself
// is returned (no copy); otherwise a new slice.
func (s *Scrubber) Bytes(b []byte) []byte {
	if s.Empty() || len(b) == 0 {
		return b
	}
	var spans []span
	st := s.newScan()
	s.scan(b, 0, nil, st, &spans)
	st.finish(s, &spans)
	if len(spans) == 0 {
		return b
	}
	out := make([]byte, 0, len(b)+len(spans)*len(Mask))
	prev := int64(0)
	for _, sp := range spans {
		out = append(out, b[prev:sp.start]...)
		out = append(out, Mask...)
		prev = sp.end
	}
	return append(out, b[prev:]...)
}

// String is Bytes for a string.
func (s *Scrubber) String(text string) string {
	if s.Empty() || text == "" {
		return text
	}
	b := s.Bytes([]byte(text))
	return string(b)
}

// Header returns h with every value scrubbed: h itself when no value
// held a secret, else a copy. A Content-Length is dropped from a copy,
// since the body it described is scrubbed separately.
func (s *Scrubber) Header(h http.Header) http.Header {
	if s.Empty() || h == nil {
		return h
	}
	var out http.Header
	for k, vs := range h {
		for i, v := range vs {
			c := s.String(v)
			if c == v {
				continue
			}
			if out == nil {
				out = h.Clone()
				out.Del("Content-Length")
			}
			out[k][i] = c
		}
	}
	if out == nil {
		return h
	}
	return out
}

// pattern is one string the automaton looks for, in decoded bytes. lead
// and trail say that the character just before or after it carries some
// of the secret's bits (a base64 character shared with a neighbouring
// byte) and is masked with it. fold: it is matched in any ASCII case (its
// text is lower-cased).
type pattern struct {
	text        string
	lead, trail bool
	fold        bool
}

// secretPatterns is what the automaton looks for to find secrets, without
// duplicates: each secret (its escaped spellings are read through the
// decoder), and the base64 cores of each of its wire spellings.
func secretPatterns(secrets []string) []pattern {
	seen := map[pattern]bool{}
	var out []pattern
	add := func(p pattern) {
		if len(p.text) >= max(MinSecretLen, 2) && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, s := range secrets {
		if len(s) < MinSecretLen {
			// Too short to mask on its own; a longer encoding of it
			// (base64 of "user:pass") arrives as a secret of its own.
			continue
		}
		fold := len(s) >= MinFoldSecretLen && hasLetter(s)
		raw := func(t string) pattern {
			if fold {
				return pattern{text: asciiLower(t), fold: true}
			}
			return pattern{text: t}
		}
		add(raw(s))
		if strings.Contains(s, " ") {
			add(raw(strings.ReplaceAll(s, " ", "+"))) // a query's spelling of a space
		}
		for _, f := range wireForms(s) {
			for _, p := range base64Cores(f) {
				add(p)
			}
		}
	}
	return out
}

// hasLetter reports whether s holds an ASCII letter (whether matching it
// in any case matches more than s).
func hasLetter(s string) bool {
	for i := range len(s) {
		if asciiFold[s[i]] != s[i] || (s[i] >= 'a' && s[i] <= 'z') {
			return true
		}
	}
	return false
}

// asciiLower is s with its ASCII letters lower-cased (other bytes, UTF-8
// included, as they are).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = asciiFold[c]
	}
	return string(b)
}

// asciiFold maps an ASCII upper-case letter to its lower case and every
// other byte to itself.
var asciiFold = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	for c := 'A'; c <= 'Z'; c++ {
		t[c] = byte(c) + 'a' - 'A'
	}
	return t
}()

// wireForms are the spellings of s an upstream may base64-encode: s, its
// JSON string forms (Go's, with \u003c-style escapes; a plain encoder's;
// PHP's, with \/) and its URL-escaped forms (query and path, upper- and
// lower-case hex). Escaped forms need their own base64: base64 does not
// commute with escaping.
func wireForms(s string) []string {
	var forms []string
	for _, f := range []string{s, jsonString(s, true), jsonString(s, false), url.QueryEscape(s), url.PathEscape(s)} {
		forms = append(forms, f, lowerHex(f), strings.ReplaceAll(f, "/", `\/`))
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// jsonString is s as a JSON string's contents, with or without Go's HTML
// escapes.
func jsonString(s string, escapeHTML bool) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	q := strings.TrimSpace(b.String())
	return q[1 : len(q)-1]
}

// base64Cores are the patterns that find f base64-encoded (both
// alphabets) at each of the three byte alignments inside a longer encoded
// string. At alignment a, f's first byte shares a 3-byte group with a
// bytes before it: the characters encoding only those bytes are not part
// of the core, and the one mixing their bits with f's is its lead. At the
// end, the character mixing f's last bits with what follows is its trail.
// Padding holds no bits and is left alone.
func base64Cores(f string) []pattern {
	var out []pattern
	buf := make([]byte, 2+len(f))
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for a := range 3 {
			clear(buf[:a])
			copy(buf[a:], f)
			e := enc.EncodeToString(buf[:a+len(f)])
			p := pattern{text: e}
			if a > 0 {
				p.text, p.lead = p.text[a+1:], true
			}
			if (a+len(f))%3 != 0 {
				p.text, p.trail = p.text[:len(p.text)-1], true
			}
			out = append(out, p)
		}
	}
	return out
}

// lowerHex lower-cases the hex digits of %XX escapes.
func lowerHex(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			for j := i + 1; j <= i+2; j++ {
				if b[j] >= 'A' && b[j] <= 'F' {
					b[j] += 'a' - 'A'
				}
			}
			i += 2
		}
	}
	return string(b)
}

// scrubError masks secrets in an error's text. RefusedError and ArgError
// keep their types; any other error whose text changes becomes one that
// still matches the sentinels callers branch on (ErrUpstream,
// ErrMCPClosed, ErrRefused, context errors) but not the original's types,
// whose text would not be masked.
func scrubError(scrub *Scrubber, err error) error {
	var ae *ArgError
	var re *RefusedError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &re):
		return &RefusedError{Code: re.Code, Msg: scrub.String(re.Msg)}
	case errors.As(err, &ae):
		return &ArgError{Arg: scrub.String(ae.Arg), Msg: scrub.String(ae.Msg)}
	}
	return scrub.Error(err)
}

// Error returns err with its text scrubbed: err itself when the text
// holds no secret, else an error with the masked text that still matches
// the sentinels callers branch on (ErrUpstream, ErrMCPClosed, ErrRefused,
// context errors) but not the original's types or chain, whose text would
// not be masked.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.String(msg); clean != msg {
		return &scrubbedError{msg: clean, err: err}
	}
	return err
}

type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }

func (e *scrubbedError) Is(target error) bool {
	switch target {
	case ErrUpstream, ErrMCPClosed, ErrRefused, context.DeadlineExceeded, context.Canceled:
		return errors.Is(e.err, target)
	}
	return false
}
