package web

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/deploy"
)

// These tests run two trawl deployments in this process on one real
// redis-server (started per test, persistence off), behind loopback
// listeners, against one shared upstream: what a client does on replica A
// must hold on replica B.

const (
	scaleAdminKey  = "trawl_admin_scaleout_test_key_0123456789"
	scaleSecretKey = "5ca1e0a75ca1e0a75ca1e0a75ca1e0a75ca1e0a75ca1e0a75ca1e0a75ca1e0a7"
	scaleLease     = 2 * time.Second
	// scaleItems and scalePerPage shape the upstream's list: five pages.
	scaleItems   = 50
	scalePerPage = 10
	scalePages   = scaleItems / scalePerPage
	// scaleWalk is one walk's requests: its pages, and the closing probe
	// of the page after the last (the total is reached on a full page).
	scaleWalk = scalePages + 1
)

const scaleSpec = `openapi: 3.0.3
info: {title: items, version: "1"}
paths:
  /items:
    get:
      operationId: list_items
      summary: List items
      description: Returns the items, paginated by page number; request page=1, page=2, … until a page comes back with fewer than per_page items or page × per_page reaches total.
      parameters:
        - {name: page, in: query, schema: {type: integer, minimum: 1}}
        - {name: per_page, in: query, schema: {type: integer, minimum: 1, maximum: 10}}
      responses:
        "200":
          description: A page of items.
          content:
            application/json:
              schema:
                type: object
                required: [data, total]
                properties:
                  data: {type: array, items: {type: object, properties: {id: {type: integer}, name: {type: string}}}}
                  total: {type: integer}
`

// scaleUpstream is the one upstream both replicas call: a paginated list
// that counts its requests and can hold pages from a given number on.
type scaleUpstream struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
	auth     map[string]int // requests by Authorization header
	holdFrom int            // 0: never hold
	hold     chan struct{}  // closed: the held pages go on
}

func newScaleUpstream(t *testing.T) *scaleUpstream {
	u := &scaleUpstream{hold: make(chan struct{}), auth: map[string]int{}}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/items" {
			http.NotFound(w, r)
			return
		}
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		u.mu.Lock()
		u.requests++
		u.auth[r.Header.Get("Authorization")]++
		holdFrom, hold := u.holdFrom, u.hold
		u.mu.Unlock()
		if holdFrom > 0 && page >= holdFrom {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		var items []map[string]any
		for i := (page-1)*scalePerPage + 1; i <= min(page*scalePerPage, scaleItems); i++ {
			items = append(items, map[string]any{"id": i, "name": fmt.Sprintf("item %d %s", i, strings.Repeat("x", 40))})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": items, "total": scaleItems})
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *scaleUpstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requests
}

// countAuth is how many requests came with the Authorization header h.
func (u *scaleUpstream) countAuth(h string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.auth[h]
}

// holdPages makes pages from n on wait until release is called.
func (u *scaleUpstream) holdPages(n int) (release func()) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.holdFrom, u.hold = n, make(chan struct{})
	hold := u.hold
	var once sync.Once
	return func() { once.Do(func() { close(hold) }) }
}

// scaleModel is the replicas' model, a function of the request alone, so
// that each replica's copy answers alike: to "walk" it calls list_items
// for every page (to "walk twice", in two steps), then says how much it
// read; to "block" it says "hello" and waits until the turn is stopped,
// then sends the time to cancelled (when there is room); to "chatty N" it
// says the numbers 0 to N-1, one text delta each, and ends once chatty is
// closed.
type scaleModel struct {
	cancelled chan<- time.Time
	chatty    <-chan struct{} // closed: a chatty turn, its numbers said, may end
}

func (m scaleModel) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	return func(yield func(agent.ModelEvent, error) bool) {
		last := req.Messages[len(req.Messages)-1]
		var user string
		calls := 0
		for _, m := range req.Messages {
			switch m.Role {
			case agent.RoleUser:
				user, calls = m.Content, 0
			case agent.RoleTool:
				calls++
			}
		}
		var evs []agent.ModelEvent
		switch {
		case last.Role == agent.RoleUser && strings.Contains(user, "block"):
			if !yield(agent.ModelEvent{Kind: agent.EventTextDelta, Text: "hello"}, nil) {
				return
			}
			<-ctx.Done()
			select {
			case m.cancelled <- time.Now():
			default:
			}
			yield(agent.ModelEvent{}, ctx.Err())
			return
		case last.Role == agent.RoleUser && strings.HasPrefix(user, "chatty "):
			n, _ := strconv.Atoi(strings.TrimPrefix(user, "chatty "))
			for i := range n {
				if !yield(agent.ModelEvent{Kind: agent.EventTextDelta, Text: fmt.Sprintf("%d ", i)}, nil) {
					return
				}
			}
			select {
			case <-m.chatty:
			case <-ctx.Done():
				yield(agent.ModelEvent{}, ctx.Err())
				return
			}
			evs = []agent.ModelEvent{{Kind: agent.EventFinish, FinishReason: "stop"}}
		case calls == 0 || (calls == 1 && strings.Contains(user, "twice")):
			evs = toolCall(fmt.Sprintf("call_%d", calls+1), "list_items", `{"_all_pages":true}`)
		default:
			evs = []agent.ModelEvent{{Kind: agent.EventTextDelta, Text: fmt.Sprintf("walked (%d bytes)", len(last.Content))},
				{Kind: agent.EventFinish, FinishReason: "stop"}}
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// replicas are two deployments on one Redis and one upstream.
type replicas struct {
	a, b  *testServer
	up    *scaleUpstream
	redis *redistest.Server // nil on a cluster
	// backend is the Redis the replicas share: the server or the cluster.
	backend redistest.Backend
	// redisURL is the replicas' redis_url.
	redisURL string
	// cancelled gets the time each blocked turn saw its context end.
	cancelled chan time.Time
	// endChatty lets chatty turns end.
	endChatty func()
}

// clusterEnv, set to 1, runs the scale-out suite on a three-master Redis
// Cluster instead of one redis-server (.ci/run does both).
const clusterEnv = "TRAWL_TEST_REDIS_CLUSTER"

// startReplicas starts a redis-server (a Redis Cluster with
// TRAWL_TEST_REDIS_CLUSTER=1), the upstream and two replicas; extra is
// YAML added to both configs.
func startReplicas(t *testing.T, extra string) *replicas {
	t.Helper()
	r := &replicas{up: newScaleUpstream(t), cancelled: make(chan time.Time, 64)}
	if os.Getenv(clusterEnv) == "1" {
		cl := redistest.StartCluster(t)
		r.redisURL = "redis+cluster://" + cl.Addrs[0] + "?addr=" + strings.Join(cl.Addrs[1:], "&addr=")
		r.backend = cl
	} else {
		r.redis = redistest.Start(t)
		r.redisURL = "redis://" + r.redis.Addr + "/0"
		r.backend = r.redis
	}
	chatty := make(chan struct{})
	var once sync.Once
	r.endChatty = func() { once.Do(func() { close(chatty) }) }
	t.Cleanup(r.endChatty)
	dir := t.TempDir()
	spec := filepath.Join(dir, "items.yaml")
	if err := os.WriteFile(spec, []byte(scaleSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	// A prefix of the test's own: the replicas share it, nothing else does.
	prefix := "trawl-test-" + randomHex(4) + ":"
	start := func(name string) *testServer {
		yaml := fmt.Sprintf(`data_dir: %s
admin_key: %s
secret_key: %s
redis_url: %s
redis_prefix: %q
run_lease: %s
providers:
  - {id: up, openapi: %[7]s, base_url: %[8]q}
  - {id: mine, openapi: %[7]s, base_url: %[8]q, runtime_auth: {type: bearer}}
agents:
  - id: scale
    max_steps: 4
    agentTools: [{tool_id: up.list_items, provider_id: up, loop_responses: true}]
  - id: mine
    max_steps: 4
    agentTools: [{tool_id: mine.list_items, provider_id: mine, loop_responses: true}]
%[9]s`, filepath.Join(dir, name), scaleAdminKey, scaleSecretKey, r.redisURL, prefix, scaleLease, spec, r.up.URL, extra)
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		logs := &syncBuffer{}
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: scaleModel{cancelled: r.cancelled, chatty: chatty},
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			t.Fatalf("replica %s: %v", name, err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("replica %s logs:\n%s", name, logs.String())
			}
		})
		return &testServer{Server: srv, URL: newHTTPServer(t, srv), logs: logs}
	}
	r.a, r.b = start("a"), start("b")
	return r
}

// sseStream reads a stream's events one at a time.
type sseStream struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func newSSEStream(t *testing.T, resp *http.Response) *sseStream {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	return &sseStream{resp: resp, sc: sc}
}

// next is the next event; false when the stream ended.
func (s *sseStream) next() (sseEvent, bool) {
	var cur sseEvent
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if cur.Data != "" {
				return cur, true
			}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
	return sseEvent{}, false
}

// until reads events up to and including the first whose type is typ.
func (s *sseStream) until(t *testing.T, typ string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			t.Fatalf("the stream ended before a %s chunk: %v", typ, chunkTypes(out))
		}
		out = append(out, ev)
		if chunkTypes([]sseEvent{ev})[0] == typ {
			return out
		}
	}
}

