package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/agent/claims"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/stream"
)

func say(text string) func(ModelRequest) []ModelEvent {
	return func(ModelRequest) []ModelEvent {
		return []ModelEvent{{Kind: EventTextDelta, Text: text}, {Kind: EventFinish, FinishReason: "stop"}}
	}
}

// claimChecks are the data-claim-check chunks the turn streamed.
func claimChecks(t *testing.T, rec *recorder) []ClaimCheck {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var out []ClaimCheck
	for _, c := range rec.chunks {
		d, ok := c.(stream.Data)
		if !ok || d.Name != ClaimCheckName {
			continue
		}
		var cc ClaimCheck
		if err := json.Unmarshal(d.Data.(json.RawMessage), &cc); err != nil {
			t.Fatal(err)
		}
		out = append(out, cc)
	}
	return out
}

// TestAnswerCheck runs turns over list_items (5 pages of 10, looping
// on): called without _all_pages it fetches the first page only.
func TestAnswerCheck(t *testing.T) {
	firstPage := func(ModelRequest) []ModelEvent { return call("c1", "list_items", `{}`) }
	allPages := func(ModelRequest) []ModelEvent { return call("c1", "list_items", `{"_all_pages":true}`) }
	lie := "All 50 items are listed; the list is complete."
	finding := claims.Finding{Kind: claims.KindUnsupported, Claim: "All 50 items", Sentence: lie,
		CallID: "c1", Tool: "list_items", Verdict: claims.FirstPageOnly}
	tests := []struct {
		name   string
		mode   AnswerCheck
		steps  []func(ModelRequest) []ModelEvent
		checks []ClaimCheck // the data-claim-check parts, reasons left out
		calls  int          // model calls
		texts  []string     // the assistant message's text parts
	}{
		{"a lying answer is flagged (warn is the default)", "", []func(ModelRequest) []ModelEvent{firstPage, say(lie)},
			[]ClaimCheck{{Mode: AnswerCheckWarn, Status: ClaimUnsupported, Findings: []claims.Finding{finding}}}, 2, []string{lie}},
		{"a truthful answer over a complete walk is untouched", "", []func(ModelRequest) []ModelEvent{allPages, say(lie)}, nil, 2, []string{lie}},
		{"a hedged answer is untouched", AnswerCheckRevise, []func(ModelRequest) []ModelEvent{firstPage, say("I fetched the first 10 items; more exist.")},
			nil, 2, []string{"I fetched the first 10 items; more exist."}},
		{"off checks nothing", AnswerCheckOff, []func(ModelRequest) []ModelEvent{firstPage, say(lie)}, nil, 2, []string{lie}},
		{"revise asks for a correction, which follows the answer", AnswerCheckRevise,
			[]func(ModelRequest) []ModelEvent{firstPage, say(lie), say("Correction: I fetched only the first 10 items; there are at least 10.")},
			[]ClaimCheck{{Mode: AnswerCheckRevise, Status: ClaimRevising, Findings: []claims.Finding{finding}}}, 3,
			[]string{lie, "Correction: I fetched only the first 10 items; there are at least 10."}},
		{"a revision that still lies is flagged, and the turn ends", AnswerCheckRevise,
			[]func(ModelRequest) []ModelEvent{firstPage, say(lie), say("Every one of the 50 items is listed.")},
			[]ClaimCheck{
				{Mode: AnswerCheckRevise, Status: ClaimRevising, Findings: []claims.Finding{finding}},
				{Mode: AnswerCheckRevise, Status: ClaimUnsupported, Revision: true, Findings: []claims.Finding{{Kind: claims.KindUnsupported,
					Claim: "Every one", Sentence: "Every one of the 50 items is listed.", CallID: "c1", Tool: "list_items", Verdict: claims.FirstPageOnly}}},
			}, 3, []string{lie, "Every one of the 50 items is listed."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &scriptModel{steps: tt.steps}
			r, _ := newTestRunner(t, m, nil)
			def := Definition{ID: "a", AnswerCheck: tt.mode, AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
			rec := &recorder{}
			tr := turn(def, rec)
			if err := r.Run(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			got := claimChecks(t, rec)
			for i := range got {
				for j := range got[i].Findings {
					if !strings.Contains(got[i].Findings[j].Reason, "list_items") {
						t.Errorf("reason %q does not name the call", got[i].Findings[j].Reason)
					}
					got[i].Findings[j].Reason = ""
				}
			}
			if diff := cmp.Diff(tt.checks, got); diff != "" {
				t.Errorf("claim checks (-want +got):\n%s", diff)
			}
			if len(m.reqs) != tt.calls {
				t.Errorf("%d model calls; want %d", len(m.reqs), tt.calls)
			}
			msg := tr.Thread.Msgs[len(tr.Thread.Msgs)-1]
			var texts []string
			parts := 0
			for _, p := range msg.Parts {
				switch p.Type {
				case "text":
					texts = append(texts, p.Text)
				case "data-" + ClaimCheckName:
					parts++
				}
			}
			if diff := cmp.Diff(tt.texts, texts); diff != "" {
				t.Errorf("texts (-want +got):\n%s", diff)
			}
			if parts != len(tt.checks) {
				t.Errorf("the thread keeps %d claim-check parts; want %d", parts, len(tt.checks))
			}
			if tt.calls == 3 {
				// The revision step was told why, after the answer it corrects.
				msgs := m.reqs[2].Messages
				last := msgs[len(msgs)-1]
				if last.Role != RoleSystem || !strings.HasPrefix(last.Content, prompts.Text("claimcheck")) || !strings.Contains(last.Content, "first page") {
					t.Errorf("the revision step's last message: %+v", last)
				}
				if prev := msgs[len(msgs)-2]; prev.Role != RoleAssistant || prev.Content != lie {
					t.Errorf("the revision step does not see the answer: %+v", prev)
				}
			}
			// The claim check follows the answer's text, and a revision
			// follows the claim check.
			types := strings.Join(rec.types(), " ")
			if len(tt.checks) > 0 && !strings.Contains(types, "text-end finish-step data-claim-check") {
				t.Errorf("chunks: %s", types)
			}
			if tt.calls == 3 && !strings.Contains(types, "data-claim-check start-step") {
				t.Errorf("chunks: %s", types)
			}
		})
	}
}

func TestAnswerCheckValidate(t *testing.T) {
	for _, v := range []AnswerCheck{"", AnswerCheckOff, AnswerCheckWarn, AnswerCheckRevise} {
		d := Definition{ID: "a", AnswerCheck: v}
		if err := d.Validate(); err != nil {
			t.Errorf("%q: %v", v, err)
		}
	}
	d := Definition{ID: "a", AnswerCheck: "sometimes"}
	if err := d.Validate(); err == nil || !strings.Contains(err.Error(), "answer_check") {
		t.Errorf("answer_check sometimes: %v", err)
	}
}
