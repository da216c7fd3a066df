//go:build !unix

package agent

import "time"

var benchStart = time.Now()

// processCPU falls back to wall-clock time where getrusage is missing.
func processCPU() time.Duration { return time.Since(benchStart) }
