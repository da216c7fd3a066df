package query

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestParseDec(t *testing.T) {
	tests := []struct {
		in          string
		text        string // appendDec of the result
		ok, inRange bool
	}{
		{"0", "0", true, true},
		{"-0.0", "0.0", true, true},
		{"12.50", "12.50", true, true},
		{"131895.2", "131895.2", true, true},
		{"1e3", "1000", true, true},
		{"1.5E-7", "0.00000015", true, true},
		{"2.5e+2", "250", true, true},
		{"+5", "5", true, true},
		{".5", "0.5", true, true},
		{"5.", "5", true, true},
		{"007", "7", true, true},
		{"9007199254740993", "9007199254740993", true, true},
		{"-123456789012345678901234567890.5", "-123456789012345678901234567890.5", true, true},
		{"0.1000000000000000000000000000001", "0.1000000000000000000000000000001", true, true},
		{"1e1000", "1" + strings.Repeat("0", 1000), true, true},
		{"1e1001", "", true, false},
		{"10e1000", "", true, false},
		{"1e-1000", "0." + strings.Repeat("0", 999) + "1", true, true},
		{"1e-1001", "", true, false},
		{"0e5000", "0", true, true},
		{"0e-1001", "", true, false},
		{"1e99999999999999999999", "", true, false},
		{"", "", false, false},
		{"-", "", false, false},
		{".", "", false, false},
		{"1.2.3", "", false, false},
		{"1e", "", false, false},
		{"12,50", "", false, false},
		{" 12", "", false, false},
		{"0x10", "", false, false},
	}
	for _, tt := range tests {
		d, ok, in := parseDec([]byte(tt.in))
		if ok != tt.ok || in != tt.inRange {
			t.Errorf("parseDec(%q) ok %v in range %v, want %v %v", tt.in, ok, in, tt.ok, tt.inRange)
			continue
		}
		if ok && in {
			if got := string(appendDec(nil, d)); got != tt.text {
				t.Errorf("parseDec(%q) = %q, want %q", tt.in, got, tt.text)
			}
		}
	}
}

// TestAccExact: sums cross from int64 to math/big and back to text
// without losing a digit, whatever the order of scales.
func TestAccExact(t *testing.T) {
	inputs := []string{"0.1", "0.2", "9223372036854775807", "1", "-0.000000000000000000001", "123456789012345678901234567890", "1e20", "-9223372036854775807.5"}
	var a acc
	want := new(big.Rat)
	for _, s := range inputs {
		d, _, _ := parseDec([]byte(s))
		a.add(d)
		r, _ := new(big.Rat).SetString(s)
		want.Add(want, r)
	}
	got := string(appendDec(nil, a.value()))
	if got != want.FloatString(21) {
		t.Errorf("sum %s, want %s", got, want.FloatString(21))
	}
	var b acc
	for _, s := range []string{"0.1", "0.2"} {
		d, _, _ := parseDec([]byte(s))
		b.add(d)
	}
	if got := string(appendDec(nil, b.value())); got != "0.3" {
		t.Errorf("0.1 + 0.2 = %s", got)
	}
}

func TestAvg(t *testing.T) {
	tests := []struct {
		sum  string
		n    int
		want string
	}{
		{"131895.20", 170, "775.85411764705882353"},
		{"2", 3, "0.66666666666666666667"},
		{"4.00", 2, "2"},
		{"2.50", 1, "2.5"},
		{"1.00000000000000000005", 1, "1"},                     // half: to the even 0
		{"1.00000000000000000015", 1, "1.0000000000000000002"}, // half: to the even 2
		{"1.000000000000000000051", 1, "1.0000000000000000001"},
		{"-7", 2, "-3.5"},
		// More integer digits than 20: rounded to a whole number, never
		// inside the integer part (the average of one row is its value).
		{"123456789012345678901234567890", 1, "123456789012345678901234567890"},
		{"12345678901234567890223", 3, "4115226300411522630074"},
		{"12345678901234567890225", 2, "6172839450617283945112"}, // half: to the even 2
		{"-12345678901234567890123.75", 1, "-12345678901234567890124"},
		{"99999999999999999999.5", 1, "100000000000000000000"},
		{"1e25", 3, "3333333333333333333333333"},
		{"0", 5, "0"},
	}
	for _, tt := range tests {
		d, _, _ := parseDec([]byte(tt.sum))
		if got := string(appendAvg(nil, d, tt.n)); got != tt.want {
			t.Errorf("avg(%s / %d) = %s, want %s", tt.sum, tt.n, got, tt.want)
		}
	}
}

