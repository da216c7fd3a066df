package redislimit

import (
	"context"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
)

// The script run twice for one acquisition (go-redis sends a call again
// after a read timeout, though Redis may have run it) answers the second
// time as granted: its own permit is not a slot someone else holds.
func TestAGrantAskedAgainIsGranted(t *testing.T) {
	srv := redistest.Start(t)
	l := New(srv.Client(t), Options{Prefix: "again" + time.Now().Format("150405.000000") + ":"})
	t.Cleanup(func() { l.Close() })
	s := tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{Concurrency: 1}}
	keys := newScopeKeys(l.k)
	p, c := keys.add(s.Provider, s.Credential)
	args := []any{l.waitGrace().Microseconds(), time.Now().UnixMicro(), l.opt.PermitLease.Microseconds(), learnTTL, growDivisor, concCeiling, "a",
		int64(time.Second / time.Microsecond), "replica.1", p, c, "0", 1, 1, 0}
	for i := range 2 {
		res, err := script.Run(context.Background(), l.c, keys.keys, args...).StringSlice()
		if err != nil {
			t.Fatal(err)
		}
		if res[0] != "1" {
			t.Fatalf("call %d: code %s, want 1 (granted)", i+1, res[0])
		}
	}
}
