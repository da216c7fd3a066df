//go:build unix && !linux

package web

import (
	"testing"
	"time"
)

// serverCPUClock: another process's CPU cannot be read here.
const serverCPUClock = false

func processCPUOf(b *testing.B, _ int) time.Duration {
	b.Fatal("no process CPU clock of another process here")
	return 0
}
