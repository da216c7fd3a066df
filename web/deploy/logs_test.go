package deploy

import (
	"context"
	"log/slog"
	"strings"
	"testing"
)

func TestLogConfig(t *testing.T) {
	for _, c := range []struct {
		lc  LogConfig
		key string
	}{{LogConfig{}, ""}, {LogConfig{Format: "json", Level: "warn"}, ""}, {LogConfig{Format: "xml"}, "log.format"},
		{LogConfig{Level: "loud"}, "log.level"}} {
		if k, _ := c.lc.check(); k != c.key {
			t.Errorf("%+v: key %q, want %q", c.lc, k, c.key)
		}
	}
	var b strings.Builder
	log := NewLogger(&b, LogConfig{Level: "warn"})
	log.Info("hidden")
	log.WarnContext(WithRequestID(context.Background(), "r1"), "shown")
	if s := b.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "request_id=r1") {
		t.Errorf("text log: %q", s)
	}
	// A plain logger passed in Options gets the ids too.
	var p strings.Builder
	withContextIDs(slog.New(slog.NewTextHandler(&p, nil))).With("k", "v").InfoContext(WithRequestID(context.Background(), "r2"), "x")
	if !strings.Contains(p.String(), "request_id=r2") {
		t.Errorf("wrapped log: %q", p.String())
	}
	cfg := DemoConfig()
	cfg.Log.Format = "yaml"
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "log.format") {
		t.Errorf("validate: %v", err)
	}
}
