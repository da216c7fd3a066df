package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/claims"
	"github.com/trawl-dev/trawl/stream"
)

// TestChatPrintsClaimCheck: a data-claim-check chunk, parsed back from
// the wire as the chat client reads it, is printed under the answer.
func TestChatPrintsClaimCheck(t *testing.T) {
	cc := agent.ClaimCheck{Mode: agent.AnswerCheckRevise, Status: agent.ClaimRevising, Findings: []claims.Finding{{
		Kind: claims.KindUnsupported, Claim: "All 50 items", CallID: "c1", Tool: "list_items", Verdict: claims.FirstPageOnly}}}
	wire, err := stream.Encode(stream.Data{Name: agent.ClaimCheckName, ID: "claim-check-1", Data: cc})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := stream.ParseChunk(wire)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := newChatRenderer(&chatClient{out: &out})
	r.chunk(stream.TextDelta{ID: "t", Delta: "All 50 items are listed."})
	r.chunk(stream.TextEnd{ID: "t"})
	r.chunk(ch)
	want := "All 50 items are listed.\n⚠ unsupported claim \"All 50 items\": list_items (c1) was first page only, not complete\n  a correction follows\n"
	if out.String() != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	var back agent.ClaimCheck
	if err := json.Unmarshal(wire, &struct {
		Data *agent.ClaimCheck `json:"data"`
	}{&back}); err != nil || back.Findings[0].Verdict != claims.FirstPageOnly {
		t.Errorf("wire %s: %v", wire, err)
	}
}
