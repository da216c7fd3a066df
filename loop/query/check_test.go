package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// The checking pass (skipValue and the strict array split) against
// encoding/json, which decides what valid JSON is: on generated values,
// on every one of them broken in small ways, and on truncations at
// every byte. The arrays of objects spell their keys alike and many of
// their values at one length, as an API's pages do, so that the member
// memo of the array split (skipObjectMemo) is consulted, and the
// breakages land on bytes it would otherwise take on trust.

// checkAgainstJSON fails t when the package's checker and encoding/json
// disagree about doc, as a whole value or as an array split into
// elements (bare and as the member of an envelope).
func checkAgainstJSON(t *testing.T, doc []byte) {
	t.Helper()
	want := json.Valid(doc)
	if got := Valid(doc); got != want {
		t.Fatalf("Valid(%q) = %v, encoding/json says %v", doc, got, want)
	}
	if c := trimSpace(doc); len(c) == 0 || c[0] != '[' {
		return
	}
	var raws []json.RawMessage
	if want && json.Unmarshal(doc, &raws) != nil {
		t.Fatalf("encoding/json: %q valid but not an array", doc)
	}
	els, err := AppendElements(nil, doc)
	if (err == nil) != want {
		t.Fatalf("AppendElements(%q): error %v, encoding/json says valid %v", doc, err, want)
	}
	if want {
		sameElements(t, doc, els, raws)
	}
	env := append(append([]byte(`{"object":"list","data":`), doc...), `,"has_more":false}`...)
	els, err = AppendElementsAt(nil, env, "data")
	switch {
	case json.Valid(env):
		if err != nil {
			t.Fatalf("AppendElementsAt(%q): %v, encoding/json says valid", env, err)
		}
		sameElements(t, env, els, raws)
	case err == nil:
		// The envelope may be broken after the array (AppendElementsAt
		// checks the array only), never inside an element it returns.
		for _, el := range els {
			if !json.Valid(el) {
				t.Fatalf("AppendElementsAt(%q) returned the invalid element %q", env, el)
			}
		}
	}
}

func sameElements(t *testing.T, doc []byte, got [][]byte, want []json.RawMessage) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%q: %d elements, encoding/json finds %d", doc, len(got), len(want))
	}
	for k := range got {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("%q: element %d is %q, encoding/json finds %q", doc, k, got[k], want[k])
		}
	}
}

// genJSON writes random JSON values, valid unless a caller breaks them.
type genJSON struct {
	r *rand.Rand
}

var (
	genMemberKeys = []string{"id", "object", "status", "amount", "currency", "customer", "name",
		"email", "created", "tags", "note", "k", "", "sixteen_bytes_k", "fifteen_bytes_", "seventeen_bytes_k",
		`e\"sc`, `\u0069d`, "é", "a b"}
	genStrs = []string{"", "a", "paid", "eur", "ord_0000001", "2025-01-02T10:01:00Z", "Customer 12",
		`Line one\nline \"two\"`, `\\`, `\/`, `\b\f\n\r\t`, `\u00e9`, `\uD83D\uDE00`, `\ud83d`, `\uDE00x`,
		"é日本", "\xff\xfe", "\x80", `tab\there`, "exactly_8", "exactly8", "nine_char", "seven_c",
		strings.Repeat("x", 47), strings.Repeat("y", 48), strings.Repeat("z", 49), strings.Repeat("w", 70)}
	genNums = []string{"0", "-0", "1", "-1", "1001", "0.5", "-0.0", "1e5", "1E+5", "1e-5", "-1.5e-10",
		"123456789012345678901234567890", "9007199254740993", "1.0e+308", "5E0"}
	genSpaces = []string{"", "", "", " ", "\n", "\t", "\r\n "}
)

func (g genJSON) space(b *strings.Builder) {
	if g.r.IntN(8) == 0 {
		b.WriteString(genSpaces[g.r.IntN(len(genSpaces))])
	}
}

