package paginate

import (
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Clock is the walker's source of time (tools.Clock, which the rate
// limiters share): budgets read Now, rate-limit waits and retry backoff
// call Sleep. It is injected so that tests never sleep; implementations
// must be safe for concurrent use: walks of one tool call share a Meter
// and a Clock. Nil in an options struct means tools.SystemClock().
type Clock = tools.Clock

// FakeClock is tools.FakeClock: Sleep advances the clock at once and
// records the wait, so tests assert a walk's waits without waiting.
type FakeClock = tools.FakeClock

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return tools.NewFakeClock(start) }
