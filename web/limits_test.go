package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chunkedReader hides its length, so the client sends the body chunked.
type chunkedReader struct{ r io.Reader }

func (c chunkedReader) Read(p []byte) (int, error) { return c.r.Read(p) }

// TestBodyOverLimitAnswers413: a body over the limit answers 413 whether
// its length is declared or it comes chunked, on every route that reads
// one; a body within the limit is read whole.
func TestBodyOverLimitAnswers413(t *testing.T) {
	ts := startDemo(t, nil)
	big := `{"args": {"status": "` + strings.Repeat("x", 5<<20) + `"}}`
	for _, path := range []string{"/v1/tools/acme.list_orders/invoke", "/v1/agents/demo/chat", "/v1/workflows/w1", "/v1/sessions"} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s chunked=%v", path, chunked), func(t *testing.T) {
				var body io.Reader = strings.NewReader(big)
				if chunked {
					body = chunkedReader{body}
				}
				method := "POST"
				if strings.HasPrefix(path, "/v1/workflows/") {
					method = "PUT"
				}
				req, _ := http.NewRequest(method, ts.URL+path, body)
				req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if chunked != (req.ContentLength == -1 || req.ContentLength == 0) {
					t.Fatalf("the request was not sent as intended (ContentLength %d)", req.ContentLength)
				}
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 413 || errorCode(t, b) != "too_large" {
					t.Errorf("%d %s", resp.StatusCode, b)
				}
			})
		}
	}
	// Without credentials the body is not read at all.
	req, _ := http.NewRequest("POST", ts.URL+"/v1/tools/acme.list_orders/invoke", chunkedReader{strings.NewReader(big)})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("an anonymous oversized body: %d; want 401", resp.StatusCode)
	}
	// Within the limit, chunked: read whole.
	req, _ = http.NewRequest("POST", ts.URL+"/v1/tools/acme.list_orders/invoke",
		chunkedReader{strings.NewReader(`{"args": {"status": "open", "_fields": ["id"]}}`)})
	req.Header.Set("Authorization", "Bearer "+ts.AdminKey())
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a small chunked body: %d", resp.StatusCode)
	}
}

// serveOn runs srv on a loopback listener until the test ends.
func serveOn(t *testing.T, srv *Server) (addr string, stop func()) {
	t.Helper()
	ln, err := netListen()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return ln.Addr().String(), stop
}

// TestServerTimeouts: a client that sends headers too slowly, a body too
// slowly, or idles on a keep-alive connection is cut off; a stream that
// outlives every one of those timeouts is not.
func TestServerTimeouts(t *testing.T) {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	release := make(chan struct{})
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release},
		Timeouts: Timeouts{Header: 300 * time.Millisecond, Body: 300 * time.Millisecond, Idle: 300 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	addr, _ := serveOn(t, srv)
	closed := func(c net.Conn) bool {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := io.ReadAll(c)
		return err == nil // EOF: the server closed it
	}

	t.Run("header", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n") // never ends its headers
		if !closed(c) {
			t.Error("a connection with unfinished headers stayed open")
		}
	})
	t.Run("body", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 100\r\n\r\n{\"user", srv.AdminKey())
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusRequestTimeout {
			t.Errorf("a stalled body: %d", resp.StatusCode)
		}
	})
	t.Run("idle", func(t *testing.T) {
		c, _ := net.Dial("tcp", addr)
		defer c.Close()
		fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("an idle keep-alive connection: %v; want it closed", err)
		}
	})
	t.Run("a stream outlives them", func(t *testing.T) {
		ts := &testServer{Server: srv, URL: "http://" + addr}
		resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("slow", "u1", "hi"))
		defer resp.Body.Close()
		time.Sleep(time.Second) // > every timeout above
		close(release)
		types := chunkTypes(readSSE(t, resp.Body))
		if len(types) < 2 || types[len(types)-2] != "finish" {
			t.Errorf("a stream longer than the timeouts ends %v", types)
		}
	})
}

