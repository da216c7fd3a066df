package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"iter"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream/redistest"
)

const (
	testAdminKey  = "trawl_admin_test_key_0123456789"
	testSecretKey = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"
)

// redisConfig is the demo on the Redis at addr.
func redisConfig(t *testing.T, addr string) *Config {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.RedisURL = "redis://" + addr + "/0"
	cfg.AdminKey, cfg.SecretKey = testAdminKey, testSecretKey
	return cfg
}

// A deployment on Redis refuses to start without what its replicas must
// share, and when Redis does not answer — each with a message that says
// what to do.
func TestRedisStartErrors(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no admin key", func(c *Config) { c.AdminKey = "" }, "admin_key: is required with redis_url"},
		{"no secret key", func(c *Config) { c.SecretKey = "" }, "secret_key: is required with redis_url"},
		{"bad secret key", func(c *Config) { c.SecretKey = "abc" }, "secret_key: must be 64 hex digits"},
		{"redis down", func(c *Config) { c.RedisURL = "redis://:pw-not-shown@127.0.0.1:1/0" }, "redis_url: Redis at 127.0.0.1:1 does not answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := redisConfig(t, srv.Addr)
			tt.mutate(cfg)
			_, err := New(ctx, cfg, Options{Stdout: io.Discard})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v; want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "pw-not-shown") {
				t.Errorf("the error shows the password: %v", err)
			}
		})
	}
}

// One replica on Redis: a turn runs, conflicts, resumes and is saved as
// on the embedded store; nothing lands in data_dir; Redis going away is a
// clear 503 (and an unready /readyz), and its return heals without a
// restart.
func TestServesOnRedis(t *testing.T) {
	rs := redistest.Start(t)
	release := make(chan struct{})
	cfg := redisConfig(t, rs.Addr)
	out := &syncBuffer{}
	srv, err := New(context.Background(), cfg, Options{Stdout: out, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv), out: out}
	if srv.Deployment().StoreKind() != "redis" {
		t.Fatalf("store kind %q", srv.Deployment().StoreKind())
	}
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "hi"))
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil || strings.Contains(line, "text-delta") {
			break
		}
	}
	resp.Body.Close()
	key := agent.ThreadKey("", "demo", "c1")
	waitActive(t, ts, key)
	second := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u2", "again"))
	b, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != 409 || errorCode(t, b) != "conflict" {
		t.Errorf("concurrent turn: %d %s", second.StatusCode, b)
	}
	st, b := ts.do(t, "GET", "/v1/agents/demo/chats", "", nil)
	if st != 200 || !strings.Contains(string(b), `"active":true`) {
		t.Errorf("chats while running: %d %s", st, b)
	}
	after := ts.openResume(t, "c1", "2")
	if after.first.ID != 3 {
		t.Fatalf("resumed at %d, want 3", after.first.ID)
	}
	close(release)
	rest := after.rest(t)
	if len(rest) == 0 || rest[len(rest)-1].Data != "[DONE]" {
		t.Fatalf("resumed stream: %v", ids(rest))
	}
	for i, e := range rest[:len(rest)-1] {
		if e.ID != int64(i+4) {
			t.Fatalf("resumed event %d has id %d", i, e.ID)
		}
	}
	_, b = ts.do(t, "GET", "/v1/agents/demo/chats/c1", "", nil)
	if !strings.Contains(string(b), "hello world") {
		t.Errorf("thread after the run: %s", b)
	}
	if st, _ := ts.do(t, "GET", "/v1/agents/demo/chat/c1/stream", "", nil); st != 204 {
		t.Errorf("resume after the run: %d", st)
	}
	st, b = ts.do(t, "GET", "/readyz", "-", nil)
	var ready Readiness
	if json.Unmarshal(b, &ready); st != 200 || ready.Stores["redis"] != "ok" {
		t.Errorf("readyz: %d %s", st, b)
	}

	rs.Stop()
	st, b = ts.do(t, "GET", "/v1/agents", "", nil)
	if st != 503 || errorCode(t, b) != "store_unavailable" {
		t.Errorf("with Redis down: %d %s", st, b)
	}
	if st, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"}); st != 503 || errorCode(t, b) != "store_unavailable" {
		t.Errorf("a session with Redis down: %d %s", st, b)
	}
	if st, _ := ts.do(t, "GET", "/readyz", "-", nil); st != 503 {
		t.Errorf("readyz with Redis down: %d", st)
	}
	rs.Restart(t)
	// go-redis fails fast once its dials failed and dials again about
	// once a second: the replica heals within that, without a restart.
	waitFor(t, func() bool {
		st, _ := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"})
		return st == 201
	})
	if st, _ := ts.do(t, "GET", "/readyz", "-", nil); st != 200 {
		t.Errorf("readyz after Redis came back: %d", st)
	}
	// Nothing of the deployment's state went to data_dir.
	if files, _ := filepath.Glob(cfg.DataDir + "/*"); len(files) != 0 {
		t.Errorf("data_dir holds %v on a Redis deployment", files)
	}
}

// A client that read a turn's stream to its end and at once sends the
// next message is not refused with 409 while the finished run releases
// its claim (it closes its log first, then releases), on either store.
func TestNextTurnRightAfterTheStreamEnds(t *testing.T) {
	rs := redistest.Start(t)
	for _, store := range []string{"embedded", "redis"} {
		t.Run(store, func(t *testing.T) {
			cfg := DemoConfig()
			cfg.DataDir = t.TempDir()
			if store == "redis" {
				cfg = redisConfig(t, rs.Addr)
				cfg.RedisPrefix = "next:"
			}
			srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: instantModel{}})
			if err != nil {
				t.Fatal(err)
			}
			ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
			for i := range 20 {
				resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "m"+strconv.Itoa(i), "hi"))
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !strings.Contains(string(b), "[DONE]") {
					t.Fatalf("turn %d: %d %.300s", i, resp.StatusCode, b)
				}
			}
		})
	}
}

// instantModel answers every step with one word at once.
type instantModel struct{}

func (instantModel) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	return func(yield func(agent.ModelEvent, error) bool) {
		if yield(agent.ModelEvent{Kind: agent.EventTextDelta, Text: "ok"}, nil) {
			yield(agent.ModelEvent{Kind: agent.EventFinish, FinishReason: "stop"}, nil)
		}
	}
}
