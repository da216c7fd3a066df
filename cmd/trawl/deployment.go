package main

import (
	"context"
	"io"
	"log/slog"
	"os"

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

// openParts opens only what one command needs of the deployment (a call,
// the tool list, a replay): no store on disk, no admin key, nothing that
// listens — so it also runs beside a server that holds the deployment's
// store. done releases it.
func openParts(ctx context.Context, cfgPath string, stderr io.Writer, parts deploy.Parts) (d *deploy.Deployment, done func(), err error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, nil, err
	}
	quiet := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err = deploy.Open(ctx, cfg, deploy.Options{Parts: parts, Logger: quiet, Stdout: io.Discard})
	if err != nil {
		return nil, nil, err
	}
	return d, func() { d.Close() }, nil
}
