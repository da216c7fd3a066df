//go:build !linux

package discovery

import "time"

var benchStart = time.Now()

// threadCPU falls back to wall time where a thread's CPU time is not
// read.
func threadCPU() time.Duration { return time.Since(benchStart) }
