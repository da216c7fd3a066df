package mcpserver

import "time"

// warmPool runs tool calls on goroutines kept from one call to the next.
// The SDK serves every request on a goroutine it starts for it, whose
// stack begins at the runtime's minimum; a tool call (the engine's walk,
// verdict and result) needs a deeper one, so on a new goroutine the stack
// is copied each time it doubles — on the stateless revision that is
// every call, about a tenth of a millisecond of CPU. A goroutine of the
// pool keeps the stack a call grew (the garbage collector may halve an
// idle one), and one idle for warmIdle ends.
type warmPool struct {
	work chan func() // unbuffered: a send succeeds only to an idle goroutine
}

// warmIdle is how long a goroutine of the pool waits for the next call.
const warmIdle = 30 * time.Second

func newWarmPool() *warmPool { return &warmPool{work: make(chan func())} }

// run calls f on a goroutine of the pool (a new one when none is idle)
// and returns when f has. As on the SDK's goroutine, a panic in f ends
// the process.
func (p *warmPool) run(f func()) {
	done := make(chan struct{})
	g := func() {
		defer close(done)
		f()
	}
	select {
	case p.work <- g:
	default:
		go p.serve(g)
	}
	<-done
}

// serve runs f, then each function sent to the pool, until none comes
// for warmIdle.
func (p *warmPool) serve(f func()) {
	idle := time.NewTimer(warmIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(warmIdle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		}
	}
}
