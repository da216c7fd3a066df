package query

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// gen makes random JSON rows with the awkward parts a projection and a
// filter meet: escapes, unicode, duplicate and dotted keys, nested and
// mixed arrays, big and exact numbers, deep nesting, whitespace.
type gen struct{ r *rand.Rand }

var (
	passKeys    = []string{"a", "b", "c", "id", "a.b", "é", `k"q`, "x\\y", "0", "\u6771"}
	passStrings = []string{"x", "X", "paid", "", `"quoted"`, `back\slash`, "line\nbreak", "tab\t", "café", "東京", "\u0000", "\U0001F600", "12.50", "1", "2024-01-01", "\u2028"}
	passNumbers = []string{"0", "-0", "1", "1.5", "1.50", "-2", "250", "249.99", "1e2", "1E+2", "-1.5e-3",
		"123456789012345678901234567890", "9223372036854775807", "9223372036854775808", "1e400", "0.1"}
)

func (g gen) str(b []byte) []byte {
	s := passStrings[g.r.IntN(len(passStrings))]
	if g.r.IntN(4) == 0 {
		return AppendString(b, s) // the package's own escaping
	}
	// Some strings spelled with \u escapes, as other encoders write them.
	b = append(b, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', byte(c))
		case c < 0x20 || g.r.IntN(5) == 0 && c < 0x10000:
			b = fmt.Appendf(b, `\u%04x`, c)
		default:
			b = append(b, string(c)...)
		}
	}
	return append(b, '"')
}

func (g gen) space(b []byte) []byte {
	if g.r.IntN(8) == 0 {
		return append(b, " \n\t\r"[:1+g.r.IntN(4)]...)
	}
	return b
}

func (g gen) value(b []byte, depth int) []byte {
	b = g.space(b)
	k := g.r.IntN(10)
	if depth > 4 {
		k = g.r.IntN(5)
	}
	switch {
	case k == 0:
		b = append(b, []string{"true", "false", "null"}[g.r.IntN(3)]...)
	case k <= 2:
		b = append(b, passNumbers[g.r.IntN(len(passNumbers))]...)
	case k <= 4:
		b = g.str(b)
	case k <= 6:
		b = append(b, '[')
		for i, n := 0, g.r.IntN(4); i < n; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = g.value(b, depth+1)
		}
		b = append(g.space(b), ']')
	default:
		b = g.object(b, depth+1)
	}
	return g.space(b)
}

func (g gen) object(b []byte, depth int) []byte {
	b = append(b, '{')
	for i, n := 0, g.r.IntN(6); i < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.space(b)
		b = AppendString(b, passKeys[g.r.IntN(len(passKeys))]) // duplicates too
		b = append(g.space(b), ':')
		b = g.value(b, depth)
	}
	return append(g.space(b), '}')
}

func (g gen) row(b []byte) []byte {
	switch g.r.IntN(20) {
	case 0:
		return g.value(b, 3) // a scalar or an array row
	case 1:
		// Deeply nested: past the fast paths' stack buffers.
		n := 40 + g.r.IntN(200)
		b = append(b, `{"a":`...)
		for range n {
			b = append(b, `[{"b":`...)
		}
		b = g.value(b, 5)
		for range n {
			b = append(b, "}]"...)
		}
		return append(b, '}')
	}
	return g.object(b, 0)
}

func (g gen) page(rows int) []byte {
	b := []byte(`{"object":"list","data":[`)
	for i := range rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = g.row(b)
	}
	b = append(b, `],"has_more":true}`...)
	if g.r.IntN(15) == 0 {
		// A malformed page: a byte changed or the tail cut.
		if g.r.IntN(2) == 0 {
			const junk = "\"{}[],:\\x\x01"
			b[g.r.IntN(len(b))] = junk[g.r.IntN(len(junk))]
		} else {
			b = b[:g.r.IntN(len(b))]
		}
	}
	return b
}

var passPaths = []string{"a", "b", "c", "id", "a.b", "b.a", "a.b.c", `a\.b`, "é", `k"q`, "x\\\\y", "0", "a.0", "c.id.b", "\u6771", "a.b.a.b"}

