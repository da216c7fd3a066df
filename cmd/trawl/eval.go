package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/eval"
	"github.com/trawl-dev/trawl/web/deploy"
)

// exitStatus ends a command with its status and a message.
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string   { return e.msg }
func (e exitStatus) ExitStatus() int { return e.code }

// evalCmd runs a dataset (agent/eval): the table on stdout, report.json
// and junit.xml in --out, exit 0 / 1 / 3. `trawl eval export` writes
// stored chats as cases.
func evalCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "export" {
		return evalExport(ctx, args[1:], stdout)
	}
	fs := flagSet("eval", stderr)
	cfgPath := configFlag(fs)
	agentID := fs.String("agent", "", "run the cases that name no agent against agent `ID` (default: the only agent, or demo)")
	model := fs.String("model", eval.ModelReplay, "the model `M`: replay (each case's transcript) or live (the configured model)")
	conc := fs.Int("concurrency", 1, "run `N` cases at once")
	repeat := fs.Int("repeat", 1, "run each case `N` times and report its pass rate")
	upstream := fs.String("upstream", eval.UpstreamLive, "the tools' upstreams `U`: live, record (keep every response in --out) or replay (serve the responses of --baseline, else of --out)")
	out := fs.String("out", "eval-report", "write report.json and junit.xml in `DIR`")
	baseline := fs.String("baseline", "", "compare with the report in `DIR` (an earlier --out)")
	allowWrites := fs.Bool("allow-writes", false, "let the cases' calls write (by default every write is refused before it is sent)")
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usagef("eval: name the dataset: trawl eval DATASET [flags] (or trawl eval export)")
	case len(pos) > 1:
		return usagef("eval: unexpected argument %q", pos[1])
	case *conc < 1 || *conc > 64:
		return usagef("eval: --concurrency must be 1 to 64, not %d", *conc)
	case *repeat < 1 || *repeat > 100:
		return usagef("eval: --repeat must be 1 to 100, not %d", *repeat)
	case *model != eval.ModelReplay && *model != eval.ModelLive:
		return usagef("eval: --model must be replay or live, not %q", *model)
	}
	ds, err := eval.LoadDataset(pos[0])
	if err != nil {
		return err
	}
	var base *eval.Report
	if *baseline != "" {
		if base, err = eval.ReadReport(*baseline); err != nil {
			return err
		}
	}
	recording := filepath.Join(*out, eval.UpstreamFile)
	if *upstream == eval.UpstreamReplay && *baseline != "" {
		recording = filepath.Join(*baseline, eval.UpstreamFile)
	}
	up, err := eval.NewUpstream(*upstream, nil, recording)
	if err != nil {
		return usagef("eval: %v", err)
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if err := checkCredentials(cfg, false, stderr); err != nil {
		return err
	}
	d, err := deploy.Open(ctx, cfg, deploy.Options{Parts: deploy.PartsReplay, Calls: *upstream != eval.UpstreamReplay,
		Logger: quietLogger(stderr), Stdout: io.Discard, Upstream: up})
	if err != nil {
		return err
	}
	defer d.Close()
	bar := newEvalBar(stderr)
	rep, err := eval.Run(ctx, d.EvalTarget(), ds, eval.Options{Model: *model, Agent: *agentID, Concurrency: *conc, Repeat: *repeat,
		AllowWrites: *allowWrites, Upstream: *upstream, Progress: bar.update})
	bar.done()
	if err != nil {
		return err
	}
	if base != nil {
		rep.Compare(base, *baseline)
	}
	if err := rep.Write(*out); err != nil {
		return err
	}
	if err := up.Save(recording); err != nil {
		return err
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "report: %s, %s\n", filepath.Join(*out, eval.ReportFile), filepath.Join(*out, eval.JUnitFile))
	switch rep.ExitCode() {
	case eval.ExitFail:
		return exitStatus{eval.ExitFail, fmt.Sprintf("eval: %d of %d cases failed", rep.Totals.Failed, rep.Totals.Cases)}
	case eval.ExitRegressed:
		return exitStatus{eval.ExitRegressed, "eval: every check holds, but the run regressed against the baseline " + *baseline}
	}
	return nil
}

// evalBar is the run's progress: one line redrawn in place on a
// terminal, nothing otherwise.
type evalBar struct {
	w     io.Writer
	tty   bool
	mu    sync.Mutex
	shown bool
	fails int
}

func newEvalBar(w io.Writer) *evalBar {
	f, ok := w.(*os.File)
	return &evalBar{w: w, tty: ok && term.IsTerminal(int(f.Fd()))}
}

