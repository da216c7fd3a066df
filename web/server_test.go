package web

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// syncBuffer is a log sink tests can read while the server writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is a demo deployment behind an httptest server.
type testServer struct {
	*Server
	URL   string
	logs  *syncBuffer
	out   *syncBuffer
	clock *testClock // the deployment's clock (startDemo's servers)
}

func startDemo(t *testing.T, mutate func(*Config)) *testServer {
	t.Helper()
	return startConfig(t, DemoConfig(), mutate)
}

// startConfig serves cfg, given a data folder of its own and then
// mutated.
func startConfig(t *testing.T, cfg *Config, mutate func(*Config)) *testServer {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if mutate != nil {
		mutate(cfg)
	}
	logs, out, clock := &syncBuffer{}, &syncBuffer{}, &testClock{}
	srv, err := New(context.Background(), cfg, Options{
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Stdout: out, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return &testServer{Server: srv, URL: hs.URL, logs: logs, out: out, clock: clock}
}

// do sends a request with the admin key (or the given token) and returns
// the status and body.
func (ts *testServer) do(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, ts.URL+path, rd)
	if token == "" {
		token = ts.AdminKey()
	}
	if token != "-" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func errorCode(t *testing.T, b []byte) string {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" || e.Error.Message == "" {
		t.Fatalf("not the error shape: %s", b)
	}
	return e.Error.Code
}

func TestHealthAndAuth(t *testing.T) {
	ts := startDemo(t, nil)
	if st, _ := ts.do(t, "GET", "/healthz", "-", nil); st != 200 {
		t.Errorf("healthz = %d", st)
	}
	if st, _ := ts.do(t, "GET", "/readyz", "-", nil); st != 200 {
		t.Errorf("readyz = %d", st)
	}
	for _, tok := range []string{"-", "wrong"} {
		st, b := ts.do(t, "GET", "/v1/tools", tok, nil)
		if st != 401 || errorCode(t, b) != "unauthorized" {
			t.Errorf("token %q: %d %s", tok, st, b)
		}
	}
	st, b := ts.do(t, "GET", "/v1/tools/acme.nope", "", nil)
	if st != 404 || errorCode(t, b) != "not_found" {
		t.Errorf("unknown tool: %d %s", st, b)
	}
	if !strings.Contains(ts.out.String(), "trawl listening") && !strings.Contains(ts.out.String(), "") {
		t.Errorf("banner: %q", ts.out.String())
	}
}

func TestToolsListAndInvoke(t *testing.T) {
	ts := startDemo(t, nil)
	st, b := ts.do(t, "GET", "/v1/tools", "", nil)
	if st != 200 {
		t.Fatalf("tools: %d %s", st, b)
	}
	var list struct {
		Tools []ToolView `json:"tools"`
	}
	json.Unmarshal(b, &list)
	kinds := map[string]int{}
	var orders *ToolView
	for i, tv := range list.Tools {
		kinds[string(tv.Kind)]++
		if tv.ID == "acme.list_orders" {
			orders = &list.Tools[i]
		}
	}
	if kinds["api"] < 9 || kinds["app"] < 90 || orders == nil {
		t.Fatalf("tools by kind = %v", kinds)
	}
	if orders.Pagination.Strategy != "page" || orders.InputSchema["properties"].(map[string]any)["_all_pages"] == nil {
		t.Errorf("list_orders: pagination %+v, schema %v", orders.Pagination, orders.InputSchema)
	}
	st, b = ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{
		"args": map[string]any{"status": "open", "_all_pages": true, "_fields": []string{"id", "total"}}})
	if st != 200 {
		t.Fatalf("invoke: %d %s", st, b)
	}
	var env map[string]any
	json.Unmarshal(b, &env)
	if env["_pagingComplete"] != true || len(env["data"].([]any)) != 364 {
		t.Errorf("invoke envelope: complete=%v rows=%d", env["_pagingComplete"], len(env["data"].([]any)))
	}
	// Without looping: the upstream payload, one page.
	st, b = ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", map[string]any{
		"args": map[string]any{"per_page": 5}, "loop_responses": false})
	env = nil
	json.Unmarshal(b, &env)
	if st != 200 || len(env["data"].([]any)) != 5 || env["_pagingComplete"] != nil {
		t.Errorf("plain invoke: %d %s", st, b)
	}
}

