package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/deploy"
)

// A redis_url that Redis refuses, or that does not parse, is a start-up
// error that says why — the server's own answer (a wrong password, a db
// out of range), the dial's failure — and never shows the password.
func TestRedisStartErrorsSayWhy(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := srv.Client(t).ConfigSet(ctx, "requirepass", "right-pw-4711").Err(); err != nil {
		t.Fatal(err)
	}
	host := srv.Addr
	for _, tt := range []struct {
		name, url string
		want      []string
	}{
		{"wrong password", "redis://:wrong-pw-not-shown@" + host + "/0", []string{"redis_url: Redis at " + host + " refused the connection", "WRONGPASS"}},
		{"no password", "redis://" + host + "/0", []string{"refused the connection", "NOAUTH"}},
		{"db out of range", "redis://:right-pw-4711@" + host + "/99", []string{"refused the connection", "DB index is out of range"}},
		{"refused", "redis://:pw-not-shown@127.0.0.1:1/0", []string{"redis_url: Redis at 127.0.0.1:1 does not answer: dial tcp", "connection refused"}},
		{"malformed", "redis://:pw-not-shown@[::1/0", []string{"redis_url: want redis://", "does not parse as a URL", "percent-encoded"}},
		{"unencoded password", "redis://:pw-not-shown/#x@" + host + "/0", []string{"redis_url: want redis://", "percent-encoded"}},
		{"slash in password", "redis://:pw-not/shown@" + host + "/0", []string{"redis_url: want redis://", "percent-encoded"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := redisConfig(t, host)
			cfg.RedisURL = tt.url
			_, err := New(ctx, cfg, Options{Stdout: io.Discard})
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: %v; want %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "shown") || strings.Contains(err.Error(), "<nil>") {
				t.Errorf("New: %v", err)
			}
		})
	}
}

// A turn whose stream vanishes from Redis (FLUSHALL) or whose Redis goes
// away mid-turn ends every follower's stream with an error chunk and
// [DONE], rather than a stream that just stops.
func TestRedisStreamLostMidTurnEndsWithError(t *testing.T) {
	for _, tt := range []struct {
		name string
		lose func(*redistest.Server)
		want string
	}{
		{"flushall", func(rs *redistest.Server) { rs.Client(t).FlushAll(context.Background()) }, "no longer in the deployment's store"},
		{"redis down", (*redistest.Server).Stop, "lost the connection to the deployment's store"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rs := redistest.Start(t)
			release := make(chan struct{})
			defer close(release)
			cfg := redisConfig(t, rs.Addr)
			cfg.RunLease = 2 * time.Second
			// The run's end waits out the lost store for a second, not
			// ten: the stream's end is what is tested.
			srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release},
				Runs: deploy.RunTimings{StoreWait: time.Second}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
			resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "hi"))
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("before the loss: %v", err)
				}
				if strings.Contains(line, "text-delta") {
					break
				}
			}
			tt.lose(rs)
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Fatalf("after the loss: %v (read %q)", err, rest)
			}
			if !strings.Contains(string(rest), `"type":"error"`) || !strings.Contains(string(rest), tt.want) ||
				!strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
				t.Errorf("the stream after the loss: %q; want an error chunk naming %q, then [DONE]", rest, tt.want)
			}
		})
	}
}

// A run that lost its claim — its replica was cut off or paused past the
// lease, and another replica's run took the chat meanwhile — does not
// write its stale thread over the one the other run saved.
func TestRunWithoutItsClaimDoesNotSave(t *testing.T) {
	rs := redistest.Start(t)
	release := make(chan struct{})
	cfg := redisConfig(t, rs.Addr)
	cfg.RunLease = 3 * time.Second
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "first"))
	resp.Body.Close()
	key := agent.ThreadKey("", "demo", "c1")
	waitActive(t, ts, key)
	// Another replica's run takes the chat and saves its thread.
	ctx := context.Background()
	if err := rs.Client(t).Set(ctx, "trawl:lease:"+key, "run_of_another_replica", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	newer, err := ts.threads.GetThread(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	newer.Msgs = append(newer.Msgs, agent.UIMessage{ID: "u2", Role: agent.RoleUser, Parts: []agent.Part{{Type: "text", Text: "second, on the other replica"}}})
	if err := ts.threads.PutThread(ctx, newer); err != nil {
		t.Fatal(err)
	}
	close(release) // the first run goes on, then ends
	for deadline := time.Now().Add(15 * time.Second); ts.runs.Count() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the first run never ended")
		}
	}
	got, err := ts.threads.GetThread(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if last := got.Msgs[len(got.Msgs)-1]; last.ID != "u2" {
		t.Errorf("the thread's last message is %q (%s): the run without its claim wrote over the other run's thread", last.ID, last.Role)
	}
}

