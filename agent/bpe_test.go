package agent

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/tools/demo"
)

// reference is tiktoken-go's own path for one encoding: its codec (split
// by regexp2, then merged) and its split pattern through regexp2 — the
// pattern is the one tiktoken-go registers its generated matcher for, so
// regexp2 runs that matcher, as the codec does.
type reference struct {
	enc   tokenizer.Encoding
	codec tokenizer.Codec
	split *regexp2.Regexp
	ours  *bpeEncoding
}

func references(t testing.TB) []reference {
	t.Helper()
	var refs []reference
	for _, c := range []struct {
		enc     tokenizer.Encoding
		pattern string
	}{{tokenizer.O200kBase, o200kPattern}, {tokenizer.Cl100kBase, cl100kPattern}} {
		codec, err := tokenizer.Get(c.enc)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, reference{enc: c.enc, codec: codec, split: regexp2.MustCompile(c.pattern, regexp2.None), ours: bpeCounter(c.enc).e.enc})
	}
	return refs
}

// pieces are regexp2's matches of the split pattern in text.
func (r reference) pieces(t testing.TB, text string) []string {
	t.Helper()
	var out []string
	m, err := r.split.FindStringMatch(text)
	for ; err == nil && m != nil; m, err = r.split.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// check holds our split and count of text to tiktoken-go's: the same
// pieces, the same tokens in each piece (the codec's tokens of the whole
// text, laid over the pieces), the same count.
func (r reference) check(t testing.TB, name, text string) {
	t.Helper()
	want := r.pieces(t, text)
	fixed := text
	if !utf8.ValidString(text) {
		fixed = string([]rune(text))
	}
	var got []string
	r.ours.split(fixed, func(p string) { got = append(got, p) })
	if !slices.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s, %s: pieces differ from regexp2's at piece %d (of %d / %d): ours %q, regexp2 %q (text %q)",
			r.enc, name, i, len(got), len(want), at2(got, i), at2(want, i), clip(text, 300))
	}
	_, toks, err := r.codec.Encode(text)
	if err != nil {
		t.Fatal(err)
	}
	k := 0
	for _, p := range want {
		n, rest := 0, p
		for rest != "" && k < len(toks) && strings.HasPrefix(rest, toks[k]) {
			rest = rest[len(toks[k]):]
			n, k = n+1, k+1
		}
		if rest != "" {
			t.Fatalf("%s, %s: the codec's tokens do not tile piece %q", r.enc, name, p)
		}
		if ours := r.ours.pieceTokens(p); ours != n {
			t.Fatalf("%s, %s: piece %q: %d tokens, the codec %d", r.enc, name, p, ours, n)
		}
	}
	if k != len(toks) {
		t.Fatalf("%s, %s: %d of the codec's %d tokens are outside the pieces", r.enc, name, len(toks)-k, len(toks))
	}
	n, err := r.codec.Count(text)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.ours.count(text); got != n {
		t.Fatalf("%s, %s: count %d, the codec %d", r.enc, name, got, n)
	}
}

func at2(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Every character's classes are the sets of tiktoken-go's generated
// matchers: the unicode package's categories as they test them, and for
// ASCII their bitmaps (which leave DEL out of both [^\r\n\p{L}\p{N}] and
// [^\s\p{L}\p{N}]).
func TestPretokenizerClasses(t *testing.T) {
	bitmap := func(r rune, lo, hi uint64) bool {
		if r < 64 {
			return lo&(1<<uint(r)) != 0
		}
		return hi&(1<<uint(r-64)) != 0
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		var c uint8
		if r < utf8.RuneSelf {
			c = asciiClass[r]
		} else {
			c = wideClass(r)
		}
		ln := unicode.In(r, unicode.L, unicode.N)
		want := map[uint8]bool{
			cS: unicode.IsSpace(r),
			cN: unicode.In(r, unicode.N),
			cL: unicode.In(r, unicode.L),
			cU: unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M),
			cW: unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M),
			cX: !ln,
			cP: !ln && !unicode.IsSpace(r),
		}
		if r < utf8.RuneSelf {
			want[cX] = bitmap(r, 0xfc00ffffffffdbff, 0x78000001f8000001)
			want[cP] = bitmap(r, 0xfc00fffeffffc1ff, 0x78000001f8000001)
		}
		for bit, w := range want {
			if (c&bit != 0) != w {
				t.Fatalf("U+%04X: class bit %d is %v, the matcher's set says %v", r, bit, c&bit != 0, w)
			}
		}
	}
}

