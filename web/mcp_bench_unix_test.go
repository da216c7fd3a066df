//go:build unix

package web

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPOverInvoke measures what the MCP door adds to a call: the
// same walk (list_orders, every page, two fields, _refresh so each call
// walks the demo upstream, which answers at once) as a direct invoke
// with agent_id and as an MCP tools/call from the Go SDK's client, both
// over loopback HTTP to one server, interleaved call by call.
//
// trawl-serve: the server is the real binary (`trawl serve` on the demo,
// built from this tree) in a process of its own, so its CPU per call —
// what trawl adds — is measured apart from the client's: the server's
// from its process CPU clock (Linux; skipped elsewhere), the client's
// from this process. It reports both sides' wall time, the wall time MCP
// adds, the server's and the client's CPU per call, and three CPU
// ratios: the server's alone, the client's alone, and both together.
//
// one-process: client and server in this process, as first measured:
// the CPU ratio counts the Go SDK client's decoding against the door.
func BenchmarkMCPOverInvoke(b *testing.B) {
	versions := []string{"2026-07-28", "2025-11-25"}
	var once sync.Once
	var bin string
	dir := b.TempDir()
	for _, v := range versions {
		b.Run("trawl-serve/"+v, func(b *testing.B) {
			if !serverCPUClock {
				b.Skip("the server's CPU is read from its process CPU clock: Linux only")
			}
			once.Do(func() { bin = buildTrawlBinary(b, dir) })
			if bin == "" {
				b.Fatal("building trawl failed")
			}
			url, key, pid := serveTrawl(b, bin)
			benchMCPOverInvoke(b, url, key, v, func() time.Duration { return processCPUOf(b, pid) })
		})
	}
	for _, v := range versions {
		b.Run("one-process/"+v, func(b *testing.B) {
			ts := startDemo(&testing.T{}, nil)
			defer ts.Close()
			benchMCPOverInvoke(b, ts.URL, ts.AdminKey(), v, nil)
		})
	}
}

// buildTrawlBinary builds cmd/trawl into dir.
func buildTrawlBinary(b *testing.B, dir string) string {
	bin := filepath.Join(dir, "trawl")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/trawl")
	cmd.Dir = ".." // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Logf("go build ./cmd/trawl: %v\n%s", err, out)
		return ""
	}
	return bin
}

// serveTrawl runs `trawl serve` on the built-in demo (its upstream
// answering at once) until b ends, and returns its URL, admin key and
// process id once it is ready.
func serveTrawl(b *testing.B, bin string) (url, key string, pid int) {
	dir := b.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	key = "bench_" + rand.Text()
	cfg := fmt.Sprintf("listen: %s\nadmin_key: %s\ndata_dir: %s\ndemo: {latency_ms: 0}\n", addr, key, filepath.Join(dir, "data"))
	cfgPath := filepath.Join(dir, "trawl.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfgPath)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logf, logf
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); logf.Close(); close(exited) }()
	b.Cleanup(func() { cmd.Process.Kill(); <-exited })
	url = "http://" + addr
	for deadline := time.Now().Add(60 * time.Second); ; {
		if resp, err := http.Get(url + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return url, key, cmd.Process.Pid
			}
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			b.Fatalf("trawl exited at start:\n%s", log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatal("trawl not ready within 60 s")
		}
	}
}

// cpuSettle is how long a call's CPU is read after its response: the
// server's work after the response was written (closing the stream,
// the call's deferred bookkeeping) is counted to the call that did it,
// not to the next one.
const cpuSettle = time.Millisecond

// benchMCPOverInvoke interleaves the two calls on the server at url.
// serverCPU, when not nil, is the server's process CPU (another
// process); this process's CPU is then the client's alone.
func benchMCPOverInvoke(b *testing.B, url, key, version string, serverCPU func() time.Duration) {
	args := map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total"}, "_refresh": true}
	body, _ := json.Marshal(map[string]any{"args": args, "agent_id": "demo"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	invoke := func() {
		req, _ := http.NewRequest("POST", url+"/v1/tools/acme.list_orders/invoke", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 {
			b.Fatalf("invoke: %d %v", resp.StatusCode, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "v0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url + "/v1/agents/demo/mcp",
		HTTPClient: &http.Client{Transport: tokenTransportWith(key, client.Transport)}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	call := func() {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders", Arguments: args})
		if err != nil || res.IsError {
			b.Fatalf("MCP call: %v", err)
		}
	}
	for range 5 { // warm both paths: connections, the tool list, the plan
		invoke()
		call()
	}
	// Per side (0 invoke, 1 MCP): wall, client CPU (this process), server CPU.
	var wall, cli, srv [2]time.Duration
	b.ResetTimer()
	for i := range b.N {
		order := [2]int{0, 1}
		if i%2 == 1 { // alternate the order: neither side always runs warm
			order = [2]int{1, 0}
		}
		for _, side := range order {
			f := invoke
			if side == 1 {
				f = call
			}
			var s0 time.Duration
			if serverCPU != nil {
				s0 = serverCPU()
			}
			t0, c0 := time.Now(), processCPU()
			f()
			wall[side] += time.Since(t0)
			if serverCPU != nil {
				time.Sleep(cpuSettle)
				srv[side] += serverCPU() - s0
			}
			cli[side] += processCPU() - c0
		}
	}
	b.StopTimer()
	n := float64(b.N)
	us := func(d time.Duration) float64 { return float64(d.Microseconds()) / n }
	b.ReportMetric(us(wall[0]), "invoke-µs/call")
	b.ReportMetric(us(wall[1]), "mcp-µs/call")
	b.ReportMetric(us(wall[1]-wall[0]), "added-µs/call")
	if serverCPU == nil {
		// One process: client and server together.
		b.ReportMetric(us(cli[0]), "invoke-cpu-µs/call")
		b.ReportMetric(us(cli[1]), "mcp-cpu-µs/call")
		b.ReportMetric(float64(cli[1])/float64(cli[0]), "cpu-ratio")
		return
	}
	b.ReportMetric(us(srv[0]), "invoke-server-cpu-µs/call")
	b.ReportMetric(us(srv[1]), "mcp-server-cpu-µs/call")
	b.ReportMetric(float64(srv[1])/float64(srv[0]), "server-cpu-ratio")
	b.ReportMetric(us(cli[0]), "invoke-client-cpu-µs/call")
	b.ReportMetric(us(cli[1]), "mcp-client-cpu-µs/call")
	b.ReportMetric(float64(cli[1])/float64(cli[0]), "client-cpu-ratio")
	b.ReportMetric(float64(srv[1]+cli[1])/float64(srv[0]+cli[0]), "cpu-ratio")
}

// tokenTransportWith sends every request with a bearer token over rt.
func tokenTransportWith(token string, rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return rt.RoundTrip(r)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// processCPU is the process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
