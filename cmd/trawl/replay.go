package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/deploy"
)

// replay plays a recorded conversation against the live tools as an
// experiment run: a readable account on stderr, the resulting thread
// (UIMessage[]) as JSON on stdout. Each answer is checked against its
// live calls (agent.CheckAnswer), and each recorded verdict against the
// live one: a verdict_changed is reported (the replay then gave no
// recorded answer), an unsupported_claim fails the replay. It fails
// (exit 1) when a tool call failed or an answer claims what its calls do
// not support.
func replay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("replay", stderr)
	agentID := fs.String("agent", "", "the `ID` of the agent to replay against (default: the only agent, or demo)")
	cfgPath := configFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("replay: name the transcript: trawl replay TRANSCRIPT [--agent ID] [--config F]")
	case len(pos) > 1:
		return usagef("replay: unexpected argument %q", pos[1])
	}
	path := pos[0]
	tr, err := agent.LoadTranscript(path)
	if err != nil {
		return err
	}
	srv, done, err := openPartsCalling(ctx, *cfgPath, stderr, deploy.PartsReplay, true)
	if err != nil {
		return err
	}
	defer done()
	acct := &account{w: stderr}
	thread, err := srv.Replay(ctx, tr, *agentID, acct.chunk)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(thread.Msgs); err != nil {
		return err
	}
	unsupported := honesty(stderr, tr, thread.Msgs)
	switch {
	case acct.failed > 0:
		return fmt.Errorf("replay: %d tool calls failed", acct.failed)
	case unsupported > 0:
		return fmt.Errorf("replay: %d answers claim what their calls do not support", unsupported)
	}
	return nil
}

// honesty reports the replayed thread's verdict changes and unsupported
// claims, turn by turn, and returns how many answers claim what their
// calls do not support.
func honesty(w io.Writer, tr *agent.Transcript, msgs []agent.UIMessage) (unsupported int) {
	turn := -1
	for _, m := range msgs {
		switch m.Role {
		case agent.RoleUser:
			turn++
			continue
		case agent.RoleAssistant:
		default:
			continue
		}
		for _, c := range tr.VerdictChanges(turn, m) {
			fmt.Fprintf(w, "! turn %d: %s: %s (%s) was %s when recorded, %s now; the recorded answer was not given\n",
				turn+1, agent.KindVerdictChanged, c.Tool, c.CallID, c.Recorded, c.Live)
		}
		findings := agent.CheckAnswer(m)
		for _, f := range findings {
			fmt.Fprintf(w, "✗ turn %d: %s: %q — %s (%s) was %s\n", turn+1, f.Kind, f.Claim, f.Tool, f.CallID, f.Verdict)
		}
		if len(findings) > 0 {
			unsupported++
		}
	}
	return unsupported
}

// account writes a readable account of a replayed run.
type account struct {
	w      io.Writer
	text   strings.Builder
	failed int
}

func (a *account) chunk(c stream.Chunk) {
	switch c := c.(type) {
	case stream.TextDelta:
		a.text.WriteString(c.Delta)
	case stream.TextEnd:
		fmt.Fprintf(a.w, "assistant: %s\n", a.text.String())
		a.text.Reset()
	case stream.ToolInputAvailable:
		in, _ := json.Marshal(c.Input)
		fmt.Fprintf(a.w, "tool %s %s\n", c.ToolName, in)
	case stream.ToolOutputAvailable:
		var env loop.Envelope
		if b, err := json.Marshal(c.Output); err == nil {
			env, _ = loop.ReadEnvelope(b)
		}
		switch {
		case env.Looped():
			fmt.Fprintf(a.w, "  → %s\n", env.Note)
		case env.Aggregate == nil:
			fmt.Fprintf(a.w, "  → ok\n")
		}
		if env.Aggregate != nil {
			fmt.Fprintf(a.w, "  → aggregate: %s\n", env.Aggregate.Verdict)
		}
	case stream.ToolOutputError:
		a.failed++
		fmt.Fprintf(a.w, "  → error: %s\n", c.ErrorText)
	case stream.ToolInputError:
		a.failed++
		fmt.Fprintf(a.w, "  → error: %s\n", c.ErrorText)
	}
}