func (g genJSON) value(b *strings.Builder, depth int) {
	n := 6
	if depth > 2 {
		n = 3 // scalars only, deeper down
	}
	switch g.r.IntN(n) {
	case 0:
		b.WriteString(`"` + genStrs[g.r.IntN(len(genStrs))] + `"`)
	case 1:
		b.WriteString(genNums[g.r.IntN(len(genNums))])
	case 2:
		b.WriteString([]string{"true", "false", "null"}[g.r.IntN(3)])
	case 3:
		g.object(b, depth+1, nil)
	case 4:
		b.WriteByte('[')
		for k := g.r.IntN(4); k > 0; k-- {
			g.space(b)
			g.value(b, depth+1)
			g.space(b)
			if k > 1 {
				b.WriteByte(',')
			}
		}
		b.WriteByte(']')
	default:
		g.rows(b, depth+1)
	}
}

// object writes an object with the given keys (nil: random ones).
func (g genJSON) object(b *strings.Builder, depth int, keys []string) {
	if keys == nil {
		for k := g.r.IntN(5); k > 0; k-- {
			keys = append(keys, genMemberKeys[g.r.IntN(len(genMemberKeys))])
		}
	}
	b.WriteByte('{')
	for k, key := range keys {
		if k > 0 {
			b.WriteByte(',')
		}
		g.space(b)
		b.WriteString(`"` + key + `"`)
		g.space(b)
		b.WriteByte(':')
		g.space(b)
		g.value(b, depth)
		g.space(b)
	}
	b.WriteByte('}')
}

// rows writes an array of objects sharing one list of keys, as a page's
// items do; the values vary, often at one length.
func (g genJSON) rows(b *strings.Builder, depth int) {
	var keys []string
	for k := 1 + g.r.IntN(12); k > 0; k-- {
		keys = append(keys, genMemberKeys[g.r.IntN(len(genMemberKeys))])
	}
	b.WriteByte('[')
	for k := g.r.IntN(5); k >= 0; k-- {
		g.space(b)
		if g.r.IntN(6) == 0 {
			g.value(b, depth)
		} else {
			g.object(b, depth, keys)
		}
		if k > 0 {
			b.WriteByte(',')
		}
	}
	b.WriteByte(']')
}

// breakages are the bytes a broken value gets: the grammar's own, the
// ones a string must not hold, and bytes a number or a literal may.
const breakages = "\"\\{}[],: \x00\x01\x1f\x7f\x80\xffa0-eE+.unt/"

func TestCheckerAgainstEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 8))
	g := genJSON{r: r}
	n := 600
	if testing.Short() || raceEnabled {
		n = 30 // the checker has no goroutines for the race detector to watch
	}
	for range n {
		var b strings.Builder
		if r.IntN(2) == 0 {
			g.rows(&b, 0)
		} else {
			g.value(&b, 0)
		}
		doc := []byte(b.String())
		if !json.Valid(doc) {
			t.Fatalf("generated invalid JSON: %q", doc)
		}
		checkAgainstJSON(t, doc)
		for range 12 {
			checkAgainstJSON(t, mutate(r, doc))
		}
		if len(doc) < 400 {
			for k := range doc {
				checkAgainstJSON(t, doc[:k])
			}
		} else {
			for range 40 {
				checkAgainstJSON(t, doc[:r.IntN(len(doc))])
			}
		}
	}
}

// mutate breaks doc in one small way: a byte replaced, dropped or
// doubled, or a breakage byte inserted.
func mutate(r *rand.Rand, doc []byte) []byte {
	if len(doc) == 0 {
		return []byte{breakages[r.IntN(len(breakages))]}
	}
	out := bytes.Clone(doc)
	k := r.IntN(len(out))
	switch r.IntN(4) {
	case 0:
		out[k] = breakages[r.IntN(len(breakages))]
	case 1:
		out = append(out[:k], out[k+1:]...)
	case 2:
		out = append(out[:k+1], out[k:]...)
	default:
		out = append(out[:k], append([]byte{breakages[r.IntN(len(breakages))]}, out[k:]...)...)
	}
	return out
}

