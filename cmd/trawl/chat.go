package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web"
)

// chat is a terminal chat client over trawl's stream. Each message
// starts a turn with POST /v1/agents/{id}/chat; the turn is then read
// from the resume endpoint (GET …/chat/{chatId}/stream) with
// stream.Follow, which reconnects with Last-Event-ID when the connection
// drops, so a broken connection costs nothing but the reconnect. Without --url
// the deployment runs in-process behind a loopback listener, so the same
// code path serves both.
//
// Ctrl-C is the chat's own: at the prompt it exits (status 130); during a
// turn it stops the turn (in-process), or leaves it running on the
// server and says how to follow it again (with --url), and the prompt
// comes back.
func chat(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flagSet("chat", stderr)
	cfgPath := configFlag(fs)
	baseURL := fs.String("url", "", "talk to the trawl server at `URL` (such as http://127.0.0.1:8080) instead of starting one")
	key := fs.String("key", "", "with --url: the admin `KEY` or a user's session token (default $TRAWL_ADMIN_KEY)")
	chatID := fs.String("chat", "", "continue the chat with this `ID` (default: a new chat)")
	message := fs.String("message", "", "send `TEXT` as the only message, then exit (default: one message per line of stdin)")
	listen := fs.String("listen", "", "without --url: serve the in-process deployment on `ADDR` too, host:port (default: a free loopback port), so the Studio can watch the same chats")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("chat: name the agent: trawl chat AGENT [--config F | --url URL --key KEY]")
	case len(pos) > 1:
		return usagef("chat: unexpected argument %q (quote a message, or use --message)", pos[1])
	case *baseURL != "" && *cfgPath != "":
		return usagef("chat: --config starts a deployment, --url talks to a running one; give one of them")
	case *baseURL == "" && *key != "":
		return usagef("chat: --key goes with --url")
	case *baseURL != "" && *listen != "":
		return usagef("chat: --listen serves the in-process deployment; with --url there is none")
	}
	if *listen != "" {
		if err := web.CheckListenAddr(*listen); err != nil {
			return usagef("chat: --listen: %v", err)
		}
	}
	// The chat handles Ctrl-C itself (see above): its requests run on a
	// context that the first signal does not end.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx = context.WithoutCancel(ctx)
	c := &chatClient{agent: pos[0], chat: *chatID, out: stdout, http: &http.Client{}}
	if c.chat == "" {
		c.chat = "cli_" + randomID(8)
	}
	if f, ok := stdout.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		c.tty = true
		// Markdown is rendered for a terminal that takes colour
		// (https://no-color.org); elsewhere the text comes as written.
		c.md = os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
		c.width = func() int {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				return cols
			}
			return 80
		}
	}
	if *baseURL != "" {
		u, err := url.Parse(*baseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("chat: --url must be an http(s) URL such as http://127.0.0.1:8080, not %q", *baseURL)
		}
		c.base = strings.TrimSuffix(u.String(), "/")
		c.key = *key
		if c.key == "" {
			c.key = os.Getenv("TRAWL_ADMIN_KEY")
		}
		if c.key == "" {
			return usagef("chat: --url needs --key (or $TRAWL_ADMIN_KEY)")
		}
	} else {
		stop, err := c.startLocal(ctx, *cfgPath, *listen, stderr)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *chatID != "" {
		// A turn still running on the chat (one left with Ctrl-C) is
		// followed to its end first.
		if err := c.interruptible(ctx, sigs, c.followActive); err != nil {
			return err
		}
	}
	if *message != "" {
		if err := c.interruptible(ctx, sigs, func(ctx context.Context) error { return c.turn(ctx, *message) }); err != nil {
			return err
		}
		if c.interrupted {
			return silentExit(130)
		}
		return nil
	}
	lines, readErr := readLines(stdin)
	for {
		if c.tty {
			fmt.Fprint(c.out, "you> ")
		}
		var text string
		select {
		case sig := <-sigs:
			fmt.Fprintln(c.out)
			return signalExit(sig)
		case line, ok := <-lines:
			if !ok {
				if c.tty {
					fmt.Fprintln(c.out)
				}
				return <-readErr
			}
			text = strings.TrimSpace(line)
		}
		if text == "" {
			continue
		}
		if err := c.interruptible(ctx, sigs, func(ctx context.Context) error { return c.turn(ctx, text) }); err != nil {
			return err
		}
	}
}

// readLines sends each line of r, then closes lines and sends the
// reader's error (nil at the end of input) on errc.
func readLines(r io.Reader) (lines <-chan string, errc <-chan error) {
	out, done := make(chan string), make(chan error, 1)
	go func() {
		in := bufio.NewScanner(r)
		in.Buffer(make([]byte, 64<<10), 1<<20)
		for in.Scan() {
			out <- in.Text()
		}
		close(out)
		done <- in.Err()
	}()
	return out, done
}

