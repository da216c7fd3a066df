package tools

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"
)

// A command server starts with PATH, HOME, the locale and the few more
// the MCP SDKs pass, plus its own env (which wins) — nothing else of
// trawl's environment.
func TestMCPEnviron(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the inherited names differ on Windows")
	}
	trawls := []string{
		"PATH=/usr/bin:/bin", "HOME=/home/trawl", "LANG=de_DE.UTF-8", "LC_ALL=C.UTF-8", "TERM=xterm", "USER=trawl",
		"SHELL=() { :; }", // an exported shell function: left out, as the SDKs do
		"TRAWL_ADMIN_KEY=admin-key-0123456789abcdefghij", "TRAWL_SECRET_KEY=00ff", "REDIS_PASSWORD=pw", "OPENAI_API_KEY=sk-x",
		"AWS_SECRET_ACCESS_KEY=aws", "SSH_AUTH_SOCK=/tmp/agent", "NOEQUALS",
	}
	cfg := MCPConfig{ID: "files", Command: []string{"srv"}, Env: map[string]MCPEnvValue{
		"API_TOKEN": {Value: "server-token-123", Secret: true}, "HOME": {Value: "/srv/files"}}}
	want := []string{"API_TOKEN=server-token-123", "HOME=/srv/files", "LANG=de_DE.UTF-8", "LC_ALL=C.UTF-8", "PATH=/usr/bin:/bin",
		"TERM=xterm", "USER=trawl"}
	if diff := cmp.Diff(want, cfg.Environ(trawls)); diff != "" {
		t.Errorf("Environ (-want +got):\n%s", diff)
	}
}

// In a config, a plain env value is a secret; {value, secret: false} is
// not; anything else is refused, naming what is wrong.
func TestMCPEnvValueParse(t *testing.T) {
	var cfg MCPConfig
	src := `{id: files, command: [srv], env: {TOKEN: tok-123456, PORT: 8080, MODE: {value: verbose, secret: false}, KEY: {value: k-123456}}}`
	if err := yaml.Unmarshal([]byte(src), &cfg); err != nil {
		t.Fatal(err)
	}
	want := map[string]MCPEnvValue{"TOKEN": {"tok-123456", true}, "PORT": {"8080", true}, "MODE": {"verbose", false}, "KEY": {"k-123456", true}}
	if diff := cmp.Diff(want, cfg.Env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	b, _ := json.Marshal(cfg.Env)
	var back map[string]MCPEnvValue
	if err := json.Unmarshal(b, &back); err != nil || !cmp.Equal(back, want) {
		t.Errorf("JSON round trip: %s → %v, %v", b, back, err)
	}
	for src, msg := range map[string]string{
		`{env: {A: {value: x, extra: 1}}}`:  `unknown key "extra"`,
		`{env: {A: {secret: false}}}`:       "value is required",
		`{env: {A: [x]}}`:                   "a string or {value",
		`{env: {A: {value: x, secret: 1}}}`: "want true or false",
	} {
		var c MCPConfig
		if err := yaml.Unmarshal([]byte(src), &c); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: %v, want an error with %q", src, err, msg)
		}
	}
	for _, bad := range []MCPConfig{
		{ID: "u", URL: "https://mcp.example/x", Env: map[string]MCPEnvValue{"A": {Value: "x"}}},
		{ID: "c", Command: []string{"srv"}, Env: map[string]MCPEnvValue{"A=B": {Value: "x"}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v): no error", bad)
		}
	}
}