// rest reads the events up to the end of the stream and closes it.
func (s *sseStream) rest() []sseEvent {
	defer s.resp.Body.Close()
	var out []sseEvent
	for {
		ev, ok := s.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

// resumeOn opens GET …/chat/{chatId}/stream on ts.
func resumeOn(t *testing.T, ts *testServer, chatID, lastID string) *http.Response {
	t.Helper()
	return resumeAt(t, ts, "/v1/agents/scale/chat/"+chatID+"/stream", "", lastID)
}

// checkWhole checks that events are a whole run's stream: ids 1…n in
// order, then finish and [DONE].
func checkWhole(t *testing.T, name string, evs []sseEvent) {
	t.Helper()
	types := chunkTypes(evs)
	if len(evs) < 3 || types[0] != "start" || types[len(types)-2] != "finish" || types[len(types)-1] != "[DONE]" {
		t.Fatalf("%s: not a whole stream: %v", name, types)
	}
	for i, e := range evs[:len(evs)-1] {
		if e.ID != int64(i+1) {
			t.Fatalf("%s: event %d has id %d: %v", name, i, e.ID, ids(evs))
		}
	}
}

func sameEvents(a, b []sseEvent) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestScaleOutResumeOnOtherReplica: a turn starts on A and its client
// goes after a progress chunk; a client resuming on B with Last-Event-ID
// gets every later event once, none skipped, to finish; the whole log
// reads the same on both replicas, and so does the thread.
func TestScaleOutResumeOnOtherReplica(t *testing.T) {
	r := startReplicas(t, "")
	release := r.up.holdPages(3) // the walk pauses after two pages
	defer release()
	onA := newSSEStream(t, r.a.post(t, "/v1/agents/scale/chat", "", chatBody("c1", "u1", "walk")))
	seen := onA.until(t, "data-tool-loop-progress")
	onA.resp.Body.Close() // the client is gone; the run goes on
	last := seen[len(seen)-1].ID

	afterB := newSSEStream(t, resumeOn(t, r.b, "c1", strconv.FormatInt(last, 10)))
	fullB := newSSEStream(t, resumeOn(t, r.b, "c1", ""))
	fullA := newSSEStream(t, resumeOn(t, r.a, "c1", ""))
	// Resumes from every earlier event id too, on either replica.
	var fromEvery []*sseStream
	for k := range last {
		ts := []*testServer{r.a, r.b}[k%2]
		fromEvery = append(fromEvery, newSSEStream(t, resumeOn(t, ts, "c1", strconv.FormatInt(k, 10))))
	}
	// Ids that are no event of the run are refused on B as on A.
	for _, bad := range []string{"abc", "-1", strconv.FormatInt(last+1000, 10)} {
		resp := resumeOn(t, r.b, "c1", bad)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("resume on B with Last-Event-ID %q: %d %s", bad, resp.StatusCode, b)
		}
	}
	release()
	rest := afterB.rest()
	if len(rest) == 0 || rest[0].ID != last+1 {
		t.Fatalf("resumed on B after event %d: %v", last, ids(rest))
	}
	whole := append(append([]sseEvent(nil), seen...), rest...)
	checkWhole(t, "A's events then B's", whole)
	b, a := fullB.rest(), fullA.rest()
	checkWhole(t, "the whole log on B", b)
	if !sameEvents(whole, b) || !sameEvents(a, b) {
		t.Errorf("the log differs:\nA then B %v\nwhole on B %v\nwhole on A %v", ids(whole), ids(b), ids(a))
	}
	for k, st := range fromEvery {
		if got := st.rest(); !sameEvents(got, whole[k:]) {
			t.Errorf("resumed after event %d: %v; want %v", k, ids(got), ids(whole[k:]))
		}
	}
	if n := r.up.count(); n != scaleWalk {
		t.Errorf("the upstream served %d requests; want one walk (%d requests)", n, scaleWalk)
	}

	// The thread is the same on both replicas, and the run is over on both.
	stA, thA := r.a.do(t, "GET", "/v1/agents/scale/chats/c1", "", nil)
	stB, thB := r.b.do(t, "GET", "/v1/agents/scale/chats/c1", "", nil)
	if stA != 200 || stB != 200 || string(thA) != string(thB) || !strings.Contains(string(thB), "walked") {
		t.Errorf("thread on A %d %.300s\non B %d %.300s", stA, thA, stB, thB)
	}
	for _, ts := range []*testServer{r.a, r.b} {
		if st, _ := ts.do(t, "GET", "/v1/agents/scale/chat/c1/stream", "", nil); st != 204 {
			t.Errorf("resume after the run: %d; want 204", st)
		}
	}
}

// mintSession mints a session on ts and returns its token.
func mintSession(t *testing.T, ts *testServer, user string) string {
	t.Helper()
	st, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": user, "ttl_seconds": 600,
		"runtime_credentials": map[string]string{"mine": "runtime-token-" + user}})
	var out struct{ Token string }
	if json.Unmarshal(b, &out); st != 201 || out.Token == "" {
		t.Fatalf("mint a session: %d %s", st, b)
	}
	return out.Token
}

