package query

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The oracle: a naive aggregate over fully decoded rows (encoding/json,
// numbers kept as text) with big.Rat arithmetic, written from the rules
// in Aggregate's documentation and sharing no code with it, so that the
// scanner, the decimal fast paths and the big fallbacks are checked
// against something that is obviously right.

type oracleObs struct {
	kind uint8 // obsValue, obsNull, obsMissing
	v    any
}

// oracleReach follows keys through a decoded value, mapping over arrays.
func oracleReach(v any, keys []string, out *[]oracleObs, arr *bool) {
	if len(keys) == 0 {
		switch x := v.(type) {
		case []any:
			*arr = true
			for _, e := range x {
				oracleReach(e, nil, out, arr)
			}
		case nil:
			*out = append(*out, oracleObs{kind: obsNull})
		default:
			*out = append(*out, oracleObs{kind: obsValue, v: v})
		}
		return
	}
	switch x := v.(type) {
	case map[string]any:
		c, ok := x[keys[0]]
		if !ok {
			*out = append(*out, oracleObs{kind: obsMissing})
			return
		}
		oracleReach(c, keys[1:], out, arr)
	case []any:
		*arr = true
		for _, e := range x {
			oracleReach(e, keys, out, arr)
		}
	case nil:
		*out = append(*out, oracleObs{kind: obsNull})
	default:
		*out = append(*out, oracleObs{kind: obsMissing})
	}
}

var numericStringRE = regexp.MustCompile(`^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// oracleInRange applies the documented range to a number's text: at most
// 1,000 decimal places and a magnitude below 10^1001.
func oracleInRange(text string) bool {
	t := strings.TrimLeft(text, "+-")
	mant, exp := t, 0
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		mant = t[:i]
		e := strings.TrimLeft(t[i+1:], "+")
		neg := strings.HasPrefix(e, "-")
		e = strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")
		if len(e) > 7 {
			e = "9999999"
		}
		if e != "" {
			exp, _ = strconv.Atoi(e)
		}
		if neg {
			exp = -exp
		}
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	e := exp - len(frac)
	if digits == "" {
		return e >= -1000
	}
	return e >= -1000 && e+len(digits)-1 <= 1000
}

type oracleNum struct {
	class   uint8 // numOK, numNaN, numOOR
	fromStr bool
	r       *big.Rat
	places  int // decimal places as written (exponent applied), at least 0
}

func oraclePlaces(text string) int {
	t := strings.TrimLeft(text, "+-")
	mant, exp := t, 0
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		mant = t[:i]
		exp, _ = strconv.Atoi(strings.TrimPrefix(t[i+1:], "+"))
	}
	_, frac, _ := strings.Cut(mant, ".")
	return max(0, len(frac)-exp)
}

func oracleNumber(v any) oracleNum {
	var text string
	var fromStr bool
	switch x := v.(type) {
	case json.Number:
		text = x.String()
	case string:
		if len(x) > 64 || !numericStringRE.MatchString(x) {
			return oracleNum{class: numNaN}
		}
		if _, err := strconv.ParseFloat(x, 64); err != nil {
			return oracleNum{class: numNaN}
		}
		text, fromStr = x, true
	default:
		return oracleNum{class: numNaN}
	}
	if !oracleInRange(text) {
		return oracleNum{class: numOOR, fromStr: fromStr}
	}
	r, ok := new(big.Rat).SetString(text)
	if !ok {
		panic("oracle: cannot read " + text)
	}
	return oracleNum{r: r, fromStr: fromStr, places: oraclePlaces(text)}
}

// oracleCanon is a text equal for equal JSON values: numbers by value,
// strings by content, composites by their JSON (generated composites are
// written with sorted keys, as json.Marshal writes them).
func oracleCanon(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return fmt.Sprint(x)
	case string:
		return "s:" + x
	case json.Number:
		if !oracleInRange(x.String()) {
			return "x:" + x.String()
		}
		r, _ := new(big.Rat).SetString(x.String())
		return "n:" + r.RatString()
	}
	b, _ := json.Marshal(v)
	return "j:" + string(b)
}

// oracleKey is a row's group key at one path, canonical.
func oracleKey(row any, keys []string) (string, any) {
	var out []oracleObs
	arr := false
	oracleReach(row, keys, &out, &arr)
	if !arr {
		for _, o := range out {
			if o.kind == obsValue {
				return oracleCanon(o.v), o.v
			}
		}
		return "null", nil
	}
	var parts []string
	var list []any
	for _, o := range out {
		if o.kind == obsValue {
			parts = append(parts, oracleCanon(o.v))
			list = append(list, o.v)
		} else {
			parts = append(parts, "null")
			list = append(list, nil)
		}
	}
	if list == nil {
		list = []any{}
	}
	return "l:[" + strings.Join(parts, "|") + "]", list
}

func oracleRank(v any) int {
	switch x := v.(type) {
	case json.Number:
		if !oracleInRange(x.String()) {
			return 1
		}
		return 0
	case string:
		return 2
	case bool:
		return 3
	case nil:
		return 5
	}
	return 4
}

func oracleCmpKey(a, b any) int {
	ra, rb := oracleRank(a), oracleRank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case json.Number:
		if ra == 0 {
			p, _ := new(big.Rat).SetString(x.String())
			q, _ := new(big.Rat).SetString(b.(json.Number).String())
			return p.Cmp(q)
		}
		return strings.Compare(x.String(), b.(json.Number).String())
	case string:
		return strings.Compare(x, b.(string))
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0
		case !x:
			return -1
		}
		return 1
	case nil:
		return 0
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return strings.Compare(string(ja), string(jb))
}

// oracleRound is q rounded half to even to 20 significant digits, or to
// a whole number when its integer part has more digits.
func oracleRound(q *big.Rat) *big.Rat {
	if q.Sign() == 0 {
		return new(big.Rat)
	}
	a := new(big.Rat).Abs(q)
	// p: 10^p <= a < 10^(p+1)
	p := 0
	ten := big.NewRat(10, 1)
	pow := func(n int) *big.Rat {
		if n >= 0 {
			return new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil))
		}
		return new(big.Rat).SetFrac(big.NewInt(1), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-n)), nil))
	}
	for a.Cmp(pow(p)) < 0 {
		p--
	}
	for a.Cmp(pow(p+1)) >= 0 {
		p++
	}
	_ = ten
	scaled := new(big.Rat).Mul(a, pow(max(19-p, 0)))
	n := new(big.Int).Quo(scaled.Num(), scaled.Denom())
	rest := new(big.Rat).Sub(scaled, new(big.Rat).SetInt(n))
	switch rest.Cmp(big.NewRat(1, 2)) {
	case 1:
		n.Add(n, big.NewInt(1))
	case 0:
		if n.Bit(0) == 1 {
			n.Add(n, big.NewInt(1))
		}
	}
	out := new(big.Rat).Mul(new(big.Rat).SetInt(n), pow(min(p-19, 0)))
	if q.Sign() < 0 {
		out.Neg(out)
	}
	return out
}

// oracleGroup is one expected group.
type oracleGroup struct {
	canon   []string
	key     []any
	rows    int
	values  []*big.Rat // nil: null
	sumText []string   // sums as written, "" otherwise
	skipped []Skipped
	strs    []int
}

type oracleResult struct {
	rows       int
	groupCount int
	groups     []oracleGroup
	skipped    []Skipped
	strs       []int
	unmatched  []string
}

func oracleAggregate(t *testing.T, spec AggregateSpec, rows [][]byte) oracleResult {
	t.Helper()
	metrics := spec.Metrics
	if len(metrics) == 0 {
		metrics = []Metric{{Op: "count"}}
	}
	var filter *Filter
	if len(spec.Filter) > 0 {
		var err error
		if filter, err = CompileFilter(spec.Filter); err != nil {
			t.Fatal(err)
		}
	}
	type state struct {
		oracleGroup
		count  []int
		sums   []*big.Rat
		places []int
		ext    []*big.Rat
		sets   []map[string]bool
	}
	groups := map[string]*state{}
	var order []string
	res := oracleResult{skipped: make([]Skipped, len(metrics)), strs: make([]int, len(metrics))}
	hit := map[string]bool{}
	split := func(p string) []string { k, _ := SplitPath(p); return k }
	for _, raw := range rows {
		if filter != nil && !filter.Match(raw) {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var row any
		if err := d.Decode(&row); err != nil {
			t.Fatal(err)
		}
		res.rows++
		var canon []string
		var key []any
		for _, g := range spec.GroupBy {
			c, v := oracleKey(row, split(g))
			canon = append(canon, c)
			key = append(key, v)
		}
		id := strings.Join(canon, "\x00")
		st := groups[id]
		if st == nil {
			st = &state{oracleGroup: oracleGroup{canon: canon, key: key, skipped: make([]Skipped, len(metrics)), strs: make([]int, len(metrics))},
				count: make([]int, len(metrics)), sums: make([]*big.Rat, len(metrics)), places: make([]int, len(metrics)),
				ext: make([]*big.Rat, len(metrics)), sets: make([]map[string]bool, len(metrics))}
			groups[id] = st
			order = append(order, id)
		}
		st.rows++
		for _, p := range append(append([]string{}, spec.GroupBy...), fieldsOf(metrics)...) {
			var out []oracleObs
			arr := false
			oracleReach(row, split(p), &out, &arr)
			for _, o := range out {
				if o.kind != obsMissing {
					hit[p] = true
				}
			}
		}
		for mi, m := range metrics {
			if m.Field == "" {
				st.count[mi]++
				continue
			}
			var out []oracleObs
			arr := false
			oracleReach(row, split(m.Field), &out, &arr)
			for _, o := range out {
				switch o.kind {
				case obsNull:
					st.skipped[mi].Null++
					continue
				case obsMissing:
					st.skipped[mi].Missing++
					continue
				}
				switch m.Op {
				case "count":
					st.count[mi]++
					continue
				case "count_distinct":
					if st.sets[mi] == nil {
						st.sets[mi] = map[string]bool{}
					}
					st.sets[mi][oracleCanon(o.v)] = true
					continue
				}
				n := oracleNumber(o.v)
				if n.fromStr && n.class != numNaN {
					st.strs[mi]++
				}
				switch n.class {
				case numNaN:
					st.skipped[mi].NotANumber++
					continue
				case numOOR:
					st.skipped[mi].OutOfRange++
					continue
				}
				st.count[mi]++
				switch m.Op {
				case "sum", "avg":
					if st.sums[mi] == nil {
						st.sums[mi] = new(big.Rat)
					}
					st.sums[mi].Add(st.sums[mi], n.r)
					st.places[mi] = max(st.places[mi], n.places)
				case "min":
					if st.ext[mi] == nil || n.r.Cmp(st.ext[mi]) < 0 {
						st.ext[mi] = n.r
					}
				case "max":
					if st.ext[mi] == nil || n.r.Cmp(st.ext[mi]) > 0 {
						st.ext[mi] = n.r
					}
				}
			}
		}
	}
	if len(spec.GroupBy) == 0 && len(groups) == 0 {
		groups[""] = &state{oracleGroup: oracleGroup{skipped: make([]Skipped, len(metrics)), strs: make([]int, len(metrics))},
			count: make([]int, len(metrics)), sums: make([]*big.Rat, len(metrics)), places: make([]int, len(metrics)),
			ext: make([]*big.Rat, len(metrics)), sets: make([]map[string]bool, len(metrics))}
		order = append(order, "")
	}
	var all []oracleGroup
	for _, id := range order {
		st := groups[id]
		g := st.oracleGroup
		g.values = make([]*big.Rat, len(metrics))
		g.sumText = make([]string, len(metrics))
		for mi, m := range metrics {
			res.skipped[mi].add(st.skipped[mi])
			res.strs[mi] += st.strs[mi]
			switch m.Op {
			case "count":
				g.values[mi] = big.NewRat(int64(st.count[mi]), 1)
			case "count_distinct":
				g.values[mi] = big.NewRat(int64(len(st.sets[mi])), 1)
			case "sum":
				if st.sums[mi] != nil {
					g.values[mi] = st.sums[mi]
					g.sumText[mi] = st.sums[mi].FloatString(st.places[mi])
				}
			case "avg":
				if st.sums[mi] != nil {
					g.values[mi] = oracleRound(new(big.Rat).Quo(st.sums[mi], big.NewRat(int64(st.count[mi]), 1)))
				}
			default:
				g.values[mi] = st.ext[mi]
			}
		}
		keep := true
		for _, h := range spec.Having {
			mi := metricIndex(metrics, h.Field)
			v := g.values[mi]
			want, _ := new(big.Rat).SetString(fmt.Sprint(h.Value))
			if v == nil {
				keep = false
				break
			}
			c := v.Cmp(want)
			ok := map[string]bool{"eq": c == 0, "neq": c != 0, "gt": c > 0, "gte": c >= 0, "lt": c < 0, "lte": c <= 0}[h.Op]
			if !ok {
				keep = false
				break
			}
		}
		if keep {
			all = append(all, g)
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		x, y := all[i], all[j]
		for _, o := range spec.OrderBy {
			var c int
			if mi := metricIndex(metrics, o.Field); mi >= 0 {
				xv, yv := x.values[mi], y.values[mi]
				switch {
				case xv == nil && yv == nil:
					continue
				case xv == nil:
					return false
				case yv == nil:
					return true
				}
				c = xv.Cmp(yv)
			} else {
				k := indexOf(spec.GroupBy, o.Field)
				xv, yv := x.key[k], y.key[k]
				switch {
				case xv == nil && yv == nil:
					continue
				case xv == nil:
					return false
				case yv == nil:
					return true
				}
				c = oracleCmpKey(xv, yv)
			}
			if o.Dir == "desc" {
				c = -c
			}
			if c != 0 {
				return c < 0
			}
		}
		for k := range x.key {
			if c := oracleCmpKey(x.key[k], y.key[k]); c != 0 {
				return c < 0
			}
		}
		return false
	})
	res.groupCount = len(all)
	limit := spec.Limit
	if limit == 0 {
		limit = DefaultAggregateLimit
	}
	res.groups = all[:min(len(all), limit)]
	if res.rows > 0 {
		for _, p := range append(append([]string{}, spec.GroupBy...), fieldsOf(metrics)...) {
			if !hit[p] && indexOf(res.unmatched, p) < 0 {
				res.unmatched = append(res.unmatched, p)
			}
		}
	}
	return res
}

func fieldsOf(ms []Metric) []string {
	var out []string
	for _, m := range ms {
		if m.Field != "" {
			out = append(out, m.Field)
		}
	}
	return out
}

func metricIndex(ms []Metric, name string) int {
	for i, m := range ms {
		n := m.As
		if n == "" {
			n = m.Op
			if m.Field != "" {
				n += "(" + m.Field + ")"
			}
		}
		if n == name {
			return i
		}
	}
	return -1
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// Generated rows: every case the issue names.

var genGroupValues = []string{`"EUR"`, `"\u0045UR"`, `1.50`, `15e-1`, `"USD"`, `"GBP"`, `"GBP"`, `null`, `1`, `1.0`, `"1"`, `true`, `"caf\u00e9"`, `"café"`, `["a","b"]`, `[]`, `{"k":1}`}

var genNumbers = []string{
	`0`, `1`, `-1`, `0.1`, `0.2`, `0.3`, `12.50`, `100.00`, `-0.0`, `775.85`, `131895.2`,
	`9007199254740993`, `-9007199254740993`, `123456789012345678901234567890`, `99999999999999999999.99`,
	`0.1000000000000000000000000000001`, `1e3`, `1.5E-7`, `2.5e+2`, `4e1000`, `1e1001`, `1e-1000`, `1e-1001`, `0e-1001`, `0e5000`,
	`"12.50"`, `"-3"`, `"+5"`, `".5"`, `"5."`, `"1e2"`, `"n/a"`, `""`, `" 12"`, `"12,50"`, `"0x10"`, `"Infinity"`,
	`true`, `false`, `null`, `{"amount":1}`, `[1,"2",null]`, `[]`, `[[1.5],[2.5]]`,
	`9223372036854775807`, `9223372036854775808`, `-9223372036854775808`, `999999999999999999`, `0.000000000000000001`,
	`0.05`, `-0.00`, `123456789012345678`, `1234567890123456789`, `12.345678901234567`, `-99999999999999999.9`, `5E0`,
}

func genRow(r *rand.Rand) []byte {
	var b strings.Builder
	b.WriteByte('{')
	n := 0
	member := func(k, v string) {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		key := strconv.Quote(k)
		if r.IntN(10) == 0 { // the same key, spelt with an escape
			key = fmt.Sprintf(`"\u%04x%s`, k[0], key[2:])
		}
		space := ""
		if r.IntN(8) == 0 {
			space = " \n\t"
		}
		b.WriteString(space + key + space + ":" + space + v + space)
	}
	pick := func(list []string) string { return list[r.IntN(len(list))] }
	if r.IntN(6) > 0 {
		member("g", pick(genGroupValues))
	}
	member("id", strconv.Itoa(r.IntN(1000)))
	if r.IntN(8) > 0 {
		member("v", pick(genNumbers))
	}
	switch r.IntN(6) {
	case 0:
	case 1:
		member("a", `null`)
	case 2:
		member("a", `5`)
	case 3:
		member("a", fmt.Sprintf(`{"b":%s,"c":%s}`, pick(genNumbers), pick(genGroupValues)))
	default:
		var items []string
		for range r.IntN(4) {
			switch r.IntN(4) {
			case 0:
				items = append(items, `{}`)
			case 1:
				items = append(items, `null`)
			default:
				items = append(items, fmt.Sprintf(`{"b":%s}`, pick(genNumbers)))
			}
		}
		member("a", "["+strings.Join(items, ",")+"]")
	}
	if r.IntN(3) == 0 {
		member("note", `"x \"quoted\" \\ y"`)
	}
	b.WriteByte('}')
	return []byte(b.String())
}