// TestFailedAuthRateLimit: an address that fails authentication with too
// many different credentials is refused — valid credentials too — with
// 429 and Retry-After, until it regains attempts; X-Forwarded-For moves
// the address only behind a trusted proxy, and then only its right-most
// untrusted hop counts.
func TestFailedAuthRateLimit(t *testing.T) {
	now := time.Now()
	ts := startDemo(t, nil)
	ts.clock.set(func() time.Time { return now })
	try := func(token, xff string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+"/v1/agents/demo/chats/none", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	guess := 0
	wrong := func() string { guess++; return fmt.Sprintf("wrong-guess-%d", guess) }
	for i := range authFailBurst {
		if st := try(wrong(), "").StatusCode; st != 401 {
			t.Fatalf("failure %d: %d", i+1, st)
		}
	}
	resp := try(ts.AdminKey(), "")
	if resp.StatusCode != 429 {
		t.Fatalf("after %d failures, a valid key: %d; want 429", authFailBurst, resp.StatusCode)
	}
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || wait < 1 || time.Duration(wait)*time.Second > authFailEvery+time.Second {
		t.Errorf("Retry-After = %q", resp.Header.Get("Retry-After"))
	}
	if st := try(ts.AdminKey(), "203.0.113.9").StatusCode; st != 429 {
		t.Errorf("a spoofed X-Forwarded-For without a trusted proxy: %d", st)
	}
	st, _ := ts.do(t, "GET", "/v1/tools", "", nil)
	if st != 429 {
		t.Errorf("admin routes share the limit: %d", st)
	}
	now = now.Add(time.Duration(wait) * time.Second)
	if st := try(ts.AdminKey(), "").StatusCode; st != 404 {
		t.Errorf("after Retry-After: %d", st)
	}
	if st := try(wrong(), "").StatusCode; st != 401 {
		t.Errorf("one regained attempt: %d", st)
	}
	if st := try(wrong(), "").StatusCode; st != 429 {
		t.Errorf("and no more: %d", st)
	}

	// Behind a trusted proxy the clients are told apart.
	px := startDemo(t, func(c *Config) { c.TrustedProxies = []string{"127.0.0.1"} })
	px.clock.set(func() time.Time { return now })
	ts = px
	for range authFailBurst {
		try(wrong(), "198.51.100.7")
	}
	if st := try(px.AdminKey(), "198.51.100.7").StatusCode; st != 429 {
		t.Errorf("the limited client behind the proxy: %d", st)
	}
	if st := try(px.AdminKey(), "6.6.6.6, 198.51.100.7").StatusCode; st != 429 {
		t.Errorf("a forged left-hand hop: %d; the proxy-appended one counts", st)
	}
	if st := try(px.AdminKey(), "198.51.100.8").StatusCode; st != 404 {
		t.Errorf("another client behind the proxy: %d", st)
	}
}

// TestOneBadKeyLocksOutNobodyElse is the shared address (a NAT, every
// browser behind one backend without trusted_proxies): one client keeps
// failing with the same bad key — twenty times at once, then once every
// authFailEvery for a long while. That key is refused with 429 once it has
// spent its attempts, but the valid admin key and a valid session token
// from the same address are never refused; and a guesser's new keys still
// spend the address's attempts.
func TestOneBadKeyLocksOutNobodyElse(t *testing.T) {
	now := time.Now()
	ts := startDemo(t, nil)
	ts.clock.set(func() time.Time { return now })
	_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "u1"})
	var sess struct{ Token string }
	json.Unmarshal(b, &sess)
	if sess.Token == "" {
		t.Fatalf("no session: %s", b)
	}
	try := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.URL+"/v1/agents/demo/chats", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const stale = "trawl_sess_stale-token-of-a-logged-out-browser"
	for i := range authFailBurst {
		if st := try(stale); st != 401 {
			t.Fatalf("failure %d: %d", i+1, st)
		}
	}
	if st := try(stale); st != 429 {
		t.Errorf("the bad key after %d failures: %d; want 429", authFailBurst, st)
	}
	for i := range 40 {
		now = now.Add(authFailEvery)
		if st := try(stale); st != 401 && st != 429 {
			t.Fatalf("the bad key, round %d: %d", i, st)
		}
		if st := try(ts.AdminKey()); st != 200 {
			t.Fatalf("round %d: the admin key from the same address: %d; want 200", i, st)
		}
		if st := try(sess.Token); st != 200 {
			t.Fatalf("round %d: a session token from the same address: %d; want 200", i, st)
		}
	}
	for i := range authFailBurst {
		try(fmt.Sprintf("guess-%d", i))
	}
	if st := try(ts.AdminKey()); st != 429 {
		t.Errorf("after %d new wrong keys, the admin key: %d; want 429", authFailBurst, st)
	}
}

