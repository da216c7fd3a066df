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
// (UIMessage[]) as JSON on stdout. It fails (exit 1) when a tool call
// failed.
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
	srv, done, err := openParts(ctx, *cfgPath, stderr, deploy.PartsReplay)
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
	if acct.failed > 0 {
		return fmt.Errorf("replay: %d tool calls failed", acct.failed)
	}
	return nil
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
