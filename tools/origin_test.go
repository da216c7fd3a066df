package tools

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestOrigin(t *testing.T) {
	for raw, want := range map[string]string{
		"https://API.example.com/x?y":   "https://api.example.com:443",
		"https://api.example.com:443/":  "https://api.example.com:443",
		"http://api.example.com":        "http://api.example.com:80",
		"http://127.0.0.1:8080/a":       "http://127.0.0.1:8080",
		"http://[::1]:9/":               "http://[::1]:9",
		"/relative":                     "",
		"https://u:p@api.example.com/x": "https://api.example.com:443",
	} {
		if got := OriginOf(raw); got != want {
			t.Errorf("OriginOf(%q) = %q, want %q", raw, got, want)
		}
	}
	a, _ := url.Parse("https://x.test/a")
	for raw, same := range map[string]bool{
		"https://x.test:443/b": true, "https://X.TEST/c?d": true, "http://x.test/a": false,
		"https://x.test:8443/a": false, "https://y.test/a": false, "/a": false,
	} {
		b, _ := url.Parse(raw)
		if got := SameOrigin(a, b); got != same {
			t.Errorf("SameOrigin(%s, %s) = %v", a, raw, got)
		}
	}
}

// hostile is a listener that records every request it gets (with all its
// headers and query) and answers with handler.
type hostile struct {
	*httptest.Server
	mu   sync.Mutex
	seen []string // "METHOD path?query | header dump"
}

func newHostile(t *testing.T, addr string, handler func(h *hostile, w http.ResponseWriter, r *http.Request)) *hostile {
	t.Helper()
	h := &hostile{}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	h.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s |", r.Method, r.URL.RequestURI())
		for k, vs := range r.Header {
			fmt.Fprintf(&b, " %s=%s", k, strings.Join(vs, ","))
		}
		h.mu.Lock()
		h.seen = append(h.seen, b.String())
		h.mu.Unlock()
		handler(h, w, r)
	}))
	h.Listener.Close()
	h.Listener = ln
	h.Start()
	t.Cleanup(h.Close)
	return h
}

func (h *hostile) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// echo answers with every header and query value it was sent, in the
// body and in a header.
func echo(_ *hostile, w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	for k, vs := range r.Header {
		fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ","))
	}
	fmt.Fprintf(&b, "query: %s\n", r.URL.RawQuery)
	w.Header().Set("X-Echo", strings.ReplaceAll(b.String(), "\n", " ; "))
	w.Write([]byte(b.String()))
}

// authCases are the four ways a credential goes on a request, each with
// a unique secret and the forms in which it must never reach a foreign
// listener.
func authCases() map[string]struct {
	auth    AuthSpec
	secrets []string
} {
	return map[string]struct {
		auth    AuthSpec
		secrets []string
	}{
		"bearer":        {AuthSpec{Type: AuthBearer, Token: "BEARER-ab12cd34"}, []string{"BEARER-ab12cd34"}},
		"api_key":       {AuthSpec{Type: AuthAPIKey, Header: "X-Custom-Key", Token: "HDRKEY-ef56ab78"}, []string{"HDRKEY-ef56ab78"}},
		"api_key query": {AuthSpec{Type: AuthAPIKey, Query: "api_key", Token: "QRYKEY-9a8b7c6d"}, []string{"QRYKEY-9a8b7c6d"}},
		"basic": {AuthSpec{Type: AuthBasic, Username: "bob", Password: "BASICPW-1f2e3d4c"},
			[]string{"BASICPW-1f2e3d4c", base64.StdEncoding.EncodeToString([]byte("bob:BASICPW-1f2e3d4c"))}},
	}
}

