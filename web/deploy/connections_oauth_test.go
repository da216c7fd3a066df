package deploy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/trawl-dev/trawl/tools"
)

// A provider that issues no refresh token (GitHub's OAuth apps, many
// others): the connection is used to its access token's last second —
// not declared ended when it enters the minute a refresh would be made
// in — and then ends, saying why, without a token request.
func TestOAuthWithoutRefreshTokenLastsItsAccessToken(t *testing.T) {
	conns, now, tokenRequests := oauthConnections(t, http.StatusBadRequest, `{"error":"invalid_grant"}`)
	ctx := context.Background()
	if err := conns.StoreOAuth(ctx, "ann", "ledgerapp", &oauth2.Token{AccessToken: "at-1", Expiry: now.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Duration{0, 9*time.Minute + 30*time.Second, 10*time.Minute - time.Second} {
		*now = time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC).Add(at)
		if tok, ok, err := conns.AccessToken(ctx, "ann", "ledgerapp"); tok != "at-1" || !ok || err != nil {
			t.Fatalf("%s after connecting, %s before the access token expires: %q %v %v", at, 10*time.Minute-at, tok, ok, err)
		}
	}
	if n := tokenRequests.Load(); n != 0 {
		t.Errorf("%d token requests for a connection with no refresh token", n)
	}
	status := func() (ConnectionInfo, bool) {
		t.Helper()
		list, err := conns.List(ctx, "ann")
		if err != nil || len(list) != 1 {
			t.Fatalf("connections: %v %v", list, err)
		}
		connected, err := conns.Connected(ctx, "ann", nil, "ledgerapp")
		if err != nil {
			t.Fatal(err)
		}
		return list[0], connected
	}
	if info, connected := status(); info.Status != "connected" || !connected {
		t.Errorf("a second before expiry: %+v, connected %v", info, connected)
	}
	*now = time.Date(2026, 12, 4, 9, 10, 0, 0, time.UTC)
	// Expired, before any call: listed broken, not connected.
	if info, connected := status(); info.Status != "broken" || !strings.Contains(info.Broken, "no refresh token") || connected {
		t.Errorf("expired, before any call: %+v, connected %v", info, connected)
	}
	if why, _ := conns.Broken(ctx, "ann", "ledgerapp"); !strings.Contains(why, "no refresh token") {
		t.Errorf("expired, before any call, the connection's broken reason: %q", why)
	}
	_, ok, err := conns.AccessToken(ctx, "ann", "ledgerapp")
	var refused *tools.RefusedError
	if ok || !errors.As(err, &refused) || refused.Code != tools.CodeConnectionBroken || !strings.Contains(err.Error(), "no refresh token") {
		t.Fatalf("once the access token expired: %v %v", ok, err)
	}
	if why, _ := conns.Broken(ctx, "ann", "ledgerapp"); !strings.Contains(why, "no refresh token") {
		t.Errorf("the connection's broken reason: %q", why)
	}
	if n := tokenRequests.Load(); n != 0 {
		t.Errorf("%d token requests for a connection with no refresh token", n)
	}
}

// A token in the minute before its expiry is refreshed first; when the
// authorization server cannot answer then (a 503), the token that still
// works is sent rather than the call refused, the connection is kept, and
// the next call tries the refresh again. Once it has expired, the call is
// refused as the provider being unavailable — not as a broken connection.
func TestOAuthRefreshUnavailableUsesTheTokenUntilItExpires(t *testing.T) {
	conns, now, tokenRequests := oauthConnections(t, http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`)
	ctx := context.Background()
	start := *now
	if err := conns.StoreOAuth(ctx, "ann", "ledgerapp", &oauth2.Token{AccessToken: "at-1", RefreshToken: "rt-1", Expiry: start.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for i, at := range []time.Duration{9*time.Minute + 30*time.Second, 9*time.Minute + 50*time.Second} {
		*now = start.Add(at)
		if tok, ok, err := conns.AccessToken(ctx, "ann", "ledgerapp"); tok != "at-1" || !ok || err != nil {
			t.Fatalf("%s before expiry, the token endpoint down: %q %v %v", 10*time.Minute-at, tok, ok, err)
		}
		if n := tokenRequests.Load(); n != int32(i+1) {
			t.Errorf("%d token requests after %d calls in the refresh window; want one each", n, i+1)
		}
	}
	*now = start.Add(10 * time.Minute)
	_, ok, err := conns.AccessToken(ctx, "ann", "ledgerapp")
	var refused *tools.RefusedError
	if ok || !errors.As(err, &refused) || refused.Code != tools.CodeProviderUnavailable {
		t.Fatalf("expired, the token endpoint down: %v %v", ok, err)
	}
	if why, _ := conns.Broken(ctx, "ann", "ledgerapp"); why != "" {
		t.Errorf("the connection was marked broken: %q", why)
	}
}

// oauthConnections is a deployment's connections with one OAuth toolkit,
// "ledgerapp" (no organization credential), whose token endpoint answers
// status and body to every request (counted), read on the clock now
// points at (2026-12-04 09:00 UTC to begin with).
func oauthConnections(t *testing.T, status int, body string) (*Connections, *time.Time, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(as.Close)
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	d, err := Open(context.Background(), cfg, Options{Logger: slog.New(slog.DiscardHandler), Stdout: &bytes.Buffer{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	client, err := tools.NewOAuthClient(context.Background(), tools.AuthSpec{Type: tools.AuthOAuth2, OAuth2: tools.OAuth2{
		Flow: tools.FlowAuthorizationCode, AuthorizeURL: as.URL + "/authorize", TokenURL: as.URL + "/token", ClientID: "trawl"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conns := d.Connections()
	conns.SetOAuth(map[string]*tools.OAuthClient{"ledgerapp": client}, nil)
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	conns.now = func() time.Time { return now }
	return conns, &now, &requests
}

// A call whose token is in its last minute waits for the refresh lock
// while the user disconnects: when the refresh finds no connection, the
// call is refused as not connected — the token loaded before the wait is
// not sent (only an unavailable authorization server, or a lock that
// does not come, falls back on it).
func TestOAuthDisconnectedDuringTheRefreshWaitIsNotSent(t *testing.T) {
	conns, now, _ := oauthConnections(t, http.StatusServiceUnavailable, `{"error":"temporarily_unavailable"}`)
	ctx := context.Background()
	if err := conns.StoreOAuth(ctx, "ann", "ledgerapp", &oauth2.Token{AccessToken: "at-1", RefreshToken: "rt-1", Expiry: now.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(9*time.Minute + 30*time.Second)
	unlock, err := conns.oauth.locks.Lock(ctx, "oauth-refresh:"+TokenHash(connKey("ann", "ledgerapp")), refreshLockTTL)
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		tok string
		ok  bool
		err error
	}
	got := make(chan answer, 1)
	go func() {
		tok, ok, err := conns.AccessToken(ctx, "ann", "ledgerapp")
		got <- answer{tok, ok, err}
	}()
	time.Sleep(100 * time.Millisecond) // the call waits for the lock
	if found, _, _, err := conns.Disconnect(ctx, "ann", "ledgerapp"); !found || err != nil {
		t.Fatalf("disconnect: %v %v", found, err)
	}
	unlock()
	a := <-got
	var refused *tools.RefusedError
	if a.ok || a.tok != "" || !errors.As(a.err, &refused) || refused.Code != tools.CodeNotConnected {
		t.Errorf("the call after the user disconnected: %q %v %v", a.tok, a.ok, a.err)
	}
}

// A 401 for the access token of a connection without a refresh token
// (the API revoked it before its expiry) ends the connection as the
// refresh path is asked to replace the token: broken, saying there is no
// refresh token, with no token request.
func TestOAuthWithoutRefreshTokenRefusedEndsTheConnection(t *testing.T) {
	conns, now, tokenRequests := oauthConnections(t, http.StatusBadRequest, `{"error":"invalid_grant"}`)
	ctx := context.Background()
	if err := conns.StoreOAuth(ctx, "ann", "ledgerapp", &oauth2.Token{AccessToken: "at-1", Expiry: now.Add(10 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	_, err := conns.Refresh(ctx, "ann", "ledgerapp", "at-1") // what a 401 for at-1 asks
	var refused *tools.RefusedError
	if !errors.As(err, &refused) || refused.Code != tools.CodeConnectionBroken || !strings.Contains(err.Error(), "no refresh token") {
		t.Fatalf("the 401's refresh: %v", err)
	}
	if why, _ := conns.Broken(ctx, "ann", "ledgerapp"); !strings.Contains(why, "was refused") {
		t.Errorf("the connection's broken reason: %q", why)
	}
	if n := tokenRequests.Load(); n != 0 {
		t.Errorf("%d token requests for a connection with no refresh token", n)
	}
}