func TestCmpDec(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"1.5", "1.50", 0}, {"1e3", "999.999", 1}, {"-1", "0", -1}, {"0", "-0.0", 0},
		{"123456789012345678901234567890", "123456789012345678901234567891", -1},
		{"1e-1000", "0", 1}, {"9223372036854775807", "9223372036854775806.9", 1},
	}
	for _, tt := range tests {
		a, _, _ := parseDec([]byte(tt.a))
		b, _, _ := parseDec([]byte(tt.b))
		if got := cmpDec(a, b); got != tt.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
		if got := cmpDec(b, a); got != -tt.want {
			t.Errorf("cmp(%s, %s) = %d, want %d", tt.b, tt.a, got, -tt.want)
		}
	}
}

// TestAggregateErrors: the parser names the member at fault.
func TestAggregateErrors(t *testing.T) {
	tests := []struct {
		spec, where, reason string
	}{
		{`[]`, "", "must be an object"},
		{`{"group":["a"]}`, "group", "unknown key; an aggregate has group_by, metrics, filter, having, order_by, limit"},
		{`{"group_by":[1]}`, "group_by", "element 0 is a number"},
		{`{"group_by":["a..b"]}`, "group_by[0]", "bad path"},
		{`{"group_by":["a","a"]}`, "group_by[1]", "given twice"},
		{`{"metrics":"count"}`, "metrics", "must be an array"},
		{`{"metrics":[{"op":"sum","feild":"total"}]}`, "metrics[0].feild", "unknown key; a metric has op, field, as"},
		{`{"metrics":[{"op":"median","field":"total"}]}`, "metrics[0].op", `unknown op "median" (ops: count, count_distinct, sum, avg, min, max)`},
		{`{"metrics":[{"field":"total"}]}`, "metrics[0].op", "is missing"},
		{`{"metrics":[{"op":"sum"}]}`, "metrics[0].field", "sum needs a field"},
		{`{"metrics":[{"op":"sum","field":2}]}`, "metrics[0].field", "must be a string, not a number"},
		{`{"metrics":[{"op":"count"},{"op":"count"}]}`, "metrics[1]", `the name "count" is given to two metrics`},
		{`{"group_by":["n"],"metrics":[{"op":"count","as":"n"}]}`, "metrics[0]", "also a group_by path"},
		{`{"filter":[{"field":"a","op":"eq","valu":1}]}`, "filter[0].valu", "unknown key"},
		{`{"filter":[{"field":"a","op":"like","value":1}]}`, "filter[0]", `unknown op "like"`},
		{`{"having":[{"field":"sum(x)","op":"gt","value":1}]}`, "having[0].field", `"sum(x)" is not a metric`},
		{`{"having":[{"field":"count","op":"contains","value":1}]}`, "having[0].op", "not a comparison"},
		{`{"having":[{"field":"count","op":"gt","value":"ten"}]}`, "having[0].value", "must be a number"},
		{`{"order_by":[{"field":"count","dir":"down"}]}`, "order_by[0].dir", `must be "asc" or "desc"`},
		{`{"order_by":[{"field":"total"}]}`, "order_by[0].field", "neither a metric (count) nor a group_by path"},
		{`{"order_by":[{"field":"count","by":"x"}]}`, "order_by[0].by", "unknown key"},
		{`{"limit":0}`, "limit", "at least 1"},
		{`{"limit":2.5}`, "limit", "whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			spec, err := ParseAggregate([]byte(tt.spec))
			if err == nil {
				_, err = CompileAggregate(spec)
			}
			ae, ok := err.(*AggregateError)
			if !ok {
				t.Fatalf("error %v (%T), want an *AggregateError", err, err)
			}
			if ae.Where != tt.where || !strings.Contains(ae.Reason, tt.reason) {
				t.Errorf("error at %q: %q; want at %q, saying %q", ae.Where, ae.Reason, tt.where, tt.reason)
			}
		})
	}
}