// invokeItems calls list_items through the invoke endpoint of ts with
// body's fields, and returns the decoded view.
func invokeItems(t *testing.T, ts *testServer, body map[string]any) map[string]any {
	t.Helper()
	st, b := ts.do(t, "POST", "/v1/tools/up.list_items/invoke", "", body)
	var view map[string]any
	if err := json.Unmarshal(b, &view); st != 200 || err != nil {
		t.Fatalf("invoke %v: %d %s", body, st, b)
	}
	return view
}

// TestScaleOutSessionsAndAgents: a session minted on A works on B (and
// its revocation on B holds on A); an agent put on A is served by B; a
// binding edited on A applies to B's next call and next turn.
func TestScaleOutSessionsAndAgents(t *testing.T) {
	r := startReplicas(t, "")
	alice := mintSession(t, r.a, "alice")
	resp := r.b.post(t, "/v1/agents/scale/chat", alice, chatBody("s1", "u1", "walk"))
	checkWhole(t, "alice's turn on B", newSSEStream(t, resp).rest())
	stA, thA := r.a.do(t, "GET", "/v1/agents/scale/chats/s1", alice, nil)
	stB, thB := r.b.do(t, "GET", "/v1/agents/scale/chats/s1", alice, nil)
	if stA != 200 || string(thA) != string(thB) || !strings.Contains(string(thA), "walked") {
		t.Errorf("alice's thread on A %d %.300s\non B %d %.300s", stA, thA, stB, thB)
	}
	if st, _ := r.a.do(t, "GET", "/v1/agents/scale/chats/s1", "", nil); st != 404 {
		t.Errorf("the admin's namespace reads alice's chat on A: %d", st)
	}
	if st, b := r.a.do(t, "GET", "/v1/agents/scale/chats", alice, nil); st != 200 || !strings.Contains(string(b), `"chatId":"s1"`) {
		t.Errorf("alice's chats on A: %d %s", st, b)
	}
	if st, b := r.b.do(t, "DELETE", "/v1/sessions/"+alice, alice, nil); st/100 != 2 {
		t.Fatalf("revoke on B: %d %s", st, b)
	}
	if st, _ := r.a.do(t, "GET", "/v1/agents/scale/chats", alice, nil); st != 401 {
		t.Errorf("a session revoked on B still works on A: %d", st)
	}

	// An agent put on A is there on B.
	if st, b := r.a.do(t, "PUT", "/v1/agents/second", "", map[string]any{"system": "s", "agentTools": []any{
		map[string]any{"tool_id": "up.list_items", "provider_id": "up", "loop_responses": true}}}); st != 200 {
		t.Fatalf("put an agent on A: %d %s", st, b)
	}
	if st, b := r.b.do(t, "GET", "/v1/agents/second", "", nil); st != 200 || !strings.Contains(string(b), "up.list_items") {
		t.Errorf("the agent put on A, on B: %d %s", st, b)
	}

	// With looping on, B's call as the agent walks every page (anew:
	// alice's turn left the walk in the cache).
	before := r.up.count()
	v := invokeItems(t, r.b, map[string]any{"agent_id": "second", "args": map[string]any{"_all_pages": true, "_refresh": true}})
	if v["_pagingComplete"] != true || r.up.count()-before != scaleWalk {
		t.Fatalf("looping on: %d requests, _pagingComplete %v", r.up.count()-before, v["_pagingComplete"])
	}
	// loop_responses off on A: B's next call and next turn make one
	// request and no walk.
	if st, b := r.a.do(t, "PATCH", "/v1/agents/second/tools/up.list_items", "", map[string]any{"loop_responses": false}); st != 200 {
		t.Fatalf("patch on A: %d %s", st, b)
	}
	if _, b := r.b.do(t, "GET", "/v1/agents/second", "", nil); strings.Contains(string(b), `"loop_responses":true`) {
		t.Errorf("the patched agent on B: %s", b)
	}
	before = r.up.count()
	v = invokeItems(t, r.b, map[string]any{"agent_id": "second", "args": map[string]any{"_all_pages": true}})
	if n := r.up.count() - before; n != 1 || v["_pagingComplete"] == true || v["_cache"] != nil {
		t.Errorf("looping off on A, B's call: %d requests, view %.300v", n, v)
	}
	before = r.up.count()
	resp = r.b.post(t, "/v1/agents/second/chat", "", chatBody("s2", "u1", "walk"))
	checkWhole(t, "B's turn after the patch", newSSEStream(t, resp).rest())
	if n := r.up.count() - before; n != 1 {
		t.Errorf("looping off on A, B's next turn made %d upstream requests; want 1", n)
	}

	// An agent deleted on B is gone on A.
	if st, b := r.b.do(t, "DELETE", "/v1/agents/second", "", nil); st != 204 {
		t.Fatalf("delete on B: %d %s", st, b)
	}
	if st, _ := r.a.do(t, "GET", "/v1/agents/second", "", nil); st != 404 {
		t.Errorf("the agent deleted on B, on A: %d", st)
	}
	resp = r.a.post(t, "/v1/agents/second/chat", "", chatBody("s3", "u1", "walk"))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("a turn on A with the agent deleted on B: %d %.200s", resp.StatusCode, b)
	}
}

