package web

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
)

// pacedUpstream is a paginated list (ten pages of ten) that logs when
// each request arrived; with spent set every answer says the quota is
// spent until two minutes from now (X-RateLimit-Remaining: 0).
type pacedUpstream struct {
	*httptest.Server
	mu      sync.Mutex
	arrived []time.Time
	spent   bool
	// delay is how long each answer takes; from, whose X-Replica header
	// each request carried; most, the most requests in flight at once.
	delay          time.Duration
	from           []string
	inFlight, most int
}

const pacedItems, pacedPerPage = 100, 10

func newPacedUpstream(t *testing.T) *pacedUpstream {
	u := &pacedUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.arrived = append(u.arrived, time.Now())
		u.from = append(u.from, r.Header.Get("X-Replica"))
		u.inFlight++
		u.most = max(u.most, u.inFlight)
		spent, delay := u.spent, u.delay
		u.mu.Unlock()
		defer func() {
			u.mu.Lock()
			u.inFlight--
			u.mu.Unlock()
		}()
		time.Sleep(delay)
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		if spent {
			w.Header().Set("X-RateLimit-Limit", "100")
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", "120")
		}
		var items []map[string]any
		for i := (page-1)*pacedPerPage + 1; i <= min(page*pacedPerPage, pacedItems); i++ {
			items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("item %d", i)})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": items, "total": pacedItems})
	}))
	t.Cleanup(u.Close)
	return u
}

// busiestSecond is the most requests that arrived within any 1 s.
func (u *pacedUpstream) busiestSecond() (most, total int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	at := slices.Clone(u.arrived)
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	for i := range at {
		n := 0
		for j := i; j < len(at) && at[j].Sub(at[i]) < time.Second; j++ {
			n++
		}
		most = max(most, n)
	}
	return most, len(at)
}

// startPaced starts n deployments (n > 1: on one Redis) whose provider
// "up" is the upstream with rateLimit (YAML) as its rate_limit; extra is
// more top-level YAML.
func startPaced(t *testing.T, n int, up *pacedUpstream, rateLimit, extra string) []*testServer {
	t.Helper()
	return startPacedWith(t, n, up, rateLimit, extra, nil)
}

// startPacedWith is startPaced with each deployment's config given to
// adjust (nil: none) before it starts.
func startPacedWith(t *testing.T, n int, up *pacedUpstream, rateLimit, extra string, adjust func(i int, cfg *Config)) []*testServer {
	t.Helper()
	dir := t.TempDir()
	spec := filepath.Join(dir, "items.yaml")
	if err := os.WriteFile(spec, []byte(strings.ReplaceAll(scaleSpec, "maximum: 10", fmt.Sprintf("maximum: %d", pacedPerPage))), 0o600); err != nil {
		t.Fatal(err)
	}
	redisConf := ""
	if n > 1 {
		srv := redistest.Start(t)
		redisConf = fmt.Sprintf("redis_url: redis://%s/0\nredis_prefix: %q\nsecret_key: %s\n", srv.Addr, "trawl-test-"+randomHex(4)+":", scaleSecretKey)
	}
	var out []*testServer
	for i := range n {
		name := fmt.Sprintf("r%d", i)
		yaml := fmt.Sprintf(`data_dir: %s
admin_key: %s
cache: {mode: "off"}
%s%sproviders:
  - {id: up, openapi: %s, base_url: %q, rate_limit: %s}
agents:
  - id: scale
    max_steps: 4
    agentTools: [{tool_id: up.list_items, provider_id: up, loop_responses: true}]
`, filepath.Join(dir, name), scaleAdminKey, redisConf, extra, spec, up.URL, rateLimit)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if adjust != nil {
			adjust(i, cfg)
		}
		logs := &syncBuffer{}
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: scaleModel{},
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { srv.Close() })
		out = append(out, &testServer{Server: srv, URL: newHTTPServer(t, srv), logs: logs})
	}
	return out
}

// walkBoth runs a walk of every page in a chat on each server at once and
// checks both came back complete.
func walkBoth(t *testing.T, a, b *testServer) {
	t.Helper()
	var wg sync.WaitGroup
	for i, ts := range []*testServer{a, b} {
		wg.Go(func() {
			resp := ts.post(t, "/v1/agents/scale/chat", "", chatBody(fmt.Sprintf("paced-%d", i), "m1", "walk"))
			defer resp.Body.Close()
			outs := toolOutputs(readSSE(t, resp.Body))
			if len(outs) != 1 || !strings.Contains(outs[0], `"_pagingComplete":true`) {
				t.Errorf("chat %d: the walk did not complete: %.400s", i, outs)
			}
		})
	}
	wg.Wait()
}

