package loop

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// trashTool is a write: POST /messages/{id}/trash.
func trashTool(origin string) *tools.Tool {
	return &tools.Tool{ID: "mail.trash", Provider: "mail", Name: "trash_message", Method: "POST",
		Path: "/messages/{id}/trash", Origin: origin, Effect: tools.EffectWrite,
		Params: []tools.Param{{Name: "id", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}}}}
}

func countingUpstream(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"`+strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/messages/"), "/trash")+`","labels":["TRASH"]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestWriteRefusesReadArguments(t *testing.T) {
	srv, n := countingUpstream(t)
	e := newTestEngine(t, Options{Cache: mustCache(t)})
	tool := trashTool(srv.URL)
	fe := map[string]any{"key": "id", "values": []any{"a", "b", "c"}}
	for _, c := range []struct {
		arg     string
		args    map[string]any
		binding Binding
	}{
		{ArgForEach, map[string]any{ArgForEach: fe}, Binding{LoopResponses: true}},
		{ArgForEach, map[string]any{ArgForEach: fe}, Binding{Bulk: true}}, // bulk needs looping
		{ArgForEach, map[string]any{ArgForEach: fe}, Binding{}},
		{ArgAllPages, map[string]any{"id": "a", ArgAllPages: true}, Binding{LoopResponses: true, Bulk: true}},
		{ArgRefresh, map[string]any{"id": "a", ArgRefresh: true}, Binding{LoopResponses: true}},
		{ArgFilter, map[string]any{"id": "a", ArgFilter: map[string]any{"field": "id", "op": "eq", "value": "a"}}, Binding{LoopResponses: true}},
	} {
		_, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Args: c.args, Binding: c.binding})
		var te *ToolError
		if !errors.As(err, &te) || te.Code != CodeWriteArgument || !strings.Contains(te.Message, c.arg) {
			t.Errorf("%s under %+v: %v, want a %s error naming it", c.arg, c.binding, err, CodeWriteArgument)
		}
	}
	if got := n.Load(); got != 0 {
		t.Errorf("%d requests sent for refused writes, want 0", got)
	}
	// The same call read-only is taken: the effect decides, and a binding
	// may override it.
	if _, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Args: map[string]any{ArgForEach: fe},
		Binding: Binding{LoopResponses: true, Effect: tools.EffectRead}}); err != nil {
		t.Errorf("read override: %v", err)
	}
}

func TestBulkWriteBudgetAndNoCache(t *testing.T) {
	srv, n := countingUpstream(t)
	e := newTestEngine(t, Options{Cache: mustCache(t)})
	tool := trashTool(srv.URL)
	b := Binding{LoopResponses: true, Bulk: true}
	three := map[string]any{ArgForEach: map[string]any{"key": "id", "values": []any{"a", "b", "c"}}}
	for i := range 2 {
		out, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Args: three, Binding: b})
		if err != nil {
			t.Fatal(err)
		}
		if out.Verdict == nil || out.Verdict.Requests != 3 {
			t.Fatalf("call %d: verdict %+v, want 3 requests", i, out.Verdict)
		}
		if got := out.Verdict.Action; !strings.Contains(got, "POST /messages/{id}/trash") || !strings.Contains(got, "3 requests") {
			t.Errorf("action %q", got)
		}
	}
	if got := n.Load(); got != 6 {
		t.Errorf("%d requests for two bulk writes of 3 values, want 6 (a write is never served from the cache)", got)
	}
	vals := make([]any, 11)
	for i := range vals {
		vals[i] = string(rune('a' + i))
	}
	_, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: b,
		Args: map[string]any{ArgForEach: map[string]any{"key": "id", "values": vals}}})
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeInvalidForEach || !strings.Contains(te.Message, "at most 10") {
		t.Errorf("11 values under the default bulk budget: %v", err)
	}
	b.BulkValues = 2
	_, err = e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: b, Args: three})
	if !errors.As(err, &te) || !strings.Contains(te.Message, "at most 2") {
		t.Errorf("3 values under bulk_values 2: %v", err)
	}
	if got := n.Load(); got != 6 {
		t.Errorf("over-budget bulk writes sent %d requests", got-6)
	}
}

// resetAfterRead is an upstream that reads the whole request, then resets
// the connection without answering: the change may have happened.
func resetAfterRead(t *testing.T) (string, *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				buf := make([]byte, 4096)
				_, _ = conn.Read(buf) // the request line and headers (no body)
				n.Add(1)
				if tc, ok := conn.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // RST, not FIN
				}
				_ = conn.Close()
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &n
}

func TestAmbiguousWriteIsNeverRetried(t *testing.T) {
	origin, n := resetAfterRead(t)
	e := newTestEngine(t, Options{})
	for _, b := range []Binding{{}, {LoopResponses: true}} {
		n.Store(0)
		_, err := e.Call(context.Background(), Call{Tool: trashTool(origin), Scope: scope, Binding: b,
			Args: map[string]any{"id": "m1"}})
		var te *ToolError
		if !errors.As(err, &te) || te.Code != CodeOutcomeUnknown {
			t.Fatalf("looping %v: %v, want %s", b.LoopResponses, err, CodeOutcomeUnknown)
		}
		for _, want := range []string{"may or may not have happened", "check", "not retried"} {
			if !strings.Contains(te.Message, want) {
				t.Errorf("message %q lacks %q", te.Message, want)
			}
		}
		if got := n.Load(); got != 1 {
			t.Errorf("looping %v: the upstream got %d requests, want 1 (no retry)", b.LoopResponses, got)
		}
	}
	// A read over the same reset is retried (and is not "unsure").
	n.Store(0)
	read := trashTool(origin)
	read.Effect = tools.EffectRead
	_, err := e.Call(context.Background(), Call{Tool: read, Scope: scope, Args: map[string]any{"id": "m1"}})
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeUpstream {
		t.Errorf("read: %v, want %s", err, CodeUpstream)
	}
	if got := n.Load(); got != 3 {
		t.Errorf("read: %d requests, want 3 (two retries)", got)
	}
}

func mustCache(t *testing.T) *DatasetCache {
	t.Helper()
	c, err := NewDatasetCache(CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
