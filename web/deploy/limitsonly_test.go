package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools/redislimit"
)

// A command's own deployment (RedisLimitsOnly) shares the providers'
// rate limits in the deployment's Redis when it answers and its clock
// agrees with this machine's; a Redis that does not answer, or a clock
// more than a second off, leaves it its own limiter, with a warning —
// the command starts either way, on its embedded store.
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
	if _, shared := d.stores.limiter.(*redislimit.Limiter); !shared || d.StoreKind() != "embedded" {
		t.Errorf("with Redis answering: limiter %T, store %s", d.stores.limiter, d.StoreKind())
	}
	if r := d.Ready(context.Background()); r.Stores["redis"] != stateOK || r.Stores["bolt"] != stateOK {
		t.Errorf("ready: %+v", r)
	}
	if !strings.Contains(logs, "no secret_key is set") {
		t.Errorf("no warning that the per-credential limits are not shared without secret_key:\n%s", logs)
	}

	d, logs = open("redis://127.0.0.1:1/0")
	if d.stores.limiter != nil || d.stores.redis != nil || !strings.Contains(logs, "redis_url does not answer: this command's rate limits are its own") {
		t.Errorf("with Redis down: limiter %T, logs:\n%s", d.stores.limiter, logs)
	}
	if r := d.Ready(context.Background()); r.Status != "ready" {
		t.Errorf("ready with Redis down: %+v", r)
	}

	for _, skew := range []time.Duration{3 * time.Second, -3 * time.Second} {
		var logs bytes.Buffer
		st := &stores{pingers: map[string]pinger{}}
		cfg := &Config{RedisURL: "redis://" + rs.Addr + "/0", RedisLimitsOnly: true, SecretKey: strings.Repeat("ab", 32)}
		st.shareLimits(context.Background(), cfg, slog.New(slog.NewTextHandler(&logs, nil)), func() time.Time { return time.Now().Add(skew) })
		if st.limiter != nil || st.redis != nil || !strings.Contains(logs.String(), "this machine's clock is not the deployment's Redis's") {
			t.Errorf("a clock %s off: limiter %T, logs:\n%s", skew, st.limiter, logs.String())
		}
		st.close()
	}
	var logs2 bytes.Buffer
	st := &stores{pingers: map[string]pinger{}}
	st.shareLimits(context.Background(), &Config{RedisURL: "redis://" + rs.Addr + "/0", RedisLimitsOnly: true, SecretKey: strings.Repeat("ab", 32)},
		slog.New(slog.NewTextHandler(&logs2, nil)), time.Now)
	if _, shared := st.limiter.(*redislimit.Limiter); !shared || logs2.Len() != 0 {
		t.Errorf("a clock in step, secret_key set: limiter %T, logs %s", st.limiter, logs2.String())
	}
	st.close()
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
