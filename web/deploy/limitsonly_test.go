package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/redislimit"
)

// A command's own deployment (RedisLimitsOnly) shares the providers'
// rate limits in the deployment's Redis, read on Redis's clock (a clock
// 3 s off reads Redis's time, with a warning); a Redis that does not
// answer leaves it its own limiter, with a warning — the command starts
// either way, on its embedded store — and so does one that stops
// answering later: the upstream requests go on, paced by the command.
func TestLimitsOnlySharesWhenItCan(t *testing.T) {
	rs := redistest.Start(t)
	open := func(url string) (*Deployment, string) {
		t.Helper()
		cfg := DemoConfig()
		cfg.DataDir = t.TempDir()
		cfg.RedisURL, cfg.RedisLimitsOnly = url, true
		var logs bytes.Buffer
		d, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Stdout: &bytes.Buffer{}})
		if err != nil {
			t.Fatalf("open with redis_url %s: %v", url, err)
		}
		t.Cleanup(func() { d.Close() })
		return d, logs.String()
	}
	d, logs := open("redis://" + rs.Addr + "/0")
	if _, shared := d.stores.limiter.(*sharedLimiter); !shared || d.StoreKind() != "embedded" {
		t.Errorf("with Redis answering: limiter %T, store %s", d.stores.limiter, d.StoreKind())
	}
	if r := d.Ready(context.Background()); r.Stores["redis"] != stateOK || r.Stores["bolt"] != stateOK {
		t.Errorf("ready: %+v", r)
	}
	if !strings.Contains(logs, "no secret_key is set") {
		t.Errorf("no warning that the per-credential limits are not shared without secret_key:\n%s", logs)
	}

	d, logs = open("redis://127.0.0.1:1/0")
	if d.stores.limiter != nil || d.stores.redis != nil || !strings.Contains(logs, "this command's rate limits are its own") {
		t.Errorf("with Redis down: limiter %T, logs:\n%s", d.stores.limiter, logs)
	}
	if r := d.Ready(context.Background()); r.Status != "ready" {
		t.Errorf("ready with Redis down: %+v", r)
	}

	share := func(addr string, skew time.Duration) (*stores, *lockedBuffer) {
		t.Helper()
		logs := &lockedBuffer{}
		st := &stores{pingers: map[string]pinger{}}
		cfg := &Config{RedisURL: "redis://" + addr + "/0", RedisLimitsOnly: true, SecretKey: strings.Repeat("ab", 32)}
		st.shareLimits(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)), func() time.Time { return time.Now().Add(skew) })
		t.Cleanup(func() { st.close() })
		return st, logs
	}
	for _, skew := range []time.Duration{0, 3 * time.Second, -3 * time.Second} {
		st, logs := share(rs.Addr, skew)
		l, shared := st.limiter.(*sharedLimiter)
		if !shared {
			t.Fatalf("a clock %s off: limiter %T, logs:\n%s", skew, st.limiter, logs)
		}
		if off := time.Until(l.clock.Now()).Abs(); off > 250*time.Millisecond {
			t.Errorf("a clock %s off: the limiter reads a time %s from Redis's", skew, off)
		}
		if warned := strings.Contains(logs.String(), "this machine's clock is off the deployment's Redis's"); warned != (skew != 0) {
			t.Errorf("a clock %s off: warned %v:\n%s", skew, warned, logs)
		}
	}

	// Redis goes away mid-session: the next requests are paced by the
	// command's own limiter, with one warning.
	gone := redistest.Start(t)
	st, logs2 := share(gone.Addr, 0)
	scope := tools.LimitScope{Provider: "acme", Limit: tools.RateLimit{RequestsPerSecond: 100}}
	p, err := st.limiter.Acquire(context.Background(), scope)
	if err != nil {
		t.Fatal(err)
	}
	p.Release(tools.Outcome{})
	gone.Stop()
	for range 3 {
		p, err := st.limiter.Acquire(context.Background(), scope)
		if err != nil {
			t.Fatalf("with Redis gone: %v", err)
		}
		p.Release(tools.Outcome{})
	}
	if n := strings.Count(logs2.String(), "stopped answering"); n != 1 {
		t.Errorf("%d warnings that Redis stopped answering, want 1:\n%s", n, logs2)
	}
	if r := (&Deployment{stores: st}).Ready(context.Background()); r.Stores["redis"] != stateOK {
		t.Errorf("ready while the command paces on its own: %+v", r)
	}
	// Redis answers again: at the next measure (here: asked for at once,
	// as a drifted clock asks) the limits are shared again.
	gone.Restart(t)
	l := st.limiter.(*sharedLimiter)
	l.clock.drift <- struct{}{}
	for deadline := time.Now().Add(5 * time.Second); l.lost.Load() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if l.lost.Load() || !strings.Contains(logs2.String(), "answers again") {
		t.Errorf("Redis back: still on the command's own limiter:\n%s", logs2)
	}
}

