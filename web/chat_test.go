package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"iter"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
)

// sseEvent is one event of a stream as a client reads it.
type sseEvent struct {
	ID   int64
	Data string
}

// readSSE reads every event until the stream ends.
func readSSE(t *testing.T, r io.Reader) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "data: "):
			cur.Data = line[6:]
		}
	}
	return out
}

func chatBody(chatID, msgID, text string) map[string]any {
	return map[string]any{"id": chatID, "trigger": "submit-message", "messages": []any{
		map[string]any{"id": msgID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": text}}}}}
}

// post starts a chat turn and returns the streaming response.
func (ts *testServer) post(t *testing.T, path, token string, body any, header ...string) *http.Response {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", ts.URL+path, strings.NewReader(string(b)))
	if token == "" {
		token = ts.AdminKey()
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func chunkTypes(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		var c struct {
			Type string `json:"type"`
		}
		json.Unmarshal([]byte(e.Data), &c)
		if c.Type == "" {
			c.Type = e.Data
		}
		out = append(out, c.Type)
	}
	return out
}

func TestDemoChatTurn(t *testing.T) {
	ts := startDemo(t, nil)
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "How many open orders worth more than 100 do we have?"))
	defer resp.Body.Close()
	for k, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
		"X-Vercel-Ai-Ui-Message-Stream": "v1", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("header %s = %q; want %q", k, got, want)
		}
	}
	events := readSSE(t, resp.Body)
	types := chunkTypes(events)
	if types[0] != "start" || types[len(types)-2] != "finish" || types[len(types)-1] != "[DONE]" {
		t.Fatalf("stream frame: %v", types)
	}
	for i, e := range events[:len(events)-1] {
		if e.ID != int64(i+1) {
			t.Fatalf("event %d has id %d", i, e.ID)
		}
	}
	joined := strings.Join(types, " ")
	for _, want := range []string{"start-step", "tool-input-start", "tool-input-available", "data-tool-loop-progress", "tool-output-available", "text-delta", "finish-step"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s chunk in %v", want, types)
		}
	}
	if strings.Index(joined, "tool-input-available") > strings.Index(joined, "tool-output-available") {
		t.Errorf("output before input: %v", types)
	}
	// The thread is kept, tool parts included.
	st, b := ts.do(t, "GET", "/v1/agents/demo/chats/c1", "", nil)
	var msgs []agent.UIMessage
	json.Unmarshal(b, &msgs)
	if st != 200 || len(msgs) != 2 || msgs[1].Role != "assistant" {
		t.Fatalf("thread: %d %s", st, b)
	}
	var tool *agent.Part
	for i, p := range msgs[1].Parts {
		if p.Type == "dynamic-tool" {
			tool = &msgs[1].Parts[i]
		}
	}
	if tool == nil || tool.ToolName != "list_orders" || tool.State != "output-available" || !strings.Contains(msgs[1].Text(), "278") {
		t.Errorf("assistant message: %+v", msgs[1])
	}
	// Nothing active now: resume answers 204.
	if st, _ := ts.do(t, "GET", "/v1/agents/demo/chat/c1/stream", "", nil); st != 204 {
		t.Errorf("resume after the run = %d", st)
	}
	// The upstream calls are in the activity log under the thread.
	st, b = ts.do(t, "GET", "/v1/activity?agent_id=demo&chat_id=c1", "", nil)
	if st != 200 || !strings.Contains(string(b), "acme.list_orders") {
		t.Errorf("activity: %d %.300s", st, b)
	}
}

// gateModel answers "hello", waits for release (or cancellation), then
// answers " world".
type gateModel struct{ release chan struct{} }

func (g gateModel) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	return func(yield func(agent.ModelEvent, error) bool) {
		if !yield(agent.ModelEvent{Kind: agent.EventTextDelta, Text: "hello"}, nil) {
			return
		}
		select {
		case <-g.release:
		case <-ctx.Done():
			yield(agent.ModelEvent{}, ctx.Err())
			return
		}
		if yield(agent.ModelEvent{Kind: agent.EventTextDelta, Text: " world"}, nil) {
			yield(agent.ModelEvent{Kind: agent.EventFinish, FinishReason: "stop"}, nil)
		}
	}
}

func startGated(t *testing.T) (*testServer, chan struct{}) {
	release := make(chan struct{})
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(t, srv)
	return &testServer{Server: srv, URL: hs}, release
}

func newHTTPServer(t *testing.T, srv *Server) string {
	t.Helper()
	hs := &http.Server{Handler: srv.Handler()}
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return "http://" + ln.Addr().String()
}

