// Package oauthtest runs the authorization server of trawl's OAuth tests
// — oidc-provider, the certified OpenID Connect / OAuth 2.0 server for
// Node (pinned in testdata/oidc, installed by its install.sh) — and a
// loopback API that accepts only the access tokens it issued (it
// introspects each one, RFC 7662).
package oauthtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Resource is the audience of every access token the server issues.
const Resource = "https://api.trawl.test"

// Options configure the server.
type Options struct {
	// AccessTTL is the access tokens' lifetime. Zero: 60 s.
	AccessTTL time.Duration
	// RedirectURIs are trawl-web's registered redirect URIs.
	RedirectURIs []string
	// DCR lets clients register themselves (RFC 7591 dynamic client
	// registration, open).
	DCR bool
}

// Server is a running oidc-provider.
type Server struct {
	Issuer string
	// The clients' secrets: trawl-web (authorization code), trawl-cc
	// (client credentials), trawl-api (the API's introspection).
	WebSecret, CCSecret, APISecret string
	// TokenRequests counts the requests to the token endpoint that went
	// through TokenURL (a counting proxy).
	TokenRequests atomic.Int64
	// TokenURL is the token endpoint behind the counting proxy.
	TokenURL string
	// tokenDown makes the proxy close every connection unanswered
	// (TokenEndpointDown).
	tokenDown atomic.Bool

	opt  Options
	port int    // the issuer's
	stop func() // ends the running oidc-provider (Restart)

	mu      sync.Mutex
	secrets []string          // every token, verifier and code the proxy saw
	pairs   map[string]string // each access token's refresh token, as issued together
	grants  []string          // each token request's grant type and resource indicator
}

// Grants are the grant type and resource indicator ("" none) of each
// request that went through TokenURL, in order: "refresh_token
// https://mcp.example/mcp".
func (s *Server) Grants() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.grants...)
}

// RefreshOf is the refresh token issued with access ("" when none was).
func (s *Server) RefreshOf(access string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pairs[access]
}

// Secrets are the client secrets and every access token, refresh token,
// authorization code and PKCE verifier that went through TokenURL: what
// no channel of trawl's may hold.
func (s *Server) Secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string{s.WebSecret, s.CCSecret, s.APISecret}, s.secrets...)
}

func (s *Server) keep(vs ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vs {
		if v != "" {
			s.secrets = append(s.secrets, v)
		}
	}
}

func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata", "oidc")
}

// Start runs oidc-provider for t (stopped at its end). Without node or
// the installed package the test is skipped, saying how to install it
// (in CI, where install.sh has run, it fails instead).
func Start(t testing.TB, opt Options) *Server {
	t.Helper()
	s := Prepare(t, opt)
	s.Run(t)
	return s
}

// Prepare is Start without running the server: its issuer (on a
// loopback port picked now, where nothing listens until Run), its
// secrets and the counting proxy are set, so that a deployment can be
// configured with an authorization server that is down.
func Prepare(t testing.TB, opt Options) *Server {
	t.Helper()
	_, err := exec.LookPath("node")
	if _, serr := os.Stat(filepath.Join(dir(), "node_modules", "oidc-provider")); err != nil || serr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("oidc-provider is not installed (node: %v); run tools/oauthtest/testdata/oidc/install.sh", err)
		}
		t.Skip("oidc-provider is not installed; run tools/oauthtest/testdata/oidc/install.sh")
	}
	if opt.AccessTTL == 0 {
		opt.AccessTTL = time.Minute
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	s := &Server{WebSecret: secret(), CCSecret: secret(), APISecret: secret(), opt: opt, port: port,
		Issuer: fmt.Sprintf("http://127.0.0.1:%d", port)}
	// The counting proxy in front of the token endpoint.
	target, _ := url.Parse(s.Issuer)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.tokenDown.Load() {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close() // no answer at all
			}
			return
		}
		s.TokenRequests.Add(1)
		body, _ := io.ReadAll(r.Body)
		var sent []string // what the client sent, echoed back (hostile)
		if form, err := url.ParseQuery(string(body)); err == nil {
			s.keep(form.Get("code"), form.Get("code_verifier"), form.Get("refresh_token"))
			s.mu.Lock()
			s.grants = append(s.grants, form.Get("grant_type")+" "+form.Get("resource"))
			s.mu.Unlock()
			for _, k := range []string{"code", "code_verifier", "refresh_token", "client_secret"} {
				sent = append(sent, encodedForms(form.Get(k))...)
			}
		}
		if _, pass, ok := r.BasicAuth(); ok {
			sent = append(sent, encodedForms(pass)...)
		}
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, target.String()+"/token", bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			if k != "Content-Length" { // the answer may grow (echo_sent)
				w.Header()[k] = v
			}
		}
		w.WriteHeader(resp.StatusCode)
		out, _ := io.ReadAll(resp.Body)
		var tok struct{ AccessToken, RefreshToken, IDToken string }
		if json.Unmarshal(out, &struct {
			A *string `json:"access_token"`
			R *string `json:"refresh_token"`
			I *string `json:"id_token"`
		}{&tok.AccessToken, &tok.RefreshToken, &tok.IDToken}) == nil {
			s.keep(tok.AccessToken, tok.RefreshToken, tok.IDToken)
			if tok.AccessToken != "" && tok.RefreshToken != "" {
				s.mu.Lock()
				if s.pairs == nil {
					s.pairs = map[string]string{}
				}
				s.pairs[tok.AccessToken] = tok.RefreshToken
				s.mu.Unlock()
			}
		}
		// A successful answer also echoes what it was sent, encoded: no
		// channel of trawl's may repeat a token answer's extra fields.
		if resp.StatusCode == http.StatusOK && len(sent) > 0 && bytes.HasSuffix(bytes.TrimSpace(out), []byte("}")) {
			extra, _ := json.Marshal(sent)
			out = append(bytes.TrimSuffix(bytes.TrimSpace(out), []byte("}")), []byte(`,"echo_sent":`+string(extra)+`}`)...)
		}
		_, _ = w.Write(out)
	}))
	t.Cleanup(proxy.Close)
	s.TokenURL = proxy.URL + "/token"
	return s
}

