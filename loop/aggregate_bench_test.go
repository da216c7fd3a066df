package loop

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// The aggregate benchmark's workload: 100,000 stored order rows of about
// 200 bytes (20 MB, what a walk at the default 24 MB byte budget can
// hold), grouped by currency with three metrics. In "front" the fields
// the aggregate reads come early in each row, as in the demo's orders; in
// "back" they come last, after a nested customer and an address, so each
// row is read to its end.
const aggBenchRows = 100_000

func aggBenchText(back bool) []byte {
	var b strings.Builder
	b.WriteString(`{"data":[`)
	currencies := []string{"EUR", "USD", "GBP", "CHF", "SEK"}
	for i := range aggBenchRows {
		if i > 0 {
			b.WriteByte(',')
		}
		total := fmt.Sprintf("%d.%02d", (i*7919)%100000, i%100)
		cur := currencies[(i*31)%len(currencies)]
		rest := fmt.Sprintf(`"id":"o_%06d","number":"A-%06d","status":"open","customer":{"id":"c_%d","name":"Customer %d","email":"c%d@example.com"},"created_at":"2025-03-%02dT10:00:00Z"`,
			i, i, i%4000, i%4000, i%4000, i%28+1)
		if back {
			fmt.Fprintf(&b, `{%s,"shipping":{"city":"Lyon","country":"FR"},"total":%s,"currency":%q}`, rest, total, cur)
		} else {
			fmt.Fprintf(&b, `{"total":%s,"currency":%q,%s,"shipping":{"city":"Lyon","country":"FR"}}`, total, cur, rest)
		}
	}
	b.WriteString(`]}`)
	return []byte(b.String())
}

const aggBenchArgs = `{"group_by":["currency"],"metrics":[{"op":"count"},{"op":"sum","field":"total"},{"op":"avg","field":"total"}]}`

// The same in jq: group_by, then count, sum and average per group.
const aggBenchJQ = `.data | group_by(.currency) | map({currency: .[0].currency, count: length, sum: (map(.total) | add), avg: ((map(.total) | add) / length)})`

// BenchmarkAggregate measures queryToolResult's aggregate over the
// 100,000 stored rows — the whole call, argument parsing and rendering
// included: its p50 over 31 calls, wall-clock, and against gojq's
// group_by on the same rows with decoding, in interleaved rounds of
// process CPU time (best of each). It first checks that both agree on
// the counts. Run it with -benchtime=1x.
func BenchmarkAggregate(b *testing.B) {
	for _, variant := range []string{"front", "back"} {
		b.Run(variant, func(b *testing.B) {
			text := aggBenchText(variant == "back")
			r := NewRetrieval(RetrievalOptions{})
			rec, err := NewStoredResult("acme.list_orders", text, "data")
			if err != nil {
				b.Fatal(err)
			}
			rec.Set = SetVerdict{Completion: Complete, Records: aggBenchRows}
			id, err := r.Keep(context.Background(), scope, rec)
			if err != nil {
				b.Fatal(err)
			}
			args := json.RawMessage(`{"resultId":"` + id + `","aggregate":` + aggBenchArgs + `}`)
			ours := func() []byte {
				out, err := r.Call(context.Background(), scope, QueryToolResult, args)
				if err != nil {
					b.Fatal(err)
				}
				return out
			}
			q, err := gojq.Parse(aggBenchJQ)
			if err != nil {
				b.Fatal(err)
			}
			code, err := gojq.Compile(q)
			if err != nil {
				b.Fatal(err)
			}
			theirs := func() any {
				var doc any
				if err := json.Unmarshal(text, &doc); err != nil {
					b.Fatal(err)
				}
				v, _ := code.Run(doc).Next()
				if err, ok := v.(error); ok {
					b.Fatal(err)
				}
				return v
			}
			agreeWithJQ(b, ours(), theirs())

			var p50, cpuOurs, cpuJQ time.Duration
			for b.Loop() {
				times := make([]time.Duration, 31)
				for i := range times {
					start := time.Now()
					ours()
					times[i] = time.Since(start)
				}
				slices.Sort(times)
				p50 = times[len(times)/2]
				for round := range 3 {
					runtime.GC()
					c := processCPU()
					ours()
					d := processCPU() - c
					if round == 0 || d < cpuOurs {
						cpuOurs = d
					}
					runtime.GC()
					c = processCPU()
					theirs()
					d = processCPU() - c
					if round == 0 || d < cpuJQ {
						cpuJQ = d
					}
				}
			}
			ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
			b.ReportMetric(ms(p50), "p50-ms")
			b.ReportMetric(ms(cpuOurs), "cpu-ms")
			b.ReportMetric(ms(cpuJQ), "gojq+decode-cpu-ms")
			b.ReportMetric(float64(cpuJQ)/float64(max(cpuOurs, 1)), "gojq/aggregate")
			b.ReportMetric(float64(len(text))/(1<<20), "MiB-stored")
		})
	}
}

