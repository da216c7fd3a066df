package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// captured is what a test server saw of one request.
type captured struct {
	Method, Path, RawQuery, Auth, APIKey, ContentType, Body string
}

func recordingServer(t *testing.T, reply func(w http.ResponseWriter, r *http.Request)) (*httptest.Server, func() []captured) {
	t.Helper()
	var mu sync.Mutex
	var seen []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, captured{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"),
			r.Header.Get("X-Api-Key"), r.Header.Get("Content-Type"), string(b)})
		mu.Unlock()
		if reply != nil {
			reply(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []captured {
		mu.Lock()
		defer mu.Unlock()
		return append([]captured(nil), seen...)
	}
}

func ordersTool(origin string) *Tool {
	return &Tool{
		ID: "acme.update_order", Provider: "acme", Name: "update_order", Kind: KindAPI,
		Method: "post", Path: "/orders/{order_id}/notes", Origin: origin,
		Params: []Param{
			{Name: "order_id", In: InPath, Required: true, Schema: &Schema{Type: "string"}},
			{Name: "tags", In: InQuery, Schema: &Schema{Type: "array"}},
			{Name: "created", In: InQuery, Schema: &Schema{Type: "object"}},
			{Name: "limit", In: InQuery, Schema: &Schema{Type: "integer"}},
			{Name: "x_request_id", Wire: "X-Request-Id", In: InHeader},
			{Name: "text", In: InBody, Schema: &Schema{Type: "string"}},
			{Name: "pinned", In: InBody, Schema: &Schema{Type: "boolean"}},
		},
	}
}

func TestInvokerBuildsRequest(t *testing.T) {
	srv, seen := recordingServer(t, nil)
	inv := NewInvoker(InvokerOptions{})
	resp, err := inv.Call(context.Background(), Request{Tool: ordersTool(srv.URL + "/api"), Args: map[string]any{
		"order_id": "a/b c", "tags": []any{"x", "y"}, "created": map[string]any{"gt": 10.0, "lt": 20.0},
		"limit": 100.0, "x_request_id": "r1", "text": "hi", "pinned": true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 200 || string(resp.Body) != `{"ok":true}` {
		t.Fatalf("response = %d %s", resp.Status, resp.Body)
	}
	got := seen()[0]
	want := captured{
		Method: "POST", Path: "/api/orders/a%2Fb%20c/notes",
		RawQuery:    "created%5Bgt%5D=10&created%5Blt%5D=20&limit=100&tags=x&tags=y",
		ContentType: "application/json", Body: `{"pinned":true,"text":"hi"}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestInvokerMissingPathParam(t *testing.T) {
	inv := NewInvoker(InvokerOptions{})
	_, err := inv.Call(context.Background(), Request{Tool: ordersTool("http://127.0.0.1:1"), Args: map[string]any{}})
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Arg != "order_id" {
		t.Fatalf("err = %v, want an ArgError for order_id", err)
	}
}

func TestInvokerCredentials(t *testing.T) {
	const org, user = "org-secret-123", "user-secret-456"
	tests := []struct {
		name      string
		auth      ProviderAuth
		runtime   string
		wantAuth  string
		wantKey   string
		wantQuery string
	}{
		{"bearer", ProviderAuth{Org: AuthSpec{Type: AuthBearer, Token: org}}, "", "Bearer " + org, "", ""},
		{"api key header", ProviderAuth{Org: AuthSpec{Type: AuthAPIKey, Header: "X-Api-Key", Token: org}}, "", "", org, ""},
		{"api key query", ProviderAuth{Org: AuthSpec{Type: AuthAPIKey, Query: "api_key", Token: org}}, "", "", "", "api_key=" + org},
		{"basic", ProviderAuth{Org: AuthSpec{Type: AuthBasic, Username: "u", Password: org}}, "", "Basic dTpvcmctc2VjcmV0LTEyMw==", "", ""},
		{"runtime replaces org", ProviderAuth{Org: AuthSpec{Type: AuthBearer, Token: org}, Runtime: AuthSpec{Type: AuthBearer}}, user, "Bearer " + user, "", ""},
		{"runtime default bearer", ProviderAuth{}, user, "Bearer " + user, "", ""},
		{"none", ProviderAuth{}, "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, seen := recordingServer(t, nil)
			inv := NewInvoker(InvokerOptions{})
			inv.SetAuth("acme", tt.auth)
			tool := &Tool{ID: "acme.list", Provider: "acme", Name: "list", Method: "GET", Path: "/orders", Origin: srv.URL}
			if _, err := inv.Call(context.Background(), Request{Tool: tool, Credential: tt.runtime}); err != nil {
				t.Fatal(err)
			}
			got := seen()[0]
			if got.Auth != tt.wantAuth || got.APIKey != tt.wantKey || got.RawQuery != tt.wantQuery {
				t.Errorf("auth=%q key=%q query=%q; want %q %q %q", got.Auth, got.APIKey, got.RawQuery, tt.wantAuth, tt.wantKey, tt.wantQuery)
			}
		})
	}
}

func TestInvokerCapsBodyAndTimesOut(t *testing.T) {
	srv, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		w.Write(bytes.Repeat([]byte("x"), 1000))
	})
	inv := NewInvoker(InvokerOptions{MaxResponseBytes: 100, Timeout: 50 * time.Millisecond})
	tool := &Tool{ID: "p.big", Provider: "p", Name: "big", Method: "GET", Path: "/big", Origin: srv.URL}
	resp, err := inv.Call(context.Background(), Request{Tool: tool})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Body) != 100 || !resp.Truncated {
		t.Errorf("body %d bytes, truncated=%v; want 100, true", len(resp.Body), resp.Truncated)
	}
	slow := &Tool{ID: "p.slow", Provider: "p", Name: "slow", Method: "GET", Path: "/slow", Origin: srv.URL}
	_, err = inv.Call(context.Background(), Request{Tool: slow})
	if !errors.Is(err, ErrUpstream) || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("err = %v; want a timed-out upstream error", err)
	}
}

func TestInvokerNextURL(t *testing.T) {
	srv, seen := recordingServer(t, nil)
	inv := NewInvoker(InvokerOptions{})
	tool := &Tool{ID: "p.list", Provider: "p", Name: "list", Method: "GET", Path: "/v1/items", Origin: srv.URL + "/base",
		Params: []Param{{Name: "limit", In: InQuery}}}
	_, err := inv.Call(context.Background(), Request{Tool: tool, Args: map[string]any{"limit": 5.0}, URL: "/base/v1/items?Page=2&PageToken=abc"})
	if err != nil {
		t.Fatal(err)
	}
	if got := seen()[0]; got.Path != "/base/v1/items" || got.RawQuery != "Page=2&PageToken=abc" {
		t.Errorf("next URL request = %s?%s", got.Path, got.RawQuery)
	}
}

// TestCredentialNeverLeaks plants unique credentials and checks every
// channel the invoker writes: the activity log (memory and bolt-free
// store), errors, and the response it returns.
func TestCredentialNeverLeaks(t *testing.T) {
	const secret = "LEAKCANARY-7f3a9c"
	srv, _ := recordingServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, `{"error":"upstream broke"}`)
	})
	log := NewActivityLog(nil, 10)
	inv := NewInvoker(InvokerOptions{Log: log})
	inv.SetAuth("p", ProviderAuth{Org: AuthSpec{Type: AuthAPIKey, Query: "key", Token: secret}})
	tool := &Tool{ID: "p.list", Provider: "p", Name: "list", Method: "GET", Path: "/x", Origin: srv.URL,
		Params: []Param{{Name: "cursor", In: InQuery}}}
	resp, err := inv.Call(context.Background(), Request{Tool: tool, Args: map[string]any{"cursor": "c1"}, Cursor: "c1", ThreadID: "th"})
	if err != nil {
		t.Fatal(err)
	}
	// A transport failure must not quote the URL (which holds the key).
	dead := &Tool{ID: "p.dead", Provider: "p", Name: "dead", Method: "GET", Path: "/x", Origin: "http://127.0.0.1:1"}
	_, derr := inv.Call(context.Background(), Request{Tool: dead})
	if derr == nil {
		t.Fatal("call to a closed port succeeded")
	}
	acts, _ := log.List(context.Background(), "", 10)
	everything, _ := json.Marshal(acts)
	channels := map[string]string{
		"activity": string(everything), "error": derr.Error(), "body": string(resp.Body),
	}
	for name, text := range channels {
		if strings.Contains(text, secret) {
			t.Errorf("%s leaks the credential: %s", name, text)
		}
	}
	if !strings.Contains(acts[1].Path, "key=REDACTED") {
		t.Errorf("activity path = %q; want the key redacted", acts[1].Path)
	}
	if acts[1].Cursor != Fingerprint("c1") || acts[1].ThreadID != "th" || acts[1].Status != 502 {
		t.Errorf("activity record = %+v", acts[1])
	}
}

func TestInvokerFormBody(t *testing.T) {
	srv, seen := recordingServer(t, nil)
	inv := NewInvoker(InvokerOptions{})
	tool := &Tool{ID: "s.create", Provider: "s", Name: "create", Method: "POST", Path: "/v1/customers", Origin: srv.URL,
		ContentType: "application/x-www-form-urlencoded",
		Params:      []Param{{Name: "email", In: InBody}, {Name: "metadata", In: InBody}, {Name: "expand", In: InBody}}}
	_, err := inv.Call(context.Background(), Request{Tool: tool, Args: map[string]any{
		"email": "a@b.c", "metadata": map[string]any{"k": "v"}, "expand": []any{"x", "y"}}})
	if err != nil {
		t.Fatal(err)
	}
	got := seen()[0]
	if got.ContentType != "application/x-www-form-urlencoded" || got.Body != "email=a%40b.c&expand=x&expand=y&metadata%5Bk%5D=v" {
		t.Errorf("form request: %s %s", got.ContentType, got.Body)
	}
}
