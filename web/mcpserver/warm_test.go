package mcpserver

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"
)

// goroutineID is the running goroutine's number, from its stack header.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	f := bytes.Fields(buf)
	return string(f[1])
}

// A call that waits never holds up another: each runs on a goroutine of
// its own while the first is busy.
func TestWarmPoolRunsConcurrentCallsAtOnce(t *testing.T) {
	p := newWarmPool()
	release := make(chan struct{})
	var first sync.WaitGroup
	first.Add(1)
	go func() {
		defer first.Done()
		p.run(func() { <-release })
	}()
	done := make(chan struct{})
	go func() {
		p.run(func() {})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a second call waited for the first to end")
	}
	close(release)
	first.Wait()
}

// Calls one after another run on the same goroutine, whose stack has
// grown, and not the caller's: once a call ends, its goroutine waits for
// the next.
func TestWarmPoolReusesAnIdleGoroutine(t *testing.T) {
	p := newWarmPool()
	var first string
	p.run(func() { first = goroutineID() })
	if first == goroutineID() {
		t.Fatal("the call ran on the caller's goroutine")
	}
	for range 5 {
		got := make(chan string)
		select {
		case p.work <- func() { got <- goroutineID() }:
		case <-time.After(10 * time.Second):
			t.Fatal("no goroutine of the pool waits for the next call")
		}
		if id := <-got; id != first {
			t.Fatalf("a call ran on goroutine %s, want %s reused", id, first)
		}
	}
}