// agreeWithJQ fails unless both give the same counts per currency and
// sums within float precision (gojq adds in float64).
func agreeWithJQ(tb testing.TB, ours []byte, theirs any) {
	tb.Helper()
	rep, ok, err := ReadAggregate(ours)
	if err != nil || !ok {
		tb.Fatalf("no aggregate: %v %.300s", err, ours)
	}
	list, _ := theirs.([]any)
	if len(list) != len(rep.Groups) {
		tb.Fatalf("%d groups, gojq %d", len(rep.Groups), len(list))
	}
	for _, g := range list {
		m := g.(map[string]any)
		found := false
		for _, og := range rep.Groups {
			var cur string
			json.Unmarshal(og.Key["currency"], &cur)
			if cur != m["currency"] {
				continue
			}
			found = true
			var sum float64
			fmt.Sscan(og.Values["sum(total)"], &sum)
			if og.Values["count"] != fmt.Sprint(m["count"]) || math.Abs(sum-m["sum"].(float64)) > 1e-6*sum {
				tb.Fatalf("%s: count %s sum %s; gojq %v %v", cur, og.Values["count"], og.Values["sum(total)"], m["count"], m["sum"])
			}
		}
		if !found {
			tb.Fatalf("gojq's group %v is not ours", m["currency"])
		}
	}
}

// BenchmarkAggregateCharacters reports what the model is sent for the
// demo's first question ("how many open orders worth more than 100, and
// how do they split by currency?"): the walk with the rows it would add
// up itself (_fields and _filter, as the demo asked before _aggregate),
// against the same walk with _aggregate, in characters.
func BenchmarkAggregateCharacters(b *testing.B) {
	srv := demo.NewServer(demo.Options{})
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	ts, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: base})
	if err != nil {
		b.Fatal(err)
	}
	cat := tools.NewCatalog()
	if err := cat.Add(ts...); err != nil {
		b.Fatal(err)
	}
	tool, _ := cat.Get("acme.list_orders")
	e := New(Options{Caller: tools.NewInvoker(tools.InvokerOptions{}), Results: NewRetrieval(RetrievalOptions{})})
	filter := []any{map[string]any{"field": "total", "op": "gt", "value": 100}}
	withRows := map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total", "currency", "customer.name"}, "_filter": filter}
	var spec any
	json.Unmarshal([]byte(`{"group_by":["currency"],"metrics":[{"op":"count"},{"op":"sum","field":"total"}],"order_by":[{"field":"count","dir":"desc"}]}`), &spec)
	withAggregate := map[string]any{"status": "open", "_all_pages": true, "_filter": filter, "_aggregate": spec}
	chars := func(args map[string]any) int {
		out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true}, Args: args})
		if err != nil {
			b.Fatal(err)
		}
		if out.Verdict.Completion != Complete || out.Truncated {
			b.Fatalf("the demo walk is %s (truncated %v)", out.Verdict.Completion, out.Truncated)
		}
		return utf8.RuneCount(out.View)
	}
	var rows, agg int
	for b.Loop() {
		rows, agg = chars(withRows), chars(withAggregate)
	}
	b.ReportMetric(float64(rows), "chars-with-rows")
	b.ReportMetric(float64(agg), "chars-with-aggregate")
	b.ReportMetric(float64(rows)/float64(agg), "ratio")
}
