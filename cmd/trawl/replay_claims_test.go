package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/agent"
)

// TestReplayHonesty replays transcripts against the demo: an answer that
// claims every order over a first page fails the replay, naming the call
// and its verdict; a recorded complete call that comes back first page
// only is a verdict_changed, and the recorded answer is not given; a
// hedged answer and the demo's own transcript pass.
func TestReplayHonesty(t *testing.T) {
	demoTranscript, err := filepath.Abs("../../tools/demo/replay.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir) // no ./trawl.yaml: the demo
	write := func(name, verdict, answer string) string {
		call := map[string]any{"name": "list_orders", "arguments": map[string]any{"per_page": 20}}
		if verdict != "" {
			call["verdict"] = verdict
		}
		b, _ := json.Marshal(map[string]any{"name": name, "turns": []any{map[string]any{"user": "How many orders are there?",
			"steps": []any{map[string]any{"tool_calls": []any{call}}, map[string]any{"text": answer}}}}})
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	answerOf := func(t *testing.T, out string) string {
		var msgs []agent.UIMessage
		if err := json.Unmarshal([]byte(out), &msgs); err != nil {
			t.Fatalf("stdout: %v\n%s", err, out)
		}
		return msgs[len(msgs)-1].Text()
	}

	t.Run("an unsupported claim fails", func(t *testing.T) {
		code, out, errOut := runCLI(t, "replay", write("lie", "", "All 120 orders were fetched; the list is complete."))
		if code != 1 || !strings.Contains(errOut, `✗ turn 1: unsupported_claim: "All 120 orders" — list_orders (`) ||
			!strings.Contains(errOut, ") was first_page_only\n") || !strings.Contains(errOut, "1 answers claim what their calls do not support") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
		if got := answerOf(t, out); got != "All 120 orders were fetched; the list is complete." {
			t.Errorf("answer %q", got)
		}
	})
	t.Run("a changed verdict is reported and the recorded answer not given", func(t *testing.T) {
		recorded := "All 364 orders were fetched; the list is complete."
		code, out, errOut := runCLI(t, "replay", write("changed", "complete", recorded))
		if !strings.Contains(errOut, "! turn 1: verdict_changed: list_orders (") || !strings.Contains(errOut, ") was complete when recorded, first_page_only now") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
		if got := answerOf(t, out); strings.Contains(got, recorded) || !strings.Contains(got, "was complete when recorded and came back first_page_only") {
			t.Errorf("answer %q; want the deviation, not the recorded text", got)
		}
		if strings.Contains(errOut, "unsupported_claim") || code != 0 {
			t.Errorf("the deviation answer was flagged: exit %d, stderr:\n%s", code, errOut)
		}
	})
	t.Run("a hedged answer passes", func(t *testing.T) {
		code, _, errOut := runCLI(t, "replay", write("hedged", "first_page_only", "I fetched the first 20 orders; more exist."))
		if code != 0 || strings.Contains(errOut, "unsupported_claim") || strings.Contains(errOut, "verdict_changed") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
	t.Run("the demo's transcript passes", func(t *testing.T) {
		code, _, errOut := runCLI(t, "replay", demoTranscript)
		if code != 0 || strings.Contains(errOut, "unsupported_claim") {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
	t.Run("a bad recorded verdict is refused", func(t *testing.T) {
		code, _, errOut := runCLI(t, "replay", write("bad", "mostly", "x"))
		if code == 0 || !strings.Contains(errOut, `verdict: want one of`) {
			t.Errorf("exit %d, stderr:\n%s", code, errOut)
		}
	})
}