func TestRedirectsStayOnTheirOrigin(t *testing.T) {
	// Three foreign listeners: the same host on another port, another
	// host name for the same address family, and a third port.
	foreign := []*hostile{
		newHostile(t, "127.0.0.1:0", echo),
		newHostile(t, "127.0.0.1:0", echo),
	}
	otherHost := newHostile(t, "127.0.0.1:0", echo)
	_, otherPort, _ := net.SplitHostPort(otherHost.Listener.Addr().String())
	targets := []string{foreign[0].URL + "/steal", foreign[1].URL + "/steal?x=1", "http://localhost:" + otherPort + "/steal"}

	for name, ac := range authCases() {
		for _, target := range targets {
			t.Run(name+" to "+target, func(t *testing.T) {
				origin := newHostile(t, "127.0.0.1:0", func(h *hostile, w http.ResponseWriter, r *http.Request) {
					switch r.URL.Path {
					case "/start":
						http.Redirect(w, r, "/same", http.StatusFound)
					case "/same":
						http.Redirect(w, r, target, http.StatusFound)
					}
				})
				inv := NewInvoker(InvokerOptions{})
				inv.SetAuth("p", ProviderAuth{Org: ac.auth})
				tool := &Tool{ID: "p.get", Provider: "p", Name: "get", Kind: KindAPI, Method: "GET", Path: "/start", Origin: origin.URL}
				resp, err := inv.Call(context.Background(), Request{Tool: tool})
				var re *RefusedError
				if !errors.As(err, &re) || re.Code != CodeCrossOriginRedirect || resp != nil {
					t.Fatalf("Call = %v, %v; want a cross-origin refusal", resp, err)
				}
				u, _ := url.Parse(target)
				if !strings.Contains(err.Error(), Origin(u)) || strings.Contains(err.Error(), "/steal") {
					t.Errorf("the error should name the target's origin only: %v", err)
				}
				for _, s := range ac.secrets {
					if strings.Contains(err.Error(), s) {
						t.Errorf("the error holds the secret: %v", err)
					}
				}
				// The same-origin hop carried the credential and no Referer.
				reqs := origin.requests()
				if len(reqs) != 2 {
					t.Fatalf("origin saw %d requests: %v", len(reqs), reqs)
				}
				for _, r := range reqs {
					if strings.Contains(r, "Referer=") {
						t.Errorf("a Referer was sent: %s", r)
					}
					if !strings.Contains(r, ac.secrets[len(ac.secrets)-1]) {
						t.Errorf("the same-origin request lacks the credential: %s", r)
					}
				}
			})
		}
	}
	for _, f := range append(foreign, otherHost) {
		if reqs := f.requests(); len(reqs) > 0 {
			t.Errorf("a foreign listener was reached: %v", reqs)
		}
	}
}

func TestRedirectLimitsAndUserInfo(t *testing.T) {
	hops := 0
	origin := newHostile(t, "127.0.0.1:0", func(h *hostile, w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			hops++
			n := len(h.requests())
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", n), http.StatusTemporaryRedirect)
		case r.URL.Path == "/five":
			n := len(h.requests())
			if n <= MaxRedirects {
				http.Redirect(w, r, "/five", http.StatusFound)
				return
			}
			echo(h, w, r)
		case r.URL.Path == "/userinfo":
			u, _ := url.Parse(h.URL)
			http.Redirect(w, r, "http://user:pw@"+u.Host+"/x", http.StatusFound)
		}
	})
	inv := NewInvoker(InvokerOptions{})
	inv.SetAuth("p", ProviderAuth{Org: AuthSpec{Type: AuthAPIKey, Query: "key", Token: "QUERYTOKEN-1"}})
	call := func(path string) (*Response, error) {
		return inv.Call(context.Background(), Request{Tool: &Tool{ID: "p.x", Provider: "p", Name: "x", Method: "GET", Path: path, Origin: origin.URL}})
	}
	// Exactly MaxRedirects same-origin hops are followed, the query
	// credential put back on each.
	resp, err := call("/five")
	if err != nil || resp.Status != 200 {
		t.Fatalf("five redirects: %v %v", resp, err)
	}
	if strings.Contains(string(resp.Body), "QUERYTOKEN-1") || !strings.Contains(string(resp.Body), "key="+Mask) {
		t.Errorf("the final hop's echo should hold the masked query credential: %s", resp.Body)
	}
	for _, r := range origin.requests() {
		if !strings.Contains(r, "key=QUERYTOKEN-1") {
			t.Errorf("a same-origin hop lost the query credential: %s", r)
		}
	}
	var re *RefusedError
	if _, err := call("/hop/0"); !errors.As(err, &re) || re.Code != CodeTooManyRedirects {
		t.Errorf("endless redirects: %v", err)
	}
	if hops != MaxRedirects+1 {
		t.Errorf("hops = %d, want %d", hops, MaxRedirects+1)
	}
	if _, err := call("/userinfo"); !errors.As(err, &re) || re.Code != CodeUserInfoURL || strings.Contains(err.Error(), "pw") {
		t.Errorf("redirect to user-info URL: %v", err)
	}
	// A tool whose origin carries user information is refused unsent.
	before := len(origin.requests())
	u, _ := url.Parse(origin.URL)
	_, err = inv.Call(context.Background(), Request{Tool: &Tool{ID: "p.x", Provider: "p", Name: "x", Method: "GET", Path: "/x", Origin: "http://me:secretpw@" + u.Host}})
	if !errors.As(err, &re) || re.Code != CodeUserInfoURL || strings.Contains(err.Error(), "secretpw") {
		t.Errorf("user-info origin: %v", err)
	}
	// A continuation URL off the tool's origin is refused unsent.
	_, err = inv.Call(context.Background(), Request{Tool: &Tool{ID: "p.x", Provider: "p", Name: "x", Method: "GET", Path: "/x", Origin: origin.URL}, URL: "http://localhost:1/next"})
	if !errors.As(err, &re) || re.Code != CodeForeignURL {
		t.Errorf("foreign next URL: %v", err)
	}
	if after := len(origin.requests()); after != before {
		t.Errorf("refused calls reached the upstream (%d requests)", after-before)
	}
}

