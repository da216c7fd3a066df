//go:build linux

package tools

import (
	"syscall"
	"time"
)

// threadCPU is the calling thread's user+system CPU time (the benchmark
// locks itself to its thread): on a shared machine, wall time measures
// the neighbours as much as the code.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
