package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/trawl-dev/trawl/loop"
)

// call walks one tool call completely and prints the envelope as JSON on
// stdout, progress on stderr (a live bar on a terminal, plain lines
// otherwise) and the boundary statement at the end.
func call(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("call", stderr)
	argsJSON := fs.String("args", "{}", "the tool's arguments as a JSON object (reserved ones included)")
	cfgPath := fs.String("config", "", "config file (default ./trawl.yaml, else the demo)")
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return usagef("call: usage: trawl call TOOL --args JSON [--config F]")
	}
	tool, rest := args[0], args[1:]
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("call: unexpected argument %q", fs.Arg(0))
	}
	var toolArgs map[string]any
	if err := json.Unmarshal([]byte(*argsJSON), &toolArgs); err != nil || toolArgs == nil {
		return usagef("call: --args must be a JSON object: %v", errOr(err, "null"))
	}
	srv, done, err := openEphemeral(ctx, *cfgPath, stderr)
	if err != nil {
		return err
	}
	defer done()
	bar := newProgressBar(stderr)
	out, err := srv.CallTool(ctx, tool, toolArgs, bar.update)
	bar.done()
	if err != nil {
		return err
	}
	var pretty any
	if json.Unmarshal(out.View, &pretty) == nil {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(pretty); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(stdout, "%s\n", out.View)
	}
	printVerdict(stderr, out)
	return nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// printVerdict writes the verdict, the boundary statement and the note,
// all rendered from the engine's typed verdict (never re-read from the
// JSON view). A plain call (no verdict) prints nothing.
func printVerdict(w io.Writer, out *loop.Outcome) {
	v := out.Verdict
	if v == nil {
		return
	}
	fmt.Fprintln(w, v.Summary())
	if b, err := json.Marshal(v.Boundary()); err == nil {
		fmt.Fprintf(w, "boundary: %s\n", b)
	}
	for _, e := range v.ForEachErrors {
		fmt.Fprintf(w, "for_each error: %s=%v: %s (retryable: %v)\n", v.ForEachKey, e.Value, e.Error, e.Retryable)
	}
	for _, s := range v.ForEachSkipped {
		fmt.Fprintf(w, "for_each skipped: %s=%v: %s\n", v.ForEachKey, s.Value, s.Reason)
	}
	if v.Note != "" {
		fmt.Fprintf(w, "note: %s\n", v.Note)
	}
	if v.ResultID != "" && !v.ResultExpires.IsZero() {
		fmt.Fprintf(w, "result: %s (kept until %s)\n", v.ResultID, v.ResultExpires.UTC().Format(time.RFC3339))
	}
}

// progressBar renders loop progress on stderr: one live line on a
// terminal, a plain line per report otherwise (at most one per 500 ms).
type progressBar struct {
	w     io.Writer
	tty   bool
	last  time.Time
	shown bool
}

func newProgressBar(w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	return &progressBar{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (b *progressBar) update(p loop.Progress) {
	now := time.Now()
	if !b.tty && now.Sub(b.last) < 500*time.Millisecond && b.shown {
		return
	}
	b.last, b.shown = now, true
	line := fmt.Sprintf("page %d/%d · %d items · %d/%d requests · %.1fs",
		p.Page, p.PagesMax, p.Items, p.Requests, p.RequestsMax, p.Elapsed.Seconds())
	if p.ForEach != nil {
		line += fmt.Sprintf(" · %s %d/%d (%v)", p.ForEach.Key, p.ForEach.Index+1, p.ForEach.Total, p.ForEach.Value)
	}
	if !b.tty {
		fmt.Fprintln(b.w, "progress: "+line)
		return
	}
	const width = 24
	filled := 0
	if p.RequestsMax > 0 {
		filled = min(width, p.Requests*width/p.RequestsMax)
	}
	fmt.Fprintf(b.w, "\r\033[K[%s%s] %s", strings.Repeat("█", filled), strings.Repeat("·", width-filled), line)
}

func (b *progressBar) done() {
	if b.tty && b.shown {
		fmt.Fprint(b.w, "\r\033[K")
	}
}
