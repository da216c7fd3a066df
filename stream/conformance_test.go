package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The conformance harness (testdata/conformance) reads our streams with
// the AI SDK's own code: ai@5.0.60, the latest 6.x and the latest 7.x.
const harnessDir = "testdata/conformance"

// harness returns the node binary, or skips the test when node or the
// harness's node_modules are missing.
func harness(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("conformance: node is not installed; install Node.js (>= 20) and run stream/testdata/conformance/install.sh")
	}
	for _, pkg := range []string{"ai5", "ai6", "ai7"} {
		if _, err := os.Stat(filepath.Join(harnessDir, "node_modules", pkg, "package.json")); err != nil {
			t.Skipf("conformance: %s is not installed; run stream/testdata/conformance/install.sh", pkg)
		}
	}
	return node
}

// scriptedTurn writes one agent turn to runID the way the runner does: a
// step with a looping tool call (streamed arguments, throttled progress
// while it walks eight pages) and a dynamic tool call, then a step that
// answers in text.
func scriptedTurn(ctx context.Context, l EventLog, runID string) error {
	clock := newFakeClock()
	progress := NewThrottle(ThrottleOptions{Now: clock.Now})
	var chunks []Chunk
	add := func(c ...Chunk) { chunks = append(chunks, c...) }

	add(Start{MessageID: "msg_" + runID}, StartStep{},
		ContextReport{Step: 0, Model: "gpt-4o-mini", Chars: 9120, Tokens: 3040, CharsPerToken: 3,
			BudgetTokens: 111616, BudgetChars: 334848, Messages: 4}.Chunk(),
		ToolInputStart{ToolCallID: "call_1", ToolName: "list_orders"},
		ToolInputDelta{ToolCallID: "call_1", InputTextDelta: `{"status":`},
		ToolInputDelta{ToolCallID: "call_1", InputTextDelta: `"open",`},
		ToolInputDelta{ToolCallID: "call_1", InputTextDelta: `"_all_pages":true}`},
		ToolInputAvailable{ToolCallID: "call_1", ToolName: "list_orders",
			Input: map[string]any{"status": "open", "_all_pages": true}},
		ToolInputStart{ToolCallID: "call_2", ToolName: "search_tools", Dynamic: true},
		ToolInputAvailable{ToolCallID: "call_2", ToolName: "search_tools", Dynamic: true,
			Input: json.RawMessage(`{"query":"refunds"}`)},
	)
	start := clock.Now()
	for page := 1; page <= 8; page++ {
		if progress.Allow("call_1") {
			add(Progress{ToolCallID: "call_1", ToolName: "list_orders", Page: page, PagesMax: 20,
				Items: 50 * page, Requests: page, RequestsMax: 60,
				ElapsedMs: clock.Now().Sub(start).Milliseconds()}.Chunk())
		}
		clock.Advance(300 * time.Millisecond)
	}
	progress.Forget("call_1")
	add(ToolOutputAvailable{ToolCallID: "call_2", Dynamic: true,
		Output: map[string]any{"tools": []string{"refunds.list"}}},
		ToolOutputAvailable{ToolCallID: "call_1", Output: map[string]any{
			"items": []map[string]any{{"id": 1}, {"id": 2}}, "_pagingComplete": true}},
		FinishStep{},
		StartStep{},
		ContextReport{Step: 1, Model: "gpt-4o-mini", Chars: 9480, Tokens: 2963, CharsPerToken: 3.2, Calibrated: true,
			BudgetTokens: 111616, BudgetChars: 357171, Messages: 6, Compacted: 1, CompactedChars: 30211,
			CompactedCalls: []string{"call_0"}, ReportedPromptTokens: 2850}.Chunk(),
		TextStart{ID: "text_1"},
		TextDelta{ID: "text_1", Delta: "There are "},
		TextDelta{ID: "text_1", Delta: "400 open orders."},
		TextEnd{ID: "text_1"},
		FinishStep{},
		Finish{},
	)
	for _, c := range chunks {
		if _, err := l.Append(ctx, runID, c); err != nil {
			return err
		}
	}
	return nil
}