// Two walks from two chats on one provider with requests_per_second: 5:
// the upstream never sees more than 5 requests in any second (+1 for a
// request on the window's edge), and both walks complete.
func TestRateLimitTwoChatsShareTheProvidersPace(t *testing.T) {
	up := newPacedUpstream(t)
	ts := startPaced(t, 1, up, "{requests_per_second: 5}", "metrics: {enabled: true}\n")[0]
	walkBoth(t, ts, ts)
	status, metrics := ts.do(t, http.MethodGet, "/metrics", "", nil)
	for _, want := range []string{`trawl_upstream_wait_seconds_bucket{provider="up",le="1"}`, `trawl_upstream_concurrency{provider="up"} 0`, `trawl_upstream_in_flight{provider="up"} 0`} {
		if status != http.StatusOK || !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics (%d) lacks %s", status, want)
		}
	}
	most, total := up.busiestSecond()
	// Each walk reads its ten pages and the closing probe of page 11 (its
	// total is reached on a full page).
	if want := 2 * (pacedItems/pacedPerPage + 1); total != want {
		t.Errorf("the upstream saw %d requests, want %d", total, want)
	}
	if most > 6 {
		t.Errorf("%d requests arrived within one second, the limit is 5 a second", most)
	}
}

// The same from two replicas on one Redis: the pace is the deployment's.
func TestRateLimitTwoReplicasShareTheProvidersPace(t *testing.T) {
	up := newPacedUpstream(t)
	rs := startPaced(t, 2, up, "{requests_per_second: 5}", "")
	walkBoth(t, rs[0], rs[1])
	up.checkTwoWalksPaced(t, "the two replicas")
}

// Two replicas on one Redis under concurrency: 1, each walking in a
// chat: the upstream never has two requests at once, both walks
// complete, and they take turns (before, one replica's walk kept the
// only slot to its end, its next request carrying its release, and the
// other's waited it out).
func TestRateLimitTwoReplicasTakeTurns(t *testing.T) {
	up := newPacedUpstream(t)
	up.delay = 40 * time.Millisecond
	rs := startPacedWith(t, 2, up, "{concurrency: 1}", "", func(i int, cfg *Config) {
		cfg.Providers[0].Auth = tools.AuthSpec{Type: tools.AuthAPIKey, Header: "X-Replica", Token: fmt.Sprintf("r%d", i)}
	})
	walkBoth(t, rs[0], rs[1])
	up.mu.Lock()
	from, most := slices.Clone(up.from), up.most
	up.mu.Unlock()
	if most != 1 {
		t.Errorf("%d requests in flight at once under concurrency: 1", most)
	}
	if want := 2 * (pacedItems/pacedPerPage + 1); len(from) != want {
		t.Errorf("the upstream saw %d requests, want %d", len(from), want)
	}
	// From the second replica's first request on, neither replica sends
	// more than three in a row (its fetch-ahead request may have asked
	// first).
	start := slices.IndexFunc(from, func(r string) bool { return r != from[0] })
	run, longest := 1, 1
	for i := max(start, 1); i < len(from); i++ {
		if from[i] == from[i-1] {
			run++
			longest = max(longest, run)
		} else {
			run = 1
		}
	}
	if start < 0 || start > 3 || longest > 3 {
		t.Errorf("requests from the replicas in the order %v: one walk waited out the other", from)
	}
}

// checkTwoWalksPaced checks the upstream saw two whole walks, never more
// than 5 requests in one second (+1 for a request on the window's edge).
func (u *pacedUpstream) checkTwoWalksPaced(t *testing.T, from string) {
	t.Helper()
	most, total := u.busiestSecond()
	// Each walk reads its ten pages and the closing probe of page 11 (its
	// total is reached on a full page).
	if want := 2 * (pacedItems/pacedPerPage + 1); total != want {
		t.Errorf("the upstream saw %d requests, want %d", total, want)
	}
	if most > 6 {
		t.Errorf("%d requests arrived within one second from %s, the limit is 5 a second", most, from)
	}
}

