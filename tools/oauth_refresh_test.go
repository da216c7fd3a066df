package tools

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Which answers of a token endpoint to a refresh break the user's
// connection (RefreshRefused): only a 4xx refusing the grant; a 5xx, a
// 429, temporarily_unavailable, a gateway's page, trawl's own client
// refused, or no answer at all keep it — and what the user is told
// (OAuthFailure) says which.
func TestOAuthRefreshRefusedOnlyOnDefiniteRefusal(t *testing.T) {
	var status int
	var body, ctype string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	defer ts.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close()
	client := func(tokenURL string) *OAuthClient {
		c, err := NewOAuthClient(context.Background(), AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode,
			ClientID: "trawl", ClientSecret: "s3cr3t-s3cr3t", AuthorizeURL: ts.URL + "/authorize", TokenURL: tokenURL}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const jsonType = "application/json"
	for _, tc := range []struct {
		name, ctype, body string
		status            int
		refused           bool
		words             string // in OAuthFailure
	}{
		{"400 invalid_grant", jsonType, `{"error":"invalid_grant"}`, 400, true, "no longer accepts this connection"},
		{"401 unauthorized_client", jsonType, `{"error":"unauthorized_client"}`, 401, true, "refused trawl's client"},
		{"401 invalid_client", jsonType, `{"error":"invalid_client"}`, 401, false, "tell the operator"},
		{"400 invalid_request", jsonType, `{"error":"invalid_request"}`, 400, false, "tell the operator"},
		{"503 temporarily_unavailable", jsonType, `{"error":"temporarily_unavailable"}`, 503, false, "temporary problem"},
		{"500 server_error", jsonType, `{"error":"server_error"}`, 500, false, "temporary problem"},
		{"500 invalid_grant", jsonType, `{"error":"invalid_grant"}`, 500, false, ""},
		{"502 html", "text/html", `<html><body>502 Bad Gateway</body></html>`, 502, false, "answered HTTP 502"},
		{"429 no body", "text/plain", ``, 429, false, "answered HTTP 429"},
		{"400 html", "text/html", `<html>Bad Request</html>`, 400, false, "refused without saying why"},
	} {
		status, body, ctype = tc.status, tc.body, tc.ctype
		_, err := client(ts.URL+"/token").Refresh(context.Background(), "a-refresh-token")
		if err == nil {
			t.Fatalf("%s: no error", tc.name)
		}
		if got := RefreshRefused(err); got != tc.refused {
			t.Errorf("%s: RefreshRefused = %v, want %v (%v)", tc.name, got, tc.refused, err)
		}
		if w := OAuthFailure(err); !strings.Contains(w, tc.words) {
			t.Errorf("%s: the user is told %q, want it to say %q", tc.name, w, tc.words)
		}
	}
	_, err = client(down+"/token").Refresh(context.Background(), "a-refresh-token")
	if err == nil || RefreshRefused(err) {
		t.Errorf("a token endpoint that does not answer: RefreshRefused(%v) = true", err)
	}
	_, err = client(ts.URL+"/token").Refresh(context.Background(), "")
	if !RefreshRefused(err) {
		t.Errorf("no refresh token at all: RefreshRefused(%v) = false", err)
	}
}
