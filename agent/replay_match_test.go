package agent

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata")

// replayConverse plays whole turns of a conversation the way the runner
// does: each question, then every step until one without tool calls
// (each call answered with a complete result). It returns each turn's
// events, summarised one step per line.
// With brief, a step is its tool calls alone (the demo's texts are the
// demo's to change).
func replayConverse(t *testing.T, r *Replay, questions []string, brief bool) string {
	t.Helper()
	msgs := []Message{{Role: RoleSystem, Content: "You help."}}
	var b strings.Builder
	for _, q := range questions {
		msgs = append(msgs, Message{Role: RoleUser, Content: q})
		turn, _ := r.Position(msgs)
		fmt.Fprintf(&b, "ask %q → turn %d\n", q, turn)
		for step := 0; ; step++ {
			if step > 10 {
				t.Fatalf("%q: more than 10 steps", q)
			}
			evs, err := replayRun(t, r, context.Background(), msgs)
			if err != nil {
				t.Fatal(err)
			}
			if brief {
				var calls []string
				for _, ev := range evs {
					if ev.Kind == EventToolCallStart {
						calls = append(calls, ev.ToolCallID+":"+ev.ToolName)
					}
				}
				if len(calls) == 0 {
					calls = []string{"(answer)"}
				}
				fmt.Fprintf(&b, "  %s\n", strings.Join(calls, " "))
			} else {
				fmt.Fprintf(&b, "  %s\n", replaySummary(evs))
			}
			m := Message{Role: RoleAssistant}
			for _, ev := range evs {
				switch ev.Kind {
				case EventTextDelta:
					m.Content += ev.Text
				case EventToolCallStart:
					m.ToolCalls = append(m.ToolCalls, ToolCall{ID: ev.ToolCallID, Name: ev.ToolName})
				case EventToolCallDelta:
					m.ToolCalls[ev.Index].Arguments += ev.ArgsDelta
				}
			}
			msgs = append(msgs, m)
			for _, c := range m.ToolCalls {
				msgs = append(msgs, Message{Role: RoleTool, ToolCallID: c.ID, Content: `{"ok":true,"_boundary":{"completion":"complete"}}`})
			}
			if len(m.ToolCalls) == 0 {
				break
			}
		}
	}
	return b.String()
}

// TestReplayMatchGolden: the turn played is the one whose question was
// asked — in the recording's order, out of it, reworded, asked again —
// and a question the recording lacks is answered by saying so, with the
// recorded questions listed. The conversations and what each plays are
// in testdata/replay/match.golden (go test -run TestReplayMatchGolden
// -update rewrites it).
func TestReplayMatchGolden(t *testing.T) {
	tr := replayLoad(t)
	demo, err := os.ReadFile(filepath.Join("..", "tools", "demo", "replay.json"))
	if err != nil {
		t.Fatal(err)
	}
	demoTr, err := ParseTranscript(demo)
	if err != nil {
		t.Fatal(err)
	}
	q1, q2 := tr.Turns[0].User, tr.Turns[1].User
	d1, d2 := demoTr.Turns[0].User, demoTr.Turns[1].User
	conversations := []struct {
		name      string
		tr        *Transcript
		questions []string
		brief     bool // tool calls only
	}{
		{"in order", tr, []string{q1, q2}, false},
		{"out of order", tr, []string{q2, q1}, false},
		{"reworded: case, punctuation, spacing", tr, []string{"  how many OPEN orders over $100 do we have  ", "which customer ordered the most"}, false},
		{"closest by words", tr, []string{"Which customers ordered most?", "open orders over 100"}, false},
		{"asked again", tr, []string{q1, q1}, false},
		{"unknown question", tr, []string{"What is the weather in Lisbon?", q2}, false},
		{"demo: in order", demoTr, []string{d1, d2}, true},
		{"demo: out of order", demoTr, []string{d2, d1}, true},
		{"demo: README's shorter question", demoTr, []string{"How many open orders worth more than 100?"}, true},
		{"demo: unknown question", demoTr, []string{"hello"}, false},
	}
	var got strings.Builder
	for _, c := range conversations {
		fmt.Fprintf(&got, "== %s\n", c.name)
		got.WriteString(replayConverse(t, NewReplay(c.tr, ReplayOptions{ChunkSize: 100000}), c.questions, c.brief))
	}
	golden := filepath.Join("testdata", "replay", "match.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -run TestReplayMatchGolden -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("conversations (-want +got):\n%s", diff)
	}
}

// TestReplayMatch: Match on its own, the rules one by one.
func TestReplayMatch(t *testing.T) {
	tr, err := ParseTranscript([]byte(`{"turns":[
		{"user":"How many open orders do we have?","steps":[{"text":"a"}]},
		{"user":"How many confirmed bookings were for a week or longer?","steps":[{"text":"b"}]},
		{"user":"again","steps":[{"text":"c"}]},
		{"user":"Again!","steps":[{"text":"d"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReplay(tr, ReplayOptions{})
	tests := []struct {
		question string
		at, want int
	}{
		{"How many open orders do we have?", 0, 0},
		{"How many open orders do we have?", 5, 0},
		{"how many open orders do we have", 1, 0},
		{"Bookings of a week or longer, confirmed ones", 0, 1},
		{"orders", 1, 0},
		{"open bookings", 0, 0}, // half each: the closer question by length
		{"again", 3, 3},         // the same text twice: the one in its place
		{"again", 0, 2},         // else the first
		{"What about invoices?", 0, -1},
		{"", 0, -1},
		{"?!", 0, -1},
	}
	for _, tt := range tests {
		if got := r.Match(tt.question, tt.at); got != tt.want {
			t.Errorf("Match(%q, %d) = %d, want %d", tt.question, tt.at, got, tt.want)
		}
	}
}
