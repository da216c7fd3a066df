package deploy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
	"gopkg.in/yaml.v3"
)

// Config is a deployment's configuration: trawl.yaml, every key optional.
// String values may hold ${ENV} (or ${ENV:-default}); relative paths are
// relative to the file.
type Config struct {
	Org       string `yaml:"org"`
	Listen    string `yaml:"listen"`
	PublicURL string `yaml:"public_url"` // where users reach trawl (connect links); zero: http://<listen>
	DataDir   string `yaml:"data_dir"`
	// RedisURL (redis:// or rediss://, with password and db) puts every
	// piece of shared state in that Redis, so several replicas serve one
	// deployment (see stores.go). Zero: the embedded store in data_dir.
	RedisURL string `yaml:"redis_url"`
	// RedisPrefix begins every key trawl writes, so deployments can share
	// one Redis. Zero: "trawl:".
	RedisPrefix string `yaml:"redis_prefix"`
	// RunLease is how long a replica's claim on a running turn or
	// workflow run outlives its last renewal: a replica that dies has its
	// runs taken over by another (continued from their checkpoints)
	// within about this long. Zero: runlease.DefaultLease (3 s). Redis
	// only.
	RunLease time.Duration `yaml:"run_lease"`
	// SecretKey (64 hex digits) seals stored connection tokens. Zero: a
	// key generated in data_dir; with redis_url it is required (every
	// replica must open what another sealed, and it never goes to Redis).
	SecretKey  string             `yaml:"secret_key"`
	AdminKey   string             `yaml:"admin_key"`
	Cache      CacheConfig        `yaml:"cache"`
	Model      ModelConfig        `yaml:"model"`
	Limits     LimitsConfig       `yaml:"limits"`
	Discovery  DiscoveryConfig    `yaml:"discovery"`
	Providers  []ProviderConfig   `yaml:"providers"`
	Toolkits   []string           `yaml:"toolkits"`
	MCPServers []tools.MCPConfig  `yaml:"mcp_servers"`
	Agents     []agent.Definition `yaml:"agents"`
	// Demo, when present, serves the built-in demo (as running without a
	// config does) with these settings; providers, toolkits, MCP servers
	// and agents must then be left out.
	Demo *DemoSettings `yaml:"demo"`

	// ShutdownGrace is how long running turns and workflow runs may go on
	// after SIGTERM before they are cancelled (each then ends with an
	// abort and is saved). Zero: 20 s.
	ShutdownGrace time.Duration `yaml:"shutdown_grace"`
	// ShutdownDelay is how long /readyz answers 503 before the listener
	// closes, for a load balancer that watches it. Zero: the listener
	// closes at once.
	ShutdownDelay time.Duration `yaml:"shutdown_delay"`
	// CORS lets browser front ends on other origins call the API.
	CORS CORSConfig `yaml:"cors"`
	// MCP tunes the MCP server (/v1/agents/{id}/mcp, trawl mcp).
	MCP MCPServeConfig `yaml:"mcp"`
	// Threads bounds the stored threads.
	Threads ThreadsConfig `yaml:"threads"`
	// WorkflowRuns bounds the stored workflow runs.
	WorkflowRuns WorkflowRunsConfig `yaml:"workflow_runs"`
	// TrustedProxies are the addresses (CIDR or single IP) of reverse
	// proxies whose X-Forwarded-For names the client. Zero: none, so the
	// client is the connection's peer.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Log, Telemetry and Metrics are the observability settings (see
	// observe.go).
	Log       LogConfig       `yaml:"log"`
	Telemetry TelemetryConfig `yaml:"telemetry"`
	Metrics   MetricsConfig   `yaml:"metrics"`

	// File is the path the config was read from ("" for the built-in demo).
	File string `yaml:"-"`
	// RedisLimitsOnly keeps a deployment that lives as long as one
	// command (`trawl mcp`, `trawl chat` without --url) on its embedded
	// store while redis_url is set, and uses that Redis for one thing:
	// the providers' rate limits, which the command's requests then
	// share with every replica's.
	RedisLimitsOnly bool `yaml:"-"`
	// lines maps a key path such as "agents[0].agentTools[1]" to its line.
	lines map[string]int
	// unset are the ${ENV} references that expanded to nothing: the
	// variable is unset or empty and the reference has no default.
	unset []UnsetEnv
	// demo: start the built-in Acme upstream and use its spec and
	// toolkits (see DemoConfig).
	demo bool
	// toolkitData are built-in toolkit manifests, beside Toolkits' files.
	toolkitData [][]byte
	// toolkitToken is an organization token for the built-in toolkits.
	toolkitToken string
	// toolkitNoOrgToken (tests) keeps the demo toolkits without an
	// organization credential, so users must connect them.
	toolkitNoOrgToken bool
	// adminKeyFromEnv: AdminKey came from TRAWL_ADMIN_KEY, not the file;
	// secretKeyFromEnv: SecretKey from TRAWL_SECRET_KEY.
	adminKeyFromEnv, secretKeyFromEnv bool
}

