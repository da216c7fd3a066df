package limittest_test

import (
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/limittest"
)

func TestMemoryLimiter(t *testing.T) {
	limittest.Run(t, func(t *testing.T, clock tools.Clock, lease time.Duration) (tools.RateLimiter, tools.RateLimiter) {
		l := tools.NewMemoryLimiter(tools.LimiterOptions{Clock: clock, PermitLease: lease})
		return l, l
	})
}
