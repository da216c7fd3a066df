package main

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/trawl-dev/trawl/web/deploy"
	"github.com/trawl-dev/trawl/web/mcpserver"
)

// mcpStdio serves an agent's tools to one MCP client over stdio (`trawl
// mcp`): the client launches it and speaks JSON-RPC on its stdin and
// stdout. It runs as the config's organization, keeping nothing past its
// own life (ephemeralConfig); logs go to stderr, since stdout is the
// protocol's.
func mcpStdio(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flagSet("mcp", stderr)
	cfgPath := configFlag(fs)
	agentID := fs.String("agent", "", "serve the tools of agent `ID` (default: demo with the built-in demo, else the config's only agent)")
	latency := fs.Int("demo-latency", 0, "delay every answer of the demo upstream by `MS` milliseconds, so progress is visible (the demo only)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("mcp: unexpected argument %q", fs.Arg(0))
	}
	cfg, cleanup, err := ephemeralConfig(*cfgPath, stderr)
	if err != nil {
		return err
	}
	defer cleanup()
	if *latency != 0 {
		if err := cfg.SetDemoLatency(*latency); err != nil {
			return usageError{"mcp: " + err.Error()}
		}
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := deploy.Open(ctx, cfg, deploy.Options{Logger: log, Stdout: io.Discard})
	if err != nil {
		return err
	}
	defer d.Close()
	id := *agentID
	if id == "" {
		var ids []string
		for _, def := range d.Agents().List() {
			ids = append(ids, def.ID)
		}
		switch {
		case cfg.IsDemo():
			id = "demo"
		case len(ids) == 1:
			id = ids[0]
		default:
			return usagef("mcp: name the agent with --agent (one of %s)", strings.Join(ids, ", "))
		}
	}
	srv := mcpserver.New(d, mcpserver.Options{Logger: log, Version: version(), PageSize: cfg.MCP.PageSize,
		ShutdownGrace: cfg.ShutdownGrace, NoInbox: d.StoreKind() != "redis"})
	defer srv.Close()
	return srv.ServeStdio(ctx, id, mcpserver.OrgCaller(), io.NopCloser(stdin), nopCloser{stdout})
}

// nopCloser is a writer whose Close does nothing: stdout stays open for
// the process's last words.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
