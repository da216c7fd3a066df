package stream

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// benchServer serves GET /runs/{run} from l and counts the streams that
// have begun.
func benchServer(b *testing.B, l EventLog, opts ServeOptions) (*httptest.Server, *atomic.Int64) {
	var open atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		open.Add(1)
		defer open.Add(-1)
		if err := Serve(w, r, l, r.PathValue("run"), opts); err != nil && r.Context().Err() == nil {
			b.Errorf("Serve: %v", err)
		}
	})
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = nil
	srv.Start()
	return srv, &open
}

// dialStream opens a bare TCP connection, asks for a run's stream and reads
// the response head; the caller owns the connection.
func dialStream(addr, runID string) (net.Conn, *bufio.Reader, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(conn, "GET /runs/%s HTTP/1.1\r\nHost: bench\r\nAccept: text/event-stream\r\n\r\n", runID)
	br := bufio.NewReaderSize(conn, 512)
	status, err := br.ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		conn.Close()
		return nil, nil, fmt.Errorf("stream %s: %q %v", runID, status, err)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			conn.Close()
			return nil, nil, err
		}
		if line == "\r\n" {
			return conn, br, nil
		}
	}
}

func heapAndStacks() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// BenchmarkIdleStreams holds 1,000 streams of open, silent runs over
// loopback HTTP and reports the memory each one costs: the server's
// connection, Serve and its reader goroutine, plus the client's bare TCP
// connection (which reads nothing, so that little of it is counted).
// Target: ≤ 64 KiB per stream.
func BenchmarkIdleStreams(b *testing.B) {
	const streams, runs = 1000, 100
	for range b.N {
		ctx := context.Background()
		l := NewMemoryLog(MemoryLogOptions{})
		for r := range runs {
			if err := l.Open(ctx, fmt.Sprint("run", r)); err != nil {
				b.Fatal(err)
			}
		}
		srv, open := benchServer(b, l, ServeOptions{})
		addr := srv.Listener.Addr().String()
		before := heapAndStacks()

		conns := make([]net.Conn, 0, streams)
		for i := range streams {
			conn, _, err := dialStream(addr, fmt.Sprint("run", i%runs))
			if err != nil {
				b.Fatal(err)
			}
			conns = append(conns, conn)
		}
		for open.Load() < streams {
			runtime.Gosched()
		}
		after := heapAndStacks()
		b.ReportMetric(float64(after-before)/streams/1024, "KiB/stream")
		b.ReportMetric(float64(runtime.NumGoroutine())/streams, "goroutines/stream")

		for r := range runs {
			_ = l.Close(ctx, fmt.Sprint("run", r))
		}
		for _, c := range conns {
			c.Close()
		}
		srv.Close()
	}
}

// BenchmarkAppendToRead has 1,000 clients follow running runs over
// loopback HTTP while the runs emit chunks, and reports how long a chunk
// takes from when it was due (its place in the schedule) to a client
// reading its event line. Target: p99 ≤ 50 ms.
//
//   - progress: 100 runs, 10 clients each; each run has two looping tool
//     calls that each report once per 750 ms (the throttle's most).
//   - text: 1,000 runs, one client each; each run emits a chunk every
//     50 ms, as a model streaming text does.
//
// The runs' schedules are spread evenly over the interval, as independent
// runs are; BenchmarkAppendToReadPeer runs the same harness and schedule
// against the AI SDK's own Node server.
func BenchmarkAppendToRead(b *testing.B) {
	for _, bc := range appendCases {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				benchAppendToRead(b, trawlTarget(b, bc.schedule), bc.schedule, bc.subs)
			}
		})
	}
}

// schedule is when the runs emit: run r's k-th interval is due at
// startAt + every·r/runs + k·every, for as long as that is within emitFor
// of startAt; each interval emits perInterval chunks.
type schedule struct {
	runs        int
	every       time.Duration
	perInterval int
	emitFor     time.Duration
}

var appendCases = []struct {
	name string
	schedule
	subs int
}{
	{"progress", schedule{100, ProgressInterval, 2, 3 * time.Second}, 10},
	{"text", schedule{1000, 50 * time.Millisecond, 1, 3 * time.Second}, 1},
}

func (s schedule) spread(r int) time.Duration {
	return s.every * time.Duration(r) / time.Duration(s.runs)
}

// intervals is how many intervals run r emits.
func (s schedule) intervals(r int) int {
	n := 0
	for s.spread(r)+time.Duration(n)*s.every < s.emitFor {
		n++
	}
	return n
}