// DemoSettings tune the built-in demo upstream.
type DemoSettings struct {
	// Approval is the demo agent's approval per effect, e.g. {write:
	// required} to see approvals at work (in chat, the Studio's
	// Approvals page and MCP clients' elicitation). Zero: none.
	Approval *agent.ApprovalPolicy `yaml:"approval"`
	// LatencyMs delays every answer of the demo upstream by that many
	// milliseconds, so that a walk's progress is visible. Zero: none.
	LatencyMs int `yaml:"latency_ms"`
	// LoopOff lists Acme tools (acme.list_orders) whose binding in the
	// demo agent has looping switched off: a configuration to compare
	// with the demo's own (trawl eval --baseline). Zero: looping on for
	// every tool.
	LoopOff []string `yaml:"loop_off"`
}

// MCPServeConfig tunes the MCP server.
type MCPServeConfig struct {
	// PageSize is how many tools one tools/list page holds. Zero: 50.
	PageSize int `yaml:"page_size"`
	// SessionIdle closes a 2025-11-25 MCP session idle this long. Zero:
	// 30 minutes.
	SessionIdle time.Duration `yaml:"session_idle"`
}

// CORSConfig lists the origins whose browser pages may call the API.
type CORSConfig struct {
	// AllowedOrigins are exact origins (scheme://host[:port]). Zero: none.
	AllowedOrigins []string `yaml:"allowed_origins"`
}

// ThreadsConfig is the retention of stored threads: the oldest go first.
// Zero fields keep the defaults; -1 lifts a bound.
type ThreadsConfig struct {
	// MaxPerUser is how many threads one user keeps. Zero: 1000.
	MaxPerUser int `yaml:"max_per_user"`
	// MaxBytes bounds one stored thread; its oldest turns are dropped
	// (the newest is always kept). Zero: 4 MiB.
	MaxBytes int `yaml:"max_bytes"`
	// MaxAgeDays deletes threads not updated for that many days. Zero: 90.
	MaxAgeDays int `yaml:"max_age_days"`
}

// WorkflowRunsConfig is the retention of stored workflow runs: the oldest
// go first. Zero fields keep the defaults; -1 lifts a bound.
type WorkflowRunsConfig struct {
	// MaxPerWorkflow is how many runs one workflow keeps (running ones
	// are never deleted for it). Zero: 1000.
	MaxPerWorkflow int `yaml:"max_per_workflow"`
	// MaxAgeDays deletes runs started that many days ago. Zero: 90.
	MaxAgeDays int `yaml:"max_age_days"`
}

// runRetention is the workflow run store's RunRetention for this config.
func (c *Config) runRetention() workflow.RunRetention {
	r := workflow.RunRetention{MaxPerWorkflow: c.WorkflowRuns.MaxPerWorkflow}
	if c.WorkflowRuns.MaxAgeDays != 0 {
		r.MaxAge = time.Duration(c.WorkflowRuns.MaxAgeDays) * 24 * time.Hour
	}
	return r
}

// retention is the thread store's Retention for this config.
func (c *Config) retention() agent.Retention {
	r := agent.Retention{MaxThreadsPerUser: c.Threads.MaxPerUser, MaxThreadBytes: c.Threads.MaxBytes}
	if c.Threads.MaxAgeDays != 0 {
		r.MaxAge = time.Duration(c.Threads.MaxAgeDays) * 24 * time.Hour
	}
	return r
}

// MinAdminKeyLength is the shortest admin key trawl accepts.
const MinAdminKeyLength = 24

// CacheConfig is the dataset cache's deployment mode.
type CacheConfig struct {
	Mode string `yaml:"mode"` // on (default) | off | shadow
}