// signalExit is the exit for a signal at the prompt: 130 for Ctrl-C,
// 143 for SIGTERM, as shells report them.
func signalExit(sig os.Signal) error {
	if sig == syscall.SIGTERM {
		return silentExit(143)
	}
	return silentExit(130)
}

// interruptible runs fn (a turn, or following one) until it ends or a
// signal comes. On Ctrl-C the turn is stopped when the deployment is
// in-process (it dies with the command otherwise), or left running on
// the server with a note on how to follow it again; the prompt comes
// back (nil). SIGTERM does the same, then exits.
func (c *chatClient) interruptible(ctx context.Context, sigs <-chan os.Signal, fn func(context.Context) error) error {
	c.interrupted = false
	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(tctx) }()
	var sig os.Signal
	select {
	case err := <-done:
		return err
	case sig = <-sigs:
	}
	cancel()
	<-done
	c.interrupted = true
	if c.local {
		sctx, scancel := context.WithTimeout(ctx, 15*time.Second)
		defer scancel()
		resp, err := c.do(sctx, http.MethodPost, c.agentURL("/chat/"+url.PathEscape(c.chat)+"/stop"), nil)
		if err != nil {
			c.note(fmt.Sprintf("(interrupted; stopping the turn failed: %v)", err))
		} else {
			resp.Body.Close()
			c.note("(stopped: the turn ended here; what it did so far is kept in the chat)")
		}
	} else {
		c.note(fmt.Sprintf("(detached: the turn goes on on the server; `trawl chat %s --url %s --chat %s` follows it again, and POST %s stops it)",
			c.agent, c.base, c.chat, "/v1/agents/"+url.PathEscape(c.agent)+"/chat/"+url.PathEscape(c.chat)+"/stop"))
	}
	if sig == syscall.SIGTERM {
		return silentExit(143)
	}
	return nil
}

// note prints a line of the client's own, wrapped at word boundaries on
// a terminal.
func (c *chatClient) note(s string) {
	width := 0
	if c.tty {
		width = c.width()
	}
	for _, l := range wrap(s, width, "  ") {
		fmt.Fprintln(c.out, l)
	}
}

// followActive follows the turn running on the chat, if one is.
func (c *chatClient) followActive(ctx context.Context) error {
	resp, err := c.do(ctx, http.MethodGet, c.agentURL("/chat/"+url.PathEscape(c.chat)+"/stream"), nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil
	}
	c.note("(a turn is running on this chat: following it)")
	return c.follow(ctx)
}

// chatClient talks to one agent's chat.
type chatClient struct {
	base, key   string
	agent, chat string
	out         io.Writer
	http        *http.Client
	tty         bool
	width       func() int // with tty
	local       bool       // the deployment runs in this process
	md          bool       // render Markdown for the terminal (a TTY, colour allowed)
	// interrupted: the last turn was left with Ctrl-C.
	interrupted bool
}

// startLocal runs the deployment in-process on a loopback port, or on
// listen when given.
func (c *chatClient) startLocal(ctx context.Context, cfgPath, listen string, stderr io.Writer) (stop func(), err error) {
	srv, done, err := openEphemeral(ctx, cfgPath, stderr)
	if err != nil {
		return nil, err
	}
	addr := listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		done()
		return nil, web.ListenError(addr, err)
	}
	if listen != "" {
		fmt.Fprintf(stderr, "serving this chat's deployment on http://%s (Studio: http://%s/studio/, admin key %s)\n", ln.Addr(), ln.Addr(), srv.AdminKey())
	}
	c.local = true
	sctx, cancel := context.WithCancel(ctx)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(sctx, ln)
	}()
	c.base, c.key = "http://"+ln.Addr().String(), srv.AdminKey()
	return func() { cancel(); <-served; done() }, nil
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (c *chatClient) agentURL(rest string) string {
	return c.base + "/v1/agents/" + url.PathEscape(c.agent) + rest
}

// do sends one API request; a non-2xx answer becomes an error carrying
// the API's message.
func (c *chatClient) do(ctx context.Context, method, u string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return nil, apiError(resp.StatusCode, b)
	}
	return resp, nil
}

// apiError reads trawl's {"error":{"code","message"}} from an answer of
// status with body.
func apiError(status int, body []byte) error {
	var e struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return fmt.Errorf("chat: %s (%s, HTTP %d)", e.Error.Message, e.Error.Code, status)
	}
	return fmt.Errorf("chat: HTTP %d %s", status, strings.TrimSpace(string(body)))
}