func (g gen) fields() *Fields {
	if g.r.IntN(5) == 0 {
		return nil
	}
	paths := make([]string, 1+g.r.IntN(5))
	for i := range paths {
		paths[i] = passPaths[g.r.IntN(len(passPaths))]
	}
	f, err := CompileFields(paths)
	if err != nil {
		panic(err)
	}
	return f
}

func (g gen) filter() *Filter {
	if g.r.IntN(5) == 0 {
		return nil
	}
	ops := []string{"eq", "neq", "gt", "gte", "lt", "lte", "contains", "in", "exists"}
	vals := []any{"x", "X", "paid", 1, 1.5, "1.50", 250, nil, true, false, "café", "2024"}
	clauses := make([]Clause, g.r.IntN(4))
	for i := range clauses {
		c := Clause{Field: passPaths[g.r.IntN(len(passPaths))], Op: ops[g.r.IntN(len(ops))]}
		switch c.Op {
		case "in":
			c.Value = []any{vals[g.r.IntN(len(vals))], vals[g.r.IntN(len(vals))]}
		case "exists":
			c.Value = []any{nil, true, false}[g.r.IntN(3)]
		case "contains":
			c.Value = []any{"x", "a", "É", 5, "\""}[g.r.IntN(5)]
		default:
			c.Value = vals[g.r.IntN(len(vals))]
			if c.Op != "eq" && c.Op != "neq" {
				c.Value = []any{"x", 1, 1.5, "1.50", 250, "2024"}[g.r.IntN(6)]
			}
		}
		clauses[i] = c
	}
	f, err := CompileFilter(clauses)
	if err != nil {
		panic(fmt.Sprint(clauses, err))
	}
	return f
}

type runOut struct {
	rows [][]byte
	st   Stats
	err  string
}

func runResult(rows [][]byte, st Stats, err error) runOut {
	o := runOut{rows: rows, st: st}
	if err != nil {
		o.err = err.Error()
	}
	return o
}

func sameRun(t *testing.T, what string, got, want runOut) {
	t.Helper()
	if got.err != want.err || !reflect.DeepEqual(got.st, want.st) || len(got.rows) != len(want.rows) {
		t.Fatalf("%s: got %d rows %+v %q, Run gives %d rows %+v %q", what, len(got.rows), got.st, got.err, len(want.rows), want.st, want.err)
	}
	for i := range got.rows {
		if !bytes.Equal(got.rows[i], want.rows[i]) {
			t.Fatalf("%s: row %d is %q, Run gives %q", what, i, got.rows[i], want.rows[i])
		}
	}
}

