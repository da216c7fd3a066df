package web

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream"
)

func (ts *testServer) invokeSSE(t *testing.T, ctx context.Context, tool string, body any) (*http.Response, error) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/tools/"+tool+"/invoke", strings.NewReader(string(b)))
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	req.Header.Set("Accept", "text/event-stream")
	return http.DefaultClient.Do(req)
}

// TestInvokeStreams: with Accept: text/event-stream an invoke streams the
// walk in the chat vocabulary — input, progress (more than one, with a
// slow upstream), then the envelope — and ends with [DONE]. The upstream
// is slow enough for two progress chunks whatever the machine: progress
// comes at most once per stream.ProgressInterval (750 ms), and pages 2–4
// are fetched ahead, so the walk takes about three answers' time — at 120
// ms a page it ended within one interval on an idle machine.
func TestInvokeStreams(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.Demo = &DemoSettings{LatencyMs: 800} })
	resp, err := ts.invokeSSE(t, context.Background(), "acme.list_orders",
		map[string]any{"args": map[string]any{"status": "open", "_all_pages": true, "_fields": []string{"id"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("content type %q", resp.Header.Get("Content-Type"))
	}
	events := readSSE(t, resp.Body)
	types := chunkTypes(events)
	joined := strings.Join(types, " ")
	if !strings.HasPrefix(joined, "start start-step tool-input-available data-tool-loop-progress") ||
		!strings.HasSuffix(joined, "tool-output-available finish-step finish [DONE]") {
		t.Errorf("chunks: %v", types)
	}
	if n := strings.Count(joined, "data-tool-loop-progress"); n < 2 {
		t.Errorf("%d progress chunks over a 4-page walk at 800 ms a page", n)
	}
	var out struct {
		Output struct {
			Complete bool `json:"_pagingComplete"`
			Boundary struct {
				Completion string `json:"completion"`
			} `json:"_boundary"`
		} `json:"output"`
	}
	json.Unmarshal([]byte(events[len(events)-4].Data), &out)
	if !out.Output.Complete || out.Output.Boundary.Completion != "complete" {
		t.Errorf("output chunk: %s", events[len(events)-4].Data)
	}
	for _, e := range events {
		if e.Data != "[DONE]" {
			if _, err := stream.ParseChunk([]byte(e.Data)); err != nil {
				t.Errorf("chunk %s: %v", e.Data, err)
			}
		}
	}
}

// TestInvokeStreamStops: a client that goes away mid-walk ends it: the
// upstream sees no more requests once the stream is closed.
func TestInvokeStreamStops(t *testing.T) {
	ts := startDemo(t, func(c *Config) { c.Demo = &DemoSettings{LatencyMs: 150} })
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := ts.invokeSSE(t, ctx, "acme.list_orders", map[string]any{"args": map[string]any{"_all_pages": true, "_fields": []string{"id"}}})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got strings.Builder
	for !strings.Contains(got.String(), "data-tool-loop-progress") {
		n, err := resp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("stream ended before progress: %v\n%s", err, got.String())
		}
	}
	cancel()
	resp.Body.Close()
	count := func() int {
		_, b := ts.do(t, "GET", "/v1/activity?limit=1000", "", nil)
		return strings.Count(string(b), `"tool":"acme.list_orders"`)
	}
	time.Sleep(400 * time.Millisecond) // the request in flight ends
	before := count()
	time.Sleep(600 * time.Millisecond)
	if after := count(); after != before || before >= 20 {
		t.Errorf("upstream requests after stop: %d then %d (a full walk is 20)", before, after)
	}
}

func TestInvokeAsAgent(t *testing.T) {
	ts := startDemo(t, nil)
	args := map[string]any{"status": "open", "_all_pages": true, "_fields": []string{"id"}}
	st, b := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{"args": args, "agent_id": "demo"})
	if st != 200 || !strings.Contains(string(b), `"_pagingComplete":true`) {
		t.Fatalf("as demo (looping on): %d %.200s", st, b)
	}
	ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false})
	st, b = ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{"args": args, "agent_id": "demo"})
	if st != 200 || strings.Contains(string(b), "_pagingComplete") || strings.Contains(string(b), "_boundary") {
		t.Errorf("as demo (looping off): %d %.200s", st, b)
	}
	for _, tt := range []struct {
		body map[string]any
		code string
	}{
		{map[string]any{"args": args, "agent_id": "nobody"}, "not_found"},
		{map[string]any{"args": args, "agent_id": "demo", "loop_responses": true}, "bad_request"},
		{map[string]any{"args": args, "chat_id": "c1"}, "bad_request"},
	} {
		if st, b := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", tt.body); st/100 != 4 || errorCode(t, b) != tt.code {
			t.Errorf("%v: %d %s", tt.body, st, b)
		}
	}
}