// turn sends one user message and prints the agent's answer as it
// streams.
func (c *chatClient) turn(ctx context.Context, text string) error {
	body := map[string]any{"id": c.chat, "messages": []any{map[string]any{
		"id": "msg_" + randomID(8), "role": "user", "parts": []any{map[string]string{"type": "text", "text": text}},
	}}}
	resp, err := c.do(ctx, http.MethodPost, c.agentURL("/chat"), body)
	if err != nil {
		return err
	}
	// The turn runs detached from this request: it is read, like any
	// resumed turn, from the resume endpoint.
	resp.Body.Close()
	return c.follow(ctx)
}

// follow prints the running turn from the resume endpoint until it ends.
func (c *chatClient) follow(ctx context.Context) error {
	u := c.agentURL("/chat/" + url.PathEscape(c.chat) + "/stream")
	r := newChatRenderer(c)
	opt := stream.FollowOptions{Client: c.http, Header: http.Header{"Authorization": {"Bearer " + c.key}}}
	for ch, err := range stream.Follow(ctx, u, opt) {
		var refused *stream.StatusError
		switch {
		case err == nil:
			r.chunk(ch)
		case ctx.Err() != nil:
			r.endLine() // the caller says what became of the turn
			return ctx.Err()
		case errors.Is(err, stream.ErrNotRunning):
			// The turn ended while the connection was down: what was not
			// printed yet is in the saved thread.
			return c.finishFromThread(ctx, r)
		case errors.As(err, &refused):
			return apiError(refused.StatusCode, refused.Body)
		default:
			return fmt.Errorf("chat: %w", err)
		}
	}
	return r.result()
}

