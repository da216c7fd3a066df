package query

import (
	"bytes"
	"fmt"
	"testing"
)

// aggRows is the loop benchmark's workload (loop/aggregate_bench_test.go):
// order rows of about 230 bytes, the aggregate's fields first (front) or
// last (back), one after the other in one text as a stored result holds
// them.
func aggRows(n int, back bool) [][]byte {
	currencies := []string{"EUR", "USD", "GBP", "CHF", "SEK"}
	var text []byte
	ends := make([]int, n)
	for i := range n {
		total := fmt.Sprintf("%d.%02d", (i*7919)%100000, i%100)
		cur := currencies[(i*31)%len(currencies)]
		rest := fmt.Sprintf(`"id":"o_%06d","number":"A-%06d","status":"open","customer":{"id":"c_%d","name":"Customer %d","email":"c%d@example.com"},"created_at":"2025-03-%02dT10:00:00Z"`,
			i, i, i%4000, i%4000, i%4000, i%28+1)
		var b bytes.Buffer
		if back {
			fmt.Fprintf(&b, `{%s,"shipping":{"city":"Lyon","country":"FR"},"total":%s,"currency":%q}`, rest, total, cur)
		} else {
			fmt.Fprintf(&b, `{"total":%s,"currency":%q,%s,"shipping":{"city":"Lyon","country":"FR"}}`, total, cur, rest)
		}
		text = append(text, b.Bytes()...)
		ends[i] = len(text)
	}
	rows := make([][]byte, n)
	start := 0
	for i, end := range ends {
		rows[i] = text[start:end:end]
		start = end
	}
	return rows
}

// BenchmarkAggregateRows is the aggregate alone over 100,000 rows (group
// by currency; count, sum and avg of total) — RunRows, which splits
// the rows over the CPUs -cpu gives it: its process CPU per row, which a shared machine inflates
// less than wall time.
func BenchmarkAggregateRows(b *testing.B) {
	a, err := CompileAggregate(AggregateSpec{GroupBy: []string{"currency"},
		Metrics: []Metric{{Op: "count"}, {Op: "sum", Field: "total"}, {Op: "avg", Field: "total"}}})
	if err != nil {
		b.Fatal(err)
	}
	for _, variant := range []string{"front", "back"} {
		rows := aggRows(100_000, variant == "back")
		b.Run(variant, func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuTime()
			for b.Loop() {
				if _, err := a.RunRows(rows); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N*len(rows)), "cpu-ns/row")
		})
	}
}