// A command's own deployment (`trawl mcp`, `trawl chat` without --url:
// RedisLimitsOnly) beside a replica on the same Redis: the two walks keep
// to the provider's one pace, and the command's chat stays its own.
func TestRateLimitCommandSharesTheReplicasPace(t *testing.T) {
	up := newPacedUpstream(t)
	rs := startPacedWith(t, 2, up, "{requests_per_second: 5}", "", func(i int, cfg *Config) {
		cfg.RedisLimitsOnly = i == 1
	})
	walkBoth(t, rs[0], rs[1])
	up.checkTwoWalksPaced(t, "the replica and the command")
	// The command's chat is in its own store: the replica does not have
	// it, and the command has it.
	if st, body := rs[0].do(t, http.MethodGet, "/v1/agents/scale/chats/paced-1", "", nil); st != http.StatusNotFound {
		t.Errorf("the replica read the command's chat: %d %.200s", st, body)
	}
	if st, body := rs[1].do(t, http.MethodGet, "/v1/agents/scale/chats/paced-1", "", nil); st != http.StatusOK {
		t.Errorf("the command's own chat: %d %.200s", st, body)
	}
}

// An answer saying the quota is spent for longer than the walk's budget
// (X-RateLimit-Remaining: 0, reset in two minutes) stops the walk before
// its next page as partial, budget_time, saying the rate limit was why;
// a later call sends nothing and fails at once, saying the same; both
// refusals are counted in trawl_upstream_wait_refused_total.
func TestRateLimitSpentQuotaStopsTheWalk(t *testing.T) {
	up := newPacedUpstream(t)
	up.spent = true
	ts := startPaced(t, 1, up, "{}", "metrics: {enabled: true}\n")[0]
	invoke := func() (int, []byte) {
		return ts.do(t, http.MethodPost, "/v1/tools/up.list_items/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}})
	}
	status, body := invoke()
	if status != http.StatusOK {
		t.Fatalf("invoke: %d %s", status, body)
	}
	var env map[string]any
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatal(err)
	}
	boundary, _ := env["_boundary"].(map[string]any)
	note, _ := env["_note"].(string)
	if env["_stoppedBy"] != "budget_time" || boundary["completion"] != "partial" || boundary["requests"] != float64(1) ||
		!strings.Contains(note, "up's rate limit pauses requests for 2m0s") || !strings.Contains(fmt.Sprint(boundary["uninspected"]), "rate limit") {
		t.Errorf("the walk under a spent quota: stopped by %v, note %q, boundary %v", env["_stoppedBy"], note, boundary)
	}
	// A call while the quota is spent sends nothing: 429 rate_limited,
	// with the pause left as its Retry-After (not 502: no upstream
	// answered).
	resp := ts.post(t, "/v1/tools/up.list_items/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}})
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":"rate_limited"`) ||
		!strings.Contains(string(body), "upstream request not sent: up's rate limit pauses requests") || ra < 100 || ra > 120 {
		t.Errorf("a call while the quota is spent: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if _, total := up.busiestSecond(); total != 1 {
		t.Errorf("the upstream saw %d requests, want only the first page", total)
	}
	// Both requests not sent are counted, by cause, and were no wait.
	status, metrics := ts.do(t, http.MethodGet, "/metrics", "", nil)
	for _, want := range []string{`trawl_upstream_wait_refused_total{cause="paused",provider="up"} 2`, `trawl_upstream_wait_seconds_count{provider="up"} 1`} {
		if status != http.StatusOK || !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics (%d) lacks %s", status, want)
		}
	}
}

// A client that goes away while its call waits (here: for the upstream's
// slow answer) is logged as 499, as nginx does, not as a failure of the
// server's (a 500 that 5xx alerts would count), and its upstream request
// is counted as canceled, not as an upstream error.
func TestClientGoneIsNotAServerError(t *testing.T) {
	up := newPacedUpstream(t)
	up.delay = 2 * time.Second
	ts := startPaced(t, 1, up, "{concurrency: 1}", "metrics: {enabled: true}\n")[0]
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/v1/tools/up.list_items/invoke", strings.NewReader(`{"args":{}}`))
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the call answered %d before its client gave up", resp.StatusCode)
	}
	var logs string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if logs = ts.logs.String(); strings.Contains(logs, "status=") {
			break
		}
	}
	if !strings.Contains(logs, "status=499") || strings.Contains(logs, "request failed") || strings.Contains(logs, "status=500") {
		t.Errorf("a client gone is logged as a failure:\n%s", logs)
	}
	_, metrics := ts.do(t, http.MethodGet, "/metrics", "", nil)
	if m := string(metrics); !strings.Contains(m, `status_class="canceled"`) || strings.Contains(m, `status_class="error"`) {
		t.Errorf("the upstream request given up is not counted as canceled:\n%s", grepLines(m, "upstream_requests_total"))
	}
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