// TestScaleOutPatchAppliesFromTheNextStep: a binding edited on A while
// B runs a turn applies from the turn's next step.
func TestScaleOutPatchAppliesFromTheNextStep(t *testing.T) {
	r := startReplicas(t, "")
	release := r.up.holdPages(2)
	defer release()
	onB := newSSEStream(t, r.b.post(t, "/v1/agents/scale/chat", "", chatBody("p1", "u1", "walk twice")))
	seen := onB.until(t, "data-tool-loop-progress") // the first step's walk is held at page 2
	if st, b := r.a.do(t, "PATCH", "/v1/agents/scale/tools/up.list_items", "", map[string]any{"loop_responses": false}); st != 200 {
		t.Fatalf("patch on A: %d %s", st, b)
	}
	release()
	events := onB.rest()
	checkWhole(t, "the turn on B", append(seen, events...))
	var outputs []string
	for _, e := range events {
		if strings.Contains(e.Data, `"type":"tool-output-available"`) {
			outputs = append(outputs, e.Data)
		}
	}
	if len(outputs) != 2 || !strings.Contains(outputs[0], `"_pagingComplete":true`) || strings.Contains(outputs[1], `"_pagingComplete":true`) {
		t.Errorf("the turn's two calls: %.300q", outputs)
	}
	if n := r.up.count(); n != scaleWalk+1 {
		t.Errorf("the upstream served %d requests; want a walk (%d requests), then one request", n, scaleWalk)
	}
}

// TestScaleOutConflictAndStop: while A runs a turn, a second turn on the
// same chat on B is refused with 409; B resumes it; a stop on B ends A's
// run within a second (the bound), and the chat is free again.
func TestScaleOutConflictAndStop(t *testing.T) {
	r := startReplicas(t, "")
	onA := newSSEStream(t, r.a.post(t, "/v1/agents/scale/chat", "", chatBody("k1", "u1", "block")))
	onA.until(t, "text-delta") // the model said hello and now waits
	ended := make(chan []sseEvent, 1)
	var endedAt time.Time
	go func() {
		rest := onA.rest()
		endedAt = time.Now()
		ended <- rest
	}()

	resp := r.b.post(t, "/v1/agents/scale/chat", "", chatBody("k1", "u2", "walk"))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 409 || errorCode(t, b) != "conflict" {
		t.Errorf("a second turn on B while A runs one: %d %s", resp.StatusCode, b)
	}
	if st, b := r.b.do(t, "GET", "/v1/agents/scale/chats", "", nil); st != 200 || !strings.Contains(string(b), `"active":true`) {
		t.Errorf("B's chat list while A runs the turn: %d %s", st, b)
	}
	onB := newSSEStream(t, resumeOn(t, r.b, "k1", ""))
	if got := onB.until(t, "text-delta"); got[0].ID != 1 {
		t.Errorf("resume on B starts at event %d", got[0].ID)
	}

	sent := time.Now()
	st, b := r.b.do(t, "POST", "/v1/agents/scale/chat/k1/stop", "", nil)
	returned := time.Now()
	if st != 200 || !strings.Contains(string(b), `"stopped":true`) {
		t.Fatalf("stop on B: %d %s", st, b)
	}
	var rest []sseEvent
	select {
	case rest = <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("A's stream had not ended 10 s after the stop on B")
	}
	t.Logf("stop on B returned after %v; A's stream ended %v after it was sent", returned.Sub(sent).Round(time.Millisecond), endedAt.Sub(sent).Round(time.Millisecond))
	if d := endedAt.Sub(sent); d > time.Second {
		t.Errorf("A's run ended %v after the stop on B; the bound is 1 s", d)
	}
	if types := chunkTypes(rest); len(types) < 2 || types[len(types)-2] != "abort" || types[len(types)-1] != "[DONE]" {
		t.Errorf("A's stopped stream ends %v", types)
	}
	if types := chunkTypes(onB.rest()); len(types) < 2 || types[len(types)-2] != "abort" {
		t.Errorf("B's resumed stream ends %v", types)
	}
	_, th := r.b.do(t, "GET", "/v1/agents/scale/chats/k1", "", nil)
	if !strings.Contains(string(th), "hello") {
		t.Errorf("the stopped turn keeps what it said: %s", th)
	}
	// The chat is free on every replica: a new turn on B runs.
	resp = r.b.post(t, "/v1/agents/scale/chat", "", chatBody("k1", "u3", "walk"))
	checkWhole(t, "the next turn on B", newSSEStream(t, resp).rest())
	if st, _ := r.a.do(t, "POST", "/v1/agents/scale/chat/k1/stop", "", nil); st != 200 {
		t.Errorf("stop with no run: %d", st)
	}
}

// TestScaleOutCacheAndResults: a complete walk on A is a cache hit on B
// with no second walk; a _resultId from A reads on B in its thread, and
// is not found in another thread.
func TestScaleOutCacheAndResults(t *testing.T) {
	r := startReplicas(t, "limits: {view_chars: 2000}\n") // small: the view is cut, the result stored
	all := map[string]any{"_all_pages": true}
	va := invokeItems(t, r.a, map[string]any{"args": all, "thread_id": "t1"})
	id, _ := va["_resultId"].(string)
	if va["_pagingComplete"] != true || va["_cache"] != nil || id == "" || r.up.count() != scaleWalk {
		t.Fatalf("the walk on A: %d requests, view %.400v", r.up.count(), va)
	}
	vb := invokeItems(t, r.b, map[string]any{"args": all, "thread_id": "t1"})
	hit, _ := vb["_cache"].(map[string]any)
	if hit["hit"] != true || vb["_pagingComplete"] != true || r.up.count() != scaleWalk {
		t.Errorf("the same call on B: %d upstream requests (want %d), _cache %v", r.up.count(), scaleWalk, vb["_cache"])
	}

	query := func(ts *testServer, thread string) (int, []byte) {
		return ts.do(t, "POST", "/v1/tools/queryToolResult/invoke", "", map[string]any{"thread_id": thread,
			"args": map[string]any{"resultId": id, "offset": 45, "limit": 5}})
	}
	st, b := query(r.b, "t1")
	if st != 200 || !strings.Contains(string(b), "item 46 ") || !strings.Contains(string(b), "item 50 ") {
		t.Errorf("A's result read on B in its thread: %d %.400s", st, b)
	}
	for _, thread := range []string{"t2", ""} {
		for _, ts := range []*testServer{r.a, r.b} {
			if st, b := query(ts, thread); st != 404 || errorCode(t, b) != "not_found" {
				t.Errorf("A's result read in thread %q: %d %.300s", thread, st, b)
			}
		}
	}
}