// waitActive waits until the chat has a run in progress.
func waitActive(t *testing.T, ts *testServer, key string) {
	t.Helper()
	for i := 0; i < 500; i++ {
		if id, _ := ts.runs.Active(context.Background(), key); id != "" {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the run never started")
}

func TestResumeConflictAndStop(t *testing.T) {
	ts, release := startGated(t)
	key := agent.ThreadKey("", "demo", "c1")
	// The client disconnects at once: the run goes on.
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "hi"))
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		if err != nil || strings.Contains(line, "text-delta") {
			break
		}
	}
	resp.Body.Close()
	waitActive(t, ts, key)
	// A second turn on the same chat is refused while the first runs.
	second := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u2", "again"))
	b, _ := io.ReadAll(second.Body)
	second.Body.Close()
	if second.StatusCode != 409 || errorCode(t, b) != "conflict" {
		t.Errorf("concurrent turn: %d %s", second.StatusCode, b)
	}
	// Resume from the start, and after event 2, while the run waits:
	// nothing repeated or skipped.
	full, after := ts.openResume(t, "c1", ""), ts.openResume(t, "c1", "2")
	if full.first.ID != 1 || after.first.ID != 3 {
		t.Fatalf("first resumed events: %d and %d; want 1 and 3", full.first.ID, after.first.ID)
	}
	close(release)
	rest, restAfter := full.rest(t), after.rest(t)
	if len(restAfter) != len(rest)-2 || rest[len(rest)-1].Data != "[DONE]" {
		t.Errorf("resume: full %v, after-2 %v", ids(rest), ids(restAfter))
	}
	for i, e := range rest[:len(rest)-1] {
		if e.ID != int64(i+2) {
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
}

// openStream is a resumed stream whose first event was read.
type openStream struct {
	first sseEvent
	body  io.ReadCloser
	br    *bufio.Reader
}

func (o *openStream) rest(t *testing.T) []sseEvent {
	defer o.body.Close()
	return readSSE(t, o.br)
}

func (ts *testServer) openResume(t *testing.T, chat, lastID string) *openStream {
	t.Helper()
	req, _ := http.NewRequest("GET", ts.URL+"/v1/agents/demo/chat/"+chat+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("resume: %d", resp.StatusCode)
	}
	o := &openStream{body: resp.Body, br: bufio.NewReader(resp.Body)}
	for {
		line, err := o.br.ReadString('\n')
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "id: ") {
			o.first.ID, _ = strconv.ParseInt(line[4:], 10, 64)
		}
		if strings.HasPrefix(line, "data: ") {
			o.first.Data = line[6:]
			return o
		}
	}
}

func ids(evs []sseEvent) []int64 {
	var out []int64
	for _, e := range evs {
		out = append(out, e.ID)
	}
	return out
}

func TestStop(t *testing.T) {
	ts, _ := startGated(t)
	key := agent.ThreadKey("", "demo", "c9")
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c9", "u1", "hi"))
	defer resp.Body.Close()
	waitActive(t, ts, key)
	st, b := ts.do(t, "POST", "/v1/agents/demo/chat/c9/stop", "", nil)
	if st != 200 || !strings.Contains(string(b), `"stopped":true`) {
		t.Fatalf("stop: %d %s", st, b)
	}
	types := chunkTypes(readSSE(t, resp.Body))
	if types[len(types)-2] != "abort" {
		t.Errorf("stopped stream ends %v", types)
	}
	_, b = ts.do(t, "GET", "/v1/agents/demo/chats/c9", "", nil)
	if !strings.Contains(string(b), "hello") {
		t.Errorf("a stopped turn keeps what it did: %s", b)
	}
}

func TestSessionsIsolateUsers(t *testing.T) {
	ts := startDemo(t, nil)
	mint := func(user string) string {
		st, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": user, "runtime_credentials": map[string]string{"acme": "user-token-" + user}, "ttl_seconds": 600})
		var out struct{ Token string }
		json.Unmarshal(b, &out)
		if st != 201 || out.Token == "" {
			t.Fatalf("mint: %d %s", st, b)
		}
		return out.Token
	}
	alice, bob := mint("alice"), mint("bob")
	resp := ts.post(t, "/v1/agents/demo/chat", alice, chatBody("shared-id", "u1", "How many open orders?"))
	readSSE(t, resp.Body)
	resp.Body.Close()
	if st, _ := ts.do(t, "GET", "/v1/agents/demo/chats/shared-id", alice, nil); st != 200 {
		t.Errorf("alice reads her chat: %d", st)
	}
	for _, tok := range []string{bob, ""} { // bob, and the admin's own namespace
		if st, _ := ts.do(t, "GET", "/v1/agents/demo/chats/shared-id", tok, nil); st != 404 {
			t.Errorf("another caller reads alice's chat: %d", st)
		}
		if st, _ := ts.do(t, "GET", "/v1/agents/demo/chat/shared-id/stream", tok, nil); st != 204 {
			t.Errorf("another caller resumes alice's chat: %d", st)
		}
		if _, b := ts.do(t, "POST", "/v1/agents/demo/chat/shared-id/stop", tok, nil); !strings.Contains(string(b), `"stopped":false`) {
			t.Errorf("another caller stops alice's chat: %s", b)
		}
	}
	// A session cannot use the admin API.
	if st, _ := ts.do(t, "GET", "/v1/tools", alice, nil); st != 401 {
		t.Errorf("session on the admin API: %d", st)
	}
	// Bad session requests.
	for _, body := range []map[string]any{{"user_id": ""}, {"user_id": "x", "runtime_credentials": map[string]string{"nope": "t"}}, {"user_id": "x", "ttl_seconds": -1}} {
		if st, _ := ts.do(t, "POST", "/v1/sessions", "", body); st != 400 {
			t.Errorf("session %v: %d", body, st)
		}
	}
}

func TestThreadSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() (*Server, string) {
		cfg := DemoConfig()
		cfg.DataDir = dir
		srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: srv.Handler()}
		ln, _ := netListen()
		go hs.Serve(ln)
		return srv, "http://" + ln.Addr().String()
	}
	srv, url := start()
	ts := &testServer{Server: srv, URL: url}
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("keep", "u1", "How many open orders?"))
	readSSE(t, resp.Body)
	resp.Body.Close()
	srv.Close()
	srv2, url2 := start()
	defer srv2.Close()
	ts2 := &testServer{Server: srv2, URL: url2}
	st, b := ts2.do(t, "GET", "/v1/agents/demo/chats/keep", "", nil)
	if st != 200 || !strings.Contains(string(b), "dynamic-tool") {
		t.Errorf("after restart: %d %.200s", st, b)
	}
}

func TestAgentsAPI(t *testing.T) {
	ts := startDemo(t, nil)
	st, b := ts.do(t, "PATCH", "/v1/agents/demo/tools/acme.list_orders", "", map[string]any{"loop_responses": false, "dataset_ttl_hours": 2})
	if st != 200 {
		t.Fatalf("patch: %d %s", st, b)
	}
	d, _ := ts.agents.Get("demo")
	for _, bnd := range d.AgentTools {
		if bnd.ToolID == "acme.list_orders" && (bnd.LoopResponses || bnd.DatasetTTLHours != 2) {
			t.Errorf("binding after patch: %+v", bnd)
		}
	}
	// A tool of a bound toolkit gets its own entry.
	if st, b := ts.do(t, "PATCH", "/v1/agents/demo/tools/chat.CHAT_SEND_MESSAGE", "", map[string]any{"discovery": true}); st != 200 {
		t.Errorf("patch toolkit tool: %d %s", st, b)
	}
	for _, tt := range []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"PATCH", "/v1/agents/demo/tools/acme.list_orders", map[string]any{"dataset_ttl_hours": -1}, 400, "dataset_ttl_hours"},
		{"PATCH", "/v1/agents/demo/tools/acme.list_orders", map[string]any{"loop": true}, 400, "unknown field"},
		{"PATCH", "/v1/agents/nope/tools/acme.list_orders", map[string]any{"loop_responses": true}, 404, "not_found"},
		{"PUT", "/v1/agents/a2", map[string]any{"agentTools": []any{map[string]any{"tool_id": "acme.nope"}}}, 400, "agentTools[0]"},
		{"PUT", "/v1/agents/a2", map[string]any{"max_steps": 1000}, 400, "max_steps"},
		{"PUT", "/v1/agents/a2", map[string]any{"context": map[string]any{"keep_recent_steps": -1}}, 400, "context.keep_recent_steps"},
		{"PUT", "/v1/agents/a2", map[string]any{"context": map[string]any{"max_token": 5}}, 400, "unknown field"},
	} {
		st, b := ts.do(t, tt.method, tt.path, "", tt.body)
		if st != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("%s %s: %d %s", tt.method, tt.path, st, b)
		}
	}
	if st, b := ts.do(t, "PUT", "/v1/agents/a3", "", map[string]any{"context": map[string]any{"max_tokens": 50000, "keep_recent_steps": 0}}); st != 200 ||
		!strings.Contains(string(b), `"context":{"max_tokens":50000,"keep_recent_steps":0}`) {
		t.Errorf("put a3 with a context budget: %d %s", st, b)
	}
	if st, _ := ts.do(t, "PUT", "/v1/agents/a2", "", map[string]any{"system": "s", "agentTools": []any{map[string]any{"toolkit": "chat"}}}); st != 200 {
		t.Errorf("put a2: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", "/v1/agents/a2", "", nil); st != 204 {
		t.Errorf("delete: %d", st)
	}
	if st, _ := ts.do(t, "GET", "/v1/agents/a2", "", nil); st != 404 {
		t.Errorf("deleted agent: %d", st)
	}
}

