package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/trawl-dev/trawl/web/deploy"
)

// loadConfig reads --config, else ./trawl.yaml when present, else the demo.
func loadConfig(path string) (*deploy.Config, error) {
	if path == "" {
		if _, err := os.Stat("trawl.yaml"); err == nil {
			path = "trawl.yaml"
		}
	}
	var cfg *deploy.Config
	if path == "" {
		cfg = deploy.DemoConfig()
	} else {
		var err error
		if cfg, err = deploy.LoadConfig(path); err != nil {
			return nil, err
		}
	}
	cfg.ApplyEnv(os.LookupEnv)
	return cfg, nil
}

// checkCredentials warns on stderr, once per reference, about each ${VAR}
// of the config that a credential needs and that is unset (so the
// credential is empty, and the upstream will answer 401); with strict
// it refuses to start instead.
func checkCredentials(cfg *deploy.Config, strict bool, stderr io.Writer) error {
	unset := cfg.UnsetCredentials()
	if len(unset) == 0 {
		return nil
	}
	if strict {
		var what []string
		for _, u := range unset {
			what = append(what, u.String())
		}
		return fmt.Errorf("config %s: %s: set them (or give a default, ${VAR:-value}), or start without --strict", cfg.File, strings.Join(what, "; "))
	}
	for _, u := range unset {
		fmt.Fprintf(stderr, "warning: config %s: %s: calls that need it will fail (the upstream's 401); set %s, or start with --strict to refuse\n",
			cfg.File, u, u.Var)
	}
	return nil
}

// openParts opens only what one command needs of the deployment (a call,
// the tool list, a replay): no store on disk, no admin key, nothing that
// listens — so it also runs beside a server that holds the deployment's
// store. done releases it.
func openParts(ctx context.Context, cfgPath string, stderr io.Writer, parts deploy.Parts) (d *deploy.Deployment, done func(), err error) {
	return openPartsCalling(ctx, cfgPath, stderr, parts, false)
}

// openPartsCalling is openParts for a command that sends tool calls to
// the providers (trawl call, trawl replay), which with redis_url keep the
// replicas' pace.
func openPartsCalling(ctx context.Context, cfgPath string, stderr io.Writer, parts deploy.Parts, calls bool) (d *deploy.Deployment, done func(), err error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, nil, err
	}
	if err := checkCredentials(cfg, false, stderr); err != nil {
		return nil, nil, err
	}
	d, err = deploy.Open(ctx, cfg, deploy.Options{Parts: parts, Calls: calls, Logger: quietLogger(stderr), Stdout: io.Discard})
	if err != nil {
		return nil, nil, err
	}
	return d, func() { d.Close() }, nil
}

// quietLogger logs warnings and errors only, on stderr: a command's
// account is its output, not the deployment's logs.
func quietLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
