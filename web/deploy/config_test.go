package deploy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestParseConfigFull(t *testing.T) {
	text := `
org: acme-co
listen: 127.0.0.1:${PORT:-9090}
admin_key: ${TRAWL_ADMIN_KEY}
cache: {mode: shadow}
model: {provider: openai, base_url: "http://127.0.0.1:1/v1", api_key: "${OPENAI_API_KEY}", name: gpt-4o-mini}
limits: {pages: 5, view_chars: 20000}
providers:
  - id: acme
    openapi: ./acme.yaml
    base_url: https://api.acme.example
    auth: {type: bearer, token: ${ACME_TOKEN}}
    runtime_auth: {type: bearer}
toolkits: [./toolkits/mail.json]
mcp_servers: [{id: files, command: [my-mcp-server, --stdio]}]
agents:
  - id: support
    system: You help the support team.
    max_steps: 12
    answer_check: revise
    agentTools:
      - {tool_id: acme.list_orders, provider_id: acme, loop_responses: true, dataset_ttl_hours: 2}
      - {toolkit: mail, discovery: auto}
      - {toolkit: chat, discovery: false}
`
	cfg, err := ParseConfig("trawl.yaml", []byte(text), env(map[string]string{
		"TRAWL_ADMIN_KEY": "k1-0123456789abcdef012345", "ACME_TOKEN": "t1", "OPENAI_API_KEY": "sk-1"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:9090" || cfg.AdminKey != "k1-0123456789abcdef012345" || cfg.Providers[0].Auth.Token != "t1" || cfg.Model.APIKey != "sk-1" {
		t.Errorf("env expansion: listen=%q key=%q token=%q", cfg.Listen, cfg.AdminKey, cfg.Providers[0].Auth.Token)
	}
	if cfg.Cache.Mode != "shadow" || cfg.Limits.Pages != 5 || cfg.Limits.ViewChars != 20000 {
		t.Errorf("cache/limits = %+v %+v", cfg.Cache, cfg.Limits)
	}
	a := cfg.Agents[0]
	if a.AgentTools[0].DatasetTTLHours != 2 || !a.AgentTools[0].LoopResponses || a.AgentTools[2].Discovery != "false" {
		t.Errorf("bindings = %+v", a.AgentTools)
	}
	if a.AnswerCheck != agent.AnswerCheckRevise {
		t.Errorf("answer_check = %q", a.AnswerCheck)
	}
	if cfg.Line("agents[0].agentTools[1]") != 23 {
		t.Errorf("line of agents[0].agentTools[1] = %d", cfg.Line("agents[0].agentTools[1]"))
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"unknown top-level key", "org: a\nlisten_addr: x\n", `trawl.yaml:2: listen_addr: unknown key "listen_addr"`},
		{"suggestion", "lisen: x\n", `(did you mean "listen"?)`},
		{"unknown nested key", "agents:\n  - id: a\n    agentTools:\n      - {tool_id: x, looping: true}\n", `trawl.yaml:4: agents[0].agentTools[0].looping: unknown key`},
		{"type error", "agents:\n  - id: a\n    max_steps: many\n", "trawl.yaml:3: agents[0].max_steps: cannot unmarshal"},
		{"bad cache mode", "cache: {mode: sometimes}\n", `trawl.yaml:1: cache.mode: must be on, off or shadow, not "sometimes"`},
		{"bad listen", "listen: nowhere\n", "trawl.yaml:1: listen: must be host:port"},
		{"duplicate provider", "providers:\n  - {id: a, openapi: x.yaml}\n  - {id: a, openapi: y.yaml}\n", `trawl.yaml:3: providers[1]: id "a" is used twice`},
		{"provider without spec", "providers:\n  - {id: a}\n", "openapi (the spec's path) is required"},
		{"bad auth", "providers:\n  - {id: a, openapi: x, auth: {type: oauth}}\n", "providers[0].auth"},
		{"binding without tool", "agents:\n  - id: a\n    agentTools:\n      - {loop_responses: true}\n", "trawl.yaml:4: agents[0].agentTools[0]: needs tool_id or toolkit"},
		{"bad discovery", "agents:\n  - id: a\n    agentTools:\n      - {toolkit: m, discovery: maybe}\n", "discovery must be auto, true or false"},
		{"bad answer check", "agents:\n  - id: a\n    answer_check: sometimes\n", "agents[0].answer_check: must be off, warn or revise"},
		{"duplicate agent", "agents:\n  - {id: a}\n  - {id: a}\n", `agent id "a" is used twice`},
		{"bad context budget", "agents:\n  - id: a\n    context: {max_tokens: -5}\n", "trawl.yaml:3: agents[0].context.max_tokens: must not be negative"},
		{"unknown context key", "agents:\n  - id: a\n    context: {max_token: 5}\n", `agents[0].context.max_token: unknown key "max_token" (did you mean "max_tokens"?)`},
		{"malformed env", "admin_key: ${OOPS\n", "malformed ${…} reference"},
		{"not a mapping", "- a\n- b\n", "the top level must be a mapping"},
		{"syntax", "org: [a\n", "trawl.yaml"},
		{"redis url scheme", "redis_url: http://127.0.0.1:6379\n", "trawl.yaml:1: redis_url: want redis://"},
		{"redis url password kept out", "redis_url: redis://:s3cretpw@127.0.0.1:6379/notadb\n", "trawl.yaml:1: redis_url: want redis://"},
		{"redis prefix alone", "redis_prefix: x\n", "trawl.yaml:1: redis_prefix: is only for a deployment on Redis"},
		{"redis prefix pattern", "redis_url: redis://127.0.0.1:6379\nredis_prefix: 'a*'\n", "trawl.yaml:2: redis_prefix: must not hold"},
		{"duration named", "redis_url: redis://127.0.0.1:6379\nrun_lease: banana\n", "trawl.yaml:2: run_lease: want a duration such as 15s, 2m or 1h30m, not \"banana\""},
		{"run lease alone", "run_lease: 5s\n", "trawl.yaml:1: run_lease: is only for a deployment on Redis"},
		{"run lease short", "redis_url: redis://127.0.0.1:6379\nrun_lease: 10ms\n", "trawl.yaml:2: run_lease: must be at least 1s"},
		{"run lease long", "redis_url: redis://127.0.0.1:6379\nrun_lease: 1000h\n", "trawl.yaml:2: run_lease: must be at least 1s and at most 10m"},
		{"redis url unparsable, password kept out", "redis_url: 'redis://:s3cretpw@[::1/0'\n", "trawl.yaml:1: redis_url: want redis://"},
		{"redis password not encoded", "redis_url: 'redis://:s3cretpw/#x@127.0.0.1:6379/0'\n", "must be percent-encoded"},
		{"bad run retention", "workflow_runs: {max_per_workflow: -5}\n", "trawl.yaml:1: workflow_runs.max_per_workflow: must be positive"},
		{"unknown run retention key", "workflow_runs: {max_runs: 5}\n", `workflow_runs.max_runs: unknown key "max_runs"`},
		{"mcp needs one", "mcp_servers:\n  - {id: f}\n", "command or url is required"},
		{"mcp env key", "mcp_servers:\n  - {id: f, command: [x], env: {A: {value: v, secrt: false}}}\n", `unknown key "secrt"`},
		{"mcp env on a url server", "mcp_servers:\n  - {id: f, url: 'https://x.example/mcp', env: {A: v}}\n", "env is for a command server"},
		{"streams per session", "limits: {streams_per_session: -1}\n", "trawl.yaml:1: limits: limits must not be negative"},
		{"rate limit burst alone", "providers:\n  - {id: a, openapi: x, rate_limit: {burst: 4}}\n", "trawl.yaml:2: providers[0].rate_limit: burst needs requests_per_second"},
		{"rate limit negative", "providers:\n  - {id: a, openapi: x, rate_limit: {concurrency: -1}}\n", "providers[0].rate_limit: concurrency must not be negative"},
		{"walk concurrency too high", "limits: {concurrency: 17}\n", "trawl.yaml:1: limits.concurrency: must be between 0 (adaptive) and 16, not 17"},
		{"rate limit concurrency fraction", "providers:\n  - {id: a, openapi: x, rate_limit: {concurrency: 1.5}}\n", "trawl.yaml:2: providers[0].rate_limit.concurrency: want a whole number, not 1.5"},
		{"fraction through an alias", "providers:\n  - {id: a, openapi: x, rate_limit: {requests_per_second: &f 1.5, concurrency: *f}}\n", "providers[0].rate_limit.concurrency: want a whole number, not 1.5"},
		{"walk concurrency fraction", "limits: {concurrency: 2.7}\n", "trawl.yaml:1: limits.concurrency: want a whole number, not 2.7"},
		{"rate limit unknown key", "providers:\n  - {id: a, openapi: x, rate_limit: {rps: 4}}\n", `providers[0].rate_limit.rps: unknown key "rps"`},
		{"rate limit on a command server", "mcp_servers:\n  - {id: f, command: [x], rate_limit: {concurrency: 2}}\n", "rate_limit applies to a server over HTTP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig("trawl.yaml", []byte(tt.text), env(nil))
			if err == nil {
				t.Fatalf("no error; want %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q; want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans lines: %q", err)
			}
			if strings.Contains(err.Error(), "s3cretpw") {
				t.Errorf("the error shows the password: %q", err)
			}
		})
	}
}

