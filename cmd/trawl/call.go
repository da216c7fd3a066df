package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/web/deploy"
)

// call walks one tool call completely and prints the envelope as JSON on
// stdout, progress on stderr (a live bar on a terminal, plain lines
// otherwise) and the boundary statement at the end. With --agent the
// agent's binding and approval policy apply: a call that needs approval
// is asked about on stderr and answered from stdin.
func call(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flagSet("call", stderr)
	argsJSON := fs.String("args", "{}", "the tool's arguments as a `JSON` object, reserved ones (_all_pages, _fields, _for_each, _filter, _aggregate) included")
	agentID := fs.String("agent", "", "run the tool as agent `ID` holds it: its binding, and its approval policy (asked on the terminal)")
	cfgPath := configFlag(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("call: name the tool: trawl call TOOL --args JSON [--config F]")
	case len(pos) > 1:
		return usagef("call: unexpected argument %q (one tool per call)", pos[1])
	}
	tool := pos[0]
	toolArgs, err := parseArgsObject(*argsJSON)
	if err != nil {
		return usagef("call: --args %v", err)
	}
	parts := deploy.PartsCall
	if *agentID != "" {
		parts = deploy.PartsReplay // the agents too
	}
	srv, done, err := openPartsCalling(ctx, *cfgPath, stderr, parts, true)
	if err != nil {
		return err
	}
	defer done()
	bar := newProgressBar(stderr)
	var out *loop.Outcome
	if *agentID != "" {
		out, err = srv.CallAs(ctx, *agentID, tool, toolArgs, bar.update, terminalAsker(stdin, stderr))
	} else {
		out, err = srv.CallTool(ctx, tool, toolArgs, bar.update)
	}
	bar.done()
	var unknown *deploy.UnknownToolError
	if errors.As(err, &unknown) {
		// A name the deployment does not have is a usage error.
		return usagef("call: %v; `trawl tools` lists every tool", unknown)
	}
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
	if v := out.Verdict; v != nil && (v.Completion == loop.Partial || v.Completion == loop.Unstable) {
		if v.Completion == loop.Unstable {
			return fmt.Errorf("%w: unstable, the collection changed during the walk (exit status 3)", errPartial)
		}
		return fmt.Errorf("%w: stopped by %s (exit status 3)", errPartial, v.StopReason)
	}
	return nil
}

// terminalAsker shows an approval request's evidence on w and reads the
// answer, one line, from r: y or yes approves; anything else, or the end
// of input, denies — nothing runs without a yes.
func terminalAsker(r io.Reader, w io.Writer) deploy.Asker {
	return func(ctx context.Context, a agent.PendingApproval) (bool, string, error) {
		ev := a.Evidence
		fmt.Fprintf(w, "approval required: agent %s's binding of %s (%s) needs a human's yes before it runs\n", a.AgentID, a.ToolID, a.Effect)
		if ev.Action != "" {
			fmt.Fprintf(w, "  action:    %s\n", ev.Action)
		}
		fmt.Fprintf(w, "  arguments: %s\n", ev.Input)
		for _, read := range ev.Reads {
			fmt.Fprintf(w, "  read before: %s\n", read)
		}
		fmt.Fprintf(w, "  approval:  %s (arguments %s…)\n", a.ID, a.ArgsHash[:12])
		fmt.Fprint(w, "Run it? [y/N] ")
		line, err := readLine(ctx, r)
		fmt.Fprintln(w)
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return true, "approved on the terminal", nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return false, "", err
		}
		if err != nil {
			return false, "no answer on the terminal", nil
		}
		return false, "denied on the terminal", nil
	}
}

// readLine reads one line from r, or returns when ctx ends.
func readLine(ctx context.Context, r io.Reader) (string, error) {
	type result struct {
		line string
		err  error
	}
	got := make(chan result, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 1)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if buf[0] == '\n' {
					got <- result{b.String(), nil}
					return
				}
				b.WriteByte(buf[0])
			}
			if err != nil {
				got <- result{b.String(), err}
				return
			}
		}
	}()
	select {
	case res := <-got:
		return res.line, res.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// parseArgsObject reads --args: a JSON object, nothing else. Its error
// says what is wrong and where, in words.
func parseArgsObject(s string) (map[string]any, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	if err := dec.Decode(&v); err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, fmt.Errorf("is not valid JSON (at character %d: %s); want an object such as '{\"status\": \"open\"}'", se.Offset, se.Error())
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil, fmt.Errorf("is not valid JSON (it ends too early); want an object such as '{\"status\": \"open\"}'")
		}
		return nil, fmt.Errorf("is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("holds more than one JSON value; want one object")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("must be a JSON object, not %s", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	}
	return "a number"
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
	for _, p := range v.ForEachPartial {
		fmt.Fprintf(w, "for_each partial: %s=%v: %d rows, stopped by %s, resumes %s\n", v.ForEachKey, p.Value, p.Rows, p.StopReason, p.Resume)
	}
	if v.Note != "" {
		fmt.Fprintf(w, "note: %s\n", v.Note)
	}
	if out.Aggregate != nil {
		for _, line := range out.Aggregate.Lines() {
			fmt.Fprintln(w, line)
		}
	}
	if v.ResultID != "" && !v.ResultExpires.IsZero() {
		fmt.Fprintf(w, "result: %s (kept until %s)\n", v.ResultID, v.ResultExpires.UTC().Format(time.RFC3339))
	}
}

// progressBar renders loop progress on stderr: one live line on a
// terminal, redrawn in place and never wider than the terminal; a plain
// line per report otherwise (at most one per 500 ms).
type progressBar struct {
	w     io.Writer
	tty   bool
	width func() int // the terminal's columns, read at each redraw

	mu    sync.Mutex
	last  time.Time
	shown bool
	frame int
}

func newProgressBar(w io.Writer) *progressBar {
	b := &progressBar{w: w, width: func() int { return 80 }}
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		b.tty = true
		b.width = func() int {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				return cols
			}
			return 80
		}
	}
	return b
}