// TestCheckerMemoAdversarial: arrays whose objects spell a member the
// way the object before did up to the byte the memo would trust, then
// differ — in the key, in the value's length, inside the value, at the
// end of the input.
func TestCheckerMemoAdversarial(t *testing.T) {
	first := `{"id":"ord_0000001","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 40) + `","nest":{"a":"bb"}}`
	seconds := []string{
		`{"id":"ord_0000002","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 40) + `","nest":{"a":"bb"}}`,
		`{"id":"ord_000000\"","sixteen_bytes_k":"abcdefgh","note":"x","nest":{}}`,
		`{"id":"ord_000\\000","sixteen_bytes_k":"abcdefgh","note":"x","nest":{}}`,
		`{"id":"ord_000` + "\x01" + `000","sixteen_bytes_k":"abcdefgh","note":"x","nest":{}}`,
		`{"id":"ord_0000001x,"sixteen_bytes_k":"abcdefgh"}`,
		`{"id":"ord_000000","x":1}`,
		`{"id" :"ord_0000001","sixteen_bytes_k":1}`,
		`{"id"` + "\x00" + `"ord_0000001"}`,
		`{"id":"ord_0000001","sixteen_bytes_K":"abcdefgh"}`,
		`{"id":"ord_0000001","sixteen_bytes_k" "abcdefgh"}`,
		`{"id":"ord_0000001","sixteen_bytes_k":"abcdefg"h"}`,
		`{"id":"ord_0000001","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 39) + `\"","nest":{"a":"bb"}}`,
		`{"id":"ord_0000001","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 20) + "\n" + strings.Repeat("n", 19) + `","nest":{"a":"bb"}}`,
		`{"id":"ord_0000001","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 40) + `","nest":{"a":"b\"}}`,
		`{"id":"ord_0000001","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 40) + `"}`,
		`{"id":1,"sixteen_bytes_k":"abcdefgh"}`,
		`{"id":"ord_0000001"`,
		`{"id":"ord_0000001","sixteen_bytes_k":"abcdefgh","note":"` + strings.Repeat("n", 40),
		`{}`, `[]`, `"x"`, `{"id":"ord_0000001"}}`,
	}
	for _, second := range seconds {
		for _, sep := range []string{",", ", ", ",\n"} {
			doc := "[" + first + sep + second + sep + first + "]"
			checkAgainstJSON(t, []byte(doc))
			for k := len("[" + first); k <= len(doc); k++ {
				checkAgainstJSON(t, []byte(doc[:k]))
			}
		}
	}
}

// TestCheckerDeepNesting: nesting at encoding/json's bound and past it,
// inside an array of objects (the memo's path) and outside.
func TestCheckerDeepNesting(t *testing.T) {
	for _, depth := range []int{1, 2, 100, MaxDepth - 2, MaxDepth - 1, MaxDepth, MaxDepth + 1} {
		inner := strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
		for _, doc := range []string{inner, "[" + inner + "]", `[{"a":1},` + inner + "]", strings.Repeat("[", depth) + strings.Repeat("]", depth)} {
			checkAgainstJSON(t, []byte(doc))
			if t.Failed() {
				t.Fatalf("depth %d", depth)
			}
		}
	}
}

func FuzzChecker(f *testing.F) {
	g := genJSON{r: rand.New(rand.NewPCG(1, 2))}
	for range 40 {
		var b strings.Builder
		g.rows(&b, 0)
		f.Add([]byte(b.String()))
	}
	for _, s := range fuzzDocs {
		f.Add([]byte(s))
	}
	for _, s := range []string{`["\u12G4"]`, `["\x"]`, `[01]`, `[1.]`, `[.5]`, `[-]`, `[1e]`, `[+1]`, `[tru]`, `[nul]`,
		`[{"a":"\ud800"},{"a":"\udc00"}]`, "[\"\xed\xa0\x80\"]", `[{"k":1},{"k" :1},{"k":1 }]`, fmt.Sprintf("[%q]", "\x7f")} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkAgainstJSON(t, doc)
	})
}