// A deployment that sends calls (trawl call, trawl replay) with
// redis_url paces its requests in that Redis, as a replica and trawl mcp
// do, its runtime credentials fingerprinted with the replicas' secret
// key; a listing (trawl tools) does not.
func TestCallSharesTheRateLimits(t *testing.T) {
	rs := redistest.Start(t)
	for _, tc := range []struct {
		parts  Parts
		calls  bool
		shared bool
	}{{PartsCall, true, true}, {PartsReplay, true, true}, {PartsReplay, false, false}, {PartsCall, false, false}} {
		cfg := DemoConfig()
		cfg.RedisURL, cfg.SecretKey = "redis://"+rs.Addr+"/0", strings.Repeat("ef", 32)
		d, err := Open(context.Background(), cfg, Options{Parts: tc.parts, Calls: tc.calls, Logger: slog.New(slog.DiscardHandler), Stdout: &bytes.Buffer{}})
		if err != nil {
			t.Fatalf("parts %d: %v", tc.parts, err)
		}
		_, shared := d.stores.limiter.(*sharedLimiter)
		if shared != tc.shared || d.StoreKind() != "memory" {
			t.Errorf("parts %d, calls %v: limiter %T, store %s; want shared %v", tc.parts, tc.calls, d.stores.limiter, d.StoreKind(), tc.shared)
		}
		if tc.shared && string(d.stores.scopeKey()) == string((&stores{}).scopeKey()) {
			t.Errorf("parts %d: credentials fingerprinted without the secret key", tc.parts)
		}
		d.Close()
	}
}

// A command sharing the replicas' rate limits with another secret key
// than theirs fingerprints runtime credentials otherwise: it is told it
// does not share the limits learned per credential. With theirs, no word.
func TestLimitsOnlyToldOfAnotherSecretKey(t *testing.T) {
	rs := redistest.Start(t)
	rcfg := DemoConfig()
	rcfg.DataDir = t.TempDir()
	rcfg.RedisURL, rcfg.AdminKey, rcfg.SecretKey = "redis://"+rs.Addr+"/0", "admin-key-for-the-test-of-keys", strings.Repeat("ab", 32)
	d, err := Open(context.Background(), rcfg, Options{Logger: slog.New(slog.DiscardHandler), Stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	for _, tc := range []struct {
		key    string
		warned bool
	}{{strings.Repeat("ab", 32), false}, {strings.Repeat("cd", 32), true}} {
		logs := &lockedBuffer{}
		st := &stores{pingers: map[string]pinger{}}
		cfg := &Config{RedisURL: rcfg.RedisURL, RedisLimitsOnly: true, SecretKey: tc.key}
		st.shareLimits(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, nil)), time.Now)
		st.close()
		if _, shared := st.limiter.(*sharedLimiter); !shared {
			t.Fatalf("secret key %s…: not shared:\n%s", tc.key[:4], logs)
		}
		if warned := strings.Contains(logs.String(), "secret_key is not the one the deployment's replicas use"); warned != tc.warned {
			t.Errorf("secret key %s…: warned %v, want %v:\n%s", tc.key[:4], warned, tc.warned, logs)
		}
		if strings.Contains(logs.String(), tc.key) {
			t.Errorf("the warning shows the key:\n%s", logs)
		}
	}
}

