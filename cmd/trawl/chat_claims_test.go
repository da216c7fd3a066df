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

// TestChatPrintsUpstreamProgress: a data-tool-loop-progress relayed from
// an upstream MCP server's notifications/progress, read back from the
// wire, is printed with the server's message and its progress of total
// (no page and item zeros before a page); on a terminal its bar fills by
// that fraction.
func TestChatPrintsUpstreamProgress(t *testing.T) {
	p := stream.Progress{ToolCallID: "c1", ToolName: "trigger-long-running-operation", ElapsedMs: 1200,
		Upstream: &stream.UpstreamProgress{Progress: 2, Total: 5, Message: "Operation in progress: step 2 of 5"}}
	wire, err := stream.Encode(p.Chunk())
	if err != nil {
		t.Fatal(err)
	}
	ch, err := stream.ParseChunk(wire)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	r := newChatRenderer(&chatClient{out: &out})
	r.chunk(ch)
	if want := "  … Operation in progress: step 2 of 5 · upstream 2 of 5 · 1.2s\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	// Mid-walk (a page fetched), the upstream's words come first.
	p.Page, p.Items, p.Requests = 1, 50, 1
	var lp strings.Builder
	r = newChatRenderer(&chatClient{out: &lp})
	r.showProgress("c1", p)
	if want := "  … Operation in progress: step 2 of 5 · upstream 2 of 5 · page 1 · 50 items · 1 request · 1.2s\n"; lp.String() != want {
		t.Errorf("mid-walk: printed %q, want %q", lp.String(), want)
	}
	p.Page, p.Items, p.Requests = 0, 0, 0
	var tty strings.Builder
	r = newChatRenderer(&chatClient{out: &tty, tty: true, width: func() int { return 80 }})
	r.showProgress("c1", p)
	if got := tty.String(); !strings.Contains(got, "[██████·········] Operation in progress: step 2 of 5") {
		t.Errorf("terminal line %q: want a bar 2/5 full and the message", got)
	}
}
