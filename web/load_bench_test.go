package web

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rssBytes is the process's resident set size (Linux; 0 elsewhere).
func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// settle collects garbage and returns freed pages to the OS, so that an
// "after" figure is what the process still holds, not what the runtime
// has yet to give back (the scavenger does it over minutes on its own).
func settle() int64 {
	runtime.GC()
	debug.FreeOSMemory()
	return rssBytes()
}

// BenchmarkLargeBodiesRSS sends 6 concurrent tool calls through the real
// server (invoke endpoint, looping on) to an upstream answering each with
// a 50 MB JSON body, which the invoker cuts at its 24 MiB cap (the call
// fails, saying the response was over the per-response cap). It reports
// RSS before, at the peak (sampled every 5 ms) and after the calls, once
// garbage is collected and freed pages returned.
func BenchmarkLargeBodiesRSS(b *testing.B) {
	if rssBytes() == 0 {
		b.Skip("RSS is read from /proc/self/status (Linux only)")
	}
	const bodySize, calls = 50 << 20, 6
	item := []byte(`{"id":"ord_00000000","customer":"Customer name","email":"c@example.com","total":123.45,"status":"open","note":"A line of free text in every row."},`)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"data":[`)
		block := bytes.Repeat(item, 64<<10/len(item))
		for n := 0; n < bodySize; n += len(block) {
			if _, err := w.Write(block); err != nil {
				return
			}
		}
		io.WriteString(w, `{"id":"last"}]}`)
	}))
	defer up.Close()
	dir := b.TempDir()
	spec := `{"openapi":"3.0.0","info":{"title":"big","version":"1"},"paths":{"/big":{"get":{"operationId":"big","parameters":[{"name":"n","in":"query","schema":{"type":"integer"}}],
	  "responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object"}}}}}}}}}`
	if err := os.WriteFile(filepath.Join(dir, "big.json"), []byte(spec), 0o600); err != nil {
		b.Fatal(err)
	}
	yaml := fmt.Sprintf("data_dir: %s\nadmin_key: bench-admin-key-0123456789abcdef\nproviders:\n  - {id: big, openapi: %s, base_url: %q}\n",
		filepath.Join(dir, "data"), filepath.Join(dir, "big.json"), up.URL)
	if err := os.WriteFile(filepath.Join(dir, "trawl.yaml"), []byte(yaml), 0o600); err != nil {
		b.Fatal(err)
	}
	cfg, err := LoadConfig(filepath.Join(dir, "trawl.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	srv, err := New(context.Background(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	call := func(i int) (int, string) {
		// Distinct arguments: identical concurrent walks would be
		// collapsed into one by the dataset cache.
		body := fmt.Sprintf(`{"args":{"_all_pages":true,"n":%d},"thread_id":"t%d"}`, i, i)
		req, _ := http.NewRequest("POST", hs.URL+"/v1/tools/big.big/invoke", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+srv.AdminKey())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(out)
	}
	if _, out := call(-1); testing.Verbose() { // warm up: connections, the first allocation of every path
		b.Logf("one call answers: %.400s", out)
	}
	var before, peak, after int64
	for b.Loop() {
		before = settle()
		var top atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			t := time.NewTicker(5 * time.Millisecond)
			defer t.Stop()
			for {
				if r := rssBytes(); r > top.Load() {
					top.Store(r)
				}
				select {
				case <-stop:
					return
				case <-t.C:
				}
			}
		}()
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				// The body is cut at the cap; the call says so.
				if status, out := call(i); status != http.StatusBadGateway || !strings.Contains(out, "per-response cap") {
					b.Errorf("call %d: status %d: %.300s", i, status, out)
				}
			})
		}
		wg.Wait()
		close(stop)
		<-sampled
		peak = top.Load()
		after = settle()
	}
	b.ReportMetric(float64(before)/(1<<20), "MiB-before")
	b.ReportMetric(float64(peak)/(1<<20), "MiB-peak")
	b.ReportMetric(float64(after)/(1<<20), "MiB-after")
	b.ReportMetric(float64(after-before)/(1<<20), "MiB-kept")
}