// TestConformanceRealServer checks a real turn of the demo with the AI
// SDK's own code (ai@5.0.60, 6.x, 7.x): chunk schemas, readUIMessageStream
// and AbstractChat over DefaultChatTransport.
func TestConformanceRealServer(t *testing.T) {
	dir, _ := filepath.Abs("../stream/testdata/conformance")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("conformance: node is not installed (bash .ci/run installs it)")
	}
	for _, pkg := range []string{"ai5", "ai6", "ai7"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", pkg)); err != nil {
			t.Skipf("conformance: %s not installed; run stream/testdata/conformance/install.sh", pkg)
		}
	}
	// No cache: every version's turn walks, so every one sees progress.
	ts := startDemo(t, func(c *Config) { c.Cache.Mode = "off" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "check.mjs", "--url", ts.URL+"/v1/agents/demo/chat",
		"--header", "Authorization: Bearer "+ts.AdminKey(),
		"--message", "How many open orders worth more than 100 do we have?",
		"--expect-tool", "list_orders", "--expect-data", "tool-loop-progress", "--expect-text", "278")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check.mjs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

func TestReplayDemoTranscript(t *testing.T) {
	ts := startDemo(t, nil)
	tr, err := agent.ParseTranscript(demoScript())
	if err != nil {
		t.Fatal(err)
	}
	var failures []string
	thread, err := ts.dep.Replay(context.Background(), tr, "", func(c stream.Chunk) {
		switch c := c.(type) {
		case stream.ToolOutputError:
			failures = append(failures, c.ErrorText)
		case stream.ToolInputError:
			failures = append(failures, c.ErrorText)
		}
	})
	if err != nil || len(failures) > 0 {
		t.Fatalf("replay: %v %v", err, failures)
	}
	b, _ := json.Marshal(thread.Msgs)
	// The recorded answers hold the numbers the live tools produce.
	for _, want := range []string{`"matched":157`, `"_pagingComplete":true`, "278 open orders"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("replayed thread lacks %s", want)
		}
	}
}

// TestGracefulShutdown: cancelling Run's context closes the listener at
// once and, after the shutdown grace, leaves the running turns to be
// continued from their checkpoints: the stream breaks off (no abort: the
// turn is not over), the thread keeps what was saved, and a server
// started on the same data dir continues the turn to its end.
func TestGracefulShutdown(t *testing.T) {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.ShutdownGrace = 300 * time.Millisecond
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{make(chan struct{})}})
	if err != nil {
		t.Fatal(err)
	}
	ln, _ := netListen()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	ts := &testServer{Server: srv, URL: "http://" + ln.Addr().String()}
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("g1", "u1", "hi"))
	defer resp.Body.Close()
	key := agent.ThreadKey("", "demo", "g1")
	waitActive(t, ts, key)
	cancel()
	refused := time.Now().Add(time.Second)
	for {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 100*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(refused) {
			t.Fatal("the listener still accepts connections 1 s after the shutdown began")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	types := chunkTypes(readSSE(t, resp.Body))
	if slices.Contains(types, "abort") || slices.Contains(types, "[DONE]") {
		t.Errorf("the stream of a turn left to be continued ends %v; want it broken off", types)
	}
	srv.Close()

	// The next start continues the turn; its stream resumes.
	release := make(chan struct{})
	close(release)
	next, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		th, err := next.threads.GetThread(context.Background(), key)
		if err == nil && len(th.Msgs) == 2 && strings.Contains(th.Msgs[1].Text(), "hello world") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the turn was not continued after the restart: %+v %v", th, err)
		}
	}
}

func TestSessionExpires(t *testing.T) {
	ts := startDemo(t, nil)
	_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "eve", "ttl_seconds": 60})
	var sess struct{ Token string }
	json.Unmarshal(b, &sess)
	if st, _ := ts.do(t, "GET", "/v1/agents/demo/chats/none", sess.Token, nil); st != 404 {
		t.Fatalf("live session: %d", st)
	}
	ts.clock.set(func() time.Time { return time.Now().Add(2 * time.Minute) })
	if st, _ := ts.do(t, "GET", "/v1/agents/demo/chats/none", sess.Token, nil); st != 401 {
		t.Errorf("expired session: %d", st)
	}
	ts.clock.set(time.Now)
	if st, _ := ts.do(t, "GET", "/v1/agents/demo/chats/none", sess.Token, nil); st != 401 {
		t.Errorf("an expired session is gone for good: %d", st)
	}
}
