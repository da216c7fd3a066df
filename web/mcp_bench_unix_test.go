//go:build unix

package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkMCPOverInvoke measures what the MCP door adds to a call: the
// same walk (list_orders, every page, two fields, _refresh so each call
// walks the demo upstream, which answers at once) as a direct invoke
// with agent_id and as an MCP tools/call from the Go SDK's client, both
// over loopback HTTP to one server, interleaved call by call. It reports
// each side's wall time and process CPU (client and server together) per
// call, the wall time MCP adds, and the CPU ratio.
func BenchmarkMCPOverInvoke(b *testing.B) {
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		b.Run(v, func(b *testing.B) { benchMCPOverInvoke(b, v) })
	}
}

func benchMCPOverInvoke(b *testing.B, version string) {
	ts := startDemo(&testing.T{}, nil)
	defer ts.Close()
	args := map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total"}, "_refresh": true}
	body, _ := json.Marshal(map[string]any{"args": args, "agent_id": "demo"})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	invoke := func() {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/tools/acme.list_orders/invoke", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
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
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: ts.URL + "/v1/agents/demo/mcp",
		HTTPClient: &http.Client{Transport: tokenTransportWith(ts.AdminKey(), client.Transport)}}, &mcp.ClientSessionOptions{ProtocolVersion: version})
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
	var invWall, mcpWall, invCPU, mcpCPU time.Duration
	b.ResetTimer()
	for i := range b.N {
		first, second := invoke, call
		fw, sw, fc, sc := &invWall, &mcpWall, &invCPU, &mcpCPU
		if i%2 == 1 { // alternate the order: neither side always runs warm
			first, second, fw, sw, fc, sc = call, invoke, &mcpWall, &invWall, &mcpCPU, &invCPU
		}
		for j, f := range []func(){first, second} {
			t0, c0 := time.Now(), processCPU()
			f()
			w, cpu := time.Since(t0), processCPU()-c0
			if j == 0 {
				*fw, *fc = *fw+w, *fc+cpu
			} else {
				*sw, *sc = *sw+w, *sc+cpu
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(invWall.Microseconds())/n, "invoke-µs/call")
	b.ReportMetric(float64(mcpWall.Microseconds())/n, "mcp-µs/call")
	b.ReportMetric(float64((mcpWall-invWall).Microseconds())/n, "added-µs/call")
	b.ReportMetric(float64(invCPU.Microseconds())/n, "invoke-cpu-µs/call")
	b.ReportMetric(float64(mcpCPU.Microseconds())/n, "mcp-cpu-µs/call")
	b.ReportMetric(float64(mcpCPU)/float64(invCPU), "cpu-ratio")
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