// A Redis that answers but cannot serve — out of memory under
// noeviction, a replica made read-only by a failover — is a 503
// store_unavailable, as a Redis that is down is, not a 500.
func TestRedisThatCannotServeIs503(t *testing.T) {
	rs := redistest.Start(t)
	cfg := redisConfig(t, rs.Addr)
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
	c := rs.Client(t)
	ctx := context.Background()
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	st, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"})
	if st != 503 || errorCode(t, b) != "store_unavailable" {
		t.Errorf("a session with Redis out of memory: %d %s", st, b)
	}
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	if st, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"}); st != 201 {
		t.Errorf("a session once Redis has room: %d %s", st, b)
	}
}

// A turn the store fails for a moment (Redis out of memory) ends its
// stream with an error chunk and [DONE] once the store takes writes
// again, and its thread is saved — rather than leaving every follower on
// a log nobody closes.
func TestTurnOutlivesAFullRedis(t *testing.T) {
	rs := redistest.Start(t)
	release := make(chan struct{})
	cfg := redisConfig(t, rs.Addr)
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "hi"))
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("before Redis filled: %v", err)
		}
		if strings.Contains(line, "text-delta") {
			break
		}
	}
	c := rs.Client(t)
	ctx := context.Background()
	c.ConfigSet(ctx, "maxmemory-policy", "noeviction")
	if err := c.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	close(release) // the model goes on; its chunks meet a full Redis
	time.Sleep(500 * time.Millisecond)
	if err := c.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(rest), storeFailedText) || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("the stream after Redis filled: %q; want the store's error chunk, then [DONE]", rest)
	}
	th, err := ts.threads.GetThread(ctx, agent.ThreadKey("", "demo", "c1"))
	if err != nil || len(th.Msgs) != 2 {
		t.Errorf("the thread: %+v %v; want the user's message and the answer so far", th, err)
	}
}

// A replica started with other keys than its peers' on the same Redis
// and prefix is refused at start (its peers could not open its
// connections nor accept its admin key); another prefix is another
// deployment, with keys of its own.
func TestReplicaWithOtherKeysRefused(t *testing.T) {
	rs := redistest.Start(t)
	ctx := context.Background()
	open := func(mutate func(*Config)) error {
		cfg := redisConfig(t, rs.Addr)
		mutate(cfg)
		srv, err := New(ctx, cfg, Options{Stdout: io.Discard})
		if err == nil {
			srv.Close()
		}
		return err
	}
	if err := open(func(*Config) {}); err != nil {
		t.Fatal(err)
	}
	if err := open(func(*Config) {}); err != nil {
		t.Fatalf("a second replica with the same keys: %v", err)
	}
	for name, mutate := range map[string]func(*Config){
		"other secret key": func(c *Config) { c.SecretKey = strings.Repeat("ab", 32) },
		"other admin key":  func(c *Config) { c.AdminKey = "trawl_admin_other_key_0123456789" },
	} {
		err := open(mutate)
		if err == nil || !strings.Contains(err.Error(), "secret_key or admin_key is not the one the deployment's other replicas use") {
			t.Errorf("%s: %v", name, err)
		}
		if err != nil && (strings.Contains(err.Error(), testSecretKey) || strings.Contains(err.Error(), "trawl_admin")) {
			t.Errorf("%s: the error shows a key: %v", name, err)
		}
	}
	if err := open(func(c *Config) { c.RedisPrefix = "other:"; c.SecretKey = strings.Repeat("ab", 32) }); err != nil {
		t.Errorf("another deployment (prefix) with its own keys: %v", err)
	}
}

// A run left neither claimed nor ended — its replica died, and so did
// the one that was ending it — ends its followers' streams with an error
// chunk once it has been so for a while, rather than keeping them on
// pings until the log expires a day later.
func TestOrphanedRunEndsItsFollowers(t *testing.T) {
	rs := redistest.Start(t)
	cfg := redisConfig(t, rs.Addr)
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard,
		Runs: deploy.RunTimings{WatchEvery: 100 * time.Millisecond, OrphanAfter: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
	ctx := context.Background()
	// The dead replica's run: a log with a chunk, a claim about to lapse
	// that no sweep will be handed.
	if err := srv.events.Open(ctx, "run_orphan"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.events.Append(ctx, "run_orphan", stream.Start{MessageID: "m"}); err != nil {
		t.Fatal(err)
	}
	key := agent.ThreadKey("", "demo", "c1")
	if err := rs.Client(t).Set(ctx, "trawl:lease:"+key, "run_orphan", time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/v1/agents/demo/chat/c1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(rctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the follower's stream did not end: %v (read %q)", err, body)
	}
	if !strings.Contains(string(body), orphanedText) || !strings.HasSuffix(string(body), "data: [DONE]\n\n") {
		t.Errorf("the follower's stream: %q", body)
	}
}