// TestRedirectKeepsBodyOn307 checks a 307 keeps the body and credentials
// on the same origin.
func TestRedirectKeepsBodyOn307(t *testing.T) {
	origin := newHostile(t, "127.0.0.1:0", func(h *hostile, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			http.Redirect(w, r, "/b", http.StatusTemporaryRedirect)
			return
		}
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, `{"method":%q,"body":%q,"auth":"%v"}`, r.Method, b, r.Header.Get("Authorization") != "")
	})
	inv := NewInvoker(InvokerOptions{})
	inv.SetAuth("p", ProviderAuth{Org: AuthSpec{Type: AuthBearer, Token: "tok-307-abcdef"}})
	tool := &Tool{ID: "p.x", Provider: "p", Name: "x", Method: "POST", Path: "/a", Origin: origin.URL,
		Params: []Param{{Name: "n", In: InBody}}}
	resp, err := inv.Call(context.Background(), Request{Tool: tool, Args: map[string]any{"n": 1.0}})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"method":"POST","body":"{\"n\":1}","auth":"true"}`; string(resp.Body) != want {
		t.Errorf("body = %s, want %s", resp.Body, want)
	}
}

func TestInvokerScrubsEveryChannel(t *testing.T) {
	const model, runtime = "MODELKEY-55aa66bb", "RUNTIME-77cc88dd"
	for name, ac := range authCases() {
		t.Run(name, func(t *testing.T) {
			for _, status := range []int{200, 401, 500} {
				up := newHostile(t, "127.0.0.1:0", func(h *hostile, w http.ResponseWriter, r *http.Request) {
					var b strings.Builder
					for k, vs := range r.Header {
						fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(vs, ","))
					}
					q := r.URL.Query()
					fmt.Fprintf(&b, "query: %s, decoded %v\n", r.URL.RawQuery, q)
					fmt.Fprintf(&b, "also %s and %s\n", model, strings.ReplaceAll(fmt.Sprint(q), "/", `\/`))
					w.Header().Set("X-Echo", strings.ReplaceAll(b.String(), "\n", " ; "))
					w.Header().Set("Link", "<"+h.URL+"/x?"+r.URL.RawQuery+`>; rel="next"`)
					w.WriteHeader(status)
					fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s"}}`, b.String())
				})
				inv := NewInvoker(InvokerOptions{Secrets: []string{model}})
				inv.SetAuth("p", ProviderAuth{Org: ac.auth, Runtime: AuthSpec{Type: AuthBearer}})
				tool := &Tool{ID: "p.x", Provider: "p", Name: "x", Method: "GET", Path: "/x", Origin: up.URL}
				for _, cred := range []string{"", runtime} {
					resp, err := inv.Call(context.Background(), Request{Tool: tool, Credential: cred})
					if err != nil {
						t.Fatal(err)
					}
					all := string(resp.Body) + fmt.Sprint(resp.Header)
					for _, s := range append(ac.secrets, model, runtime) {
						if strings.Contains(all, s) {
							t.Errorf("status %d, credential %q: %q leaks: %s", status, cred, s, all)
						}
					}
					if !strings.Contains(all, Mask) {
						t.Errorf("nothing masked: %s", all)
					}
				}
			}
		})
	}
}