// TestScaleOutRedisRestart: while Redis is down, requests that need it
// fail at once with 503 store_unavailable, never served from local
// state; once it is back (empty: persistence is off), they work again.
func TestScaleOutRedisRestart(t *testing.T) {
	if os.Getenv(clusterEnv) == "1" {
		t.Skip("restarts one redis-server; a cluster's failover is Redis's own")
	}
	r := startReplicas(t, "")
	alice := mintSession(t, r.a, "alice")
	if st, _ := r.b.do(t, "GET", "/v1/agents/scale/chats", alice, nil); st != 200 {
		t.Fatalf("alice on B: %d", st)
	}
	// A turn runs on A when Redis goes: A cannot renew its claim, so it
	// must end the turn within the lease (another replica could take the
	// chat once the claim lapsed).
	live := newSSEStream(t, r.a.post(t, "/v1/agents/scale/chat", "", chatBody("live", "u1", "block")))
	live.until(t, "text-delta")
	liveEnded := make(chan time.Time, 1)
	var liveRest []sseEvent
	go func() {
		liveRest = live.rest()
		liveEnded <- time.Now()
	}()
	r.redis.Stop()
	stopped := time.Now()
	down := []struct {
		ts           *testServer
		method, path string
		token        string
		body         any
	}{
		{r.a, "POST", "/v1/sessions", "", map[string]any{"user_id": "bob"}},
		{r.b, "GET", "/v1/agents/scale/chats", alice, nil},
		{r.a, "GET", "/v1/agents/scale/chats/s1", "", nil},
		{r.b, "POST", "/v1/agents/scale/chat", "", chatBody("d1", "u1", "walk")},
		{r.a, "GET", "/v1/agents/scale/chat/d1/stream", "", nil},
	}
	for _, d := range down {
		began := time.Now()
		st, b := d.ts.do(t, d.method, d.path, d.token, d.body)
		took := time.Since(began)
		if st != 503 || errorCode(t, b) != "store_unavailable" {
			t.Errorf("%s %s with Redis down: %d %.300s; want 503 store_unavailable", d.method, d.path, st, b)
		}
		if took > 5*time.Second {
			t.Errorf("%s %s with Redis down took %v to fail", d.method, d.path, took)
		}
		t.Logf("%s %s with Redis down: %d in %v", d.method, d.path, st, took.Round(time.Millisecond))
	}
	for name, ts := range map[string]*testServer{"A": r.a, "B": r.b} {
		if st, _ := ts.do(t, "GET", "/readyz", "-", nil); st != 503 {
			t.Errorf("/readyz on %s with Redis down: %d", name, st)
		}
	}
	// The turn itself ends on A (its stream broke off already: the log it
	// reads is in Redis).
	select {
	case at := <-r.cancelled:
		d := at.Sub(stopped)
		t.Logf("the turn running on A when Redis went was cancelled %v later (lease %v)", d.Round(time.Millisecond), scaleLease)
		// Its claim was last renewed before Redis went and lapses a lease
		// after that; the holder gives its turn up then (renewals are
		// tried every third of the lease: a second of slack).
		if d > scaleLease+time.Second {
			t.Errorf("the turn on A was cancelled %v after Redis went, well after its claim lapsed (lease %v)", d.Round(time.Millisecond), scaleLease)
		}
	case <-time.After(time.Until(stopped.Add(scaleLease + 5*time.Second))):
		t.Errorf("the turn running on A was still running %v after Redis went (lease %v)", time.Since(stopped).Round(time.Millisecond), scaleLease)
	}
	select {
	case at := <-liveEnded:
		t.Logf("its stream ended %v after Redis went, after %v", at.Sub(stopped).Round(time.Millisecond), chunkTypes(liveRest))
	case <-time.After(5 * time.Second):
		t.Errorf("the stream of the turn A ended was still open")
	}
	// A call may go on uncached (a dataset cache failure is counted and
	// the walk made, loop.CacheStats.Errors), but never passes for a hit.
	st, b := r.b.do(t, "POST", "/v1/tools/up.list_items/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}})
	switch {
	case st == 503 && errorCode(t, b) == "store_unavailable":
	case st == 200 && strings.Contains(string(b), `"_pagingComplete":true`) && !strings.Contains(string(b), `"_cache"`):
	default:
		t.Errorf("a walk with Redis down: %d %.300s", st, b)
	}
	r.redis.Restart(t)
	// Each replica heals on its own, without a restart (go-redis dials
	// again about once a second after its dials failed).
	back := time.Now()
	for _, ts := range []*testServer{r.a, r.b} {
		waitFor(t, func() bool {
			st, _ := ts.do(t, "GET", "/v1/agents/scale/chats/none", "", nil)
			return st == 404
		})
	}
	t.Logf("both replicas served again %v after Redis was back", time.Since(back).Round(time.Millisecond))
	for name, ts := range map[string]*testServer{"A": r.a, "B": r.b} {
		if st, _ := ts.do(t, "GET", "/readyz", "-", nil); st != 200 {
			t.Errorf("/readyz on %s with Redis back: %d", name, st)
		}
	}
	// The turn A ended holds nothing: a new turn on the chat runs on B.
	resp := r.b.post(t, "/v1/agents/scale/chat", "", chatBody("live", "u2", "walk"))
	checkWhole(t, "a new turn on the chat A ended", newSSEStream(t, resp).rest())
	bob := mintSession(t, r.a, "bob")
	// Redis came back empty: alice's session is gone, bob's works on B.
	if st, _ := r.b.do(t, "GET", "/v1/agents/scale/chats", alice, nil); st != 401 {
		t.Errorf("alice's session after Redis lost it: %d", st)
	}
	resp = r.b.post(t, "/v1/agents/scale/chat", bob, chatBody("d1", "u1", "walk"))
	checkWhole(t, "a turn on B after the restart", newSSEStream(t, resp).rest())
	if st, b := r.a.do(t, "GET", "/v1/agents/scale/chats/d1", bob, nil); st != 200 || !strings.Contains(string(b), "walked") {
		t.Errorf("bob's thread on A after the restart: %d %.300s", st, b)
	}
}

// TestScaleOutCollapsedWalk: A and B asked for the same walk at once make
// it once: B waits for A's walk and reads what it recorded.
func TestScaleOutCollapsedWalk(t *testing.T) {
	r := startReplicas(t, "")
	release := r.up.holdPages(2)
	defer release()
	views := make(chan string, 2)
	call := func(ts *testServer) {
		b, _ := json.Marshal(map[string]any{"args": map[string]any{"_all_pages": true}})
		req, _ := http.NewRequest("POST", ts.URL+"/v1/tools/up.list_items/invoke", strings.NewReader(string(b)))
		req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			views <- err.Error()
			return
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		views <- fmt.Sprintf("%d %s", resp.StatusCode, out)
	}
	go call(r.a)
	waitFor(t, func() bool { return r.up.count() >= 2 }) // A walks, held at page 2 (and the pages it fetched ahead)
	go call(r.b)
	// B looked the walk up, missed, and waits for A's; a moment more for
	// it to reach the shared lock.
	waitFor(t, func() bool { return r.b.dep.Cache().Stats().Misses == 1 })
	time.Sleep(200 * time.Millisecond)
	release()
	for range 2 {
		select {
		case v := <-views:
			if !strings.HasPrefix(v, "200 ") || !strings.Contains(v, `"_pagingComplete":true`) {
				t.Errorf("a collapsed call: %.300s", v)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the calls did not return")
		}
	}
	if n := r.up.count(); n != scaleWalk {
		t.Errorf("two replicas asked for one walk at once: %d upstream requests; want one walk of %d", n, scaleWalk)
	}
	if st := r.b.dep.Cache().Stats(); st.Walks != 0 {
		t.Errorf("B's cache: %+v; want no walk of its own", st)
	}
}

// TestScaleOutOneTurnPerChat: many turns on one chat sent at once to
// both replicas: exactly one runs, every other is refused with 409.
func TestScaleOutOneTurnPerChat(t *testing.T) {
	r := startReplicas(t, "")
	const n = 8
	type answer struct {
		replica string
		status  int
		body    string
		resp    *http.Response
	}
	answers := make(chan answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		ts, name := r.a, "A"
		if i%2 == 1 {
			ts, name = r.b, "B"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			b, _ := json.Marshal(chatBody("race", fmt.Sprintf("u%d", i), "block"))
			req, _ := http.NewRequest("POST", ts.URL+"/v1/agents/scale/chat", strings.NewReader(string(b)))
			req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- answer{replica: name, body: err.Error()}
				return
			}
			a := answer{replica: name, status: resp.StatusCode}
			if resp.StatusCode == 200 {
				a.resp = resp // the running turn's stream
			} else {
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				a.body = string(out)
			}
			answers <- a
		}()
	}
	close(start)
	wg.Wait()
	close(answers)
	var running []answer
	for a := range answers {
		switch {
		case a.status == 200:
			running = append(running, a)
		case a.status != 409 || !strings.Contains(a.body, `"conflict"`):
			t.Errorf("a concurrent turn on %s: %d %s", a.replica, a.status, a.body)
		}
	}
	if len(running) != 1 {
		t.Fatalf("%d of %d concurrent turns on one chat ran; want exactly one", len(running), n)
	}
	// Stopped from the other replica, it ends.
	other := r.b
	if running[0].replica == "B" {
		other = r.a
	}
	if st, b := other.do(t, "POST", "/v1/agents/scale/chat/race/stop", "", nil); st != 200 || !strings.Contains(string(b), `"stopped":true`) {
		t.Fatalf("stop on the other replica: %d %s", st, b)
	}
	if types := chunkTypes(newSSEStream(t, running[0].resp).rest()); len(types) < 2 || types[len(types)-2] != "abort" {
		t.Errorf("the running turn's stream ends %v", types)
	}
}

// TestScaleOutConnectAcrossReplicas: a connect link minted on A opens on
// B and its form submits on A (a load balancer may send each request
// anywhere); the credential, sealed with the shared secret_key, opens on
// both; the spent link is spent on both.
func TestScaleOutConnectAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	prefix := "trawl-test-" + randomHex(4) + ":"
	start := func() *testServer {
		cfg := redisConfig(t, rs.Addr)
		cfg.RedisPrefix = prefix
		cfg.ConnectDemoToolkits()
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		return &testServer{Server: srv, URL: newHTTPServer(t, srv)}
	}
	a, b := start(), start()
	_, sb := a.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"})
	var sess struct{ Token string }
	if json.Unmarshal(sb, &sess); sess.Token == "" {
		t.Fatalf("mint a session: %s", sb)
	}
	link, err := userConnections{s: a.Server, user: "ann", sessionHash: deploy.TokenHash(sess.Token)}.ConnectLink(context.Background(), "chat")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	// The browser opens the link on B; its cookie (cookies ignore the
	// port) goes to A as it would through one host name.
	ann, csrf, _ := openConnect(t, b.URL+u.Path+"?"+u.RawQuery)
	if st, body := get(t, newBrowser(t), a.URL+u.Path+"?"+u.RawQuery); st != 400 || !strings.Contains(body, "already opened") {
		t.Errorf("a second browser opening the link on A: %d %.200s", st, body)
	}
	if st, body := submitConnect(t, ann, a.URL+u.Path, a.URL, csrf, "ann-token"); st != 200 || !strings.Contains(body, "connected for account <code>ann</code>") {
		t.Fatalf("the submit on A of the form opened on B: %d %.300s", st, body)
	}
	for name, ts := range map[string]*testServer{"A": a, "B": b} {
		cred, ok, err := ts.conns.Credential(context.Background(), "ann", "chat")
		if err != nil || !ok || cred != "ann-token" {
			t.Errorf("ann's credential on %s: %q %v %v", name, cred, ok, err)
		}
	}
	if st, _ := submitConnect(t, ann, b.URL+u.Path, b.URL, csrf, "again"); st != 403 {
		t.Errorf("the spent form replayed on B: %d", st)
	}
	if cred, _, _ := b.conns.Credential(context.Background(), "ann", "chat"); cred != "ann-token" {
		t.Errorf("stored %q after the replay", cred)
	}
}

