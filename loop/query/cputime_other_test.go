//go:build !unix

package query

import "time"

var processStart = time.Now()

// cpuTime falls back to wall-clock time where getrusage is missing.
func cpuTime() time.Duration { return time.Since(processStart) }