// finishFromThread prints the rest of the newest assistant message from
// the saved thread: what the stream did not deliver before the turn ended.
func (c *chatClient) finishFromThread(ctx context.Context, r *chatRenderer) error {
	resp, err := c.do(ctx, http.MethodGet, c.agentURL("/chats/"+url.PathEscape(c.chat)), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var msgs []agent.UIMessage
	if err := json.NewDecoder(resp.Body).Decode(&msgs); err != nil {
		return fmt.Errorf("chat: reading the saved thread: %w", err)
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != agent.RoleAssistant {
		r.endLine()
		return nil
	}
	printed := r.text.String()
	at := 0
	for _, p := range msgs[len(msgs)-1].Parts {
		switch {
		case p.Type == "text":
			if rest := len(printed) - at; rest >= len(p.Text) {
				at += len(p.Text)
			} else {
				r.print(p.Text[max(rest, 0):])
				at = len(printed)
				r.endLine()
			}
		case p.IsTool() && p.ToolCallID != "" && !r.verdicts[p.ToolCallID]:
			if _, seen := r.names[p.ToolCallID]; !seen {
				r.toolInput(p.ToolCallID, p.Name(), p.Input)
			}
			if p.Output != nil {
				r.verdict(p.ToolCallID, p.Output)
			} else if p.ErrorText != "" {
				r.toolError(p.ToolCallID, p.ErrorText)
			}
		}
	}
	r.endLine()
	return nil
}

// chatRenderer prints one turn's chunks: text as it streams, one live
// progress line per looping call, then its verdict.
type chatRenderer struct {
	c        *chatClient
	text     strings.Builder // every text delta printed this turn
	midLine  bool            // the cursor is after text on a line
	progress string          // the tool call whose live line is drawn
	frame    int
	verdicts map[string]bool // tool calls whose verdict was printed
	names    map[string]string
	err      error   // an error chunk
	md       *mdTerm // with c.md: the Markdown renderer
}

func newChatRenderer(c *chatClient) *chatRenderer {
	r := &chatRenderer{c: c, verdicts: map[string]bool{}, names: map[string]string{}}
	if c.md {
		r.md = &mdTerm{width: c.width}
	}
	return r
}

func (r *chatRenderer) result() error {
	r.endLine()
	return r.err
}

func (r *chatRenderer) print(s string) {
	r.clearProgress()
	r.text.WriteString(s)
	if r.md != nil {
		if s = r.md.write(s); s == "" {
			return // held: a table row, a line's start
		}
	}
	fmt.Fprint(r.c.out, s)
	r.midLine = !strings.HasSuffix(s, "\n")
}

func (r *chatRenderer) endLine() {
	r.clearProgress()
	if r.md != nil {
		if rest := r.md.flush(); rest != "" {
			fmt.Fprint(r.c.out, rest)
			r.midLine = !strings.HasSuffix(rest, "\n")
		}
	}
	if r.midLine {
		fmt.Fprintln(r.c.out)
		r.midLine = false
	}
}

func (r *chatRenderer) line(s string) {
	r.endLine()
	fmt.Fprintln(r.c.out, s)
}

func (r *chatRenderer) clearProgress() {
	if r.progress != "" && r.c.tty {
		fmt.Fprint(r.c.out, "\r\033[K")
	}
	r.progress = ""
}

// chunk prints one chunk of the turn.
func (r *chatRenderer) chunk(ch stream.Chunk) {
	switch ch := ch.(type) {
	case stream.TextDelta:
		r.print(ch.Delta)
	case stream.TextEnd:
		r.endLine()
	case stream.ToolInputAvailable:
		in, _ := json.Marshal(ch.Input)
		r.toolInput(ch.ToolCallID, ch.ToolName, in)
	case stream.ToolInputError:
		r.line("✗ " + ch.ToolName + ": " + oneLine(ch.ErrorText))
	case stream.Data:
		if p, ok := stream.ProgressOf(ch); ok {
			r.showProgress(ch.ID, p)
		}
		if cc, ok := agent.ClaimCheckOf(ch); ok {
			for _, l := range cc.Lines() {
				r.line(l)
			}
		}
	case stream.ToolOutputAvailable:
		out, _ := json.Marshal(ch.Output)
		r.verdict(ch.ToolCallID, out)
	case stream.ToolOutputError:
		r.toolError(ch.ToolCallID, ch.ErrorText)
	case stream.Abort:
		r.line("(the turn was stopped)")
	case stream.Error:
		r.line("error: " + oneLine(ch.ErrorText))
		r.err = fmt.Errorf("chat: the turn failed: %s", oneLine(ch.ErrorText))
	}
}

func (r *chatRenderer) toolInput(id, name string, input json.RawMessage) {
	r.names[id] = name
	r.line(clip(fmt.Sprintf("→ %s %s", name, input), r.lineWidth()))
}

func (r *chatRenderer) lineWidth() int {
	if r.c.tty {
		return r.c.width()
	}
	return 0 // no limit
}

func (r *chatRenderer) showProgress(id string, p stream.Progress) {
	lp := loop.Progress{Progress: paginate.Progress{
		Page: p.Page, PagesMax: p.PagesMax, Items: p.Items, Requests: p.Requests, RequestsMax: p.RequestsMax,
		Elapsed: time.Duration(p.ElapsedMs) * time.Millisecond, Total: p.Total,
	}}
	if fe := p.ForEach; fe != nil {
		lp.ForEach = &loop.ForEachProgress{Key: fe.Key, Value: fe.Value, Index: fe.Index, Total: fe.Total}
	}
	if u := p.Upstream; u != nil {
		lp.Upstream = &tools.UpstreamProgress{Progress: u.Progress, Total: u.Total, Message: u.Message}
	}
	if !r.c.tty {
		r.endLine()
		fmt.Fprintln(r.c.out, "  … "+progressText(lp, 0))
		return
	}
	r.endLine()
	r.frame++
	fmt.Fprint(r.c.out, "\r\033[K  "+progressLine(lp, r.c.width()-2, r.frame))
	r.progress = id
}

func (r *chatRenderer) toolError(id, text string) {
	r.verdicts[id] = true
	r.line("  ✗ " + r.names[id] + " failed: " + oneLine(text))
}

// verdict prints a tool result's verdict: its completion (complete ·
// partial · unstable · single response) and the counts.
func (r *chatRenderer) verdict(id string, output json.RawMessage) {
	r.verdicts[id] = true
	// On a terminal the line wraps at word boundaries, never mid-word.
	for _, l := range wrap(verdictLine(r.names[id], output), r.lineWidth()-2, "  ") {
		r.line("  " + l)
	}
}

// verdictLine summarises a tool output in one line.
func verdictLine(name string, output json.RawMessage) string {
	env, _ := loop.ReadEnvelope(output)
	mark := map[loop.Completion]string{loop.Complete: "✓", loop.Partial: "!", loop.Unstable: "~", loop.SingleResponse: "·", "": "✓"}[env.Completion]
	if mark == "" {
		mark = "?"
	}
	words := strings.ReplaceAll(string(env.Completion), "_", " ")
	if words == "" {
		words = "done"
	}
	parts := []string{fmt.Sprintf("%s %s: %s", mark, name, words)}
	if b := env.Boundary; b != nil {
		if b.Records != nil {
			parts = append(parts, plural(*b.Records, "record", "records"))
		}
		parts = append(parts, plural(b.Pages, "page", "pages"), plural(b.Requests, "request", "requests"))
	}
	if env.StoppedBy != "" {
		parts = append(parts, "stopped by "+env.StoppedBy)
	}
	if env.Truncated {
		parts = append(parts, fmt.Sprintf("%d of %d rows shown, the rest stored as %s", env.ShownItems, env.TotalItems, env.ResultID))
	}
	if a := env.Aggregate; a != nil && a.Verdict != "" {
		parts = append(parts, "aggregate "+a.Verdict)
	}
	return strings.Join(parts, " · ")
}

// clip shortens s to width runes (no limit when width <= 0).
func clip(s string, width int) string {
	r := []rune(s)
	if width <= 0 || len(r) < width {
		return s
	}
	return string(r[:max(width-2, 1)]) + "…"
}