// TestScaleOutWorkflowRun: a workflow put on A runs on B; A resumes the
// run's stream and stops it; both read the stopped run; a run started on
// A completes and B reads its result.
func TestScaleOutWorkflowRun(t *testing.T) {
	r := startReplicas(t, "")
	def := `{"steps": [{"id": "items", "type": "tool", "tool": "up.list_items", "loop": {"all_pages": true, "fields": ["id"]}}]}`
	req, _ := http.NewRequest("PUT", r.a.URL+"/v1/workflows/all", strings.NewReader(def))
	req.Header.Set("Authorization", "Bearer "+scaleAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("put the workflow on A: %d %s", resp.StatusCode, b)
	}
	resp.Body.Close()

	release := r.up.holdPages(2)
	defer release()
	onB := newSSEStream(t, r.b.post(t, "/v1/workflows/all/runs", "", nil))
	runID := onB.resp.Header.Get("X-Trawl-Run-Id")
	onB.until(t, "data-tool-loop-progress") // the walk is held at page 2
	fromA := newSSEStream(t, resumeAt(t, r.a, "/v1/workflows/all/runs/"+runID+"/stream", "", ""))
	if first := fromA.until(t, "start"); first[0].ID != 1 {
		t.Errorf("A resumes B's run at event %d", first[0].ID)
	}
	// Stopped from A in the middle of its walk, B's run ends within a
	// second: the held upstream request is given up.
	ended := make(chan time.Time, 1)
	var onBRest []sseEvent
	go func() {
		onBRest = onB.rest()
		ended <- time.Now()
	}()
	sent := time.Now()
	if st, b := r.a.do(t, "POST", "/v1/workflows/all/runs/"+runID+"/stop", "", nil); st != 200 || !strings.Contains(string(b), `"stopped":true`) {
		t.Fatalf("stop on A of B's run: %d %s", st, b)
	}
	select {
	case at := <-ended:
		t.Logf("B's run, stopped on A mid-walk, ended %v after the stop was sent", at.Sub(sent).Round(time.Millisecond))
		if at.Sub(sent) > time.Second {
			t.Errorf("B's run ended %v after the stop on A; the bound is 1 s", at.Sub(sent))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("B's run had not ended 10 s after the stop on A")
	}
	for name, types := range map[string][]string{"B's": chunkTypes(onBRest), "A's resumed": chunkTypes(fromA.rest())} {
		if len(types) < 2 || types[len(types)-2] != "abort" {
			t.Errorf("%s stream of the stopped run ends %v", name, types)
		}
	}
	for name, ts := range map[string]*testServer{"A": r.a, "B": r.b} {
		if st, b := ts.do(t, "GET", "/v1/workflows/all/runs/"+runID, "", nil); st != 200 || !strings.Contains(string(b), `"status":"stopped"`) {
			t.Errorf("the stopped run on %s: %d %.300s", name, st, b)
		}
	}
	release()

	onA := newSSEStream(t, r.a.post(t, "/v1/workflows/all/runs", "", nil))
	done := onA.resp.Header.Get("X-Trawl-Run-Id")
	if types := chunkTypes(onA.rest()); len(types) < 2 || types[len(types)-2] != "finish" {
		t.Errorf("the run on A ends %v", types)
	}
	st, b := r.b.do(t, "GET", "/v1/workflows/all/runs/"+done, "", nil)
	if st != 200 || !strings.Contains(string(b), `"status":"done"`) || !strings.Contains(string(b), `"id":50`) {
		t.Errorf("A's finished run on B: %d %.300s", st, b)
	}
	if st, b := r.b.do(t, "GET", "/v1/workflows/all/runs", "", nil); st != 200 || !strings.Contains(string(b), runID) || !strings.Contains(string(b), done) {
		t.Errorf("the runs listed on B: %d %.300s", st, b)
	}
}

// resumeAt opens GET path on ts with token ("": the admin key) and,
// unless it is "", Last-Event-ID.
func resumeAt(t *testing.T, ts *testServer, path, token, lastID string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+cmp.Or(token, ts.AdminKey()))
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestScaleOutTurnOutlivesItsLease: a turn that runs for longer than the
// lease on a live replica is not taken for a dead replica's: B's resumed
// stream stays quiet, B still refuses a second turn, and the turn ends
// only when stopped.
func TestScaleOutTurnOutlivesItsLease(t *testing.T) {
	r := startReplicas(t, "")
	onA := newSSEStream(t, r.a.post(t, "/v1/agents/scale/chat", "", chatBody("long", "u1", "block")))
	onA.until(t, "text-delta")
	onB := newSSEStream(t, resumeOn(t, r.b, "long", ""))
	onB.until(t, "text-delta")
	events := make(chan sseEvent, 16)
	go func() {
		for {
			ev, ok := onB.next()
			if !ok {
				close(events)
				return
			}
			events <- ev
		}
	}()
	// Two and a half leases: a claim that is not renewed has lapsed, and
	// the sweeps (several per lease) had their chances to end it.
	select {
	case ev, ok := <-events:
		t.Fatalf("B's resumed stream of a live turn, within %v: %v %.200s (open %v)", 5*scaleLease/2, ev.ID, ev.Data, ok)
	case <-time.After(5 * scaleLease / 2):
	}
	resp := r.b.post(t, "/v1/agents/scale/chat", "", chatBody("long", "u2", "walk"))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 409 {
		t.Errorf("a second turn on B after %v: %d %s", 5*scaleLease/2, resp.StatusCode, b)
	}
	if st, b := r.b.do(t, "POST", "/v1/agents/scale/chat/long/stop", "", nil); st != 200 || !strings.Contains(string(b), `"stopped":true`) {
		t.Fatalf("stop on B: %d %s", st, b)
	}
	var rest []string
	for ev := range events {
		rest = append(rest, chunkTypes([]sseEvent{ev})...)
	}
	if len(rest) < 2 || rest[len(rest)-2] != "abort" {
		t.Errorf("B's resumed stream ends %v", rest)
	}
	if types := chunkTypes(onA.rest()); len(types) < 2 || types[len(types)-2] != "abort" {
		t.Errorf("A's stream ends %v", types)
	}
}

// toolOutputs are the tool-output-available chunks of a stream.
func toolOutputs(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		if strings.Contains(e.Data, `"type":"tool-output-available"`) {
			out = append(out, e.Data)
		}
	}
	return out
}