// Texts where the split's branches meet: contractions, capitals and small
// letters sharing Lm/Lo/M, numbers in threes, symbols before line breaks
// and slashes, white space before a word, at the end, and around line
// breaks (where tiktoken-go's matcher stops at the first), DEL, bytes that
// are not UTF-8.
var pretokenizerEdges = []string{
	"", "a", " ", "\n", "'", "''", "'s", "'S", "'ſ", "'ſt", "'re", "'RE", "'rE", "'ve", "'ll", "'lL", "'l", "'d", "'m", "'x",
	"don't", "DON'T", "We'LL", "it'ſ", "o'clock", "rock'n'roll", "l'été",
	"HelloWorld", "helloWORLD", "ABC", "aBC", "ǅemal", "ʰello", "ʰ", "Aʰ", "Aʰb", "AʰB", "ʰʰA", "中文字", "A中", "é", "é",
	"a\u0301", "\u0301", " \u0301", "\u0301a", "A\u0301\u0301", "\u0301\u0301", "\u0301A", "x\u0301'S", "ऄ\u093e",
	"1", "12", "123", "1234", "1234567", "٣٤٥٦", "²³¹", "½", "Ⅻ", "a1", "1a", " 1", "$1", "1.5e10",
	"!", "!!", " !", "  !", "!\n", "!\n\n", "!\r\n", "!//", " .\n/\n/x", "a/b//c", "{\"id\":1}", "\"key\": \"value\",\n",
	"  ", "   a", " a", "\ta", "\t\ta", "a  ", "a \n", "a\n\n", "\n\n\n", "  \n  \nx", "\n \n", " \r\n \r\n ", "\r", "\r\r\n",
	"\u00a0a", "\u00a0\u00a0a", "\u3000x", "\u2028", "\u0085 ", "x\u000b\u000cy", "\x1c\x1d\x1e\x1f", "\x00\x01", "\x7f", "a\x7fb", "\x7f\x7f", " \x7f",
	"\xff", "a\xffb", "\xc3", "\xe2\x82", "é\xc3(", "\xed\xa0\x80", "\ufffd", "€ ©", "😀😀", "👩‍💻", "a\u200db",
	strings.Repeat("=", 300), strings.Repeat(" ", 300) + "x", strings.Repeat("ab", 200), strings.Repeat("9", 100),
	strings.Repeat("\n", 200), strings.Repeat("_", 97), strings.Repeat("漢", 120), strings.Repeat("é", 80),
}

func TestPretokenizerMatchesRegexp2(t *testing.T) {
	refs := references(t)
	t.Run("edges", func(t *testing.T) {
		for _, r := range refs {
			for i, s := range pretokenizerEdges {
				r.check(t, "edge "+string(rune('0'+i%10)), s)
				r.check(t, "edge in words", "Zz "+s+" zZ")
			}
		}
	})
	t.Run("random", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(27, 7))
		n := 3000
		if testing.Short() {
			n = 300
		}
		for i := range n {
			s := randomText(rng, 1+rng.IntN(60))
			for _, r := range refs {
				r.check(t, "random "+strings.Repeat("#", 0)+string(rune('a'+i%26)), s)
			}
		}
	})
	t.Run("demo", func(t *testing.T) {
		texts := map[string]string{"the demo's OpenAPI document": string(demo.Spec()), "the looping guidance": prompts.Text("looping")}
		srv := demo.NewServer(demo.Options{})
		for _, path := range []string{"/orders?per_page=100", "/customers?per_page=50", "/tickets", "/events", "/properties", "/properties/p_1/bookings?per_page=50", "/stats"} {
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
			body, _ := io.ReadAll(rec.Result().Body)
			if rec.Code != 200 || len(body) < 100 {
				t.Fatalf("GET %s: %d, %d bytes", path, rec.Code, len(body))
			}
			texts["GET "+path] = string(body)
		}
		for name, text := range texts {
			for _, r := range refs {
				r.check(t, name, text)
			}
		}
	})
	t.Run("vendor specs", func(t *testing.T) {
		dir := filepath.Join("..", "..", "shared", "specs")
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		if len(files) == 0 {
			t.Skip("../shared/specs not found beside the repository: the vendor OpenAPI documents are not tokenized")
		}
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			// The first 48 KB of each: regexp2 reads about 5 MB/s.
			text := string(data[:min(len(data), 48<<10)])
			for _, r := range refs {
				r.check(t, filepath.Base(f), text)
			}
		}
	})
}

