package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run the real binary: built into a temporary folder, started
// on a config whose agent replays a long turn against a slow upstream on
// loopback, and stopped with real signals.

const (
	lifecycleKey   = "trawl_admin_lifecycle_test_key_0123456789"
	lifecycleSteps = 12                     // tool steps per turn
	stepLatency    = 250 * time.Millisecond // per upstream call: a turn lasts ~3 s
	testGrace      = time.Second
)

// slowUpstream answers GET /wait after stepLatency (or when the caller
// gives up).
func slowUpstream(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-time.After(stepLatency):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"ok": true, "step": %q}`, r.URL.Query().Get("step"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

const slowSpec = `openapi: 3.0.3
info: {title: slow, version: "1"}
paths:
  /wait:
    get:
      operationId: wait
      parameters:
        - {name: step, in: query, schema: {type: integer}}
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object}}}}
`

// lifecycleDir writes the config, spec and transcript of a deployment
// whose agent "slow" makes lifecycleSteps tool calls per turn.
func lifecycleDir(t *testing.T, upstream string, grace time.Duration) (cfgPath, addr string) {
	dir := t.TempDir()
	var steps []map[string]any
	for i := range lifecycleSteps {
		steps = append(steps, map[string]any{"text": fmt.Sprintf("step %d", i+1),
			"tool_calls": []any{map[string]any{"name": "wait", "arguments": map[string]any{"step": i + 1}}}})
	}
	steps = append(steps, map[string]any{"text": "all steps done"})
	tr, _ := json.Marshal(map[string]any{"name": "slow", "turns": []any{map[string]any{"user": "go", "steps": steps}}})
	os.WriteFile(filepath.Join(dir, "transcript.json"), tr, 0o600)
	os.WriteFile(filepath.Join(dir, "slow.yaml"), []byte(slowSpec), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr = ln.Addr().String()
	ln.Close()
	cfg := fmt.Sprintf(`listen: %s
data_dir: ./data
admin_key: %s
shutdown_grace: %s
model: {provider: replay, transcript: ./transcript.json}
providers:
  - {id: slow, openapi: ./slow.yaml, base_url: %q}
agents:
  - id: slow
    max_steps: %d
    agentTools: [{tool_id: slow.wait, provider_id: slow}]
