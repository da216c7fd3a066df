package tools

import (
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
)

// MCPEnvValue is one variable of a command server's env: its value and
// whether it is a secret. In a config it is written as a plain string —
// a secret — or as {value: …, secret: false} for one that is not (a log
// level, a URL, a path), which is then not masked.
type MCPEnvValue struct {
	Value string
	// Secret values are masked by the deployment's scrubber wherever they
	// appear (values shorter than MinSecretLen excepted, as always).
	Secret bool
}

// UnmarshalYAML reads a plain scalar (a secret) or {value, secret}.
func (v *MCPEnvValue) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err == nil {
		*v = MCPEnvValue{Value: s, Secret: true}
		return nil
	}
	var m map[string]any
	if err := unmarshal(&m); err != nil {
		return fmt.Errorf("an env value is a string or {value: …, secret: false}")
	}
	return v.fromMap(m)
}

// UnmarshalJSON reads a string (a secret) or {"value", "secret"}.
func (v *MCPEnvValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = MCPEnvValue{Value: s, Secret: true}
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("an env value is a string or {\"value\": …, \"secret\": false}")
	}
	return v.fromMap(m)
}

// MarshalJSON writes a secret as a string, anything else as an object.
func (v MCPEnvValue) MarshalJSON() ([]byte, error) {
	if v.Secret {
		return json.Marshal(v.Value)
	}
	return json.Marshal(map[string]any{"value": v.Value, "secret": false})
}

func (v *MCPEnvValue) fromMap(m map[string]any) error {
	*v = MCPEnvValue{Secret: true}
	for k, x := range m {
		switch k {
		case "value":
			switch x := x.(type) {
			case string:
				v.Value = x
			case int, int64, float64, bool:
				v.Value = fmt.Sprint(x)
			default:
				return fmt.Errorf("env value: want a string, not %T", x)
			}
		case "secret":
			b, ok := x.(bool)
			if !ok {
				return fmt.Errorf("env secret: want true or false")
			}
			v.Secret = b
		default:
			return fmt.Errorf("env value: unknown key %q (want value and secret)", k)
		}
	}
	if _, ok := m["value"]; !ok {
		return fmt.Errorf("env value: value is required")
	}
	return nil
}

// mcpInherited are the variables a command server gets from trawl's own
// environment: what the official MCP SDKs pass by default (the TypeScript
// and Python SDKs' getDefaultEnvironment, which Claude Desktop uses too),
// plus the locale. Everything else — trawl's keys, the Redis URL, cloud
// credentials — stays with trawl.
func mcpInherited(name string) bool {
	if runtime.GOOS == "windows" {
		switch strings.ToUpper(name) {
		case "APPDATA", "HOMEDRIVE", "HOMEPATH", "LOCALAPPDATA", "PATH", "PROCESSOR_ARCHITECTURE",
			"SYSTEMDRIVE", "SYSTEMROOT", "TEMP", "USERNAME", "USERPROFILE", "PROGRAMFILES":
			return true
		}
		return false
	}
	switch name {
	case "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LANGUAGE":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// Environ is the environment a command server starts with: the inherited
// variables of environ (os.Environ's form; values that are shell functions,
// "() {…}", are left out as the SDKs do), then the server's own Env, which
// wins. Sorted by name.
func (c MCPConfig) Environ(environ []string) []string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && mcpInherited(k) && !strings.HasPrefix(v, "()") {
			env[k] = v
		}
	}
	for k, v := range c.Env {
		env[k] = v.Value
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// checkEnv validates Env's names.
func (c MCPConfig) checkEnv() error {
	if len(c.Env) > 0 && len(c.Command) == 0 {
		return fmt.Errorf("mcp server %q: env is for a command server (a url server gets no environment)", c.ID)
	}
	names := slices.Collect(maps.Keys(c.Env))
	sort.Strings(names)
	for _, k := range names {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("mcp server %q: env: %q is not a variable name", c.ID, k)
		}
		if strings.ContainsRune(c.Env[k].Value, 0) {
			return fmt.Errorf("mcp server %q: env %s: the value holds a NUL byte", c.ID, k)
		}
	}
	return nil
}
