package scaleout_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/redislog"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// BenchmarkCrossReplicaAppendToRead: two replicas, each its own
// redislog.Log on its own go-redis client, on one redis-server. 100 runs
// append a progress chunk every 50 ms on replica A for 3 s; on replica B a
// reader per run reads it from id 0, as a resuming client does, and each
// event's delay is from before A's Append to B's reader holding it.
// Target: p99 ≤ 50 ms. Also reported per appended event: the commands
// the server ran (Lua-called ones included), the commands the two
// clients sent, the bytes in and out of the server, and CPU (this
// process: both replicas and the readers; the server's own).
func BenchmarkCrossReplicaAppendToRead(b *testing.B) {
	const (
		runs    = 100
		every   = 50 * time.Millisecond
		emitFor = 3 * time.Second
	)
	srv := redistest.Start(b)
	admin := srv.Client(b)
	ctx := context.Background()
	for i := range b.N {
		var sentA, sentB cmdCounter
		replica := func(h *cmdCounter) *redislog.Log {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr})
			c.AddHook(h)
			b.Cleanup(func() { c.Close() })
			l := redislog.New(c, redislog.Options{Prefix: fmt.Sprintf("bench%d:", i)})
			b.Cleanup(func() { l.Shutdown() })
			return l
		}
		a, rb := replica(&sentA), replica(&sentB)
		maxEvents := int(emitFor/every) + 2
		appendedAt := make([][]atomic.Int64, runs)
		for r := range runs {
			if err := a.Open(ctx, fmt.Sprint("run", r)); err != nil {
				b.Fatal(err)
			}
			appendedAt[r] = make([]atomic.Int64, maxEvents+1)
		}

		before, err := readRedisStats(ctx, admin)
		if err != nil {
			b.Fatal(err)
		}
		cpuBefore := processCPU()
		cmdsBefore := sentA.n.Load() + sentB.n.Load()
		b.ResetTimer()

		delays := make([][]time.Duration, runs)
		var readers sync.WaitGroup
		for r := range runs {
			readers.Go(func() {
				for ev, err := range rb.Read(ctx, fmt.Sprint("run", r), 0) {
					if err != nil {
						b.Error(err)
						return
					}
					delays[r] = append(delays[r], time.Duration(time.Now().UnixNano()-appendedAt[r][ev.Seq].Load()))
				}
			})
		}
		var appended atomic.Int64
		start := time.Now()
		var producers sync.WaitGroup
		for r := range runs {
			producers.Go(func() {
				run := fmt.Sprint("run", r)
				defer func() {
					if err := a.Close(ctx, run); err != nil {
						b.Error(err)
					}
				}()
				// Spread the runs over the interval, as independent runs are.
				time.Sleep(every * time.Duration(r) / runs)
				tick := time.NewTicker(every)
				defer tick.Stop()
				for seq := 1; seq <= maxEvents && time.Since(start) < emitFor; seq++ {
					p := stream.Progress{ToolCallID: "call_0", ToolName: "acme.list_orders",
						Page: seq, PagesMax: 20, Items: 50 * seq, Requests: seq, RequestsMax: 60,
						ElapsedMs: time.Since(start).Milliseconds()}
					appendedAt[r][seq].Store(time.Now().UnixNano())
					got, err := a.Append(ctx, run, p.Chunk())
					if err != nil {
						b.Error(err)
						return
					}
					if got != int64(seq) {
						b.Errorf("run %d: append %d got seq %d", r, seq, got)
						return
					}
					appended.Add(1)
					<-tick.C
				}
			})
		}
		producers.Wait()
		readers.Wait()
		b.StopTimer()

		cpu := processCPU() - cpuBefore
		after, err := readRedisStats(ctx, admin)
		if err != nil {
			b.Fatal(err)
		}
		d := after.sub(before)
		n := float64(appended.Load())
		var all []time.Duration
		for r := range runs {
			all = append(all, delays[r]...)
		}
		if len(all) != int(n) {
			b.Fatalf("read %d events of %d appended", len(all), int(n))
		}
		percentiles(b, all, "")
		b.ReportMetric(n/emitFor.Seconds(), "events/s")
		b.ReportMetric(float64(d.Commands)/n, "redis-cmds/event")
		b.ReportMetric(float64(sentA.n.Load()+sentB.n.Load()-cmdsBefore)/n, "sent-cmds/event")
		b.ReportMetric(float64(d.NetBytes)/n, "redis-B/event")
		b.ReportMetric(float64(cpu.Microseconds())/n, "cpu-µs/event")
		b.ReportMetric(float64(d.CPU.Microseconds())/n, "redis-cpu-µs/event")
		b.Log(d.top(10, n, "event"))
	}
}
