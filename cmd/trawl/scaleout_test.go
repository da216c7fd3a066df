package main

import (
	"bufio"
	"cmp"
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
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
)

// scaleLease is the run lease of the replicas below: short, so that a
// dead replica's run is seen ended quickly.
const scaleLease = 2 * time.Second

// scaleDirs writes the configs of two replicas of the lifecycle
// deployment (agent "slow", lifecycleSteps tool calls per turn, and the
// provider "pages" of pagedSpec on pages) on one Redis: the same keys,
// prefix and lease, each its own address and data dir.
func scaleDirs(t *testing.T, upstream, pages, redisAddr string) (cfgs, addrs [2]string) {
	t.Helper()
	base, _ := lifecycleDir(t, upstream, testGrace)
	dir := filepath.Dir(base)
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pages.yaml"), []byte(pagedSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(orig), "\n") // drop the listen line
	rest = strings.Replace(rest, "data_dir: ./data\n", "", 1)
	rest = strings.Replace(rest, "agents:\n", fmt.Sprintf("  - {id: pages, openapi: ./pages.yaml, base_url: %q}\nagents:\n", pages), 1)
	for i, name := range []string{"a", "b"} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
		cfg := fmt.Sprintf("listen: %s\ndata_dir: ./data-%s\nredis_url: redis://%s/0\nredis_prefix: \"trawl-test:\"\nrun_lease: %s\nsecret_key: %s\n%s",
			addrs[i], name, redisAddr, scaleLease, strings.Repeat("5ca1e0a7", 8), rest)
		cfgs[i] = filepath.Join(dir, "trawl-"+name+".yaml")
		if err := os.WriteFile(cfgs[i], []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cfgs, addrs
}

const pagedSpec = `openapi: 3.0.3
info: {title: pages, version: "1"}
paths:
  /items:
    get:
      operationId: list_items
      summary: List items
      description: Paginated by page number; request page=1, page=2, … until page × per_page reaches total.
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
                  data: {type: array, items: {type: object, properties: {id: {type: integer}}}}
                  total: {type: integer}
`

// pagedItems is the size of pagedUpstream's list: five pages of ten.
const pagedItems = 50

// pagedUpstream serves pagedSpec's list, records the pages asked for, and
// can hold every page from the second on.
type pagedUpstream struct {
	*httptest.Server
	mu    sync.Mutex
	pages []int
	held  bool
	hold  chan struct{}
}

func newPagedUpstream(t *testing.T) *pagedUpstream {
	u := &pagedUpstream{hold: make(chan struct{})}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		page = max(page, 1)
		u.mu.Lock()
		u.pages = append(u.pages, page)
		held, hold := u.held, u.hold
		u.mu.Unlock()
		if held && page >= 2 {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		var items []map[string]any
		for i := (page-1)*10 + 1; i <= min(page*10, pagedItems); i++ {
			items = append(items, map[string]any{"id": i})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"data": items, "total": pagedItems})
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *pagedUpstream) asked() []int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]int(nil), u.pages...)
}

// event is one SSE event with its id.
type event struct {
	id    int64
	typ   string
	data  string
	final bool // data: [DONE]
}

// readEvents reads a stream's events, calling seen on each, until it
// ends.
func readEvents(r *bufio.Scanner, seen func(event)) []event {
	var out []event
	var cur event
	for r.Scan() {
		line := r.Text()
		switch {
		case line == "" && cur.data != "":
			out = append(out, cur)
			if seen != nil {
				seen(cur)
			}
			cur = event{}
		case strings.HasPrefix(line, "id: "):
			cur.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "data: "):
			cur.data = line[6:]
			if cur.data == "[DONE]" {
				cur.final = true
			} else {
				var c chunk
				json.Unmarshal([]byte(cur.data), &c)
				cur.typ = c.Type
			}
		}
	}
	return out
}