// ModelConfig selects the model behind every agent.
type ModelConfig struct {
	Provider string `yaml:"provider"` // openai (default when an API key or base URL is set) | replay
	BaseURL  string `yaml:"base_url"`
	APIKey   string `yaml:"api_key"`
	Name     string `yaml:"name"`
	// Transcript is the replay model's script (provider replay).
	Transcript string `yaml:"transcript"`
	// Pictures says whether the model takes pictures: the images an MCP
	// tool returns are then shown to it. Nil: true; false for a model
	// that takes text only.
	Pictures *bool `yaml:"pictures"`
}

// LimitsConfig holds the deployment's walk budgets and view budget; zero
// fields keep trawl's defaults.
type LimitsConfig struct {
	agent.Limits `yaml:",inline"`
	// ViewChars is the size guard's budget for one tool result in front
	// of the model, in characters. Zero: 32,000.
	ViewChars int `yaml:"view_chars"`
	// StreamsPerSession caps the streams one session token holds open at
	// once (chat turns and resumes, per replica); one more answers 429.
	// Zero: defaultStreamsPerSession.
	StreamsPerSession int `yaml:"streams_per_session"`
}

// DiscoveryConfig tunes tool discovery.
type DiscoveryConfig struct {
	// DirectBudget is how many connected-app tools go to the model
	// directly. Zero: 15.
	DirectBudget int `yaml:"direct_budget"`
	// Embeddings turns on semantic ranking in search_tools. Zero: BM25
	// alone.
	Embeddings EmbeddingsConfig `yaml:"embeddings"`
}

// EmbeddingsConfig is an OpenAI-compatible embeddings endpoint for
// semantic tool search. BaseURL zero: the model's base_url; APIKey zero:
// the model's api_key when BaseURL is zero or the model's too.
type EmbeddingsConfig struct {
	Model   string `yaml:"model"`
	BaseURL string `yaml:"base_url"`
	APIKey  string `yaml:"api_key"`
}

// ProviderConfig is "your own API": tools imported from an OpenAPI document.
type ProviderConfig struct {
	ID          string         `yaml:"id"`
	OpenAPI     string         `yaml:"openapi"`
	BaseURL     string         `yaml:"base_url"`
	Auth        tools.AuthSpec `yaml:"auth"`
	RuntimeAuth tools.AuthSpec `yaml:"runtime_auth"`
	// PropagateTrace false keeps the W3C trace context off this
	// provider's requests. Zero: sent while traces are on.
	PropagateTrace *bool `yaml:"propagate_trace"`
	// RateLimit paces the provider's requests across the deployment (see
	// tools.RateLimit). Zero: only what the upstream reports.
	RateLimit tools.RateLimit `yaml:"rate_limit"`

	specData []byte // a built-in spec, instead of the OpenAPI file
}

// ConfigError is a problem in a config file, with where it is.
type ConfigError struct {
	File string
	Line int // 0 when unknown
	Key  string
	Msg  string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// LoadConfig reads, expands, checks and validates a config file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, err := ParseConfig(path, data, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	cfg.resolvePaths(filepath.Dir(path))
	return cfg, nil
}

// ParseConfig parses config text. name is used in error messages; lookup
// resolves ${ENV} references.
func ParseConfig(name string, data []byte, lookup func(string) (string, bool)) (*Config, error) {
	// ${ENV} references are set aside before parsing, so that they may
	// stand anywhere — even unquoted in a flow mapping, as in
	// {token: ${ACME_TOKEN}}, where "{" and "}" would end the mapping —
	// and are expanded in the parsed values (which keeps line numbers).
	data, refs := hideEnvRefs(data)
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(name, err)
	}
	cfg := &Config{File: name, lines: map[string]int{}}
	if len(doc.Content) == 0 {
		cfg.setDefaults()
		return cfg, nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, &ConfigError{File: name, Line: root.Line, Msg: "the top level must be a mapping of keys"}
	}
	var unset []UnsetEnv
	if err := expandEnv(name, root, refs, lookup, &unset); err != nil {
		return nil, err
	}
	if err := checkKeys(name, root, reflect.TypeOf(Config{}), "", cfg.lines); err != nil {
		return nil, err
	}
	for _, u := range unset {
		for path, line := range cfg.lines {
			if line == u.Line && len(path) > len(u.Key) {
				u.Key = path // the deepest key on the reference's line
			}
		}
		cfg.unset = append(cfg.unset, u)
	}
	if err := root.Decode(cfg); err != nil {
		return nil, namedYAMLError(yamlError(name, err), cfg.lines)
	}
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