// randomText strings n fragments drawn to meet the split's edges.
func randomText(rng *rand.Rand, n int) string {
	frags := []string{
		"a", "Z", "the", "The", "THE", "Hello", "camelCase", "snake_case", "'", "'s", "'T", "'re", "'LL", "'l", "'d", "'ſ", "'x",
		"0", "42", "1234", "٣", "²", "½", "Ⅻ", " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", "\u00a0", "\u3000", "\u0085", "\u2028", "\v", "\f",
		"!", ".", ",", ":", "\"", "{", "}", "[", "]", "/", "//", "-", "_", "=", "#", "@", "`", "~", "\\", "\x00", "\x1f", "\x7f",
		"é", "É", "ß", "ǅ", "ʰ", "ª", "中", "文", "あ", "Ж", "ж", "ع", "ऄ", "\u093e", "\u0301", "\u20dd", "€", "©", "😀", "\u200d", "\ufffd",
		"\xff", "\xc3", "\xe2\x82",
	}
	var b strings.Builder
	for range n {
		switch rng.IntN(12) {
		case 0: // any character at all
			r := rune(rng.IntN(unicode.MaxRune + 1))
			if !utf8.ValidRune(r) {
				r = 'q'
			}
			b.WriteRune(r)
		case 1: // a long run, for the heap merge
			b.WriteString(strings.Repeat(frags[rng.IntN(len(frags))], 1+rng.IntN(150)))
		default:
			b.WriteString(frags[rng.IntN(len(frags))])
		}
	}
	return b.String()
}

// FuzzTokenCount holds the split and the count of any text to
// tiktoken-go's, for both encodings.
func FuzzTokenCount(f *testing.F) {
	for _, s := range pretokenizerEdges {
		f.Add(s)
	}
	f.Add(`{"data":[{"id":"ord_0001","total":129.5,"currency":"EUR"}],"next":"/orders?page=2"}`)
	refs := references(f)
	f.Fuzz(func(t *testing.T, s string) {
		for _, r := range refs {
			r.check(t, "fuzz", s)
		}
	})
}

// The same rows counted by the regexp2 codec and by ours, for the ratio
// (bench/README.md, the long-thread row).
func BenchmarkTokenCount(b *testing.B) {
	srv := demo.NewServer(demo.Options{})
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest("GET", "/orders?per_page=100", nil))
	text := rec.Body.String()
	refs := references(b)
	for _, r := range refs[:1] {
		b.Run("tiktoken-go", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				r.codec.Count(text)
			}
		})
		b.Run("trawl", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				r.ours.count(text)
			}
		})
	}
	if diff := cmp.Diff(refs[0].ours.count(text), mustCount(b, refs[0].codec, text)); diff != "" {
		b.Fatal(diff)
	}
}

