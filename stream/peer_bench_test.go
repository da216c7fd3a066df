package stream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// peerDir holds the AI SDK peer server (bench/peer: server.mjs, its
// pinned packages and install.sh).
var peerDir = filepath.Join("..", "bench", "peer")

// peer is a running AI SDK Node server (bench/peer/server.mjs).
type peer struct {
	addr string
	pid  int
}

// startPeer starts the peer server in mode ("ui" or "resumable"), or
// skips b when Node or the peer's packages are missing.
func startPeer(b *testing.B, mode string) *peer {
	b.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		b.Skip("peer: node is not installed; install Node.js (>= 20) and run bench/peer/install.sh")
	}
	for _, pkg := range []string{"ai", "resumable-stream"} {
		if _, err := os.Stat(filepath.Join(peerDir, "node_modules", pkg, "package.json")); err != nil {
			b.Skipf("peer: %s is not installed; run bench/peer/install.sh (bench/run does)", pkg)
		}
	}
	cmd := exec.Command(node, "--expose-gc", "server.mjs", mode)
	cmd.Dir = peerDir
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	port, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	if err != nil || !ok {
		b.Fatalf("peer %s did not start: %q %v", mode, line, err)
	}
	return &peer{addr: "127.0.0.1:" + port, pid: cmd.Process.Pid}
}

func (p *peer) post(b *testing.B, path string, body any) {
	b.Helper()
	buf, _ := json.Marshal(body)
	resp, err := http.Post("http://"+p.addr+path, "application/json", bytes.NewReader(buf))
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("peer %s: %d", path, resp.StatusCode)
	}
}

// heap is the peer's JS heap plus external memory after a full GC.
func (p *peer) heap(b *testing.B) uint64 {
	resp, err := http.Get("http://" + p.addr + "/mem")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ Heap uint64 }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		b.Fatal(err)
	}
	return m.Heap
}

// cpu is the peer process's CPU so far (/proc/<pid>/stat, utime + stime).
func (p *peer) cpu() time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ
}

// peerTarget serves s's runs from a peer server in mode.
func peerTarget(b *testing.B, mode string, s schedule) target {
	p := startPeer(b, mode)
	p.post(b, "/open", map[string]any{"runs": s.runs})
	return target{
		addr: p.addr,
		start: func(startAt time.Time) func() {
			p.post(b, "/start", map[string]any{"startAt": startAt.UnixMilli(), "every": s.every.Milliseconds(),
				"perInterval": s.perInterval, "emitFor": s.emitFor.Milliseconds()})
			return func() {} // the readers see each run end
		},
		// data: {"type":"data-tool-loop-progress",…,"data":{"seq":N,…}}
		seq: func(line []byte) (int, bool) {
			_, rest, ok := bytes.Cut(line, []byte(`"seq":`))
			if !ok {
				return 0, false
			}
			end := bytes.IndexByte(rest, ',')
			if end < 0 {
				return 0, false
			}
			n, err := strconv.Atoi(string(rest[:end]))
			return n, err == nil
		},
		serverCPU: p.cpu,
	}
}

// BenchmarkAppendToReadPeer runs BenchmarkAppendToRead's harness and
// schedules against trawl and, in the same run, the AI SDK's own Node
// server (ai 7: createUIMessageStream per client, "ai-sdk"; and one per
// run behind resumable-stream on an in-memory publisher,
// "ai-sdk-resumable"): delay from when each chunk was due to a client
// reading it, reads per second, CPU per read (server and clients), and
// memory per idle stream. It skips without Node or bench/peer's packages
// (bench/peer/install.sh; bench/run runs it). Figures: bench/README.md.
func BenchmarkAppendToReadPeer(b *testing.B) {
	servers := []struct {
		name string
		make func(b *testing.B, s schedule) target
	}{
		{"trawl", trawlTarget},
		{"ai-sdk", func(b *testing.B, s schedule) target { return peerTarget(b, "ui", s) }},
		{"ai-sdk-resumable", func(b *testing.B, s schedule) target { return peerTarget(b, "resumable", s) }},
	}
	for _, bc := range appendCases {
		for _, srv := range servers {
			b.Run(bc.name+"/"+srv.name, func(b *testing.B) {
				for range b.N {
					benchAppendToRead(b, srv.make(b, bc.schedule), bc.schedule, bc.subs)
				}
			})
		}
	}
	for _, srv := range servers {
		b.Run("idle/"+srv.name, func(b *testing.B) {
			for range b.N {
				benchIdlePeer(b, srv.name)
			}
		})
	}
}

// benchIdlePeer holds 1,000 streams of 100 silent runs and reports the
// memory each costs the server: for trawl its heap and stacks (with the
// clients' bare connections, as BenchmarkIdleStreams), for the peer its
// JS heap and external memory.
func benchIdlePeer(b *testing.B, name string) {
	const streams, runs = 1000, 100
	var addr string
	var mem func() uint64
	switch name {
	case "trawl":
		ctx := context.Background()
		l := NewMemoryLog(MemoryLogOptions{})
		for r := range runs {
			if err := l.Open(ctx, fmt.Sprint("run", r)); err != nil {
				b.Fatal(err)
			}
		}
		srv, _ := benchServer(b, l, ServeOptions{})
		b.Cleanup(srv.Close)
		addr, mem = srv.Listener.Addr().String(), heapAndStacks
	default:
		mode := "ui"
		if name == "ai-sdk-resumable" {
			mode = "resumable"
		}
		p := startPeer(b, mode)
		p.post(b, "/open", map[string]any{"runs": runs})
		addr, mem = p.addr, func() uint64 { return p.heap(b) }
	}
	before := mem()
	conns := make([]net.Conn, 0, streams)
	for i := range streams {
		conn, _, err := dialStream(addr, fmt.Sprint("run", i%runs))
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, conn)
	}
	runtime.Gosched()
	after := mem()
	b.ReportMetric(float64(after-before)/streams/1024, "KiB/stream")
	for _, c := range conns {
		c.Close()
	}
}