// TestScaleOutCacheKeepsCredentialScopes: walks made with a user's own
// credential are cached for that user on every replica, and never served
// to another user on any.
func TestScaleOutCacheKeepsCredentialScopes(t *testing.T) {
	r := startReplicas(t, "")
	alice, bob := mintSession(t, r.a, "alice"), mintSession(t, r.b, "bob")
	turn := func(ts *testServer, token, chat string) []string {
		t.Helper()
		evs := newSSEStream(t, ts.post(t, "/v1/agents/mine/chat", token, chatBody(chat, "u1", "walk"))).rest()
		checkWhole(t, "turn "+chat, evs)
		return toolOutputs(evs)
	}
	aliceAuth, bobAuth := "Bearer runtime-token-alice", "Bearer runtime-token-bob"
	if out := turn(r.a, alice, "r1"); len(out) != 1 || strings.Contains(out[0], `"_cache"`) || r.up.countAuth(aliceAuth) != scaleWalk {
		t.Fatalf("alice's walk on A: %d requests with her credential, %.300q", r.up.countAuth(aliceAuth), out)
	}
	if out := turn(r.b, bob, "r1"); len(out) != 1 || strings.Contains(out[0], `"_cache"`) || r.up.countAuth(bobAuth) != scaleWalk {
		t.Errorf("bob's walk on B: %d requests with his credential, %.300q", r.up.countAuth(bobAuth), out)
	}
	if out := turn(r.b, alice, "r2"); len(out) != 1 || !strings.Contains(out[0], `"_cache":{"hit":true`) || r.up.countAuth(aliceAuth) != scaleWalk {
		t.Errorf("alice's same walk on B: %d requests with her credential (want %d), %.300q", r.up.countAuth(aliceAuth), scaleWalk, out)
	}
	if n := r.up.count(); n != 2*scaleWalk {
		t.Errorf("the upstream served %d requests; want two walks (alice's, bob's)", n)
	}
	// The organization has no credential for this provider: the admin's
	// call is refused, never answered from a user's walk.
	st, b := r.a.do(t, "POST", "/v1/tools/mine.list_items/invoke", "", map[string]any{"args": map[string]any{"_all_pages": true}})
	if st == 200 || strings.Contains(string(b), "item 1 ") {
		t.Errorf("the admin's call of a user-credential tool: %d %.300s", st, b)
	}
}

