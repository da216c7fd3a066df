package web

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// turnText is the text a streamed turn said.
func turnText(t *testing.T, events []sseEvent) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		var c struct{ Type, Delta string }
		if json.Unmarshal([]byte(e.Data), &c) == nil && c.Type == "text-delta" {
			b.WriteString(c.Delta)
		}
	}
	return b.String()
}

// TestDemoReplayTellsWhenLoopingIsOff: with looping switched off for
// list_orders, the recorded tool call loses its reserved arguments, and
// the replayed answer says so instead of claiming every page was checked.
func TestDemoReplayTellsWhenLoopingIsOff(t *testing.T) {
	ts := startDemo(t, nil)
	q := "How many open orders worth more than 100 do we have, and how do they split by currency?"
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("on", "u1", q))
	on := turnText(t, readSSE(t, resp.Body))
	resp.Body.Close()
	if !strings.Contains(on, "I checked every page") {
		t.Fatalf("with looping on the recorded answer is played:\n%s", on)
	}
	if st, b := ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false}); st != 200 {
		t.Fatalf("PATCH: %d %s", st, b)
	}
	resp = ts.post(t, "/v1/agents/demo/chat", "", chatBody("off", "u1", q))
	off := turnText(t, readSSE(t, resp.Body))
	resp.Body.Close()
	for _, want := range []string{"`list_orders` ran without looping", "`_all_pages`", "`_filter`", "Allow response looping for this tool"} {
		if !strings.Contains(off, want) {
			t.Errorf("answer lacks %q:\n%s", want, off)
		}
	}
	if strings.Contains(off, "I checked every page") || strings.Contains(off, "278") {
		t.Errorf("with looping off the answer still claims the recorded result:\n%s", off)
	}
}

func TestRootRedirectsToStudio(t *testing.T) {
	ts := startDemo(t, nil)
	resp, _ := studioGet(t, "GET", ts.URL+"/", nil)
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/studio/" {
		t.Errorf("GET / = %d → %q, want 302 → /studio/", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestDemoLatency: demo.latency_ms slows every upstream answer, so a walk
// of four pages takes at least four times as long; a config file with
// demo serves the demo; bad values are refused with the key.
func TestDemoLatency(t *testing.T) {
	cfg, err := ParseConfig("trawl.yaml", []byte("demo: {latency_ms: 60}\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.IsDemo() || cfg.Demo.LatencyMs != 60 {
		t.Fatalf("demo config: demo=%v %+v", cfg.IsDemo(), cfg.Demo)
	}
	ts := startDemo(t, func(c *Config) { c.Demo = cfg.Demo })
	start := time.Now()
	st, b := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{"args": map[string]any{"status": "open", "_all_pages": true, "_fields": []string{"id"}}})
	if st != 200 || !strings.Contains(string(b), `"_pagingComplete":true`) {
		t.Fatalf("invoke: %d %.300s", st, b)
	}
	// Page 1 must arrive before the walk knows its end; the later pages
	// may then be fetched ahead together (limits.concurrency), so the walk
	// takes at least two answers' latency, however fast the machine.
	if took := time.Since(start); took < 2*60*time.Millisecond {
		t.Errorf("a 4-page walk at 60 ms per answer took %v, under two answers' latency", took)
	}
	for _, bad := range []string{"demo: {latency_ms: -1}\n", "demo: {latency_ms: 5}\nagents: [{id: x}]\n", "demo: {latncy_ms: 5}\n"} {
		if _, err := ParseConfig("trawl.yaml", []byte(bad), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "demo") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
	if err := DemoConfig().SetDemoLatency(20000); err == nil {
		t.Error("SetDemoLatency(20000) accepted")
	}
	plain, _ := ParseConfig("trawl.yaml", []byte("org: x\n"), func(string) (string, bool) { return "", false })
	if err := plain.SetDemoLatency(10); err == nil {
		t.Error("SetDemoLatency on a config without the demo accepted")
	}
}

// TestActivityCarriesTheToolCall: every upstream request of a chat's tool
// call, a workflow step or an invoke is recorded with the call's id, so
// the Studio can group them as a trace.
func TestActivityCarriesTheToolCall(t *testing.T) {
	ts := startDemo(t, nil)
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("trace", "u1", "How many open orders worth more than 100?"))
	readSSE(t, resp.Body)
	resp.Body.Close()
	st, b := ts.do(t, "GET", "/v1/activity?agent_id=demo&chat_id=trace", "", nil)
	var got struct {
		Activity []struct{ CallID, Tool string } `json:"activity"`
	}
	if err := json.Unmarshal(b, &got); st != 200 || err != nil || len(got.Activity) < 2 {
		t.Fatalf("activity: %d %v %.300s", st, err, b)
	}
	for _, a := range got.Activity {
		if a.CallID != "call_0_0_0" || a.Tool != "acme.list_orders" {
			t.Errorf("record %+v: want call_0_0_0 of acme.list_orders", a)
		}
	}
	ts.do(t, "POST", "/v1/tools/acme.get_stats/invoke", "", map[string]any{"args": map[string]any{}, "thread_id": "try-1"})
	_, b = ts.do(t, "GET", "/v1/activity?thread_id=try-1", "", nil)
	if !strings.Contains(string(b), `"callId":"invoke_`) {
		t.Errorf("invoke activity: %s", b)
	}
}
