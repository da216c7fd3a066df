package redislog_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/redislog"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// BenchmarkAppendToRead: one run, one live reader; each op is one Append
// of a small text delta. Reports the append cost and the delay from
// before Append to the reader holding the event, for the in-process log
// and the Redis one on loopback, side by side.
func BenchmarkAppendToRead(b *testing.B) {
	srv := redistest.Start(b)
	c := srv.Client(b)
	logs := []struct {
		name string
		log  stream.EventLog
	}{
		{"memory", stream.NewMemoryLog(stream.MemoryLogOptions{})},
		{"redis", redislog.New(c, redislog.Options{Prefix: "bench:"})},
	}
	for _, l := range logs {
		b.Run(l.name, func(b *testing.B) {
			ctx := context.Background()
			run := fmt.Sprintf("run-%d", time.Now().UnixNano())
			if err := l.log.Open(ctx, run); err != nil {
				b.Fatal(err)
			}
			sent := make([]time.Time, b.N+1)
			delays := make([]time.Duration, 0, b.N)
			done := make(chan struct{})
			go func() {
				defer close(done)
				for ev, err := range l.log.Read(ctx, run, 0) {
					if err != nil {
						b.Error(err)
						return
					}
					delays = append(delays, time.Since(sent[ev.Seq]))
				}
			}()
			b.ResetTimer()
			for i := 1; i <= b.N; i++ {
				sent[i] = time.Now()
				if _, err := l.log.Append(ctx, run, stream.TextDelta{ID: "t", Delta: "a few words of text"}); err != nil {
					b.Fatal(err)
				}
				if i%64 == 0 {
					time.Sleep(time.Millisecond) // a run emits in bursts, not flat out
				}
			}
			b.StopTimer()
			if err := l.log.Close(ctx, run); err != nil {
				b.Fatal(err)
			}
			<-done
			slices.Sort(delays)
			pct := func(p float64) float64 {
				return float64(delays[min(len(delays)-1, int(p*float64(len(delays))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.5), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
		})
	}
}