// TestScaleOutConcurrentPatchesAllLand: patches of one agent sent at once
// to both replicas, each changing something else, all land.
func TestScaleOutConcurrentPatchesAllLand(t *testing.T) {
	r := startReplicas(t, "")
	if st, b := r.a.do(t, "PUT", "/v1/agents/many", "", map[string]any{"system": "s", "agentTools": []any{
		map[string]any{"tool_id": "up.list_items", "provider_id": "up", "loop_responses": true},
		map[string]any{"tool_id": "mine.list_items", "provider_id": "mine", "loop_responses": true},
	}}); st != 200 {
		t.Fatalf("put the agent: %d %s", st, b)
	}
	for round := 1; round <= 5; round++ {
		patches := []struct {
			ts   *testServer
			tool string
			body map[string]any
		}{
			{r.a, "up.list_items", map[string]any{"dataset_ttl_hours": round}},
			{r.b, "mine.list_items", map[string]any{"dataset_ttl_hours": 10 + round}},
			{r.b, "up.list_items", map[string]any{"loop_responses": round%2 == 0}},
			{r.a, "mine.list_items", map[string]any{"loop_responses": round%2 == 1}},
		}
		start := make(chan struct{})
		errs := make(chan string, len(patches))
		var wg sync.WaitGroup
		for _, p := range patches {
			wg.Add(1)
			go func() {
				defer wg.Done()
				b, _ := json.Marshal(p.body)
				req, _ := http.NewRequest("PATCH", p.ts.URL+"/v1/agents/many/tools/"+p.tool, strings.NewReader(string(b)))
				req.Header.Set("Authorization", "Bearer "+scaleAdminKey)
				req.Header.Set("Content-Type", "application/json")
				<-start
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Sprintf("PATCH %s %s: %d %s", p.tool, b, resp.StatusCode, out)
				}
			}()
		}
		close(start)
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Errorf("round %d: %s", round, e)
		}
		for name, ts := range map[string]*testServer{"A": r.a, "B": r.b} {
			_, b := ts.do(t, "GET", "/v1/agents/many", "", nil)
			var d agent.Definition
			if err := json.Unmarshal(b, &d); err != nil {
				t.Fatalf("the agent on %s: %s", name, b)
			}
			got := map[string]agent.Binding{}
			for _, bnd := range d.AgentTools {
				got[bnd.ToolID] = bnd
			}
			up, mine := got["up.list_items"], got["mine.list_items"]
			if up.DatasetTTLHours != float64(round) || mine.DatasetTTLHours != float64(10+round) ||
				up.LoopResponses != (round%2 == 0) || mine.LoopResponses != (round%2 == 1) {
				t.Errorf("round %d, the agent on %s: up %+v, mine %+v", round, name, up, mine)
			}
		}
	}
}

// TestScaleOutRunsStayWithTheirUser: another user, on the other replica,
// can neither resume, stop nor block a user's running turn on a chat of
// the same id.
func TestScaleOutRunsStayWithTheirUser(t *testing.T) {
	r := startReplicas(t, "")
	alice, bob := mintSession(t, r.a, "alice"), mintSession(t, r.a, "bob")
	onA := newSSEStream(t, r.a.post(t, "/v1/agents/scale/chat", alice, chatBody("same", "u1", "block")))
	onA.until(t, "text-delta")
	if st, _ := r.b.do(t, "GET", "/v1/agents/scale/chat/same/stream", bob, nil); st != 204 {
		t.Errorf("bob resumes alice's chat on B: %d", st)
	}
	if _, b := r.b.do(t, "POST", "/v1/agents/scale/chat/same/stop", bob, nil); !strings.Contains(string(b), `"stopped":false`) {
		t.Errorf("bob stops alice's chat on B: %s", b)
	}
	// Bob's own chat of the same id runs beside hers.
	resp := r.b.post(t, "/v1/agents/scale/chat", bob, chatBody("same", "u1", "walk"))
	checkWhole(t, "bob's turn on B", newSSEStream(t, resp).rest())
	// Alice's turn still runs: she resumes it on B and stops it there.
	onB := newSSEStream(t, resumeAt(t, r.b, "/v1/agents/scale/chat/same/stream", alice, ""))
	onB.until(t, "text-delta")
	if _, b := r.b.do(t, "POST", "/v1/agents/scale/chat/same/stop", alice, nil); !strings.Contains(string(b), `"stopped":true`) {
		t.Errorf("alice stops her chat on B: %s", b)
	}
	if types := chunkTypes(onA.rest()); len(types) < 2 || types[len(types)-2] != "abort" {
		t.Errorf("alice's stream on A ends %v", types)
	}
	onB.rest()
}

// TestScaleOutResumeALongLog: a turn of thousands of chunks, its client
// gone in the middle, resumes on B from there: every later event once, in
// order, to the end; and the whole log reads the same on B from the start.
func TestScaleOutResumeALongLog(t *testing.T) {
	r := startReplicas(t, "")
	const n = 3000
	onA := newSSEStream(t, r.a.post(t, "/v1/agents/scale/chat", "", chatBody("long", "u1", fmt.Sprintf("chatty %d", n))))
	var seen []sseEvent
	for len(seen) < n/2 {
		ev, ok := onA.next()
		if !ok {
			t.Fatalf("A's stream ended after %d events", len(seen))
		}
		seen = append(seen, ev)
	}
	onA.resp.Body.Close()
	last := seen[len(seen)-1].ID
	onB := newSSEStream(t, resumeOn(t, r.b, "long", strconv.FormatInt(last, 10)))
	fullB := newSSEStream(t, resumeOn(t, r.b, "long", ""))
	r.endChatty()
	rest := onB.rest()
	whole := append(append([]sseEvent(nil), seen...), rest...)
	checkWhole(t, "A's events then B's", whole)
	deltas := 0
	for _, e := range whole {
		if strings.Contains(e.Data, `"type":"text-delta"`) {
			if want := fmt.Sprintf(`"delta":"%d "`, deltas); !strings.Contains(e.Data, want) {
				t.Fatalf("delta %d: %s", deltas, e.Data)
			}
			deltas++
		}
	}
	if deltas != n {
		t.Errorf("%d text deltas across A and B; want %d", deltas, n)
	}
	if full := fullB.rest(); !sameEvents(full, whole) {
		t.Errorf("the whole log on B: %d events; A's then B's: %d", len(full), len(whole))
	}
}
