package web

import (
	"net"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools/demo"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func demoScript() []byte { return demo.ReplayScript() }

// waitFor polls cond for up to five seconds.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not met in time")
}