func runAggregate(t *testing.T, spec string, rows ...string) *AggregateResult {
	t.Helper()
	s, err := ParseAggregate([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	a, err := CompileAggregate(s)
	if err != nil {
		t.Fatal(err)
	}
	b := make([][]byte, len(rows))
	for i, r := range rows {
		b[i] = []byte(r)
	}
	res, err := a.RunRows(b)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestAggregateJSON fixes the shape a model reads.
func TestAggregateJSON(t *testing.T) {
	res := runAggregate(t, `{"group_by":["currency"],"metrics":[{"op":"count"},{"op":"sum","field":"total"},{"op":"avg","field":"total"}],"order_by":[{"field":"count","dir":"desc"}]}`,
		`{"currency":"EUR","total":0.1}`, `{"currency":"EUR","total":0.2}`, `{"currency":"EUR","total":null}`,
		`{"currency":"USD","total":"12.50"}`, `{"total":"n/a"}`)
	got := string(res.AppendJSON(nil, []Member{{Key: "over", Value: []byte(`"over all 5 rows (complete)"`)}}, 0))
	want := `{"over":"over all 5 rows (complete)","rows":5,"groupBy":["currency"],"groupCount":3,"groups":[` +
		`{"currency":"EUR","count":3,"sum(total)":"0.3","avg(total)":"0.15","_skipped":{"sum(total)":{"null":1,"missing":0,"not_a_number":0},"avg(total)":{"null":1,"missing":0,"not_a_number":0}}},` +
		`{"currency":"USD","count":1,"sum(total)":"12.50","avg(total)":"12.5"},` +
		`{"currency":null,"count":1,"sum(total)":null,"avg(total)":null,"_skipped":{"sum(total)":{"null":0,"missing":0,"not_a_number":1},"avg(total)":{"null":0,"missing":0,"not_a_number":1}}}],` +
		`"skipped":{"sum(total)":{"null":1,"missing":0,"not_a_number":1},"avg(total)":{"null":1,"missing":0,"not_a_number":1}},` +
		`"numericStrings":{"sum(total)":1,"avg(total)":1}}`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !json.Valid([]byte(got)) {
		t.Error("not valid JSON")
	}
	eur := res.Groups[0]
	if r := eur.Values[res.Metric("sum(total)")].Rat(); r == nil || r.Cmp(big.NewRat(3, 10)) != 0 {
		t.Errorf("typed sum %v, want 3/10", r)
	}
}

// TestAggregateRoom: groups that do not fit are left out, and the result
// says how many it shows.
func TestAggregateRoom(t *testing.T) {
	var rows []string
	for i := range 300 {
		rows = append(rows, `{"id":"`+strings.Repeat("x", 40)+string(rune('a'+i%26))+string(rune('a'+i/26))+`","v":1}`)
	}
	res := runAggregate(t, `{"group_by":["id"],"limit":500}`, rows...)
	if res.GroupCount != 300 || len(res.Groups) != 300 {
		t.Fatalf("%d groups, %d returned", res.GroupCount, len(res.Groups))
	}
	out := res.AppendJSON(nil, nil, 4000)
	if n := utf8.RuneCount(out); n > 4000 || !json.Valid(out) {
		t.Fatalf("%d characters, valid %v", n, json.Valid(out))
	}
	var v struct {
		Groups      []json.RawMessage
		GroupsShown int
		Note        string
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if v.GroupsShown != len(v.Groups) || v.GroupsShown == 0 || v.GroupsShown >= 300 || !strings.Contains(v.Note, "of the 300 groups fit") {
		t.Errorf("shown %d of %d groups, note %q", v.GroupsShown, len(v.Groups), v.Note)
	}
	limited := runAggregate(t, `{"group_by":["id"],"limit":2}`, rows...)
	var w struct {
		GroupsShown int
		Note        string
	}
	if err := json.Unmarshal(limited.AppendJSON(nil, nil, 0), &w); err != nil {
		t.Fatal(err)
	}
	if w.GroupsShown != 2 || !strings.Contains(w.Note, "first 2 of the 300 groups") {
		t.Errorf("limit 2: %+v", w)
	}
}

// TestAggregateUnmatched: a misspelt path is reported.
func TestAggregateUnmatched(t *testing.T) {
	res := runAggregate(t, `{"group_by":["curency"],"metrics":[{"op":"sum","field":"total"}]}`, `{"currency":"EUR","total":1}`)
	if diff := cmp.Diff([]string{"curency"}, res.Unmatched); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// FuzzAggregate: any rows give a result or an error, never a panic, and
// the result renders as valid JSON.
func FuzzAggregate(f *testing.F) {
	for _, seed := range []string{
		`[{"g":"a","v":1.5},{"g":"a","v":"2"},{"v":null},{"g":["x",1],"v":[1,[2,{"v":3}]]}]`,
		`[{"g":{"a":[1,2]},"v":1e1001},{"g":1.0,"v":-0.0},{"g":1,"v":"1e-5"},{"g":true}]`,
		`[1,"x",null,[{"g":1}],{"a":{"b":[{"c":1},{"c":"2.50"}]}}]`,
		`[{"v":123456789012345678901234567890123,"g":"\u00e9"},{"v":0.00000000000000000001,"g":"é"}]`,
	} {
		f.Add([]byte(seed))
	}
	spec := AggregateSpec{GroupBy: []string{"g", "a.b.c"}, Metrics: []Metric{
		{Op: "count"}, {Op: "count", Field: "v"}, {Op: "count_distinct", Field: "v"}, {Op: "sum", Field: "v"},
		{Op: "avg", Field: "v"}, {Op: "min", Field: "v"}, {Op: "max", Field: "a.b.c"},
	}, OrderBy: []OrderBy{{Field: "sum(v)", Dir: "desc"}}}
	a, err := CompileAggregate(spec)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		rows, err := Elements(doc)
		if err != nil {
			return
		}
		res, err := a.RunRows(rows)
		if err != nil {
			t.Fatalf("rows Elements accepted: %v", err)
		}
		if out := res.AppendJSON(nil, nil, 0); !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
	})
}
