//go:build !linux

package tools

import "time"

var benchStart = time.Now()

// threadCPU falls back to wall time where per-thread CPU time is not
// read.
func threadCPU() time.Duration { return time.Since(benchStart) }
