package scaleout_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisStats are a redis-server's counters that a benchmark reads before
// and after its measured part.
type redisStats struct {
	// Commands is every command the server ran, those a Lua script
	// called included, INFO itself excluded.
	Commands int64
	// NetBytes is total_net_input_bytes + total_net_output_bytes.
	NetBytes int64
	// CPU is the server process's user + system time.
	CPU time.Duration
	// Calls counts the commands by name.
	Calls map[string]int64
}

func (a redisStats) sub(b redisStats) redisStats {
	d := redisStats{Commands: a.Commands - b.Commands, NetBytes: a.NetBytes - b.NetBytes, CPU: a.CPU - b.CPU, Calls: map[string]int64{}}
	for k, v := range a.Calls {
		if n := v - b.Calls[k]; n != 0 {
			d.Calls[k] = n
		}
	}
	return d
}

// top names the commands called most, with their calls per unit.
func (a redisStats) top(n int, per float64, unit string) string {
	names := make([]string, 0, len(a.Calls))
	for k := range a.Calls {
		names = append(names, k)
	}
	slices.SortFunc(names, func(x, y string) int { return int(a.Calls[y] - a.Calls[x]) })
	var s strings.Builder
	for i, k := range names {
		if i == n {
			break
		}
		fmt.Fprintf(&s, "%s %.1f, ", k, float64(a.Calls[k])/per)
	}
	return strings.TrimSuffix(s.String(), ", ") + " per " + unit
}

// readRedisStats reads INFO commandstats, stats and cpu.
func readRedisStats(ctx context.Context, c *redis.Client) (redisStats, error) {
	info, err := c.Info(ctx, "commandstats", "stats", "cpu").Result()
	if err != nil {
		return redisStats{}, fmt.Errorf("INFO: %w", err)
	}
	s := redisStats{Calls: map[string]int64{}}
	var cpu float64
	for line := range strings.SplitSeq(info, "\n") {
		line = strings.TrimSpace(line)
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch {
		case strings.HasPrefix(k, "cmdstat_"):
			if k == "cmdstat_info" {
				continue
			}
			// calls=N,usec=...
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %q", k, v)
			}
			s.Commands += n
			s.Calls[strings.TrimPrefix(k, "cmdstat_")] = n
		case k == "total_net_input_bytes" || k == "total_net_output_bytes":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %q", k, v)
			}
			s.NetBytes += n
		case k == "used_cpu_sys" || k == "used_cpu_user":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return redisStats{}, fmt.Errorf("INFO %s: %q", k, v)
			}
			cpu += f
		}
	}
	s.CPU = time.Duration(cpu * float64(time.Second))
	return s, nil
}

// cmdCounter is a go-redis hook counting the commands a client sends
// (round trips; a pipeline counts each command in it).
type cmdCounter struct{ n atomic.Int64 }

func (h *cmdCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *cmdCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h *cmdCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// percentiles reports p50, p99 and the maximum of d (sorted in place) as
// milliseconds under the given metric prefix ("" or "ttfc-").
func percentiles(b *testing.B, d []time.Duration, prefix string) {
	b.Helper()
	if len(d) == 0 {
		b.Fatal("no delays measured")
	}
	slices.Sort(d)
	at := func(p float64) float64 {
		return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(at(0.50), prefix+"p50-ms")
	b.ReportMetric(at(0.99), prefix+"p99-ms")
	b.ReportMetric(at(1), prefix+"max-ms")
}
