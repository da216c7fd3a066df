package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"iter"
	"net/url"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

const (
	testModelKey   = "MODELKEY/tok+5d4c3b2a1f"
	testRuntimeKey = "RUNTIME/tok+0a9b8c7d6e"
)

// pieces cuts s into n-byte deltas of kind.
func pieces(kind EventKind, s string, n int, index int) []ModelEvent {
	var out []ModelEvent
	for len(s) > 0 {
		k := min(n, len(s))
		ev := ModelEvent{Kind: kind, Index: index}
		if kind == EventToolCallDelta {
			ev.ArgsDelta = s[:k]
		} else {
			ev.Text = s[:k]
		}
		out = append(out, ev)
		s = s[k:]
	}
	return out
}

// leaks returns the spellings of the planted keys found in text.
func leaks(text string) []string {
	var out []string
	for _, k := range []string{testModelKey, testRuntimeKey} {
		for _, f := range []string{k, url.QueryEscape(k), strings.ReplaceAll(k, "/", `\/`), base64.StdEncoding.EncodeToString([]byte(k)),
			base64.StdEncoding.EncodeToString([]byte("Bearer " + k))[12:30]} {
			if strings.Contains(text, f) {
				out = append(out, f)
			}
		}
	}
	return out
}

// TestRunnerScrubsModelOutput: the model's own output — text, reasoning,
// tool calls and their arguments, all streamed in 3-character deltas, the
// keys raw, URL-escaped and base64-encoded inside a longer string — is
// masked before the stream, the thread and the next request see it, with
// the deployment's secrets and the caller's runtime credential.
func TestRunnerScrubsModelOutput(t *testing.T) {
	said := "my key header is Bearer " + testModelKey + ", yours is " +
		base64.StdEncoding.EncodeToString([]byte("Bearer "+testRuntimeKey)) + " or ?k=" + url.QueryEscape(testModelKey) + "; bye"
	args := `{"note":"` + strings.ReplaceAll(testRuntimeKey, "/", `\/`) + `"}`
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent {
			evs := pieces(EventReasoningDelta, "thinking of "+testModelKey, 3, 0)
			evs = append(evs, pieces(EventTextDelta, said, 3, 0)...)
			evs = append(evs, ModelEvent{Kind: EventToolCallStart, ToolCallID: "c1", ToolName: "nope"})
			evs = append(evs, pieces(EventToolCallDelta, args, 3, 0)...)
			return append(evs, ModelEvent{Kind: EventFinish, FinishReason: "tool_calls"})
		},
	}}
	r, _ := newTestRunner(t, m, nil)
	deployment := tools.NewScrubber(testModelKey)
	r.opt.Scrub = func(runtime ...string) *tools.Scrubber { return deployment.With(runtime...) }
	rec := &recorder{}
	tr := turn(Definition{ID: "a", MaxSteps: 2}, rec)
	tr.Credentials = map[string]string{"p": testRuntimeKey}
	if err := r.Run(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	chunks, _ := json.Marshal(rec.chunks)
	thread, _ := json.Marshal(tr.Thread)
	m.mu.Lock()
	next, _ := json.Marshal(m.reqs[1:])
	m.mu.Unlock()
	for name, text := range map[string]string{"stream": string(chunks), "thread": string(thread), "the next model request": string(next)} {
		if l := leaks(text); len(l) > 0 {
			t.Errorf("%s holds %q: %s", name, l, text)
		}
		if !strings.Contains(text, tools.Mask) {
			t.Errorf("%s holds no mask: %s", name, text)
		}
	}
	// The deltas add up to the part kept in the thread, and what is not a
	// secret is kept as the model said it.
	var streamed strings.Builder
	for _, c := range rec.chunks {
		if d, ok := c.(interface{ Type() string }); ok && d.Type() == "text-delta" {
			b, _ := json.Marshal(c)
			var td struct{ ID, Delta string }
			json.Unmarshal(b, &td)
			if td.ID == "txt_0" {
				streamed.WriteString(td.Delta)
			}
		}
	}
	var kept string
	for _, p := range tr.Thread.Msgs[len(tr.Thread.Msgs)-1].Parts {
		if p.Type == "text" && kept == "" {
			kept = p.Text
		}
	}
	if streamed.String() != kept || !strings.HasPrefix(kept, "my key header is Bearer "+tools.Mask+", yours is QmVhcmVyI") ||
		!strings.HasSuffix(kept, " or ?k="+tools.Mask+"; bye") {
		t.Errorf("streamed %q, kept %q", streamed.String(), kept)
	}
}

// errModel fails at once with err.
type errModel struct{ err error }

func (m errModel) Stream(context.Context, ModelRequest) iter.Seq2[ModelEvent, error] {
	return func(yield func(ModelEvent, error) bool) { yield(ModelEvent{}, m.err) }
}

// A model error is scrubbed like its output, before the stream, the log
// and the error returned see it.
func TestRunnerScrubsModelErrors(t *testing.T) {
	r, _ := newTestRunner(t, errModel{errors.New("bad key " + url.QueryEscape(testModelKey) + " for " +
		base64.StdEncoding.EncodeToString([]byte("Bearer "+testRuntimeKey)))}, nil)
	r.opt.Scrub = func(runtime ...string) *tools.Scrubber { return tools.NewScrubber(testModelKey).With(runtime...) }
	rec := &recorder{}
	tr := turn(Definition{ID: "a"}, rec)
	tr.Credentials = map[string]string{"p": testRuntimeKey}
	err := r.Run(context.Background(), tr)
	var me *ModelError
	if !errors.As(err, &me) {
		t.Fatalf("Run: %v, want a ModelError", err)
	}
	chunks, _ := json.Marshal(rec.chunks)
	for name, text := range map[string]string{"error": err.Error(), "stream": string(chunks)} {
		if l := leaks(text); len(l) > 0 || !strings.Contains(text, tools.Mask) {
			t.Errorf("%s: %s (leaks %q)", name, text, l)
		}
	}
}