// resumeStream resumes path on p after lastID and reads the stream in
// the background; the channel gets its events when it ends.
func resumeStream(t *testing.T, p *process, path string, lastID int64) <-chan []event {
	t.Helper()
	r, err := p.request("GET", path, nil, "Last-Event-ID", strconv.FormatInt(lastID, 10))
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != 200 {
		r.Body.Close()
		t.Fatalf("resume %s: %d; want the run's stream", path, r.StatusCode)
	}
	sc := bufio.NewScanner(r.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	ended := make(chan []event, 1)
	go func() {
		defer r.Body.Close()
		ended <- readEvents(sc, nil)
	}()
	return ended
}

// endBy waits for a resumed stream's end until deadline.
func endBy(t *testing.T, name string, ended <-chan []event, deadline time.Time) []event {
	t.Helper()
	select {
	case evs := <-ended:
		return evs
	case <-time.After(time.Until(deadline)):
		t.Fatalf("%s had not ended by the deadline", name)
		return nil
	}
}

// checkLapsed checks a resumed stream of a run whose replica died: the
// events after lastID in order, an error chunk, [DONE].
func checkLapsed(t *testing.T, name string, evs []event, lastID int64) {
	t.Helper()
	var types []string
	hasError := false
	for i, e := range evs {
		types = append(types, cmp.Or(e.typ, e.data))
		hasError = hasError || e.typ == "error"
		if !e.final && e.id != lastID+int64(i)+1 {
			t.Errorf("%s: resumed event %d has id %d after Last-Event-ID %d", name, i, e.id, lastID)
		}
	}
	if !hasError || len(evs) == 0 || !evs[len(evs)-1].final {
		t.Errorf("%s: %v; want an error chunk, then [DONE]", name, types)
	}
	t.Logf("%s: %v", name, types)
}

// TestScaleOutSIGKILL: replica A is killed (SIGKILL) in the middle of a
// chat turn and of a workflow run; a client resuming either on replica B
// gets the events after its last one, then, within the run lease plus
// 5 s of the kill, an error chunk, and the stream ends. The thread, read
// on B, holds every step completed before the kill, and the chat is free
// for a new turn on B; the workflow run reads as failed.
func TestScaleOutSIGKILL(t *testing.T) {
	bin := buildTrawl(t)
	rs := redistest.Start(t)
	cfgs, addrs := scaleDirs(t, slowUpstream(t).URL, newPagedUpstream(t).URL, rs.Addr)
	a := startTrawl(t, bin, cfgs[0], addrs[0])
	b := startTrawl(t, bin, cfgs[1], addrs[1])

	// A workflow of lifecycleSteps slow calls, put on B, runs on A.
	var steps []map[string]any
	for i := range lifecycleSteps {
		steps = append(steps, map[string]any{"id": fmt.Sprintf("w%d", i+1), "type": "tool", "tool": "slow.wait", "input": map[string]any{"step": i + 1}})
	}
	if r, err := b.request("PUT", "/v1/workflows/slow", map[string]any{"steps": steps}); err != nil || r.StatusCode != 200 {
		t.Fatalf("put the workflow on B: %v %v", err, r)
	}
	wf, err := a.request("POST", "/v1/workflows/slow/runs", nil)
	if err != nil || wf.StatusCode != 200 {
		t.Fatalf("workflow run on A: %v %v", err, wf)
	}
	defer wf.Body.Close()
	runID := wf.Header.Get("X-Trawl-Run-Id")
	var wfLast int64
	wfRead := make(chan struct{})
	wsc := bufio.NewScanner(wf.Body)
	wsc.Buffer(make([]byte, 1<<20), 8<<20)
	go func() {
		defer close(wfRead)
		readEvents(wsc, func(e event) { wfLast = e.id })
	}()

	resp, err := a.request("POST", "/v1/agents/slow/chat", chatRequest("k1"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat on A: %v %v", err, resp)
	}
	defer resp.Body.Close()
	const completed = 4
	var last int64
	var killedAt time.Time
	killed := make(chan struct{})
	started := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	go readEvents(sc, func(e event) {
		if killedAt.IsZero() {
			last = e.id
		}
		// The step after the fourth has started: the runner saved the
		// thread before starting it.
		if e.typ == "start-step" {
			if started++; started == completed+1 {
				a.cmd.Process.Kill()
				killedAt = time.Now()
				close(killed)
			}
		}
	})
	select {
	case <-killed:
	case <-time.After(30 * time.Second):
		t.Fatal("the turn never reached its fifth step")
	}
	<-a.exited
	a.exited <- nil
	<-wfRead // the workflow stream broke off with A

	// Both resumed at once on B: each ends with an error within the lease
	// plus 5 s of the kill.
	chatEnd := resumeStream(t, b, "/v1/agents/slow/chat/k1/stream", last)
	runEnd := resumeStream(t, b, "/v1/workflows/slow/runs/"+runID+"/stream", wfLast)
	deadline := killedAt.Add(scaleLease + 5*time.Second)
	chat := endBy(t, "the chat resumed on B", chatEnd, deadline)
	t.Logf("B's resumed chat stream ended %v after A was killed (lease %v)", time.Since(killedAt).Round(time.Millisecond), scaleLease)
	checkLapsed(t, "the chat resumed on B", chat, last)
	checkLapsed(t, "the workflow run resumed on B", endBy(t, "the workflow run resumed on B", runEnd, deadline), wfLast)

	th := b.thread(t, "k1")
	if len(th) != 2 || th[1].Role != "assistant" {
		t.Fatalf("thread on B after the kill: %+v", th)
	}
	if n := completedCalls(th); n < completed || n > completed+1 {
		t.Errorf("the thread holds %d completed calls; want the %d finished before the kill", n, completed)
	}
	if r, err := b.request("GET", "/v1/workflows/slow/runs/"+runID, nil); err != nil {
		t.Error(err)
	} else {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if r.StatusCode != 200 || !strings.Contains(string(body), `"status":"failed"`) {
			t.Errorf("the dead replica's workflow run on B: %d %.300s", r.StatusCode, body)
		}
	}
	// The dead run no longer holds the chat: nothing to resume, and a
	// new turn on B runs (stopped again at once).
	if r, err := b.request("GET", "/v1/agents/slow/chat/k1/stream", nil); err != nil || r.StatusCode != http.StatusNoContent {
		t.Errorf("resume on B after the run ended: %v %v; want 204", err, r)
	} else {
		r.Body.Close()
	}
	next, err := b.request("POST", "/v1/agents/slow/chat", map[string]any{"id": "k1", "messages": []any{map[string]any{
		"id": "m2", "role": "user", "parts": []any{map[string]any{"type": "text", "text": "again"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer next.Body.Close()
	if next.StatusCode != 200 {
		t.Errorf("a new turn on B on the recovered chat: %d", next.StatusCode)
	}
	if stop, err := b.request("POST", "/v1/agents/slow/chat/k1/stop", nil); err == nil {
		stop.Body.Close()
	}
}

// TestScaleOutSIGKILLMidWalk: B asks for the walk A is making and waits
// for it (two replicas make one walk); A is killed mid-walk: B's call
// does not wait on the dead replica's walk forever — within the lease
// plus 5 s it walks itself and answers complete.
func TestScaleOutSIGKILLMidWalk(t *testing.T) {
	bin := buildTrawl(t)
	rs := redistest.Start(t)
	up := newPagedUpstream(t)
	cfgs, addrs := scaleDirs(t, slowUpstream(t).URL, up.URL, rs.Addr)
	a := startTrawl(t, bin, cfgs[0], addrs[0])
	b := startTrawl(t, bin, cfgs[1], addrs[1])
	up.mu.Lock()
	up.held = true
	up.mu.Unlock()

	body := map[string]any{"args": map[string]any{"_all_pages": true}}
	go func() {
		if r, err := a.request("POST", "/v1/tools/pages.list_items/invoke", body); err == nil {
			r.Body.Close()
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); len(up.asked()) < 2; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("A's walk never reached page 2: %v", up.asked())
		}
	}
	type answer struct {
		status int
		body   string
		at     time.Time
	}
	got := make(chan answer, 1)
	go func() {
		r, err := b.request("POST", "/v1/tools/pages.list_items/invoke", body)
		if err != nil {
			got <- answer{body: err.Error(), at: time.Now()}
			return
		}
		out, _ := io.ReadAll(r.Body)
		r.Body.Close()
		got <- answer{r.StatusCode, string(out), time.Now()}
	}()
	// B's call joins A's walk rather than making its own: page 1 (never
	// held) is asked once. (A's walk, which knows the total, may have
	// fetched pages ahead of page 2: they are held too.)
	time.Sleep(300 * time.Millisecond)
	if pages := up.asked(); slices.Index(pages, 1) != 0 || slices.Contains(pages[1:], 1) {
		t.Fatalf("B walked beside A's walk: pages asked %v", pages)
	}
	a.cmd.Process.Kill()
	killedAt := time.Now()
	<-a.exited
	a.exited <- nil
	up.mu.Lock()
	up.held = false
	close(up.hold)
	up.mu.Unlock()
	select {
	case ans := <-got:
		t.Logf("B answered %v after A was killed (lease %v); pages asked: %v", ans.at.Sub(killedAt).Round(time.Millisecond), scaleLease, up.asked())
		if ans.status != 200 || !strings.Contains(ans.body, `"_pagingComplete":true`) {
			t.Errorf("B's call after A died mid-walk: %d %.300s", ans.status, ans.body)
		}
	case <-time.After(scaleLease + 5*time.Second):
		t.Fatalf("B's call still waited %v after A died mid-walk (lease %v)", time.Since(killedAt).Round(time.Millisecond), scaleLease)
	}
}

// TestScaleOutRedisDownAtStart: a replica whose Redis does not answer
// does not start: it exits at once with an error naming redis_url.
func TestScaleOutRedisDownAtStart(t *testing.T) {
	bin := buildTrawl(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String() // nothing answers here once closed
	ln.Close()
	cfgs, _ := scaleDirs(t, "http://127.0.0.1:1", "http://127.0.0.1:1", dead)
	cmd := exec.Command(bin, "serve", "--config", cfgs[0])
	var stderr strings.Builder
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(stderr.String(), "redis_url") || !strings.Contains(stderr.String(), dead) {
			t.Errorf("trawl serve with Redis down: %v\n%s", err, stderr.String())
		}
		t.Logf("%v: %s", err, strings.TrimSpace(stderr.String()))
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("trawl serve with Redis down did not exit:\n%s", stderr.String())
	}
}
