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
// takes from the start of Append to a client reading its event line.
// Target: p99 ≤ 50 ms.
//
//   - progress: 100 runs, 10 clients each; each run has two looping tool
//     calls that each report once per 750 ms (the throttle's most).
//   - text: 1,000 runs, one client each; each run emits a chunk every
//     50 ms, as a model streaming text does.
func BenchmarkAppendToRead(b *testing.B) {
	for _, bc := range []struct {
		name        string
		runs, subs  int
		every       time.Duration
		perInterval int
	}{
		{"progress", 100, 10, ProgressInterval, 2},
		{"text", 1000, 1, 50 * time.Millisecond, 1},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				benchAppendToRead(b, bc.runs, bc.subs, bc.every, bc.perInterval, 3*time.Second)
			}
		})
	}
}

func benchAppendToRead(b *testing.B, runs, subs int, every time.Duration, perInterval int, emitFor time.Duration) {
	ctx := context.Background()
	l := NewMemoryLog(MemoryLogOptions{})
	maxEvents := int(emitFor/every+1)*perInterval + 1
	appendedAt := make([][]atomic.Int64, runs) // [run][seq] UnixNano
	for r := range runs {
		if err := l.Open(ctx, fmt.Sprint("run", r)); err != nil {
			b.Fatal(err)
		}
		appendedAt[r] = make([]atomic.Int64, maxEvents+2)
	}
	srv, _ := benchServer(b, l, ServeOptions{})
	defer srv.Close()
	addr := srv.Listener.Addr().String()

	type reader struct {
		run    int
		br     *bufio.Reader
		conn   net.Conn
		delays []time.Duration
	}
	readers := make([]*reader, 0, runs*subs)
	for r := range runs {
		for range subs {
			conn, br, err := dialStream(addr, fmt.Sprint("run", r))
			if err != nil {
				b.Fatal(err)
			}
			readers = append(readers, &reader{run: r, br: br, conn: conn})
		}
	}
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
				// Chunked framing: the event's "id: N" line follows a size line.
				rest, ok := strings.CutPrefix(string(line), "id: ")
				if !ok {
					continue
				}
				now := time.Now().UnixNano()
				seq, err := strconv.Atoi(strings.TrimSpace(rest))
				if err != nil {
					b.Error(err)
					return
				}
				rd.delays = append(rd.delays, time.Duration(now-appendedAt[rd.run][seq].Load()))
			}
		})
	}

	b.ResetTimer()
	cpuBefore := cpuTime()
	start := time.Now()
	var producers sync.WaitGroup
	for r := range runs {
		producers.Go(func() {
			runID := fmt.Sprint("run", r)
			defer l.Close(ctx, runID)
			// Spread the runs over the interval, as independent runs are.
			tick := time.NewTicker(every)
			defer tick.Stop()
			time.Sleep(every * time.Duration(r) / time.Duration(runs))
			seq := 0
			for page := 1; time.Since(start) < emitFor; page++ {
				for call := range perInterval {
					seq++
					appendedAt[r][seq].Store(time.Now().UnixNano())
					p := Progress{ToolCallID: fmt.Sprint("call_", call), ToolName: "list_orders",
						Page: page, PagesMax: 20, Items: 50 * page, Requests: page, RequestsMax: 60,
						ElapsedMs: time.Since(start).Milliseconds()}
					if _, err := l.Append(ctx, runID, p.Chunk()); err != nil {
						b.Error(err)
						return
					}
				}
				<-tick.C
			}
		})
	}
	producers.Wait()
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime() - cpuBefore

	var all []time.Duration
	for _, rd := range readers {
		all = append(all, rd.delays...)
	}
	if len(all) == 0 {
		b.Fatal("no events read")
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		return float64(all[int(p*float64(len(all)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(pct(1), "max-ms")
	b.ReportMetric(float64(len(all))/emitFor.Seconds(), "reads/s")
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