func TestRuntimeCredentialRequired(t *testing.T) {
	up, seen := recordingServer(t, nil)
	inv := NewInvoker(InvokerOptions{})
	inv.SetAuth("acme", ProviderAuth{Runtime: AuthSpec{Type: AuthBearer}})
	inv.SetAuth("mail", ProviderAuth{Runtime: AuthSpec{Type: AuthBearer}})
	inv.SetAuth("both", ProviderAuth{Org: AuthSpec{Type: AuthBearer, Token: "org-token-1"}, Runtime: AuthSpec{Type: AuthBearer}})
	api := &Tool{ID: "acme.x", Provider: "acme", Name: "x", Kind: KindAPI, Method: "GET", Path: "/x", Origin: up.URL}
	app := &Tool{ID: "mail.x", Provider: "mail", Name: "x", Kind: KindApp, ToolkitName: "Mail", Method: "GET", Path: "/x", Origin: up.URL}
	var re *RefusedError
	for _, tool := range []*Tool{api, app} {
		_, err := inv.Call(context.Background(), Request{Tool: tool})
		if !errors.As(err, &re) || re.Code != CodeNotConnected || !strings.HasPrefix(re.Msg, "this needs your ") {
			t.Errorf("%s without a credential: %v", tool.ID, err)
		}
	}
	if !strings.Contains(NeedsCredential(app).Msg, "connect_toolkit") {
		t.Errorf("a connected app's refusal should point to connect_toolkit: %s", NeedsCredential(app).Msg)
	}
	if n := len(seen()); n != 0 {
		t.Fatalf("refused calls reached the upstream: %d", n)
	}
	if _, err := inv.Call(context.Background(), Request{Tool: api, Credential: "user-tok-1"}); err != nil {
		t.Errorf("with a credential: %v", err)
	}
	both := &Tool{ID: "both.x", Provider: "both", Name: "x", Method: "GET", Path: "/x", Origin: up.URL}
	if _, err := inv.Call(context.Background(), Request{Tool: both}); err != nil {
		t.Errorf("an organization credential is the fallback: %v", err)
	}
	if got := seen(); len(got) != 2 || got[0].Auth != "Bearer user-tok-1" || got[1].Auth != "Bearer org-token-1" {
		t.Errorf("requests = %+v", got)
	}
}

// FuzzRedirectDecision checks the redirect policy on arbitrary URLs: a
// redirect is followed exactly when it stays on the first request's
// origin, carries no user information and the chain is short enough; a
// Referer never goes; a refusal names at most the target's origin.
func FuzzRedirectDecision(f *testing.F) {
	f.Add("https://api.test/a?key=K", "https://api.test:443/b", 1)
	f.Add("https://api.test/a", "http://api.test/b", 1)
	f.Add("http://127.0.0.1:80/a", "http://127.0.0.1/b?x", 5)
	f.Add("http://127.0.0.1:8080/a", "http://127.0.0.1:8081/a", 1)
	f.Add("https://api.test/a", "https://user:pw@api.test/a", 1)
	f.Add("https://api.test/a", "https://API.TEST/a", 6)
	f.Add("https://api.test/a", "//evil.test/a", 1)
	f.Add("https://[::1]:8443/a", "https://[::1]:8443/b", 2)
	f.Fuzz(func(t *testing.T, first, target string, hops int) {
		fu, err1 := url.Parse(first)
		tu, err2 := url.Parse(target)
		if err1 != nil || err2 != nil || fu.Host == "" {
			return
		}
		tu = fu.ResolveReference(tu)
		hops = 1 + (hops%10+10)%10
		via := make([]*http.Request, hops)
		for i := range via {
			via[i] = &http.Request{URL: fu, Header: http.Header{}}
		}
		req := (&http.Request{URL: tu, Header: http.Header{"Referer": {first}}}).WithContext(context.Background())
		err := checkRedirect(req, via)
		want := tu.User == nil && SameOrigin(fu, tu) && hops <= MaxRedirects
		if (err == nil) != want {
			t.Fatalf("checkRedirect(%q → %q, %d hops) = %v, want follow=%v", first, tu, hops, err, want)
		}
		if req.Header.Get("Referer") != "" {
			t.Fatal("a Referer was left on the request")
		}
		if err != nil {
			var re *RefusedError
			if !errors.As(err, &re) || !errors.Is(err, ErrRefused) {
				t.Fatalf("not a refusal: %v", err)
			}
			msg := strings.ReplaceAll(strings.ReplaceAll(err.Error(), Origin(tu), ""), Origin(fu), "")
			for _, part := range []string{tu.RawQuery, tu.Fragment, tu.User.String()} {
				if len(part) > 3 && strings.Contains(msg, part) {
					t.Fatalf("the refusal quotes %q: %v", part, err)
				}
			}
		}
	})
}