`, addr, lifecycleKey, grace, upstream, lifecycleSteps+2)
	cfgPath = filepath.Join(dir, "trawl.yaml")
	os.WriteFile(cfgPath, []byte(cfg), 0o600)
	return cfgPath, addr
}

func buildTrawl(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the binary: skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "trawl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a running trawl.
type process struct {
	cmd    *exec.Cmd
	addr   string
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func startTrawl(t *testing.T, bin, cfgPath, addr string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, "serve", "--config", cfgPath), addr: addr, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = io.Discard, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("trawl stderr:\n%s", p.stderr.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return p
			}
		}
		select {
		case err := <-p.exited:
			p.exited <- err
			t.Fatalf("trawl exited at start: %v\n%s", err, p.stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("trawl did not become ready\n%s", p.stderr.String())
		}
	}
}

func (p *process) request(method, path string, body any, header ...string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+p.addr+path, rd)
	req.Header.Set("Authorization", "Bearer "+lifecycleKey)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return http.DefaultClient.Do(req)
}

func chatRequest(chatID string) map[string]any {
	return map[string]any{"id": chatID, "trigger": "submit-message", "messages": []any{map[string]any{
		"id": "m-" + chatID, "role": "user", "parts": []any{map[string]any{"type": "text", "text": "go"}}}}}
}

// chunk is one UI message stream chunk as a client reads it.
type chunk struct {
	Type      string `json:"type"`
	MessageID string `json:"messageId"`
}

// readChunks reads a stream's chunks as they come, calling seen on each,
// until the stream ends; done reports whether [DONE] arrived.
func readChunks(r io.Reader, seen func(chunk)) (chunks []chunk, done bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			return chunks, true
		}
		var c chunk
		json.Unmarshal([]byte(data), &c)
		chunks = append(chunks, c)
		if seen != nil {
			seen(c)
		}
	}
	return chunks, false
}

// thread is a stored chat as GET /v1/agents/{id}/chats/{chatId} returns it.
type thread []struct {
	ID    string `json:"id"`
	Role  string `json:"role"`
	Parts []struct {
		Type       string          `json:"type"`
		State      string          `json:"state"`
		Text       string          `json:"text"`
		ToolCallID string          `json:"toolCallId"`
		Output     json.RawMessage `json:"output"`
	} `json:"parts"`
}

func (p *process) thread(t *testing.T, chatID string) thread {
	t.Helper()
	resp, err := p.request("GET", "/v1/agents/slow/chats/"+chatID, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var th thread
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || json.Unmarshal(b, &th) != nil {
		t.Fatalf("chat %s: %d %s", chatID, resp.StatusCode, b)
	}
	return th
}

func completedCalls(th thread) int {
	n := 0
	for _, m := range th {
		for _, p := range m.Parts {
			if p.Type == "dynamic-tool" && p.State == "output-available" {
				n++
			}
		}
	}
	return n
}

// TestSIGTERMUnderLoad: with clients looping turns, SIGTERM closes the
// listener within a second, the process exits within the grace plus
// five seconds; every turn that started either finished, or — still
// running when the grace ended — broke off without a last chunk, and
// after a restart it is continued: resumed from its last event, it
// streams on to finish. Every turn is in its thread, whole.
func TestSIGTERMUnderLoad(t *testing.T) {
	bin := buildTrawl(t)
	cfgPath, addr := lifecycleDir(t, slowUpstream(t).URL, testGrace)
	p := startTrawl(t, bin, cfgPath, addr)

	type turn struct {
		chatID, messageID, last string
		done                    bool
		events                  int // the last event's id: ids run 1, 2, 3…
	}
	const clients = 20
	var mu sync.Mutex
	var turns []turn
	refusals := map[string]int{}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				chatID := fmt.Sprintf("c%d-%d", c, i)
				resp, err := p.request("POST", "/v1/agents/slow/chat", chatRequest(chatID))
				if err != nil {
					mu.Lock()
					refusals["connection"]++
					mu.Unlock()
					return
				}
				if resp.StatusCode != 200 {
					mu.Lock()
					refusals[fmt.Sprintf("%d Retry-After=%s", resp.StatusCode, resp.Header.Get("Retry-After"))]++
					mu.Unlock()
					resp.Body.Close()
					return
				}
				chunks, done := readChunks(resp.Body, nil)
				resp.Body.Close()
				tr := turn{chatID: chatID, done: done, events: len(chunks)}
				if len(chunks) > 0 {
					tr.messageID, tr.last = chunks[0].MessageID, chunks[len(chunks)-1].Type
				}
				mu.Lock()
				turns = append(turns, tr)
				mu.Unlock()
			}
		}()
	}
	// Once every client has finished a turn, each is in the middle of its
	// next one (a turn lasts several times the grace).
	for waited := time.Duration(0); ; waited += 50 * time.Millisecond {
		mu.Lock()
		n := len(turns)
		mu.Unlock()
		if n >= clients {
			break
		}
		if waited > time.Minute {
			t.Fatalf("only %d turns finished in a minute", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(stepLatency)

	sent := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Since(sent) > time.Second {
			t.Fatalf("the listener still accepts connections %v after SIGTERM", time.Since(sent))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("listener closed %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	select {
	case err := <-p.exited:
		p.exited <- err
		if err != nil {
			t.Errorf("exit: %v", err)
		}
		t.Logf("exited %v after SIGTERM (grace %v)", time.Since(sent).Round(time.Millisecond), testGrace)
	case <-time.After(testGrace + 5*time.Second):
		t.Fatalf("still running %v after SIGTERM (grace %v)", testGrace+5*time.Second, testGrace)
	}
	wg.Wait()

	finished, left := 0, 0
	for _, tr := range turns {
		switch {
		case !tr.done:
			left++ // to be continued after the restart
		case tr.last == "finish":
			finished++
		default:
			t.Errorf("turn %s ended with %q", tr.chatID, tr.last)
		}
	}
	t.Logf("%d turns: %d finished, %d left to be continued at shutdown; new requests refused: %v", len(turns), finished, left, refusals)
	if finished == 0 || left == 0 {
		t.Errorf("want turns that finished before SIGTERM and turns left running by it: %d finished, %d left", finished, left)
	}

	// Restarted on the same data dir, every turn left running is
	// continued: resumed after its last event while it runs, it streams
	// to finish; resumed after it ended, 204 (its thread is whole, below).
	p = startTrawl(t, bin, cfgPath, addr)
	streamed := 0
	for i, tr := range turns {
		if tr.done {
			continue
		}
		r, err := p.request("GET", "/v1/agents/slow/chat/"+tr.chatID+"/stream", nil, "Last-Event-ID", strconv.Itoa(tr.events))
		if err != nil {
			t.Fatal(err)
		}
		chunks, done := readChunks(r.Body, nil)
		r.Body.Close()
		turns[i].last = "finish"
		switch {
		case r.StatusCode == http.StatusNoContent:
		case r.StatusCode != http.StatusOK || !done || len(chunks) == 0 || chunks[len(chunks)-1].Type != "finish" || !slices.ContainsFunc(chunks, func(c chunk) bool { return c.Type == "data-turn-resumed" }):
			t.Errorf("turn %s resumed after the restart: %d, %d chunks, done %v", tr.chatID, r.StatusCode, len(chunks), done)
		default:
			streamed++
		}
	}
	t.Logf("after the restart, %d of the %d turns left running were resumed while they ran, the others had finished", streamed, left)
	for _, tr := range turns {
		th := p.thread(t, tr.chatID)
		if len(th) != 2 || th[0].Role != "user" || th[1].ID != tr.messageID {
			t.Errorf("chat %s after restart: %d messages; want the user's and the assistant's %s", tr.chatID, len(th), tr.messageID)
			continue
		}
		calls := completedCalls(th)
		if tr.last == "finish" && (calls != lifecycleSteps || th[1].Parts[len(th[1].Parts)-1].Text != "all steps done") {
			t.Errorf("finished chat %s holds %d calls", tr.chatID, calls)
		}
	}
}

// TestSIGKILLMidTurn: a process killed mid-turn loses at most the step in
// flight: after a restart on the same data dir the thread holds every
// completed step, the restarted process continues the turn, and resuming
// the chat streams it to its finish; then the chat takes a new turn.
func TestSIGKILLMidTurn(t *testing.T) {
	bin := buildTrawl(t)
	cfgPath, addr := lifecycleDir(t, slowUpstream(t).URL, testGrace)
	p := startTrawl(t, bin, cfgPath, addr)
	resp, err := p.request("POST", "/v1/agents/slow/chat", chatRequest("k1"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat: %v %v", err, resp)
	}
	defer resp.Body.Close()
	const completed = 4
	killed := make(chan struct{})
	steps := 0
	go readChunks(resp.Body, func(c chunk) {
		// The step after the fourth has started: the runner saved the
		// thread before starting it.
		if c.Type == "start-step" {
			if steps++; steps == completed+1 {
				p.cmd.Process.Kill()
				close(killed)
			}
		}
	})
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn never reached its fifth step")
	}
	<-p.exited
	p.exited <- nil

	p = startTrawl(t, bin, cfgPath, addr)
	th := p.thread(t, "k1")
	if len(th) != 2 || th[1].Role != "assistant" {
		t.Fatalf("thread after the crash: %+v", th)
	}
	if n := completedCalls(th); n < completed {
		t.Errorf("thread holds %d completed calls; want at least the %d finished before the kill", n, completed)
	}
	for i, part := range th[1].Parts {
		if part.Type == "dynamic-tool" && part.State == "output-available" && !strings.Contains(string(part.Output), `"ok":true`) {
			t.Errorf("part %d: output %s", i, part.Output)
		}
	}
	r, err := p.request("GET", "/v1/agents/slow/chat/k1/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	readChunks(r.Body, func(c chunk) { types = append(types, c.Type) })
	r.Body.Close()
	all := strings.Join(types, " ")
	if r.StatusCode != http.StatusOK || !strings.Contains(all, "data-turn-resumed") || !strings.HasSuffix(all, "finish") || slices.Contains(types, "error") {
		t.Errorf("resume after the restart: %d %s; want the turn continued to finish", r.StatusCode, all)
	}
	if n := completedCalls(p.thread(t, "k1")); n != lifecycleSteps {
		t.Errorf("the continued turn's thread holds %d completed calls; want each of the %d once", n, lifecycleSteps)
	}
	// The chat goes on from the saved thread.
	r, err = p.request("POST", "/v1/agents/slow/chat", map[string]any{"id": "k1", "messages": []any{map[string]any{
		"id": "m2", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "again"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Errorf("a new turn on the recovered chat: %d", r.StatusCode)
	}
	if n := len(p.thread(t, "k1")); n < 3 {
		t.Errorf("the recovered chat holds %d messages after another turn", n)
	}
}

// TestSecondSignalExitsAtOnce: a second signal during the shutdown grace
// ends the process without waiting out the grace; the turn keeps the
// steps it completed.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	bin := buildTrawl(t)
	cfgPath, addr := lifecycleDir(t, slowUpstream(t).URL, time.Minute)
	p := startTrawl(t, bin, cfgPath, addr)
	resp, err := p.request("POST", "/v1/agents/slow/chat", chatRequest("s1"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat: %v %v", err, resp)
	}
	defer resp.Body.Close()
	started := make(chan struct{})
	steps := 0
	go readChunks(resp.Body, func(c chunk) {
		if c.Type == "start-step" {
			if steps++; steps == 3 {
				close(started)
			}
		}
	})
	<-started
	p.cmd.Process.Signal(syscall.SIGTERM)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break // the first signal is being handled
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	sent := time.Now()
	p.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-p.exited:
		p.exited <- err
		if err == nil {
			t.Error("a forced exit reported success")
		}
		t.Logf("exited %v after the second signal", time.Since(sent).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("a second signal did not end the process (the grace is a minute)")
	}
	if !strings.Contains(p.stderr.String(), "exiting without waiting") {
		t.Errorf("stderr does not say why: %s", p.stderr.String())
	}
	p = startTrawl(t, bin, cfgPath, addr)
	if n := completedCalls(p.thread(t, "s1")); n < 2 {
		t.Errorf("the thread holds %d completed calls; want the 2 finished before the signals", n)
	}
}