func TestLoadConfigResolvesPaths(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "trawl.yaml")
	os.WriteFile(path, []byte("data_dir: data\nproviders:\n  - {id: a, openapi: specs/a.yaml}\ntoolkits: [/abs/tk.json]\n"), 0o600)
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != filepath.Join(dir, "data") || cfg.Providers[0].OpenAPI != filepath.Join(dir, "specs/a.yaml") || cfg.Toolkits[0] != "/abs/tk.json" {
		t.Errorf("paths: %q %q %q", cfg.DataDir, cfg.Providers[0].OpenAPI, cfg.Toolkits[0])
	}
	_, err = LoadConfig(filepath.Join(dir, "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestEmptyConfigIsDefaults(t *testing.T) {
	cfg, err := ParseConfig("trawl.yaml", nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Org != "default" || cfg.Listen != "127.0.0.1:8080" || cfg.Cache.Mode != "on" {
		t.Errorf("defaults = %+v", cfg)
	}
}

func TestApplyEnv(t *testing.T) {
	cfg := DemoConfig()
	cfg.ApplyEnv(env(map[string]string{"OPENAI_API_KEY": "sk-x", "TRAWL_ADMIN_KEY": "adm"}))
	if cfg.Model.Provider != "openai" || cfg.Model.APIKey != "sk-x" || cfg.AdminKey != "adm" {
		t.Errorf("env: %+v %q", cfg.Model, cfg.AdminKey)
	}
	replay := &Config{Model: ModelConfig{Provider: "replay"}}
	replay.ApplyEnv(env(map[string]string{"OPENAI_API_KEY": "sk-x"}))
	if replay.Model.Provider != "replay" || replay.Model.APIKey != "" {
		t.Errorf("a named provider must stay: %+v", replay.Model)
	}
}

// An MCP server's env values expand ${ENV} like any config value; a
// plain one is a secret, {value, secret: false} is not.
func TestMCPEnvFromConfig(t *testing.T) {
	cfg, err := ParseConfig("trawl.yaml", []byte("mcp_servers:\n  - id: f\n    command: [srv]\n    env: {TOKEN: ${TOK}, MODE: {value: '${MODE:-quiet}', secret: false}}\n"),
		env(map[string]string{"TOK": "tok-from-the-env"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]tools.MCPEnvValue{"TOKEN": {Value: "tok-from-the-env", Secret: true}, "MODE": {Value: "quiet"}}
	if diff := cmp.Diff(want, cfg.MCPServers[0].Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestLifecycleConfig(t *testing.T) {
	cfg, err := ParseConfig("trawl.yaml", []byte(`shutdown_grace: 5s
shutdown_delay: 2s
threads: {max_per_user: 10, max_bytes: -1, max_age_days: 7}
trusted_proxies: [10.0.0.0/8, "::1"]
`), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ShutdownGrace != 5*time.Second || cfg.ShutdownDelay != 2*time.Second {
		t.Errorf("durations: %v %v", cfg.ShutdownGrace, cfg.ShutdownDelay)
	}
	if r := cfg.retention(); r.MaxThreadsPerUser != 10 || r.MaxThreadBytes != -1 || r.MaxAge != 7*24*time.Hour {
		t.Errorf("retention: %+v", r)
	}
	for _, tt := range []struct{ text, want string }{
		{"shutdown_grace: 20\n", `trawl.yaml:1: shutdown_grace: want a duration such as 15s, 2m or 1h30m, not "20"`},
		{"shutdown_grace: -1s\n", "trawl.yaml:1: shutdown_grace: must not be negative"},
		{"shutdown_delay: soon\n", `trawl.yaml:1: shutdown_delay: want a duration such as 15s, 2m or 1h30m, not "soon"`},
		{"threads: {max_per_user: -2}\n", "trawl.yaml:1: threads.max_per_user: must be positive"},
		{"threads:\n  max_bytes: 1000\n", "trawl.yaml:2: threads.max_bytes: must be at least 65536"},
		{"trusted_proxies: [10.0.0.0/33]\n", `trawl.yaml:1: trusted_proxies[0]: "10.0.0.0/33" is not an address or CIDR`},
		{"trusted_proxies: [proxy.internal]\n", "trusted_proxies[0]"},
	} {
		if _, err := ParseConfig("trawl.yaml", []byte(tt.text), env(nil)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: %v; want %q", tt.text, err, tt.want)
		}
	}
}

// TestParseRedisURL: redis_url names one Redis or, with +cluster, a Redis
// Cluster's seed nodes; on a cluster the prefix becomes one hash tag.
func TestParseRedisURL(t *testing.T) {
	for _, tc := range []struct {
		url     string
		addrs   []string // the cluster's seeds; nil: one Redis
		tls, ok bool
	}{
		{url: "redis://127.0.0.1:6379/2", ok: true},
		{url: "redis+cluster://:pw@10.0.0.1:7000?addr=10.0.0.2:7000&addr=10.0.0.3:7000", addrs: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"}, ok: true},
		{url: "rediss+cluster://10.0.0.1:7000", addrs: []string{"10.0.0.1:7000"}, tls: true, ok: true},
		{url: "http+cluster://10.0.0.1:7000"},
		{url: "redis+cluster://10.0.0.1:7000?bogus=1"},
	} {
		one, cluster, err := parseRedisURL(tc.url)
		switch {
		case (err == nil) != tc.ok:
			t.Errorf("%s: error %v, want ok %v", tc.url, err, tc.ok)
		case !tc.ok:
		case tc.addrs == nil && (one == nil || cluster != nil):
			t.Errorf("%s: not one Redis", tc.url)
		case tc.addrs != nil && (cluster == nil || !slices.Equal(cluster.Addrs, tc.addrs) || (cluster.TLSConfig != nil) != tc.tls):
			t.Errorf("%s: cluster %+v", tc.url, cluster)
		}
	}
}