// conformanceServer serves:
//
//	POST /chat             a new run of scriptedTurn, live
//	GET  /runs/{run}       a stored run, from Last-Event-ID
func conformanceServer(t *testing.T, l EventLog) *httptest.Server {
	var runs atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /chat", func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil || len(body.Messages) == 0 {
			http.Error(w, fmt.Sprintf("not an AI SDK chat request: %v", err), http.StatusBadRequest)
			return
		}
		runID := fmt.Sprint("run_", runs.Add(1))
		ctx := context.WithoutCancel(r.Context()) // the run outlives the request
		if err := l.Open(ctx, runID); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		go func() {
			defer l.Close(ctx, runID)
			if err := scriptedTurn(ctx, l, runID); err != nil {
				t.Errorf("%s: %v", runID, err)
			}
		}()
		if err := Serve(w, r, l, runID, ServeOptions{}); err != nil {
			t.Errorf("Serve %s: %v", runID, err)
		}
	})
	mux.HandleFunc("GET /runs/{run}", func(w http.ResponseWriter, r *http.Request) {
		if err := Serve(w, r, l, r.PathValue("run"), ServeOptions{}); err != nil {
			t.Errorf("Serve %s: %v", r.PathValue("run"), err)
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// harnessSummary is the part of check.mjs's output the test reads.
type harnessSummary struct {
	OK       bool `json:"ok"`
	Versions []struct {
		Package  string   `json:"package"`
		Version  string   `json:"version"`
		OK       bool     `json:"ok"`
		Failures []string `json:"failures"`
	} `json:"versions"`
}

func runHarness(t *testing.T, node string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"check.mjs"}, args...)...)
	cmd.Dir = harnessDir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) {
		t.Fatalf("check.mjs %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	var sum harnessSummary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("check.mjs output: %v\n%s\n%s", err, out, stderr.String())
	}
	if len(sum.Versions) != 3 {
		t.Errorf("checked %d versions, want 3", len(sum.Versions))
	}
	for _, v := range sum.Versions {
		for _, f := range v.Failures {
			t.Errorf("%s (ai@%s): %s", v.Package, v.Version, f)
		}
	}
	if !sum.OK || t.Failed() || testing.Verbose() {
		t.Logf("summary:\n%s", out)
	}
}

// TestConformance serves a scripted turn built with this package and has
// ai@5.0.60, 6.x and 7.x validate every chunk, read the stream to its
// final message, and run a Chat over DefaultChatTransport against it.
func TestConformance(t *testing.T) {
	node := harness(t)
	l := NewMemoryLog(MemoryLogOptions{})
	srv := conformanceServer(t, l)

	t.Run("chat turn", func(t *testing.T) {
		runHarness(t, node, "--url", srv.URL+"/chat",
			"--expect-tool", "list_orders", "--expect-tool", "search_tools",
			"--expect-data", ProgressName, "--expect-data", ContextName, "--expect-text", "400 open orders.")
	})

	ctx := context.Background()
	t.Run("resume", func(t *testing.T) {
		if err := l.Open(ctx, "resumed"); err != nil {
			t.Fatal(err)
		}
		if err := scriptedTurn(ctx, l, "resumed"); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(ctx, "resumed"); err != nil {
			t.Fatal(err)
		}
		runHarness(t, node, "--url", srv.URL+"/runs/resumed", "--method", "GET",
			"--header", "Last-Event-ID: 5", "--after", "5", "--checks", "schema")
	})

	t.Run("every chunk type", func(t *testing.T) {
		if err := l.Open(ctx, "golden"); err != nil {
			t.Fatal(err)
		}
		for _, tc := range chunkCases {
			if _, err := l.Append(ctx, "golden", tc.chunk); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Close(ctx, "golden"); err != nil {
			t.Fatal(err)
		}
		runHarness(t, node, "--url", srv.URL+"/runs/golden", "--method", "GET", "--checks", "schema")
	})
}