func (b *progressBar) update(p loop.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if !b.tty {
		if b.shown && now.Sub(b.last) < 500*time.Millisecond {
			return
		}
		b.last, b.shown = now, true
		fmt.Fprintln(b.w, "progress: "+progressText(p, 0))
		return
	}
	b.last, b.shown = now, true
	b.frame++
	fmt.Fprint(b.w, "\r\033[K"+progressLine(p, b.width(), b.frame))
}

func (b *progressBar) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tty && b.shown {
		fmt.Fprint(b.w, "\r\033[K")
	}
}

// progressFraction is how far a walk is, from what is known: the fan-out
// values done when there is a fan-out, else the items received of the
// total the server reported. ok is false when nothing says how far the
// end is (a cursor walk without a total): the bar then shows movement,
// not a level — the budget is a ceiling, not a measure of progress.
func progressFraction(p loop.Progress) (f float64, ok bool) {
	switch {
	case p.ForEach != nil && p.ForEach.Total > 0:
		return float64(p.ForEach.Index) / float64(p.ForEach.Total), true
	case p.Total > 0:
		return min(1, float64(p.Items)/float64(p.Total)), true
	case p.Upstream != nil && p.Upstream.Total > 0:
		return min(1, p.Upstream.Progress/p.Upstream.Total), true
	}
	return 0, false
}

// progressSegment is one part of the progress text; the lowest keep is
// dropped first when the line does not fit.
type progressSegment struct {
	text string
	keep int
}

func progressSegments(p loop.Progress) []progressSegment {
	var segs []progressSegment
	if u := p.Upstream; u != nil {
		// What the upstream says of the request under way (an MCP tool's
		// progress): first, and kept longest; before any page, the rest
		// would only count zeros.
		if u.Message != "" {
			segs = append(segs, progressSegment{u.Message, 6})
		}
		n := strconv.FormatFloat(u.Progress, 'f', -1, 64)
		if u.Total > 0 {
			n += " of " + strconv.FormatFloat(u.Total, 'f', -1, 64)
		}
		segs = append(segs, progressSegment{"upstream " + n, 5})
		if p.Page == 0 && p.Items == 0 {
			return append(segs, progressSegment{fmt.Sprintf("%.1fs", p.Elapsed.Seconds()), 2})
		}
	}
	page := fmt.Sprintf("page %d", p.Page)
	if p.ForEach == nil && p.Total > 0 && p.Items > 0 && p.Page > 0 {
		// Pages known from the total and the page size seen so far.
		est := (p.Total*p.Page + p.Items - 1) / p.Items
		page = fmt.Sprintf("page %d of ~%d", p.Page, max(est, p.Page))
	}
	segs = append(segs, progressSegment{page, 5})
	items := fmt.Sprintf("%d items", p.Items)
	if p.ForEach == nil && p.Total > 0 {
		items = fmt.Sprintf("%d of %d items", p.Items, p.Total)
	}
	segs = append(segs, progressSegment{items, 6})
	if fe := p.ForEach; fe != nil {
		segs = append(segs, progressSegment{fmt.Sprintf("%s %d/%d", fe.Key, fe.Index+1, fe.Total), 4})
		segs = append(segs, progressSegment{fmt.Sprintf("(%v)", fe.Value), 1})
	}
	segs = append(segs, progressSegment{plural(p.Requests, "request", "requests"), 3})
	segs = append(segs, progressSegment{fmt.Sprintf("%.1fs", p.Elapsed.Seconds()), 2})
	if p.PagesMax > 0 || p.RequestsMax > 0 {
		segs = append(segs, progressSegment{fmt.Sprintf("limits %d pages, %d requests", p.PagesMax, p.RequestsMax), 0})
	}
	return segs
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// progressText is the progress as words: the segments whose keep is at
// least minKeep.
func progressText(p loop.Progress, minKeep int) string {
	var parts []string
	for _, s := range progressSegments(p) {
		if s.keep >= minKeep {
			parts = append(parts, s.text)
		}
	}
	return strings.Join(parts, " · ")
}

// progressLine is the live line for a terminal width columns wide: a bar
// and as much of the text as fits in width-1 columns (writing the last
// column would wrap on some terminals and leave a stale line per
// redraw). frame moves the bar when the end is unknown.
func progressLine(p loop.Progress, width, frame int) string {
	const barMax, barMin = 24, 8
	limit := max(width-1, 1)
	for minKeep := 0; minKeep <= 6; minKeep++ {
		text := progressText(p, minKeep)
		if room := limit - utf8.RuneCountInString(text) - 3; room >= barMin { // "[" bar "] "
			return "[" + progressBarCells(p, min(room, barMax), frame) + "] " + text
		}
	}
	for minKeep := 0; minKeep <= 6; minKeep++ {
		if text := progressText(p, minKeep); utf8.RuneCountInString(text) <= limit {
			return text
		}
	}
	r := []rune(progressText(p, 6))
	return string(r[:min(len(r), limit)])
}

func progressBarCells(p loop.Progress, width, frame int) string {
	if f, ok := progressFraction(p); ok {
		filled := min(width, int(f*float64(width)+0.5))
		return strings.Repeat("█", filled) + strings.Repeat("·", width-filled)
	}
	// Unknown end: a short block that sweeps back and forth.
	const block = 3
	span := width - block
	pos := frame % (2 * max(span, 1))
	if pos > span {
		pos = 2*span - pos
	}
	return strings.Repeat("·", pos) + strings.Repeat("█", block) + strings.Repeat("·", width-block-pos)
}
