package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
)

// scaleLease is the run lease of the replicas below: short, so that a
// dead replica's run is seen ended quickly.
const scaleLease = 2 * time.Second

// scaleDirs writes the configs of two replicas of the lifecycle
// deployment (agent "slow", lifecycleSteps tool calls per turn) on one
// Redis: the same keys, prefix and lease, each its own address and data
// dir.
func scaleDirs(t *testing.T, upstream, redisAddr string) (cfgs, addrs [2]string) {
	t.Helper()
	base, _ := lifecycleDir(t, upstream, testGrace)
	dir := filepath.Dir(base)
	orig, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(orig), "\n") // drop the listen line
	rest = strings.Replace(rest, "data_dir: ./data\n", "", 1)
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

// TestScaleOutSIGKILL: replica A is killed (SIGKILL) in the middle of a
// turn; a client resuming the chat on replica B gets the events after its
// last one, then, within the run lease plus 5 s of the kill, an error
// chunk, and the stream ends. The thread, read on B, holds every step
// completed before the kill, and the chat is free for a new turn on B.
func TestScaleOutSIGKILL(t *testing.T) {
	bin := buildTrawl(t)
	rs := redistest.Start(t)
	cfgs, addrs := scaleDirs(t, slowUpstream(t).URL, rs.Addr)
	a := startTrawl(t, bin, cfgs[0], addrs[0])
	b := startTrawl(t, bin, cfgs[1], addrs[1])

	resp, err := a.request("POST", "/v1/agents/slow/chat", chatRequest("k1"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("chat on A: %v %v", err, resp)
	}
	defer resp.Body.Close()
	const completed = 4
	var last int64
	var killedAt time.Time
	killed := make(chan struct{})
	steps := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 8<<20)
	go readEvents(sc, func(e event) {
		if killedAt.IsZero() {
			last = e.id
		}
		// The step after the fourth has started: the runner saved the
		// thread before starting it.
		if e.typ == "start-step" {
			if steps++; steps == completed+1 {
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

	r, err := b.request("GET", "/v1/agents/slow/chat/k1/stream", nil, "Last-Event-ID", strconv.FormatInt(last, 10))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("resume on B %v after the kill: %d; want the run's stream", time.Since(killedAt), r.StatusCode)
	}
	rsc := bufio.NewScanner(r.Body)
	rsc.Buffer(make([]byte, 1<<20), 8<<20)
	ended := make(chan []event, 1)
	go func() { ended <- readEvents(rsc, nil) }()
	var rest []event
	select {
	case rest = <-ended:
	case <-time.After(scaleLease + 5*time.Second):
		t.Fatalf("B's resumed stream had not ended %v after A was killed (lease %v)", time.Since(killedAt).Round(time.Millisecond), scaleLease)
	}
	took := time.Since(killedAt).Round(time.Millisecond)
	var types []string
	hasError := false
	for i, e := range rest {
		types = append(types, cmp.Or(e.typ, e.data))
		if e.typ == "error" {
			hasError = true
		}
		if !e.final && e.id != last+int64(i)+1 {
			t.Errorf("resumed event %d has id %d after Last-Event-ID %d", i, e.id, last)
		}
	}
	t.Logf("B's resumed stream ended %v after A was killed (lease %v): %v", took, scaleLease, types)
	if !hasError || len(rest) == 0 || !rest[len(rest)-1].final {
		t.Errorf("B's resumed stream: %v; want an error chunk, then [DONE]", types)
	}

	th := b.thread(t, "k1")
	if len(th) != 2 || th[1].Role != "assistant" {
		t.Fatalf("thread on B after the kill: %+v", th)
	}
	if n := completedCalls(th); n < completed || n > completed+1 {
		t.Errorf("the thread holds %d completed calls; want the %d finished before the kill", n, completed)
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
