package redislimit_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/redislimit"
)

// BenchmarkRoundTrips is the limiter's cost per upstream request: an
// acquisition and a release with an answer carrying X-RateLimit headers
// (the common case), one request after another as a walk makes them
// ("sequential") and from 8 walks at once ("parallel"), on the embedded
// limiter and on Redis (bench/README.md, "Rate limits").
func BenchmarkRoundTrips(b *testing.B) {
	srv := redistest.Start(b)
	answer := tools.Outcome{Status: 200, Header: http.Header{"X-Ratelimit-Limit": {"5000"}, "X-Ratelimit-Remaining": {"4000"}, "X-Ratelimit-Reset": {"3600"}}}
	s := tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{RequestsPerSecond: 1e6, Concurrency: 64}}
	for _, kind := range []string{"memory", "redis"} {
		// Each sub-benchmark its own keys: their quota (4,000 left, as
		// the answers say) is not spent by the one before.
		newLimiter := func(b *testing.B) (tools.RateLimiter, func() int64) {
			if kind == "memory" {
				return tools.NewMemoryLimiter(tools.LimiterOptions{}), func() int64 { return 0 }
			}
			l := redislimit.New(srv.Client(b), redislimit.Options{Prefix: "bench:" + b.Name() + ":"})
			b.Cleanup(func() { l.Close() })
			return l, l.RoundTrips
		}
		b.Run(kind+"/sequential", func(b *testing.B) {
			l, trips := newLimiter(b)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				p, err := l.Acquire(ctx, s)
				if err != nil {
					b.Fatal(err)
				}
				p.Release(answer)
			}
			b.ReportMetric(float64(trips())/float64(b.N), "round-trips/op")
		})
		b.Run(kind+"/parallel", func(b *testing.B) {
			l, trips := newLimiter(b)
			ctx := context.Background()
			b.SetParallelism(4) // 8 goroutines on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					p, err := l.Acquire(ctx, s)
					if err != nil {
						b.Error(err)
						return
					}
					p.Release(answer)
				}
			})
			b.ReportMetric(float64(trips())/float64(b.N), "round-trips/op")
		})
	}
}