var (
	yamlLine     = regexp.MustCompile(`line (\d+): `)
	yamlDuration = regexp.MustCompile("^cannot unmarshal !!\\w+ `(.*)` into time.Duration$")
)

// namedYAMLError names the key of a value that did not decode (the
// deepest key on its line) and says what a duration looks like.
func namedYAMLError(err error, lines map[string]int) error {
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Line == 0 || ce.Key != "" {
		return err
	}
	for path, line := range lines {
		if line == ce.Line && len(path) > len(ce.Key) {
			ce.Key = path
		}
	}
	if m := yamlDuration.FindStringSubmatch(ce.Msg); m != nil {
		ce.Msg = fmt.Sprintf("want a duration such as 15s, 2m or 1h30m, not %q", m[1])
	}
	return ce
}

// yamlError rewrites yaml.v3's messages into file:line form.
func yamlError(name string, err error) error {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := te.Errors[0]
		line := 0
		if m := yamlLine.FindStringSubmatch(msg); m != nil {
			fmt.Sscan(m[1], &line)
			msg = strings.Replace(msg, m[0], "", 1)
		}
		return &ConfigError{File: name, Line: line, Msg: msg}
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		fmt.Sscan(m[1], &line)
		msg = strings.Replace(msg, m[0], "", 1)
	}
	return &ConfigError{File: name, Line: line, Msg: msg}
}

var (
	envRef      = regexp.MustCompile(`\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*))?\}`)
	placeholder = regexp.MustCompile(`__trawl_env_([0-9]+)__`)
)

// hideEnvRefs replaces each ${…} reference (and "$$") by a placeholder that
// YAML reads as plain text, and returns the references in order.
func hideEnvRefs(data []byte) ([]byte, []string) {
	var refs []string
	out := envRef.ReplaceAllFunc(data, func(m []byte) []byte {
		refs = append(refs, string(m))
		return []byte(fmt.Sprintf("__trawl_env_%d__", len(refs)-1))
	})
	return out, refs
}

// expandEnv puts the references back into every scalar, expanded:
// ${NAME} and ${NAME:-default}; "$$" is a literal "$". An unset variable
// without a default expands to "", and is added to unset.
func expandEnv(name string, n *yaml.Node, refs []string, lookup func(string) (string, bool), unset *[]UnsetEnv) error {
	if n.Kind == yaml.ScalarNode {
		if strings.Contains(n.Value, "${") {
			return &ConfigError{File: name, Line: n.Line, Msg: fmt.Sprintf("malformed ${…} reference in %q", n.Value)}
		}
		if placeholder.MatchString(n.Value) {
			n.Value = placeholder.ReplaceAllStringFunc(n.Value, func(m string) string {
				i, _ := strconv.Atoi(placeholder.FindStringSubmatch(m)[1])
				if i >= len(refs) {
					return m
				}
				ref := refs[i]
				if ref == "$$" {
					return "$"
				}
				sub := envRef.FindStringSubmatch(ref)
				if v, ok := lookup(sub[1]); ok && v != "" {
					return v
				}
				if sub[2] == "" {
					*unset = append(*unset, UnsetEnv{Var: sub[1], Line: n.Line})
				}
				return sub[3]
			})
			// A plain scalar again, so "${PORT}" can become an int.
			if n.Style == 0 {
				n.Tag = ""
			}
		}
	}
	for _, c := range n.Content {
		if err := expandEnv(name, c, refs, lookup, unset); err != nil {
			return err
		}
	}
	return nil
}

// UnsetEnv is a ${VAR} reference of a config that expanded to nothing.
type UnsetEnv struct {
	Var  string // the variable
	Key  string // the key path whose value holds it, such as providers[0].auth.token
	Line int
}

// credentialWords name what a credential is called, in a key path or a
// variable's name.
var credentialWords = []string{"token", "key", "password", "secret", "credential"}

// UnsetCredentials are the ${VAR} references left unset where a
// credential goes: a key path or a variable named for a token, key,
// password or secret — except admin_key, which is generated when
// absent. Each fails only when used (an upstream's 401), so start-up
// says so early (and refuses with --strict).
func (c *Config) UnsetCredentials() []UnsetEnv {
	var out []UnsetEnv
	for _, u := range c.unset {
		if u.Key == "admin_key" {
			continue
		}
		last := strings.ToLower(u.Key[strings.LastIndexByte(u.Key, '.')+1:])
		name := strings.ToLower(u.Var)
		for _, w := range credentialWords {
			if strings.Contains(last, w) || strings.Contains(name, w) {
				out = append(out, u)
				break
			}
		}
	}
	return out
}