// Restart ends the running server and starts it again on its port: it
// forgets every client that registered itself and every grant (it keeps
// them in memory), as an authorization server that purged its dynamic
// clients does.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.stop()
	s.Run(t)
}

// Run starts the prepared server on its port, for t.
func (s *Server) Run(t testing.TB) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"WEB_SECRET=" + s.WebSecret, "CC_SECRET=" + s.CCSecret, "API_SECRET=" + s.APISecret,
		"ACCESS_TTL=" + strconv.Itoa(int(s.opt.AccessTTL/time.Second)), "API_URL=" + Resource,
		"REDIRECT_URIS=" + strings.Join(s.opt.RedirectURIs, " "), "PORT=" + strconv.Itoa(s.port)}
	if s.opt.DCR {
		env = append(env, "DCR=1")
	}
	var hello struct{ Issuer string }
	s.stop = runNode(t, node, dir(), env, "oidc-provider", &hello)
	if hello.Issuer != s.Issuer {
		t.Fatalf("oidc-provider named issuer %q, want %s", hello.Issuer, s.Issuer)
	}
}

// runNode runs server.mjs in dir with node for t (stopped at its end),
// its environment plus env, and decodes into hello the one line of JSON
// it prints once it listens. A server that ends before it prints that
// line (its port, picked free when the fixture was made, taken since by
// another process's connection on a busy machine) is started again, up
// to three times; what it wrote to stderr is logged each time and named
// in the failure.
//
// It returns what ends the server (also done at t's end).
func runNode(t testing.TB, node, dir string, env []string, what string, hello any) (stop func()) {
	t.Helper()
	var said string
	for attempt := 1; attempt <= 3; attempt++ {
		l, stderr, stop := startNode(t, node, dir, env, what)
		if stop != nil {
			if err := json.Unmarshal([]byte(l), hello); err != nil {
				t.Fatalf("%s said %q", what, l)
			}
			return stop
		}
		said = strings.TrimSpace(stderr)
		t.Logf("%s ended before it listened (attempt %d); its stderr: %s", what, attempt, said)
		time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
	}
	t.Fatalf("%s did not start in three attempts; its stderr: %s", what, said)
	return nil
}

// startNode starts server.mjs once and waits for its first line of
// stdout: the line and what ends the server, or its stderr and nil when
// it ended without one. It fails t when the server prints nothing in
// 30 s.
func startNode(t testing.TB, node, dir string, env []string, what string) (line, stderr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, node, "server.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Read only once Wait has returned, when exec's copier is done.
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case l, got := <-lines:
		if got {
			stop := sync.OnceFunc(func() { cancel(); _ = cmd.Wait() })
			t.Cleanup(stop)
			return l, "", stop
		}
		cancel() // stdout closed: the process has ended (or is ended now)
		_ = cmd.Wait()
		return "", errBuf.String(), nil
	case <-time.After(30 * time.Second):
		cancel()
		_ = cmd.Wait()
		t.Fatalf("%s did not start in 30 s; its stderr: %s", what, strings.TrimSpace(errBuf.String()))
		return "", "", nil
	}
}

// TokenEndpointDown makes TokenURL stop answering (down: every
// connection closed before an answer) or answer again.
func (s *Server) TokenEndpointDown(down bool) { s.tokenDown.Store(down) }

func secret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "sec-" + hex.EncodeToString(b)
}