func (b *evalBar) update(done, total int, id string, passed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !passed {
		b.fails++
	}
	if !b.tty {
		return
	}
	const cells = 24
	full := cells * done / max(total, 1)
	fmt.Fprintf(b.w, "\r\033[K[%s%s] %d/%d · %d failed · %s", strings.Repeat("█", full), strings.Repeat("░", cells-full), done, total, b.fails, id)
	b.shown = true
}

func (b *evalBar) done() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shown {
		fmt.Fprint(b.w, "\r\033[K")
	}
}

// evalExport writes stored chats of an agent as dataset cases, read over
// a server's chat API.
func evalExport(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("eval export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	agentID := fs.String("agent", "", "the `ID` of the agent whose chats to export (required)")
	var chats []string
	fs.Func("chat", "export the chat `ID` (repeat for more)", func(s string) error { chats = append(chats, s); return nil })
	since := fs.String("since", "", "export every chat updated within `D` (a duration such as 24h) or since an RFC 3339 time")
	base := fs.String("url", "", "the server's base `URL` (required)")
	key := fs.String("key", "", "the API `KEY` (default $TRAWL_ADMIN_KEY): the chats are its user's")
	outPath := fs.String("out", "", "write the cases to `FILE` (default stdout)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("eval export: unexpected argument %q", fs.Arg(0))
	case *agentID == "":
		return usagef("eval export: --agent is required")
	case *base == "":
		return usagef("eval export: --url is required (the server whose store holds the chats)")
	case len(chats) == 0 && *since == "":
		return usagef("eval export: name the chats: --chat ID (repeatable) or --since D")
	case len(chats) > 0 && *since != "":
		return usagef("eval export: --chat and --since exclude each other")
	}
	if u, err := url.Parse(*base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("eval export: --url must be an http(s) URL such as http://127.0.0.1:8080, not %q", *base)
	}
	if *key == "" {
		*key = os.Getenv("TRAWL_ADMIN_KEY")
	}
	if *key == "" {
		return usagef("eval export: --url needs --key (or $TRAWL_ADMIN_KEY)")
	}
	api := &exportClient{base: strings.TrimSuffix(*base, "/"), key: *key, agent: *agentID}
	if *since != "" {
		cut, err := sinceTime(*since, time.Now())
		if err != nil {
			return usagef("eval export: --since: %v", err)
		}
		if chats, err = api.chatsSince(ctx, cut); err != nil {
			return err
		}
		if len(chats) == 0 {
			return fmt.Errorf("eval export: no chat of agent %s updated since %s", *agentID, cut.Format(time.RFC3339))
		}
	}
	var buf strings.Builder
	for _, chat := range chats {
		msgs, err := api.thread(ctx, chat)
		if err != nil {
			return err
		}
		c, err := eval.CaseFromThread(chat, *agentID, msgs)
		if err != nil {
			return err
		}
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	if *outPath == "" {
		_, err := io.WriteString(stdout, buf.String())
		return err
	}
	return os.WriteFile(*outPath, []byte(buf.String()), 0o644)
}

// sinceTime reads --since: a duration back from now, or an RFC 3339 time.
func sinceTime(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, errors.New("want a duration (24h) or an RFC 3339 time, not " + s)
	}
	return t, nil
}

// exportClient reads chats over the chat API.
type exportClient struct{ base, key, agent string }

func (c *exportClient) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("eval export: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("eval export: GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("eval export: GET %s: %s: %.300s", path, resp.Status, body)
	}
	return json.Unmarshal(body, v)
}

func (c *exportClient) chatsSince(ctx context.Context, cut time.Time) ([]string, error) {
	var list struct {
		Chats []struct {
			ChatID  string    `json:"chatId"`
			Updated time.Time `json:"updated"`
		} `json:"chats"`
	}
	if err := c.get(ctx, "/v1/agents/"+url.PathEscape(c.agent)+"/chats", &list); err != nil {
		return nil, err
	}
	var out []string
	for _, ch := range list.Chats {
		if !ch.Updated.Before(cut) {
			out = append(out, ch.ChatID)
		}
	}
	return out, nil
}

func (c *exportClient) thread(ctx context.Context, chat string) ([]agent.UIMessage, error) {
	var msgs []agent.UIMessage
	if err := c.get(ctx, "/v1/agents/"+url.PathEscape(c.agent)+"/chats/"+url.PathEscape(chat), &msgs); err != nil {
		return nil, err
	}
	return msgs, nil
}
