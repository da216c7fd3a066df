package web

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// serverCPUClock: another process's CPU can be read (its process CPU
// clock).
const serverCPUClock = true

// processCPUOf is the CPU time of process pid, all its threads, to the
// nanosecond: its process CPU clock (clock_getcpuclockid's, which Linux
// lets any process read), not /proc's tick-counted utime and stime.
func processCPUOf(b *testing.B, pid int) time.Duration {
	const cpuClockSched = 2 // CPUCLOCK_SCHED: the runtime the scheduler counts
	var ts unix.Timespec
	if err := unix.ClockGettime(int32(^pid<<3|cpuClockSched), &ts); err != nil {
		b.Fatalf("reading the CPU clock of process %d: %v", pid, err)
	}
	return time.Duration(ts.Nano())
}