func TestClientAddr(t *testing.T) {
	s := &Server{}
	var err error
	if s.proxies, err = (&Config{TrustedProxies: []string{"10.0.0.0/8", "::1"}}).ProxyPrefixes(); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ remote, xff, want string }{
		{"192.0.2.1:5000", "", "192.0.2.1"},
		{"192.0.2.1:5000", "203.0.113.1", "192.0.2.1"}, // not a proxy: XFF ignored
		{"10.1.2.3:5000", "203.0.113.1", "203.0.113.1"},
		{"10.1.2.3:5000", "1.1.1.1, 203.0.113.1, 10.9.9.9", "203.0.113.1"},
		{"10.1.2.3:5000", "", "10.1.2.3"},
		{"10.1.2.3:5000", "garbage", "10.1.2.3"},
		{"10.1.2.3:5000", "10.0.0.1", "10.0.0.1"}, // only proxies: the farthest
		{"[::1]:5000", "2001:db8::1", "2001:db8::1"},
		{"[::ffff:192.0.2.1]:5000", "", "192.0.2.1"},
	}
	for _, tt := range tests {
		r := &http.Request{RemoteAddr: tt.remote, Header: http.Header{}}
		if tt.xff != "" {
			r.Header.Set("X-Forwarded-For", tt.xff)
		}
		if got := s.clientAddr(r); got != netip.MustParseAddr(tt.want) {
			t.Errorf("%s + XFF %q = %s; want %s", tt.remote, tt.xff, got, tt.want)
		}
	}
}

// TestFailLimiterBounded: the limiter holds at most authFailClients
// addresses; IPv6 addresses of one /64 share a bucket.
func TestFailLimiterBounded(t *testing.T) {
	now := time.Now()
	l := newFailLimiter(func() time.Time { return now })
	for i := range authFailClients + 100 {
		l.fail(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), "k")
	}
	one := netip.MustParseAddr("10.200.0.1")
	for i := range authFailClients + 100 {
		l.fail(one, fmt.Sprint(i))
	}
	if len(l.addrs) > authFailClients || len(l.pairs) > authFailClients {
		t.Errorf("holds %d addresses and %d pairs", len(l.addrs), len(l.pairs))
	}
	a, b := netip.MustParseAddr("2001:db8:1:2::1"), netip.MustParseAddr("2001:db8:1:2:ffff::9")
	for i := range authFailBurst {
		l.fail(a, fmt.Sprint("guess", i))
	}
	if _, blocked := l.blocked(b, "valid"); !blocked {
		t.Error("another address of the same /64 is not limited")
	}
	if _, blocked := l.blocked(netip.MustParseAddr("2001:db8:1:3::1"), "valid"); blocked {
		t.Error("another /64 is limited")
	}
}

// TestRevokeSession: the admin key revokes any session, a session itself,
// and another session's token answers 404 without touching it.
func TestRevokeSession(t *testing.T) {
	ts := startDemo(t, nil)
	mint := func(user string) string {
		_, b := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": user})
		var s struct{ Token string }
		json.Unmarshal(b, &s)
		return s.Token
	}
	alive := func(tok string) bool {
		st, _ := ts.do(t, "GET", "/v1/agents/demo/chats/none", tok, nil)
		return st == 404
	}
	a, b, c := mint("a"), mint("b"), mint("c")
	if st, _ := ts.do(t, "DELETE", "/v1/sessions/"+a, b, nil); st != 404 || !alive(a) {
		t.Errorf("b revoking a: %d (a alive: %v)", st, alive(a))
	}
	if st, _ := ts.do(t, "DELETE", "/v1/sessions/"+a, "-", nil); st != 401 {
		t.Errorf("no credential: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", "/v1/sessions/"+a, "", nil); st != 204 || alive(a) {
		t.Errorf("admin revoking a: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", "/v1/sessions/"+a, "", nil); st != 404 {
		t.Errorf("revoking again: %d", st)
	}
	if st, _ := ts.do(t, "DELETE", "/v1/sessions/"+b, b, nil); st != 204 || alive(b) {
		t.Errorf("b revoking itself: %d", st)
	}
	if !alive(c) {
		t.Error("an unrelated session ended")
	}
}

// TestAdminKeyTooShort: a short admin key is refused at start, wherever
// it comes from, naming its source.
func TestAdminKeyTooShort(t *testing.T) {
	_, err := ParseConfig("trawl.yaml", []byte("org: a\nadmin_key: hunter2\n"), env(nil))
	if err == nil || !strings.Contains(err.Error(), "trawl.yaml:2: admin_key: is 7 characters; an admin key must be at least 24") {
		t.Errorf("config file: %v", err)
	}
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.ApplyEnv(env(map[string]string{"TRAWL_ADMIN_KEY": "short"}))
	if _, err := New(context.Background(), cfg, Options{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), "TRAWL_ADMIN_KEY: is 5 characters") {
		t.Errorf("environment: %v", err)
	}
	cfg = DemoConfig()
	cfg.DataDir = t.TempDir()
	os.WriteFile(filepath.Join(cfg.DataDir, "admin_key"), []byte("abc\n"), 0o600)
	if _, err := New(context.Background(), cfg, Options{Stdout: io.Discard}); err == nil || !strings.Contains(err.Error(), "admin_key holds a key of 3 characters") {
		t.Errorf("saved key: %v", err)
	}
	cfg = DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.AdminKey = strings.Repeat("k", MinAdminKeyLength)
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard})
	if err != nil {
		t.Fatalf("a %d-character key: %v", MinAdminKeyLength, err)
	}
	srv.Close()
}

