//go:build unix

package agent

import (
	"syscall"
	"time"
)

// processCPU is the process's user+system CPU time: benchmarks report it
// per operation beside ns/op, which on a shared machine measures the
// neighbours as much as the code.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