// String says what is unset and what it leaves empty.
func (u UnsetEnv) String() string {
	return fmt.Sprintf("${%s} is not set, so %s (line %d) is empty", u.Var, u.Key, u.Line)
}

// checkKeys rejects keys that t has no field for, naming the closest one,
// and records every key path's line.
func checkKeys(name string, n *yaml.Node, t reflect.Type, path string, lines map[string]int) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil { // *name: the value &name marked
		if strings.Count(path, ".")+strings.Count(path, "[") > maxConfigDepth {
			return &ConfigError{File: name, Line: n.Line, Key: path, Msg: "aliases nest too deep (an anchor within itself?)"}
		}
		n = n.Alias
	}
	switch {
	case n.Kind == yaml.MappingNode && t.Kind() == reflect.Struct:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := joinPath(path, k.Value)
			lines[p] = k.Line
			ft, ok := fields[k.Value]
			if !ok {
				known := make([]string, 0, len(fields))
				for f := range fields {
					known = append(known, f)
				}
				sort.Strings(known)
				msg := fmt.Sprintf("unknown key %q", k.Value)
				if s := closest(k.Value, known); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return &ConfigError{File: name, Line: k.Line, Key: p, Msg: msg}
			}
			if err := checkKeys(name, v, ft, p, lines); err != nil {
				return err
			}
		}
	case n.Kind == yaml.ScalarNode && isWholeKind(t) && n.ShortTag() == "!!float":
		// yaml.v3 would decode 1.5 into an int as 1, silently.
		if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
			return &ConfigError{File: name, Line: n.Line, Key: path, Msg: fmt.Sprintf("want a whole number, not %s", n.Value)}
		}
	case n.Kind == yaml.SequenceNode && t.Kind() == reflect.Slice:
		for i, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", path, i)
			lines[p] = c.Line
			if err := checkKeys(name, c, t.Elem(), p, lines); err != nil {
				return err
			}
		}
	}
	return nil
}

// maxConfigDepth bounds how deep checkKeys follows aliases: an anchor
// used within itself would never end.
const maxConfigDepth = 64