func TestMCPRedirectsStayOnTheirOrigin(t *testing.T) {
	srv := newTestMCPServer(mcpTestServerOptions{})
	var foreignHits int
	var mu sync.Mutex
	foreign := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		foreignHits++
		mu.Unlock()
		http.Error(w, "no", 500)
	}))
	t.Cleanup(foreign.Close)
	// An endpoint that sends the client to another origin.
	jump := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, foreign.URL+"/mcp?token=zzz", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(jump.Close)
	_, err := ConnectMCP(t.Context(), MCPConfig{ID: "m", URL: jump.URL}, MCPOptions{})
	if err == nil || !strings.Contains(err.Error(), "another origin") || strings.Contains(err.Error(), "zzz") {
		t.Fatalf("ConnectMCP through a cross-origin redirect: %v", err)
	}
	if foreignHits != 0 {
		t.Errorf("the foreign origin was reached %d times", foreignHits)
	}
	// A same-origin redirect is followed.
	mux := http.NewServeMux()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mux.Handle("/mcp", h)
	mux.Handle("/old", http.RedirectHandler("/mcp", http.StatusPermanentRedirect))
	same := httptest.NewServer(mux)
	t.Cleanup(same.Close)
	src := connectTest(t, MCPConfig{ID: "m", URL: same.URL + "/old"}, MCPOptions{})
	if len(src.Tools()) == 0 {
		t.Error("no tools through a same-origin redirect")
	}
	if err := (MCPConfig{ID: "m", URL: "http://u:p@127.0.0.1:1/mcp"}).Validate(); err == nil {
		t.Error("an MCP URL with user information was accepted")
	}
}

// TestRouterScrubsMCPResults: MCP results pass the same scrubber.
func TestRouterScrubsMCPResults(t *testing.T) {
	endpoint := serveMCP(t, newTestMCPServer(mcpTestServerOptions{}))
	src := connectTest(t, MCPConfig{ID: "files", URL: endpoint}, MCPOptions{})
	inv := NewInvoker(InvokerOptions{Secrets: []string{"MODEL-KEY-echoed-1"}})
	r := Router{HTTP: inv, MCP: map[string]*MCPSource{"files": src}}
	tool := toolByName(t, src.Tools(), "search_orders")
	resp, err := r.Call(t.Context(), Request{Tool: tool, Credential: "RUNTIME-echoed-2",
		Args: map[string]any{"query": "MODEL-KEY-echoed-1 and RUNTIME-echoed-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(resp.Body); strings.Contains(got, "echoed") || strings.Count(got, Mask) != 2 {
		t.Errorf("MCP result = %s", got)
	}
}

func TestMCPConfigSecrets(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  MCPConfig
		want []string
	}{
		{"query values", MCPConfig{ID: "m", URL: "https://mcp.example/sse?api_key=MCPKEY-123456&x=1"}, []string{"1", "MCPKEY-123456"}},
		// The server receives the spelling written in the URL, raw '/' and
		// encoded '+' alike, and may echo it base64-encoded.
		{"as written and decoded", MCPConfig{ID: "m", URL: "https://mcp.example/mcp?key=MCPQSECRET/Zq%2B4444hh"},
			[]string{"MCPQSECRET/Zq%2B4444hh", "MCPQSECRET/Zq+4444hh"}},
		{"env values marked secret", MCPConfig{ID: "m", Command: []string{"srv"}, Env: map[string]MCPEnvValue{
			"API_TOKEN": {Value: "env-secret-123", Secret: true}, "LOG_LEVEL": {Value: "verbose-logging"}}}, []string{"env-secret-123"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cfg.Secrets()
			sort.Strings(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Secrets (-want +got):\n%s", diff)
			}
		})
	}
}