// due is when run r's chunk seq (from 1) was due.
func (s schedule) due(startAt time.Time, r, seq int) time.Time {
	return startAt.Add(s.spread(r) + time.Duration((seq-1)/s.perInterval)*s.every)
}

// target is a stream server the harness follows runs on.
type target struct {
	addr string
	// start makes the runs emit on s from startAt; wait returns once
	// they have all ended.
	start func(startAt time.Time) (wait func())
	// seq reads a chunk's sequence number from one line of the stream.
	seq func(line []byte) (int, bool)
	// serverCPU is the CPU the server used so far when it is another
	// process (0 for this one, whose CPU cpuTime counts).
	serverCPU func() time.Duration
}

// trawlTarget serves s's runs from trawl's memory event log.
func trawlTarget(b *testing.B, s schedule) target {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	for r := range s.runs {
		if err := l.Open(ctx, fmt.Sprint("run", r)); err != nil {
			b.Fatal(err)
		}
	}
	srv, _ := benchServer(b, l, ServeOptions{})
	b.Cleanup(srv.Close)
	return target{
		addr: srv.Listener.Addr().String(),
		start: func(startAt time.Time) func() {
			var producers sync.WaitGroup
			for r := range s.runs {
				producers.Go(func() {
					runID := fmt.Sprint("run", r)
					defer l.Close(ctx, runID)
					seq := 0
					for k := range s.intervals(r) {
						time.Sleep(time.Until(startAt.Add(s.spread(r) + time.Duration(k)*s.every)))
						for call := range s.perInterval {
							seq++
							p := Progress{ToolCallID: fmt.Sprint("call_", call), ToolName: "list_orders",
								Page: k + 1, PagesMax: 20, Items: 50 * (k + 1), Requests: k + 1, RequestsMax: 60,
								ElapsedMs: time.Since(startAt).Milliseconds()}
							if _, err := l.Append(ctx, runID, p.Chunk()); err != nil {
								b.Error(err)
								return
							}
						}
					}
				})
			}
			return producers.Wait
		},
		// Chunked framing: the event's "id: N" line follows a size line.
		seq: func(line []byte) (int, bool) {
			rest, ok := strings.CutPrefix(string(line), "id: ")
			if !ok {
				return 0, false
			}
			n, err := strconv.Atoi(strings.TrimSpace(rest))
			return n, err == nil
		},
		serverCPU: func() time.Duration { return 0 },
	}
}

func benchAppendToRead(b *testing.B, t target, s schedule, subs int) {
	type reader struct {
		run    int
		br     *bufio.Reader
		conn   net.Conn
		delays []time.Duration
		last   time.Time // when it read its last event
	}
	readers := make([]*reader, 0, s.runs*subs)
	for r := range s.runs {
		for range subs {
			conn, br, err := dialStream(t.addr, fmt.Sprint("run", r))
			if err != nil {
				b.Fatal(err)
			}
			readers = append(readers, &reader{run: r, br: br, conn: conn})
		}
	}
	// Every client is connected; the schedule starts a moment later.
	startAt := time.Now().Add(100 * time.Millisecond)
	var wg sync.WaitGroup
	for _, rd := range readers {
		wg.Go(func() {
			defer rd.conn.Close()
			for {
				line, err := rd.br.ReadSlice('\n')
				if err == io.EOF || (err == nil && strings.Contains(string(line), "[DONE]")) {
					return
				}
				if err != nil {
					b.Error(err)
					return
				}
				seq, ok := t.seq(line)
				if !ok {
					continue
				}
				rd.last = time.Now()
				rd.delays = append(rd.delays, rd.last.Sub(s.due(startAt, rd.run, seq)))
			}
		})
	}

	b.ResetTimer()
	cpuBefore, serverBefore := cpuTime(), t.serverCPU()
	wait := t.start(startAt)
	wait()
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpuBefore + t.serverCPU() - serverBefore

	var all []time.Duration
	var last time.Time
	for _, rd := range readers {
		all = append(all, rd.delays...)
		if rd.last.After(last) {
			last = rd.last
		}
	}
	want := 0
	for r := range s.runs {
		want += s.intervals(r) * s.perInterval * subs
	}
	if len(all) != want {
		b.Fatalf("read %d events, want %d", len(all), want)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	// Reads per second reached: every event read, over the time from the
	// schedule's start to the last read (the schedule asks for
	// len(all)/emitFor; a server that falls behind reaches less).
	b.ReportMetric(float64(len(all))/last.Sub(startAt).Seconds(), "reads/s")
	// Process CPU (server and clients) per event read: on a loaded machine
	// the delays grow with the wait for a CPU, this does not.
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(all)), "cpu-µs/read")
}

// cpuTime is the CPU time the process has used (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