// isWholeKind reports an integer type that is not a duration (which
// decodes from "15s").
func isWholeKind(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return t != reflect.TypeFor[time.Duration]()
	}
	return false
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// yamlFields maps the yaml keys of struct t (inline fields flattened) to
// their types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(opts, "inline") {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// closest returns the known key within edit distance 2 of s, if any.
func closest(s string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		if d := tools.EditDistance(strings.ToLower(s), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// Line returns the line of a key path ("agents[0].agentTools[1]"), or 0.
func (c *Config) Line(path string) int { return c.lines[path] }

func (c *Config) errAt(path, msg string) error {
	return &ConfigError{File: c.File, Line: c.lines[path], Key: path, Msg: msg}
}

func (c *Config) setDefaults() {
	if c.Org == "" {
		c.Org = "default"
	}
	if c.Listen == "" {
		c.Listen = "127.0.0.1:8080"
	}
	if c.DataDir == "" {
		c.DataDir = "./trawl-data"
	}
	if c.Cache.Mode == "" {
		c.Cache.Mode = "on"
	}
	if c.Model.Provider == "" && (c.Model.APIKey != "" || c.Model.BaseURL != "") {
		c.Model.Provider = "openai"
	}
	if c.Model.Name == "" {
		c.Model.Name = "gpt-4o-mini"
	}
}

func (c *Config) validate() error {
	if !validIdent(c.Org) {
		return c.errAt("org", "must be letters, digits, '-' or '_'")
	}
	if err := c.checkRedis(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c.errAt("listen", fmt.Sprintf("must be host:port, not %q", c.Listen))
	}
	switch c.Cache.Mode {
	case "on", "off", "shadow":
	default:
		return c.errAt("cache.mode", fmt.Sprintf("must be on, off or shadow, not %q", c.Cache.Mode))
	}
	switch c.Model.Provider {
	case "", "openai", "replay":
	default:
		return c.errAt("model.provider", fmt.Sprintf("must be openai or replay, not %q", c.Model.Provider))
	}
	if c.Limits.ViewChars < 0 || c.Limits.Pages < 0 || c.Limits.Requests < 0 || c.Limits.Items < 0 ||
		c.Limits.Bytes < 0 || c.Limits.Seconds < 0 || c.Limits.ForEachValues < 0 || c.Limits.StreamsPerSession < 0 {
		return c.errAt("limits", "limits must not be negative")
	}
	if n := c.Limits.Concurrency; n < 0 || n > paginate.MaxConcurrency {
		return c.errAt("limits.concurrency", fmt.Sprintf("must be between 0 (adaptive) and %d, not %d", paginate.MaxConcurrency, n))
	}
	if c.ShutdownGrace < 0 {
		return c.errAt("shutdown_grace", "must not be negative")
	}
	if c.MCP.PageSize < 0 || c.MCP.PageSize > 1000 {
		return c.errAt("mcp.page_size", fmt.Sprintf("must be 1 to 1000 (zero: 50), not %d", c.MCP.PageSize))
	}
	if c.MCP.SessionIdle < 0 {
		return c.errAt("mcp.session_idle", "must not be negative")
	}
	if key, msg := c.checkObserve(); key != "" {
		return c.errAt(key, msg)
	}
	if c.ShutdownDelay < 0 {
		return c.errAt("shutdown_delay", "must not be negative")
	}
	for i, o := range c.CORS.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			return c.errAt(fmt.Sprintf("cors.allowed_origins[%d]", i), err.Error())
		}
		c.CORS.AllowedOrigins[i] = strings.ToLower(o)
	}
	for _, b := range []struct {
		key string
		v   int
	}{{"threads.max_per_user", c.Threads.MaxPerUser}, {"threads.max_bytes", c.Threads.MaxBytes}, {"threads.max_age_days", c.Threads.MaxAgeDays},
		{"workflow_runs.max_per_workflow", c.WorkflowRuns.MaxPerWorkflow}, {"workflow_runs.max_age_days", c.WorkflowRuns.MaxAgeDays}} {
		if b.v < -1 {
			return c.errAt(b.key, "must be positive (0 keeps the default, -1 lifts the bound)")
		}
	}
	if c.Threads.MaxBytes > 0 && c.Threads.MaxBytes < 64<<10 {
		return c.errAt("threads.max_bytes", "must be at least 65536 (64 KiB)")
	}
	if _, err := c.ProxyPrefixes(); err != nil {
		return err
	}
	if err := c.checkAdminKey(); err != nil {
		return err
	}
	if c.Discovery.DirectBudget < 0 {
		return c.errAt("discovery.direct_budget", "must not be negative")
	}
	if c.Demo != nil {
		switch {
		case c.Demo.LatencyMs < 0 || c.Demo.LatencyMs > 10000:
			return c.errAt("demo.latency_ms", "must be 0 to 10000 (milliseconds)")
		case len(c.Providers) > 0 || len(c.Toolkits) > 0 || len(c.MCPServers) > 0 || len(c.Agents) > 0:
			return c.errAt("demo", "the built-in demo brings its own providers, toolkits and agent; leave those keys out")
		}
		if p := c.Demo.Approval; p != nil {
			for k, a := range map[string]agent.Approval{"read": p.Read, "write": p.Write, "destructive": p.Destructive} {
				if a != "" && a != agent.ApprovalAuto && a != agent.ApprovalRequired {
					return c.errAt("demo.approval."+k, fmt.Sprintf("must be required or auto, not %q", a))
				}
			}
		}
		c.demo = true
	}
	if e := c.Discovery.Embeddings; e != (EmbeddingsConfig{}) && strings.TrimSpace(e.Model) == "" {
		return c.errAt("discovery.embeddings", "model is required (the embeddings model, e.g. text-embedding-3-small)")
	}
	seen := map[string]string{}
	for i, p := range c.Providers {
		at := fmt.Sprintf("providers[%d]", i)
		switch {
		case !validIdent(p.ID):
			return c.errAt(at, fmt.Sprintf("id %q must be letters, digits, '-' or '_'", p.ID))
		case seen[p.ID] != "":
			return c.errAt(at, fmt.Sprintf("id %q is used twice (also by %s)", p.ID, seen[p.ID]))
		case p.OpenAPI == "":
			return c.errAt(at, "openapi (the spec's path) is required")
		}
		seen[p.ID] = at
		if err := p.Auth.Validate(); err != nil {
			return c.errAt(at+".auth", err.Error())
		}
		if err := p.RuntimeAuth.Validate(); err != nil {
			return c.errAt(at+".runtime_auth", err.Error())
		}
		if err := checkProviderOAuth(p); err != nil {
			return c.errAt(at+err.key, err.msg)
		}
		if err := p.RateLimit.Validate(); err != nil {
			return c.errAt(at+".rate_limit", err.Error())
		}
	}
	for i, m := range c.MCPServers {
		at := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case seen[m.ID] != "":
			return c.errAt(at, fmt.Sprintf("id %q is used twice (also by %s)", m.ID, seen[m.ID]))
		}
		if err := m.Validate(); err != nil {
			return c.errAt(at, err.Error())
		}
		seen[m.ID] = at
	}
	agents := map[string]bool{}
	for i := range c.Agents {
		at := fmt.Sprintf("agents[%d]", i)
		if err := c.Agents[i].Validate(); err != nil {
			var fe *agent.FieldError
			if errors.As(err, &fe) {
				return c.errAt(at+"."+fe.Field, fe.Msg)
			}
			return c.errAt(at, err.Error())
		}
		if agents[c.Agents[i].ID] {
			return c.errAt(at, fmt.Sprintf("agent id %q is used twice", c.Agents[i].ID))
		}
		agents[c.Agents[i].ID] = true
	}
	return nil
}

