package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/trawl-dev/trawl/web"
	"github.com/trawl-dev/trawl/web/deploy"
)

// flagSet returns a FlagSet whose errors become usage errors (see
// parseFlags); it prints nothing itself.
func flagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseFlags parses args: -h or --help asks for the command's help, any
// other flag error is a one-line usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{fs}
		}
		return usagef("%s: %v (see trawl %s --help)", fs.Name(), err, fs.Name())
	}
	return nil
}

// parseInterleaved parses args whose flags may come before, between or
// after the positional arguments, and returns the positional ones. After
// "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if i := slices.Index(args, "--"); i == 0 {
			return append(pos, args[1:]...), nil
		}
		if err := parseFlags(fs, args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// configFlag is the --config flag every command that builds a deployment
// takes.
func configFlag(fs *flag.FlagSet) *string {
	return fs.String("config", "", "read the config from file `F` (default ./trawl.yaml, else the built-in demo)")
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flagSet("serve", stderr)
	cfgPath := configFlag(fs)
	listen := fs.String("listen", "", "listen on `ADDR`, host:port (overrides the config)")
	dataDir := fs.String("data-dir", "", "keep the embedded store and generated keys in `DIR` (overrides the config)")
	latency := fs.Int("demo-latency", 0, "delay every answer of the demo upstream by `MS` milliseconds, so progress is visible (the demo only)")
	strict := fs.Bool("strict", false, "refuse to start when a ${VAR} a credential needs is unset (default: a warning)")
	cacheMode := fs.String("cache", "", "the dataset cache's `MODE`: on, off (every walk walks) or shadow (overrides the config)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("serve: unexpected argument %q", fs.Arg(0))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *latency != 0 {
		if err := cfg.SetDemoLatency(*latency); err != nil {
			return usageError{"serve: " + err.Error()}
		}
	}
	switch *cacheMode {
	case "":
	case "on", "off", "shadow":
		cfg.Cache.Mode = *cacheMode
	default:
		return usagef("serve: --cache must be on, off or shadow, not %q", *cacheMode)
	}
	if *listen != "" {
		cfg.Listen = *listen
	}
	if *dataDir != "" {
		cfg.DataDir = *dataDir
	}
	if err := web.CheckListenAddr(cfg.Listen); err != nil {
		if *listen != "" {
			return usageError{"serve: --listen: " + err.Error()}
		}
		return fmt.Errorf("config %s: %w", cfg.File, err)
	}
	if err := checkCredentials(cfg, *strict, stderr); err != nil {
		return err
	}
	srv, err := web.New(ctx, cfg, web.Options{Logger: deploy.NewLogger(stderr, cfg.Log), Stdout: stdout, Version: version()})
	if err != nil {
		return err
	}
	defer srv.Close()
	stop := exitOnSecondSignal(ctx, stderr)
	defer stop()
	return srv.Run(ctx)
}

// exitOnSecondSignal ends the process at once on a SIGINT or SIGTERM that
// arrives after ctx ended (the first signal), for an operator who does not
// want to wait out the shutdown grace. The store is crash-safe and the
// threads were saved after every step, so at most the steps in flight
// are lost. stop withdraws it.
func exitOnSecondSignal(ctx context.Context, stderr io.Writer) (stop func()) {
	sig := make(chan os.Signal, 1)
	done := make(chan struct{})
	unregister := context.AfterFunc(ctx, func() {
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			select {
			case s := <-sig:
				fmt.Fprintf(stderr, "trawl: %v again: exiting without waiting for the running turns\n", s)
				os.Exit(1)
			case <-done:
			}
		}()
	})
	return func() {
		unregister()
		signal.Stop(sig)
		close(done)
	}
}

// openEphemeral assembles a whole server for `trawl chat` without --url
// that keeps nothing (see ephemeralConfig). done releases it.
func openEphemeral(ctx context.Context, cfgPath string, stderr io.Writer) (srv *web.Server, done func(), err error) {
	cfg, cleanup, err := ephemeralConfig(cfgPath, stderr)
	if err != nil {
		return nil, nil, err
	}
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err = web.New(ctx, cfg, web.Options{Logger: quiet, Stdout: io.Discard, Version: version()})
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return srv, func() { srv.Close(); cleanup() }, nil
}

// ephemeralConfig is the config at cfgPath (see loadConfig) made to keep
// nothing, for a deployment that lives as long as one command (`trawl
// chat` without --url, `trawl mcp`): its own temporary data folder, which
// also keeps it clear of the lock a running server holds on the
// deployment's store, and Redis (redis_url) only for the providers'
// rate limits. A credential left unset is a
// warning on stderr. cleanup removes the folder.
func ephemeralConfig(cfgPath string, stderr io.Writer) (cfg *deploy.Config, cleanup func(), err error) {
	if cfg, err = loadConfig(cfgPath); err != nil {
		return nil, nil, err
	}
	dataDir, err := os.MkdirTemp("", "trawl-*")
	if err != nil {
		return nil, nil, err
	}
	cfg.DataDir = dataDir
	// Keeping nothing includes the deployment's Redis: a command joining
	// it would write its threads there and sweep the replicas' runs as a
	// replica does. It shares one thing there: the providers' rate
	// limits, so its requests and the replicas' keep to one pace.
	cfg.RedisLimitsOnly = true
	if err := checkCredentials(cfg, false, stderr); err != nil {
		os.RemoveAll(dataDir)
		return nil, nil, err
	}
	return cfg, func() { os.RemoveAll(dataDir) }, nil
}
