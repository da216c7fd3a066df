package redislimit_test

import (
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/limittest"
	"github.com/trawl-dev/trawl/tools/redislimit"
)

func TestRedisLimiter(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		n := 0
		limittest.Run(t, func(t *testing.T, clock tools.Clock, lease time.Duration) (tools.RateLimiter, tools.RateLimiter) {
			n++
			opt := redislimit.Options{Prefix: "t" + string(rune('a'+n%26)) + time.Now().Format("150405.000000") + ":",
				LimiterOptions: tools.LimiterOptions{Clock: clock, PermitLease: lease}}
			a := redislimit.New(srv.Universal(t), opt)
			b := redislimit.New(srv.Universal(t), opt) // another replica
			t.Cleanup(func() { a.Close(); b.Close() })
			return a, b
		})
	})
}
