package web

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/web/deploy"
)

// TestStreamsPerSessionCapped: a session token holds at most
// limits.streams_per_session streams open (new turns and resumes alike);
// one more answers 429 too_many_streams with Retry-After, while the admin
// key and other sessions are unaffected, and a closed stream frees its
// place.
func TestStreamsPerSessionCapped(t *testing.T) {
	release := make(chan struct{})
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.Limits.StreamsPerSession = 2
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{Server: srv, URL: newHTTPServer(t, srv)}
	t.Cleanup(func() { close(release) })
	session := func(user string) string {
		_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": user})
		var s struct{ Token string }
		json.Unmarshal(b, &s)
		if s.Token == "" {
			t.Fatalf("no session: %s", b)
		}
		return s.Token
	}
	tok, other := session("u1"), session("u2")
	// open starts a turn and waits for its first delta: the stream is open.
	open := func(token, chat string) *http.Response {
		t.Helper()
		resp := ts.post(t, "/v1/agents/demo/chat", token, chatBody(chat, "m1", "hi"))
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("chat %s: %d %s", chat, resp.StatusCode, b)
		}
		br := bufio.NewReader(resp.Body)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("chat %s: %v", chat, err)
			}
			if strings.Contains(line, "text-delta") {
				return resp
			}
		}
	}
	first := open(tok, "c1")
	second := open(tok, "c2")
	defer second.Body.Close()

	refused := func(what string, resp *http.Response) {
		t.Helper()
		defer resp.Body.Close()
		var e struct {
			Error struct{ Code, Message string }
		}
		json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode != 429 || e.Error.Code != "too_many_streams" || !strings.Contains(e.Error.Message, "2 streams") ||
			resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %+v (Retry-After %q); want 429 too_many_streams", what, resp.StatusCode, e.Error, resp.Header.Get("Retry-After"))
		}
	}
	refused("a third turn", ts.post(t, "/v1/agents/demo/chat", tok, chatBody("c3", "m1", "hi")))
	req, _ := http.NewRequest("GET", ts.URL+"/v1/agents/demo/chat/c1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	refused("a resume", resp)

	open("", "admin-1").Body.Close() // the admin key is not capped
	open(other, "o1").Body.Close()   // nor is another session

	first.Body.Close()
	hash := deploy.TokenHash(tok)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ts.streams.mu.Lock()
		n := ts.streams.open[hash]
		ts.streams.mu.Unlock()
		if n < 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed stream never freed its place")
		}
	}
	open(tok, "c4").Body.Close()
}