var genMetrics = []Metric{
	{Op: "count"}, {Op: "count", Field: "v"}, {Op: "count_distinct", Field: "v"}, {Op: "count_distinct", Field: "g"},
	{Op: "sum", Field: "v"}, {Op: "avg", Field: "v"}, {Op: "min", Field: "v"}, {Op: "max", Field: "v"},
	{Op: "sum", Field: "a.b"}, {Op: "avg", Field: "a.b"}, {Op: "max", Field: "a.b"}, {Op: "count", Field: "a.b"},
	{Op: "sum", Field: "nope"},
}

func genSpec(r *rand.Rand) AggregateSpec {
	var s AggregateSpec
	switch r.IntN(6) {
	case 0:
	case 1:
		s.GroupBy = []string{"g", "a.c"}
	case 2:
		s.GroupBy = []string{"a.b"}
	case 3:
		s.GroupBy = []string{"absent"}
	default:
		s.GroupBy = []string{"g"}
	}
	perm := r.Perm(len(genMetrics))
	for _, i := range perm[:1+r.IntN(5)] {
		s.Metrics = append(s.Metrics, genMetrics[i])
	}
	switch r.IntN(5) {
	case 0:
		s.Filter = []Clause{{Field: "v", Op: "exists"}}
	case 1:
		s.Filter = []Clause{{Field: "id", Op: "gt", Value: 2000}} // matches nothing: empty groups
	}
	if r.IntN(4) == 0 {
		s.Having = []Clause{{Field: metricName(s.Metrics[0]), Op: []string{"gt", "gte", "lt", "neq"}[r.IntN(4)], Value: json.Number("1")}}
	}
	if r.IntN(2) == 0 {
		s.OrderBy = []OrderBy{{Field: metricName(s.Metrics[r.IntN(len(s.Metrics))]), Dir: []string{"asc", "desc"}[r.IntN(2)]}}
	}
	if r.IntN(4) == 0 {
		s.Limit = 1 + r.IntN(4)
	}
	return s
}