func mustCount(tb testing.TB, c tokenizer.Codec, text string) int {
	tb.Helper()
	n, err := c.Count(text)
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// The rank table holds every token of each encoding at the codec's id, and
// nothing else: each id the codec decodes is found at its rank, and texts
// that are not tokens — random text, tokens run together or cut short —
// are found exactly when a map of the decoded vocabulary has them.
func TestRankTableMatchesVocabulary(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 11))
	for _, r := range references(t) {
		vocab := map[string]uint32{}
		var toks []string
		for id, misses := uint(0), 0; misses < 1024; id++ {
			tok, err := r.codec.Decode([]uint{id})
			if err != nil {
				misses++
				continue
			}
			misses = 0
			vocab[tok] = uint32(id)
			toks = append(toks, tok)
		}
		if len(vocab) < 100_000 {
			t.Fatalf("%s: %d tokens decoded", r.enc, len(vocab))
		}
		for tok, id := range vocab {
			if got := r.ours.ranks.rank(tok); got != id {
				t.Fatalf("%s: rank of %q is %d, the codec's id %d", r.enc, tok, got, id)
			}
			if len(tok) == 2 && r.ours.rank(tok) != id {
				t.Fatalf("%s: the pair table's rank of %q is %d, the codec's id %d", r.enc, tok, r.ours.rank(tok), id)
			}
		}
		probe := func(s string) {
			want, ok := vocab[s]
			if !ok {
				want = noRank
			}
			if got := r.ours.ranks.rank(s); got != want {
				t.Fatalf("%s: rank of %q is %d, want %d", r.enc, s, got, want)
			}
			if len(s) == 2 && r.ours.rank(s) != want {
				t.Fatalf("%s: the pair table's rank of %q is %d, want %d", r.enc, s, r.ours.rank(s), want)
			}
		}
		n := 50_000
		if testing.Short() {
			n = 5_000
		}
		for range n {
			a, b := toks[rng.IntN(len(toks))], toks[rng.IntN(len(toks))]
			probe(a + b)
			if len(a) > 1 {
				probe(a[:len(a)-1])
				probe(a[1:])
			}
			probe(randomText(rng, 1+rng.IntN(3)))
			probe(string([]byte{byte(rng.IntN(256)), byte(rng.IntN(256))}))
		}
		probe("")
		probe(strings.Repeat("a", 300))
	}
}

// A long text is counted through the shared piece caches: its count is
// the sum of its pieces' counts merged afresh, whatever the caches held
// before — texts of rows that repeat their pieces, random texts whose
// pieces take over each other's slots, and pieces that differ from a
// cached one in a single byte or in their length only.
func TestPieceCacheCountsAsMerged(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 12))
	uncached := func(e *bpeEncoding, text string) int {
		n := 0
		e.split(text, func(p string) { n += e.pieceTokens(p) })
		return n
	}
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		e := bpeCounter(enc).e.enc
		var texts []string
		for i := range 40 {
			var b strings.Builder
			b.WriteString(`{"data":[`)
			for j := range 30 {
				fmt.Fprintf(&b, `{"id":%d,"status":"open","total":%d.%02d,"name":"Customer %d"},`, i*30+j, rng.IntN(100000), j, rng.IntN(1000))
			}
			b.WriteString(`],"_resultId":"r_` + fmt.Sprintf("%x", rng.Uint64()) + `"}`)
			texts = append(texts, b.String(), randomText(rng, 300+rng.IntN(400)))
		}
		// Pieces of one character repeated, whose keys differ by their
		// length only; one piece then its neighbours by a byte or a length.
		for _, c := range []string{"a", "=", "0", " ", "é"} {
			var b strings.Builder
			for range 20 {
				for n := 2; n <= maxCachedPiece+1; n++ {
					b.WriteString(strings.Repeat(c, n) + "\n")
				}
			}
			texts = append(texts, b.String())
		}
		word := "abcdefghijklmnopqrstuvwxyz"
		for n := 2; n <= maxCachedPiece+1; n++ {
			for k := range n {
				b := []byte(word[:n])
				b[k] = 'A' + byte(k)
				texts = append(texts, strings.Repeat(" "+word[:n]+" "+string(b)+" "+word[:n-1], 50))
			}
		}
		for _, text := range texts {
			if len(text) < pieceCacheMin {
				t.Fatalf("a text of %d bytes is not counted through the cache", len(text))
			}
			text = strings.ToValidUTF8(text, "\ufffd")
			if got, want := e.count(text), uncached(e, text); got != want {
				t.Fatalf("%s: %d tokens through the cache, %d merged afresh (text %q)", enc, got, want, clip(text, 200))
			}
		}
	}
}

// No two pieces of one length have the same key: keys of pieces that
// differ in one byte, or are a piece's prefix, all differ.
func TestPieceKeyIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 8))
	type key struct {
		lo, hi uint64
		n      int
	}
	for range 2000 {
		n := 1 + rng.IntN(maxCachedPiece)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		seen := map[key]string{}
		add := func(s string) {
			lo, hi := pieceKey(s)
			k := key{lo, hi, len(s)}
			if other, ok := seen[k]; ok && other != s {
				t.Fatalf("pieces %q and %q have one key", other, s)
			}
			seen[k] = s
		}
		add(string(b))
		for i := range b {
			c := slices.Clone(b)
			c[i] ^= byte(1 + rng.IntN(255))
			add(string(c))
			add(string(b[:i+1]))
		}
	}
}