// TestShutdownDrains: once the shutdown began, /readyz answers 503 while
// the listener stays open for shutdown_delay, and new turns and workflow
// runs are refused with 503 and Retry-After; a running turn finishes
// within the grace, and its stream ends with finish, not abort.
func TestShutdownDrains(t *testing.T) {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.ShutdownDelay = 2 * time.Second
	cfg.ShutdownGrace = 10 * time.Second
	release := make(chan struct{})
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: gateModel{release}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ln, _ := netListen()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	ts := &testServer{Server: srv, URL: "http://" + ln.Addr().String()}
	running := ts.post(t, "/v1/agents/demo/chat", "", chatBody("d1", "u1", "hi"))
	defer running.Body.Close()
	waitActive(t, ts, "u=;a=demo;c=d1")
	if st, _ := ts.do(t, "GET", "/readyz", "", nil); st != 200 {
		t.Fatalf("readyz before: %d", st)
	}
	cancel()
	waitFor(t, func() bool { return srv.draining.Load() })
	// New connections: the listener is open during the delay.
	http.DefaultClient.CloseIdleConnections()
	if st, b := ts.do(t, "GET", "/readyz", "", nil); st != 503 || errorCode(t, b) != "shutting_down" {
		t.Errorf("readyz while draining: %d %s", st, b)
	}
	for _, path := range []string{"/v1/agents/demo/chat", "/v1/workflows/none/runs"} {
		resp := ts.post(t, path, "", chatBody("d2", "u2", "hi"))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || errorCode(t, b) != "shutting_down" {
			t.Errorf("POST %s while draining: %d Retry-After=%q %s", path, resp.StatusCode, resp.Header.Get("Retry-After"), b)
		}
	}
	if st, _ := ts.do(t, "GET", "/healthz", "", nil); st != 200 {
		t.Errorf("healthz while draining: %d (the process is alive)", st)
	}
	close(release) // the running turn finishes within the grace
	types := chunkTypes(readSSE(t, running.Body))
	if len(types) < 2 || types[len(types)-2] != "finish" {
		t.Errorf("a turn that finished within the grace ends %v", types)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("the listener is still open after Serve returned")
	}
}

// FuzzClientAddr: whatever X-Forwarded-For says, the client is the peer
// unless the peer is a trusted proxy, and then an address from the header
// that is not a proxy — or, failing one, the farthest proxy seen.
func FuzzClientAddr(f *testing.F) {
	f.Add("10.0.0.1:80", "203.0.113.1")
	f.Add("192.0.2.7:80", "10.0.0.1, 203.0.113.1")
	f.Add("10.0.0.1:80", "203.0.113.1,10.0.0.2, garbage ,10.0.0.3")
	f.Add("[::1]:80", "::ffff:10.0.0.9, 2001:db8::1")
	s := &Server{}
	s.proxies, _ = (&Config{TrustedProxies: []string{"10.0.0.0/8", "::1"}}).ProxyPrefixes()
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := &http.Request{RemoteAddr: remote, Header: http.Header{"X-Forwarded-For": {xff}}}
		got := s.clientAddr(r)
		peer, err := netip.ParseAddrPort(remote)
		if err != nil {
			if got != netip.IPv4Unspecified() {
				t.Fatalf("unparsable peer %q gave %s", remote, got)
			}
			return
		}
		if !s.trusted(peer.Addr().Unmap()) {
			if got != peer.Addr().Unmap() {
				t.Fatalf("untrusted peer %s: client %s", peer, got)
			}
			return
		}
		if got == peer.Addr().Unmap() {
			return
		}
		found := false
		for _, h := range strings.Split(xff, ",") {
			if a, err := netip.ParseAddr(strings.TrimSpace(h)); err == nil && a.Unmap() == got {
				found = true
			}
		}
		if !found {
			t.Fatalf("client %s is neither the peer nor in %q", got, xff)
		}
	})
}