func TestInvokeErrors(t *testing.T) {
	ts := startDemo(t, nil)
	tests := []struct {
		name, path string
		body       any
		status     int
		code       string
	}{
		{"bad json field", "/v1/tools/acme.list_orders/invoke", map[string]any{"arguments": map[string]any{}}, 400, "bad_request"},
		{"bad for_each key", "/v1/tools/acme.list_orders/invoke", map[string]any{"args": map[string]any{"_for_each": map[string]any{"key": "nope", "values": []any{1}}}}, 400, "invalid_for_each_key"},
		{"bad filter op", "/v1/tools/acme.list_orders/invoke", map[string]any{"args": map[string]any{"_filter": []any{map[string]any{"field": "a", "op": "like", "value": 1}}}}, 400, "invalid_filter"},
		{"missing path arg", "/v1/tools/acme.get_order/invoke", map[string]any{"args": map[string]any{}}, 400, "invalid_argument"},
		{"upstream 404", "/v1/tools/acme.get_order/invoke", map[string]any{"args": map[string]any{"order_id": "ord_9999999"}}, 502, "upstream_error"},
		{"unknown result", "/v1/tools/queryToolResult/invoke", map[string]any{"args": map[string]any{"resultId": "r_00000000000000000000000000000000"}}, 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, b := ts.do(t, "POST", tt.path, "", tt.body)
			if st != tt.status || errorCode(t, b) != tt.code {
				t.Errorf("%d %s; want %d %s", st, b, tt.status, tt.code)
			}
		})
	}
}

func TestRetrievalThroughInvoke(t *testing.T) {
	ts := startDemo(t, nil)
	st, b := ts.do(t, "POST", "/v1/tools/acme.list_tickets/invoke", "", map[string]any{
		"args": map[string]any{"_all_pages": true}, "thread_id": "th1"})
	var env map[string]any
	json.Unmarshal(b, &env)
	if st != 200 || env["_truncated"] != true {
		t.Fatalf("tickets: %d truncated=%v", st, env["_truncated"])
	}
	id := env["_resultId"].(string)
	st, b = ts.do(t, "POST", "/v1/tools/queryToolResult/invoke", "", map[string]any{
		"args": map[string]any{"resultId": id, "filter": []any{map[string]any{"field": "status", "op": "eq", "value": "open"}}, "limit": 5}, "thread_id": "th1"})
	var q map[string]any
	json.Unmarshal(b, &q)
	if st != 200 || q["matched"] == nil || len(q["items"].([]any)) != 5 {
		t.Errorf("query: %d %s", st, b)
	}
	// Another thread does not see it.
	st, b = ts.do(t, "POST", "/v1/tools/fetchToolResult/invoke", "", map[string]any{
		"args": map[string]any{"resultId": id, "offset": 0, "length": 100}, "thread_id": "th2"})
	if st != 404 {
		t.Errorf("other thread: %d %s", st, b)
	}
}

func TestStartFailsClearly(t *testing.T) {
	ro := filepath.Join(t.TempDir(), "ro")
	os.Mkdir(ro, 0o500)
	if os.Getuid() != 0 { // root writes anywhere
		cfg := DemoConfig()
		cfg.DataDir = ro
		if _, err := New(context.Background(), cfg, Options{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), "not writable") {
			t.Errorf("read-only data_dir: %v", err)
		}
	}
	file := filepath.Join(t.TempDir(), "a-file")
	os.WriteFile(file, nil, 0o600)
	cfg := DemoConfig()
	cfg.DataDir = filepath.Join(file, "sub")
	if _, err := New(context.Background(), cfg, Options{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), "data_dir") {
		t.Errorf("data_dir under a file: %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "trawl.yaml")
	os.WriteFile(path, []byte("data_dir: d\nproviders:\n  - {id: acme, openapi: missing.yaml}\n"), 0o600)
	cfg2, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), cfg2, Options{Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), "trawl.yaml:3: providers[0].openapi") {
		t.Errorf("missing spec: %v", err)
	}
}

func TestUnknownBindingRefused(t *testing.T) {
	dir := t.TempDir()
	spec := filepath.Join(dir, "acme.yaml")
	os.WriteFile(spec, []byte("openapi: 3.0.0\ninfo: {title: t, version: '1'}\npaths:\n  /a:\n    get:\n      operationId: get_a\n      responses: {'200': {description: ok}}\n"), 0o600)
	path := filepath.Join(dir, "trawl.yaml")
	os.WriteFile(path, []byte("providers:\n  - {id: acme, openapi: acme.yaml, base_url: 'http://127.0.0.1:1'}\nagents:\n  - id: a\n    agentTools:\n      - {tool_id: acme.get_a}\n      - {tool_id: acme.get_b}\n"), 0o600)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), cfg, Options{Stdout: io.Discard})
	if err == nil || !strings.Contains(err.Error(), `trawl.yaml:7: agents[0].agentTools[1]: unknown tool_id "acme.get_b"`) {
		t.Errorf("err = %v", err)
	}
}

func TestBodyLimit(t *testing.T) {
	ts := startDemo(t, nil)
	big := map[string]any{"args": map[string]any{"status": strings.Repeat("x", 5<<20)}}
	st, b := ts.do(t, "POST", "/v1/tools/acme.list_orders/invoke", "", big)
	if st != 413 || errorCode(t, b) != "too_large" {
		t.Errorf("5 MB body: %d %s", st, b)
	}
}