func metricName(m Metric) string {
	if m.Field == "" {
		return m.Op
	}
	return m.Op + "(" + m.Field + ")"
}

func TestAggregateAgainstOracle(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 2026))
	runs := 1000
	if raceEnabled {
		runs = 150
	}
	for run := range runs {
		rows := make([][]byte, r.IntN(60))
		for i := range rows {
			rows[i] = genRow(r)
		}
		spec := genSpec(r)
		name := fmt.Sprintf("run %d", run)
		a, err := CompileAggregate(spec)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := a.RunRows(rows)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := oracleAggregate(t, spec, rows)
		compareOracle(t, name, spec, rows, got, want)
	}
}

func compareOracle(t *testing.T, name string, spec AggregateSpec, rows [][]byte, got *AggregateResult, want oracleResult) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		b, _ := json.Marshal(spec)
		t.Errorf("%s: %s\nspec %s\nrows:\n%s", name, fmt.Sprintf(format, args...), b, bytes.Join(rows, []byte("\n")))
	}
	if got.Rows != want.rows || got.GroupCount != want.groupCount || len(got.Groups) != len(want.groups) {
		fail("rows %d groups %d shown %d, want %d, %d, %d", got.Rows, got.GroupCount, len(got.Groups), want.rows, want.groupCount, len(want.groups))
		return
	}
	if diff := cmp.Diff(want.skipped, got.Skipped); diff != "" {
		fail("skipped (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.strs, got.NumericStrings); diff != "" {
		fail("numeric strings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want.unmatched, got.Unmatched); diff != "" {
		fail("unmatched (-want +got):\n%s", diff)
	}
	for gi, wg := range want.groups {
		gg := got.Groups[gi]
		var canon []string
		for _, k := range gg.Key {
			d := json.NewDecoder(strings.NewReader(k))
			d.UseNumber()
			var v any
			if err := d.Decode(&v); err != nil {
				fail("group %d key %q: %v", gi, k, err)
				return
			}
			if list, ok := v.([]any); ok {
				var parts []string
				for _, e := range list {
					parts = append(parts, oracleCanon(e))
				}
				canon = append(canon, "l:["+strings.Join(parts, "|")+"]")
			} else {
				canon = append(canon, oracleCanon(v))
			}
		}
		if diff := cmp.Diff(wg.canon, canon); diff != "" {
			fail("group %d key (-want +got):\n%s", gi, diff)
			return
		}
		if gg.Rows != wg.rows {
			fail("group %d rows %d, want %d", gi, gg.Rows, wg.rows)
		}
		if diff := cmp.Diff(wg.skipped, gg.Skipped); diff != "" {
			fail("group %d skipped (-want +got):\n%s", gi, diff)
		}
		for mi, wv := range wg.values {
			gv := gg.Values[mi]
			switch {
			case wv == nil && gv.Null():
			case wv == nil || gv.Null():
				fail("group %d metric %s = %q, want %v", gi, got.Metrics[mi].Name, gv.Text, wv)
			case gv.Rat().Cmp(wv) != 0:
				fail("group %d metric %s = %s, want %s", gi, got.Metrics[mi].Name, gv.Text, wv.FloatString(30))
			case wg.sumText[mi] != "" && gv.Text != wg.sumText[mi]:
				fail("group %d metric %s written %q, want %q (the largest scale of its numbers)", gi, got.Metrics[mi].Name, gv.Text, wg.sumText[mi])
			case got.Metrics[mi].Op == "avg" && strings.Contains(gv.Text, ".") && strings.HasSuffix(gv.Text, "0"):
				fail("group %d avg %q ends in a zero after the point", gi, gv.Text)
			}
		}
	}
}

// TestAggregateParallelIsRun: many rows are aggregated in chunks at
// once; the merged result is exactly the one pass's, and the oracle's.
func TestAggregateParallelIsRun(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	r := rand.New(rand.NewPCG(7, 11))
	rows := make([][]byte, 2*parallelRows+17)
	for i := range rows {
		rows[i] = genRow(r)
	}
	specs := 6
	if raceEnabled {
		specs = 2
	}
	for run := range specs {
		spec := genSpec(r)
		spec.Limit = MaxAggregateLimit
		a, err := CompileAggregate(spec)
		if err != nil {
			t.Fatal(err)
		}
		par, err := a.RunRows(rows)
		if err != nil {
			t.Fatal(err)
		}
		seq, err := a.Run(slices.Values(rows))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(seq, par); diff != "" {
			b, _ := json.Marshal(spec)
			t.Errorf("run %d, spec %s: chunked (-one pass +chunks):\n%s", run, b, diff)
		}
		if run == 0 && !raceEnabled {
			compareOracle(t, fmt.Sprintf("parallel run %d", run), spec, rows[:0], par, oracleAggregate(t, spec, rows))
		}
	}
}