// Introspection is what the server says of a token.
type Introspection struct {
	Active   bool   `json:"active"`
	ClientID string `json:"client_id"`
	Sub      string `json:"sub"`
	Scope    string `json:"scope"`
	Aud      any    `json:"aud"`
}

// Introspect asks the server about token, as the API does.
func (s *Server) Introspect(ctx context.Context, token string) (Introspection, error) {
	var out Introspection
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Issuer+"/token/introspection", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("trawl-api", s.APISecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("introspection: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// Revoke revokes token as client trawl-web would (RFC 7009): the user
// withdrawing consent, in a test.
func (s *Server) Revoke(ctx context.Context, token string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.Issuer+"/token/revocation", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth("trawl-web", s.WebSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revocation: %s", resp.Status)
	}
	return nil
}

// API is a loopback API that accepts the server's access tokens: GET
// /whoami answers the token's subject and client — and, hostile, echoes
// the token it was sent and the refresh token issued with it
// (refresh_echo: a planted secret the caller never sent), each also
// base64-, base64url-, percent- and JSON-escaped (echo_forms,
// refresh_forms, echo_json, refresh_json); any other token gets 401
// with an RFC 6750 invalid_token challenge, and so do the tokens the
// test rejects (Reject) and the requests it challenges (Challenge).
type API struct {
	URL string
	mu  sync.Mutex
	// seen are the accepted and refused tokens, in order.
	accepted, refused []string
	rejected          map[string]bool // tokens refused whatever the server says (Reject)
	challenge         string          // the WWW-Authenticate of the next refusals (Challenge)
	challenges        int             // how many more requests get it
}

// Reject makes the API refuse token from now on, with 401 and an RFC
// 6750 invalid_token challenge, though the authorization server still
// says it is active: the resource server revoked it early, or the two
// disagree on its expiry.
func (a *API) Reject(token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rejected == nil {
		a.rejected = map[string]bool{}
	}
	a.rejected[token] = true
}

// Challenge makes the API answer its next n requests, whatever token
// they carry, with 401 and challenge as their WWW-Authenticate (an
// insufficient_scope one, say).
func (a *API) Challenge(challenge string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.challenge, a.challenges = challenge, n
}

// refusal is the challenge the API answers tok with now ("" when tok is
// up to the authorization server).
func (a *API) refusal(tok string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.challenges > 0 {
		a.challenges--
		return a.challenge
	}
	if a.rejected[tok] {
		return invalidToken
	}
	return ""
}

const invalidToken = `Bearer error="invalid_token", error_description="the access token expired or is not valid"`

// StartAPI runs the API for t.
func (s *Server) StartAPI(t testing.TB) *API {
	a := &API{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		var info Introspection
		challenge := a.refusal(tok)
		if challenge == "" {
			var err error
			info, err = s.Introspect(r.Context(), tok)
			if !ok || err != nil || !info.Active || info.Aud != Resource {
				challenge = invalidToken
			}
		}
		if challenge != "" {
			a.mu.Lock()
			a.refused = append(a.refused, tok)
			a.mu.Unlock()
			w.Header().Set("WWW-Authenticate", challenge)
			http.Error(w, `{"error":"refused"}`, http.StatusUnauthorized)
			return
		}
		a.mu.Lock()
		a.accepted = append(a.accepted, tok)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		refresh := s.RefreshOf(tok)
		body, _ := json.Marshal(map[string]any{"sub": info.Sub, "client_id": info.ClientID, "scope": info.Scope, "path": r.URL.Path,
			"echo": tok, "refresh_echo": refresh, "echo_forms": encodedForms(tok), "refresh_forms": encodedForms(refresh)})
		// The JSON-escaped spellings go in as written: an encoder would
		// write the characters themselves.
		_, _ = w.Write(append(body[:len(body)-1], []byte(`,"echo_json":"`+jsonEscaped(tok)+`","refresh_json":"`+jsonEscaped(refresh)+`"}`)...))
	}))
	t.Cleanup(srv.Close)
	a.URL = srv.URL
	return a
}

// encodedForms are the spellings of secret that the hostile API echoes
// besides the secret itself — base64 and base64url (alone, and inside a
// longer encoded string at another alignment) and percent-encoding of
// every character — each of which trawl's scrubber masks.
func encodedForms(secret string) []string {
	if secret == "" {
		return nil
	}
	var pct strings.Builder
	for i := range len(secret) {
		fmt.Fprintf(&pct, "%%%02X", secret[i])
	}
	return []string{base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.RawURLEncoding.EncodeToString([]byte("id=" + secret + ";exp=3600")), pct.String()}
}

// jsonEscaped is secret as the contents of a JSON string with every
// character written as a \u escape.
func jsonEscaped(secret string) string {
	var b strings.Builder
	for _, r := range secret {
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

// Tokens are the tokens the API accepted and refused so far.
func (a *API) Tokens() (accepted, refused []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.accepted...), append([]string(nil), a.refused...)
}