// checkOrigin accepts an exact web origin: scheme://host[:port], nothing
// more.
func checkOrigin(o string) error {
	if o == "*" {
		return errors.New(`"*" is not accepted: list each origin (scheme://host[:port])`)
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(o, "/") {
		return fmt.Errorf("%q is not an origin: want scheme://host[:port], without a path", o)
	}
	return nil
}

// ProxyPrefixes parses TrustedProxies.
func (c *Config) ProxyPrefixes() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for i, p := range c.TrustedProxies {
		pfx, err := parsePrefix(p)
		if err != nil {
			return nil, c.errAt(fmt.Sprintf("trusted_proxies[%d]", i), err.Error())
		}
		out = append(out, pfx)
	}
	return out, nil
}

// parsePrefix reads a CIDR or a single address.
func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address or CIDR", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// checkAdminKey refuses a configured admin key that is too short to be
// safe, naming where it came from.
func (c *Config) checkAdminKey() error {
	if c.AdminKey == "" || len(c.AdminKey) >= MinAdminKeyLength {
		return nil
	}
	msg := fmt.Sprintf("is %d characters; an admin key must be at least %d (or leave it unset to have one generated)", len(c.AdminKey), MinAdminKeyLength)
	if c.RedisURL != "" {
		msg = fmt.Sprintf("is %d characters; an admin key must be at least %d (every replica on redis_url uses the same one)", len(c.AdminKey), MinAdminKeyLength)
	}
	if c.adminKeyFromEnv {
		return &ConfigError{File: "environment", Key: "TRAWL_ADMIN_KEY", Msg: msg}
	}
	return c.errAt("admin_key", msg)
}

func validIdent(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

// resolvePaths makes file paths relative to the config file's folder.
func (c *Config) resolvePaths(dir string) {
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	c.DataDir = abs(c.DataDir)
	c.Model.Transcript = abs(c.Model.Transcript)
	for i := range c.Providers {
		c.Providers[i].OpenAPI = abs(c.Providers[i].OpenAPI)
	}
	for i := range c.Toolkits {
		c.Toolkits[i] = abs(c.Toolkits[i])
	}
}

// ApplyEnv fills what the environment provides and the file left unset:
// TRAWL_ADMIN_KEY as the admin key, TRAWL_SECRET_KEY as the secret key,
// and OPENAI_API_KEY as the model's key
// (which selects the openai provider unless another is named).
func (c *Config) ApplyEnv(lookup func(string) (string, bool)) {
	if v, ok := lookup("TRAWL_ADMIN_KEY"); ok && v != "" && c.AdminKey == "" {
		c.AdminKey, c.adminKeyFromEnv = v, true
	}
	if v, ok := lookup("TRAWL_SECRET_KEY"); ok && v != "" && c.SecretKey == "" {
		c.SecretKey, c.secretKeyFromEnv = v, true
	}
	if v, ok := lookup("OPENAI_API_KEY"); ok && v != "" && c.Model.APIKey == "" && (c.Model.Provider == "" || c.Model.Provider == "openai") {
		c.Model.APIKey, c.Model.Provider = v, "openai"
	}
}