// A Redis that answers and tells its time but does not run scripts
// (scripting disabled, a proxy without EVAL) cannot pace requests: the
// command keeps its own limiter from the start, with a warning, rather
// than failing its first request over to it; and a command that lost
// its Redis does not take such a one back at the next measure, to lose
// it again at the next request with a warning each way every minute.
func TestLimitsOnlyRedisWithoutScripts(t *testing.T) {
	rs := redistest.StartWith(t, "--rename-command", "EVALSHA", "evalsha_off", "--rename-command", "EVAL", "eval_off")
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	st := &stores{pingers: map[string]pinger{}}
	cfg := &Config{RedisURL: "redis://" + rs.Addr + "/0", RedisLimitsOnly: true, SecretKey: strings.Repeat("ab", 32)}
	st.shareLimits(context.Background(), cfg, log, time.Now)
	t.Cleanup(func() { st.close() })
	if st.limiter != nil || st.redis != nil || !strings.Contains(logs.String(), "does not run the rate limiter's script") {
		t.Errorf("a Redis without scripts: limiter %T, logs:\n%s", st.limiter, logs)
	}

	c := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { c.Close() })
	l := &sharedLimiter{shared: redislimit.New(c, redislimit.Options{}), own: tools.NewMemoryLimiter(tools.LimiterOptions{}), log: log}
	l.lost.Store(true)
	l.back()
	if !l.lost.Load() || strings.Contains(logs.String(), "answers again") {
		t.Errorf("a Redis without scripts was taken back:\n%s", logs)
	}

	// Replicas cannot work on it at all: refused at start, naming the key.
	rcfg := DemoConfig()
	rcfg.DataDir = t.TempDir()
	rcfg.RedisURL, rcfg.AdminKey, rcfg.SecretKey = "redis://"+rs.Addr+"/0", "admin-key-for-the-test-of-scripts", strings.Repeat("cd", 32)
	d, err := Open(context.Background(), rcfg, Options{Logger: slog.New(slog.DiscardHandler), Stdout: &bytes.Buffer{}})
	if err == nil {
		d.Close()
		t.Fatal("replicas opened on a Redis that does not run scripts")
	}
	if msg := err.Error(); !strings.Contains(msg, "redis_url") || !strings.Contains(msg, "does not run Lua scripts") {
		t.Errorf("replicas on a Redis without scripts: %v", err)
	}
}

// The registered client a replica takes at its connect page (Resume) is
// the one kept for its own authorization server and redirect URI: a
// record another deployment's public_url wrote is not taken (it would
// be replaced at once, and the two would replace each other's).
func TestKeptClientIDIsThisDeploymentsOnly(t *testing.T) {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.PublicURL = "https://trawl.example"
	d, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx := context.Background()
	sealer, err := NewSealer(d.stores.secretKey)
	if err != nil {
		t.Fatal(err)
	}
	keep := func(rc registeredClient) {
		t.Helper()
		plain, _ := json.Marshal(rc)
		sealed, err := sealer.Seal(plain, []byte(registeredKey("notes")))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.stores.connections.Put(ctx, registeredKey("notes"), sealed); err != nil {
			t.Fatal(err)
		}
	}
	kept := d.keptClientID("notes")
	if id, err := kept(ctx, "https://as.example"); id != "" || err != nil {
		t.Errorf("nothing kept: %q, %v", id, err)
	}
	mine := "https://trawl.example" + OAuthCallbackPath
	for _, c := range []struct {
		rc   registeredClient
		want string
	}{
		{registeredClient{Issuer: "https://as.example", RedirectURI: mine, ClientID: "c1"}, "c1"},
		{registeredClient{Issuer: "https://as.example", RedirectURI: "https://other.example" + OAuthCallbackPath, ClientID: "c2"}, ""},
		{registeredClient{Issuer: "https://other-as.example", RedirectURI: mine, ClientID: "c3"}, ""},
	} {
		keep(c.rc)
		if id, err := kept(ctx, "https://as.example"); id != c.want || err != nil {
			t.Errorf("kept %+v: answered %q, %v; want %q", c.rc, id, err, c.want)
		}
	}
}

// lockedBuffer is a log the keep goroutine writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