// TestRunPagesIsRun: whatever the rows, fields and filter, the rows a
// Pass checked and worked page by page give through RunPages exactly what
// the plain path gives (AppendElementsAt, then Run): the same checked
// rows and errors, the same kept rows byte for byte, the same stats —
// also when the rows asked are a subset of the pages' (duplicates
// dropped), hold rows of no page, come in another order, or the pages
// are another Pass's.
func TestRunPagesIsRun(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	g := gen{r}
	rounds := 400
	if testing.Short() {
		rounds = 60
	}
	for round := range rounds {
		fields, filter := g.fields(), g.filter()
		pass := NewPass(fields, filter)
		var pages [][]byte
		for range 1 + r.IntN(4) {
			pages = append(pages, g.page(r.IntN(12)))
		}
		var plain, rows [][]byte
		var worked []*Page
		for pi, p := range pages {
			var perr, err error
			plain, perr = AppendElementsAt(plain, p, "data")
			var pg *Page
			rows, pg, err = pass.AppendElementsAt(rows, p, "data")
			if fmt.Sprint(err) != fmt.Sprint(perr) || len(rows) != len(plain) {
				t.Fatalf("round %d page %d: %d rows, %v; AppendElementsAt: %d rows, %v", round, pi, len(rows), err, len(plain), perr)
			}
			for i := range rows {
				if !bytes.Equal(rows[i], plain[i]) {
					t.Fatalf("round %d: row %d %q, AppendElementsAt %q", round, i, rows[i], plain[i])
				}
			}
			if (pg == nil) != (pass == nil || err != nil) {
				t.Fatalf("round %d page %d: page %v with pass %v and err %v", round, pi, pg != nil, pass != nil, err)
			}
			if pg != nil {
				worked = append(worked, pg)
			}
		}
		what := fmt.Sprintf("round %d (%d rows, %d pages worked)", round, len(rows), len(worked))
		if pass != nil && len(worked) == len(pages) {
			// Every row is found in the pages: their work is what is used.
			c := pageCursor{pages: worked}
			for i, row := range rows {
				if _, w := c.find(row); w == nil {
					t.Fatalf("%s: row %d not found in the pages", what, i)
				}
			}
		}
		want := runResult(Run(rows, fields, filter))
		sameRun(t, what, runResult(RunPages(rows, fields, filter, worked)), want)

		// Some rows dropped, as duplicates are.
		var sub [][]byte
		for _, row := range rows {
			if r.IntN(3) > 0 {
				sub = append(sub, row)
			}
		}
		sameRun(t, what+", a subset", runResult(RunPages(sub, fields, filter, worked)), runResult(Run(sub, fields, filter)))

		// Equal rows elsewhere in memory, a row twice, another order.
		mixed := append([][]byte(nil), sub...)
		if len(rows) > 0 {
			for range 3 {
				k := r.IntN(len(mixed) + 1)
				var row []byte
				switch r.IntN(3) {
				case 0:
					row = append([]byte(nil), rows[r.IntN(len(rows))]...) // a copy
				case 1:
					row = rows[r.IntN(len(rows))] // again, or out of order
				default:
					row = g.row(nil) // of no page
				}
				mixed = append(mixed[:k], append([][]byte{row}, mixed[k:]...)...)
			}
		}
		sameRun(t, what+", mixed", runResult(RunPages(mixed, fields, filter, worked)), runResult(Run(mixed, fields, filter)))

		// Pages of another pass are not used.
		other, otherFilter := g.fields(), g.filter()
		sameRun(t, what+", other fields", runResult(RunPages(rows, other, otherFilter, worked)), runResult(Run(rows, other, otherFilter)))
	}
}

// TestRunPagesBareArray: the same for a page that is the array itself.
func TestRunPagesBareArray(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 1))
	g := gen{r}
	for round := range 200 {
		fields, filter := g.fields(), g.filter()
		arr := []byte{'['}
		for i := range r.IntN(10) {
			if i > 0 {
				arr = append(arr, ',')
			}
			arr = g.row(arr)
		}
		arr = append(arr, ']')
		if r.IntN(10) == 0 {
			arr = append(arr, " x"...)
		}
		plain, perr := AppendElements(nil, arr)
		rows, pg, err := NewPass(fields, filter).AppendElements(nil, arr)
		if fmt.Sprint(err) != fmt.Sprint(perr) || len(rows) != len(plain) {
			t.Fatalf("round %d: %d rows %v, AppendElements %d rows %v", round, len(rows), err, len(plain), perr)
		}
		sameRun(t, fmt.Sprint("round ", round), runResult(RunPages(rows, fields, filter, []*Page{pg})), runResult(Run(rows, fields, filter)))
	}
}

// A projection of more than 64 paths, or nothing to do, needs no pass.
func TestNewPassNothingAhead(t *testing.T) {
	if NewPass(nil, nil) != nil {
		t.Error("a pass with neither fields nor filter")
	}
	empty, _ := CompileFilter(nil)
	if NewPass(nil, empty) != nil {
		t.Error("a pass for a filter of no clause")
	}
	paths := make([]string, maxPassPaths+1)
	for i := range paths {
		paths[i] = fmt.Sprintf("p%d", i)
	}
	wide, err := CompileFields(paths)
	if err != nil {
		t.Fatal(err)
	}
	if NewPass(wide, nil) != nil {
		t.Error("a pass for 65 paths")
	}
	var none *Pass
	rows, pg, err := none.AppendElementsAt(nil, []byte(`{"data":[1,{"a":2}]}`), "data")
	if err != nil || pg != nil || len(rows) != 2 {
		t.Errorf("nil pass: %q %v %v", rows, pg, err)
	}
}
