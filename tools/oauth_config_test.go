package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestOAuthSpecValidate(t *testing.T) {
	no := false
	ac := OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", AuthorizeURL: "https://as.example/auth", TokenURL: "https://as.example/token"}
	cc := OAuth2{Flow: FlowClientCredentials, ClientID: "c", ClientSecret: "s", TokenURL: "https://as.example/token"}
	with := func(o OAuth2, f func(*OAuth2)) AuthSpec { f(&o); return AuthSpec{Type: AuthOAuth2, OAuth2: o} }
	tests := []struct {
		spec AuthSpec
		want string // "" for valid
	}{
		{AuthSpec{Type: AuthOAuth2, OAuth2: ac}, ""},
		{AuthSpec{Type: AuthOAuth2, OAuth2: cc}, ""},
		{with(ac, func(o *OAuth2) { o.AuthorizeURL, o.TokenURL, o.Issuer = "", "", "https://login.example" }), ""},
		{with(ac, func(o *OAuth2) { o.AuthorizeURL, o.TokenURL = "http://127.0.0.1:9/a", "http://localhost:9/t" }), ""},
		{with(ac, func(o *OAuth2) { o.TokenAuthMethod, o.PKCE = ClientSecretPost, &no }), ""},
		{with(ac, func(o *OAuth2) { o.Flow = "" }), "needs flow: authorization_code"},
		{with(ac, func(o *OAuth2) { o.Flow = "implicit" }), `auth flow "implicit" is not one of`},
		{with(ac, func(o *OAuth2) { o.ClientID = "" }), "needs client_id"},
		{with(ac, func(o *OAuth2) { o.AuthorizeURL = "" }), "needs authorize_url, or issuer"},
		{with(ac, func(o *OAuth2) { o.TokenURL = "" }), "needs token_url, or issuer"},
		{with(ac, func(o *OAuth2) { o.TokenURL = "http://as.example/token" }), "token_url: \"http://as.example/token\" must be https"},
		{with(ac, func(o *OAuth2) { o.Issuer = "login.example" }), "issuer: \"login.example\" is not an absolute"},
		{with(ac, func(o *OAuth2) { o.RevokeURL = "https://u:p@as.example/revoke" }), "revoke_url: the URL must not carry user:password@"},
		{with(ac, func(o *OAuth2) { o.TokenAuthMethod = "private_key_jwt" }), `token_auth_method "private_key_jwt" is not one of`},
		{with(cc, func(o *OAuth2) { o.ClientSecret = "" }), "flow client_credentials needs client_secret"},
		{with(cc, func(o *OAuth2) { o.AuthorizeURL = "https://as.example/auth" }), "takes no authorize_url"},
		{with(cc, func(o *OAuth2) { o.PKCE = &no }), "takes no pkce"},
		{AuthSpec{Type: AuthOAuth2, Token: "t", OAuth2: cc}, "takes no token"},
		{AuthSpec{Type: AuthBearer, OAuth2: OAuth2{ClientID: "c"}}, "takes no OAuth 2.0 settings"},
		{AuthSpec{Type: AuthAPIKey, Header: "X", OAuth2: OAuth2{Flow: FlowClientCredentials}}, "takes no OAuth 2.0 settings"},
	}
	for _, tc := range tests {
		err := tc.spec.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.spec, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: error %v, want %q", tc.spec, err, tc.want)
		}
	}
	// The client secret is redacted like the other credentials.
	s := AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "c", ClientSecret: "cs-secret-value"}}
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%#v", s)} {
		if strings.Contains(out, "cs-secret-value") || !strings.Contains(out, "credential=redacted") {
			t.Errorf("printed spec: %s", out)
		}
	}
}

// A manifest names the OAuth settings flat in auth, scopes as a list or
// one string; unknown keys are still refused.
func TestManifestOAuth(t *testing.T) {
	doc := func(auth string) []byte {
		return []byte(`{"toolkit": "crm", "name": "CRM", "base_url": "https://crm.example", "auth": ` + auth + `,
		 "tools": [{"name": "CRM_LIST", "description": "d", "http": {"method": "GET", "path": "/x"}}]}`)
	}
	m, err := ParseManifest(doc(`{"type": "oauth2", "flow": "authorization_code", "issuer": "https://login.example",
		"client_id": "trawl", "scopes": ["crm.read", "offline_access"], "audience": "https://crm.example"}`))
	if err != nil {
		t.Fatal(err)
	}
	if m.Auth.Flow != FlowAuthorizationCode || m.Auth.Issuer != "https://login.example" || fmt.Sprint(m.Auth.Scopes.List()) != "[crm.read offline_access]" || !m.Auth.pkce() {
		t.Errorf("auth: %+v", m.Auth.OAuth2)
	}
	m, err = ParseManifest(doc(`{"type": "oauth2", "flow": "client_credentials", "token_url": "https://login.example/token", "client_id": "a", "client_secret": "b", "scopes": "x  y"}`))
	if err != nil || m.Auth.Scopes != "x y" {
		t.Fatalf("scopes as a string: %v %q", err, m.Auth.Scopes)
	}
	if _, err := ParseManifest(doc(`{"type": "oauth2", "flow": "client_credentials", "tokenurl": "x"}`)); err == nil || !strings.Contains(err.Error(), `unknown key "tokenurl"`) {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := ParseManifest(doc(`{"type": "oauth2", "client_id": "a", "token_url": "https://x.example/t"}`)); err == nil || !strings.Contains(err.Error(), "needs flow") {
		t.Errorf("no flow: %v", err)
	}
	if _, err := ParseManifest(doc(`{"type": "oauth2", "flow": "client_credentials", "client_id": "a", "client_secret": "b", "token_url": "https://x.example/t", "scopes": 5}`)); err == nil || !strings.Contains(err.Error(), "scopes must be") {
		t.Errorf("bad scopes: %v", err)
	}
	var y struct{ Auth AuthSpec }
	if err := yaml.Unmarshal([]byte("auth: {type: oauth2, flow: client_credentials, scopes: [a, b], pkce: false}\n"), &y); err != nil || y.Auth.Scopes != "a b" || y.Auth.PKCE == nil || *y.Auth.PKCE {
		t.Errorf("yaml: %v %+v", err, y.Auth.OAuth2)
	}
	if b, _ := json.Marshal(y.Auth.Scopes); string(b) != `["a","b"]` {
		t.Errorf("scopes marshal as %s", b)
	}
}

// issuer: alone fills the URLs from the RFC 8414 document (or OpenID
// Connect's), with the path after the well-known part for an issuer with
// a path; an issuer whose metadata names another issuer is refused.
func TestOAuthIssuerDiscovery(t *testing.T) {
	var srv *httptest.Server
	var asked []string
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		issuer := srv.URL + "/tenant"
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server/tenant":
			http.NotFound(w, r)
		case "/.well-known/openid-configuration/tenant":
			json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/auth",
				"token_endpoint": issuer + "/token", "revocation_endpoint": issuer + "/revoke", "jwks_uri": issuer + "/jwks",
				"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
				"token_endpoint_auth_methods_supported": []string{"client_secret_post"}})
		case "/.well-known/oauth-authorization-server/plain":
			json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL + "/plain", "authorization_endpoint": srv.URL + "/plain/auth",
				"token_endpoint": srv.URL + "/plain/token", "revocation_endpoint": "http://as.example/revoke",
				"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"}})
		case "/.well-known/oauth-authorization-server/other":
			json.NewEncoder(w).Encode(map[string]any{"issuer": "https://evil.example", "authorization_endpoint": "https://evil.example/a",
				"token_endpoint": "https://evil.example/t", "code_challenge_methods_supported": []string{"S256"}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c, err := NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", Issuer: srv.URL + "/tenant"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sp := c.Spec()
	if sp.AuthorizeURL != srv.URL+"/tenant/auth" || sp.TokenURL != srv.URL+"/tenant/token" || sp.RevokeURL != srv.URL+"/tenant/revoke" || c.ep.Load().method != ClientSecretPost {
		t.Errorf("discovered: %+v (method %s)", sp, c.ep.Load().method)
	}
	if fmt.Sprint(asked[:2]) != "[/.well-known/oauth-authorization-server/tenant /.well-known/openid-configuration/tenant]" {
		t.Errorf("asked %v", asked)
	}
	// A URL set in config wins over the metadata's.
	c, err = NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", Issuer: srv.URL + "/tenant", TokenURL: "https://tok.example/t"}}, nil)
	if err != nil || c.Spec().TokenURL != "https://tok.example/t" {
		t.Errorf("override: %v %+v", err, c)
	}
	_, err = NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", Issuer: srv.URL + "/other"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "does not match issuer") {
		t.Errorf("foreign issuer: %v", err)
	}
	// A discovered endpoint on plain http off loopback would carry the
	// client secret in the clear: refused, as in the config.
	_, err = NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", Issuer: srv.URL + "/plain"}}, nil)
	if err == nil || !strings.Contains(err.Error(), `revocation_endpoint "http://as.example/revoke" must be https`) {
		t.Errorf("plain http revocation endpoint: %v", err)
	}
	// Unless the config names its own.
	if _, err := NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", Issuer: srv.URL + "/plain", RevokeURL: "https://as.example/revoke"}}, nil); err != nil {
		t.Errorf("revoke_url set: %v", err)
	}
	_, err = NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowAuthorizationCode, ClientID: "c", Issuer: srv.URL + "/none"}}, nil)
	if err == nil || !strings.Contains(err.Error(), "publishes no authorization server metadata") {
		t.Errorf("no metadata: %v", err)
	}
}

func TestTokenExpired(t *testing.T) {
	for h, want := range map[string]bool{
		"": true, `Bearer error="invalid_token", error_description="expired"`: true, `Bearer realm="x"`: true,
		`Bearer error="insufficient_scope", scope="a"`: false, `Basic realm="x"`: true,
	} {
		hd := http.Header{}
		if h != "" {
			hd.Set("WWW-Authenticate", h)
		}
		if got := TokenExpired(hd); got != want {
			t.Errorf("TokenExpired(%q) = %v", h, got)
		}
	}
}

// An issuer that does not answer at first: OpenOAuthClient starts the
// client unavailable (no error), every exchange fails with
// ErrAuthServerUnavailable and words naming the issuer and the cause;
// KeepDiscovering reads the metadata once it is served, and the client
// then has its endpoints. A wrong spec is still an error.
func TestOAuthClientUnavailableUntilDiscovered(t *testing.T) {
	var srv *httptest.Server
	var up atomic.Bool
	var tries atomic.Int32
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			if tries.Add(1) >= 4 { // four failed reads (two tries of two well-known URLs), then it is back
				up.Store(true)
			}
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": srv.URL, "token_endpoint": srv.URL + "/token",
			"revocation_endpoint": srv.URL + "/revoke", "response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"}})
	}))
	defer srv.Close()
	ctx := context.Background()
	spec := AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, ClientID: "c", ClientSecret: "client-secret-51d2", Issuer: srv.URL}}
	if _, err := OpenOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: FlowClientCredentials, Issuer: srv.URL}}, nil); err == nil {
		t.Error("a spec without client_id opened")
	}
	c, err := OpenOAuthClient(ctx, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	why, down := c.Unavailable()
	if !down || !strings.Contains(why, "metadata could not be read") {
		t.Fatalf("unavailable: %v %q", down, why)
	}
	_, err = c.ClientToken(ctx)
	if !errors.Is(err, ErrAuthServerUnavailable) {
		t.Fatalf("a token while unavailable: %v", err)
	}
	if words := OAuthFailure(err); !strings.Contains(words, srv.URL) || !strings.Contains(words, "has not answered since trawl started") || !strings.Contains(words, "trawl keeps trying") {
		t.Errorf("in words: %s", words)
	}
	if err := c.Revoke(ctx, "some-token-value", "access_token"); !errors.Is(err, ErrAuthServerUnavailable) || !c.CanRevoke() {
		t.Errorf("revoking while unavailable: %v (can revoke: %v)", err, c.CanRevoke())
	}
	var logs strings.Builder
	kctx, cancel := context.WithTimeout(ctx, time.Minute) // a bound for a failing test, not a timing
	defer cancel()
	c.KeepDiscovering(kctx, time.Millisecond, 4*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)))
	if _, down := c.Unavailable(); down || c.Spec().TokenURL != srv.URL+"/token" || c.Spec().RevokeURL != srv.URL+"/revoke" {
		t.Errorf("after KeepDiscovering: down %v, spec %+v", down, c.Spec())
	}
	if !strings.Contains(logs.String(), "trying again") || !strings.Contains(logs.String(), "authorization server reached") {
		t.Errorf("the retries were not logged: %s", logs.String())
	}
}

// authorize_params go on the authorization request only (Google issues a
// refresh token only with access_type=offline and prompt=consent); the
// request's own parameters cannot be set that way.
func TestOAuthAuthorizeParams(t *testing.T) {
	doc := func(auth string) []byte {
		return []byte(`{"toolkit": "gmail", "name": "Gmail", "base_url": "https://gmail.example", "auth": ` + auth + `,
		 "tools": [{"name": "GMAIL_LIST", "description": "d", "http": {"method": "GET", "path": "/x"}}]}`)
	}
	m, err := ParseManifest(doc(`{"type": "oauth2", "flow": "authorization_code", "authorize_url": "https://accounts.example/o/oauth2/v2/auth",
		"token_url": "https://oauth2.example/token", "client_id": "trawl", "scopes": ["mail.read"],
		"authorize_params": {"access_type": "offline", "prompt": "consent"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := m.Auth.AuthorizeParams.Values(); got.Get("access_type") != "offline" || got.Get("prompt") != "consent" || len(got) != 2 {
		t.Fatalf("authorize_params: %v", got)
	}
	c, err := NewOAuthClient(context.Background(), m.Auth, nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := c.AuthCodeURL("st", c.NewVerifier(), "https://trawl.example/connect/oauth/callback")
	if err != nil {
		t.Fatal(err)
	}
	q := mustQuery(t, u)
	if q.Get("access_type") != "offline" || q.Get("prompt") != "consent" || q.Get("state") != "st" || q.Get("code_challenge_method") != "S256" || q.Get("client_id") != "trawl" {
		t.Errorf("authorize URL: %s", u)
	}
	// The exchange carries none of them.
	var form string
	tok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		form = r.PostForm.Encode()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"at-value-123456","token_type":"Bearer","expires_in":3600}`))
	}))
	defer tok.Close()
	spec := m.Auth
	spec.TokenURL = tok.URL + "/token"
	c, err = NewOAuthClient(context.Background(), spec, tok.Client())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exchange(context.Background(), "code-1", "", "https://trawl.example/connect/oauth/callback"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(form, "access_type") || strings.Contains(form, "prompt") || !strings.Contains(form, "code=code-1") {
		t.Errorf("the code exchange sent %s", form)
	}
	// YAML, and JSON back out.
	var y struct{ Auth AuthSpec }
	if err := yaml.Unmarshal([]byte("auth: {type: oauth2, flow: authorization_code, client_id: c, issuer: https://login.example, authorize_params: {prompt: select_account}}\n"), &y); err != nil || y.Auth.AuthorizeParams.Values().Get("prompt") != "select_account" || y.Auth.Validate() != nil {
		t.Errorf("yaml: %v %+v", err, y.Auth.OAuth2)
	}
	if b, _ := json.Marshal(y.Auth.AuthorizeParams); string(b) != `{"prompt":"select_account"}` {
		t.Errorf("marshal: %s", b)
	}
	// Refused: the request's own parameters, a value that is not a
	// string, and the client-credentials flow.
	for auth, want := range map[string]string{
		`{"type": "oauth2", "flow": "authorization_code", "issuer": "https://login.example", "client_id": "a", "authorize_params": {"redirect_uri": "https://evil.example"}}`: "may not set redirect_uri",
		`{"type": "oauth2", "flow": "authorization_code", "issuer": "https://login.example", "client_id": "a", "authorize_params": {"Scope": "all"}}`:                         "may not set Scope: trawl sets it (from scopes)",
		`{"type": "oauth2", "flow": "authorization_code", "issuer": "https://login.example", "client_id": "a", "authorize_params": {"prompt": 1}}`:                            "authorize_params must be an object of strings",
		`{"type": "oauth2", "flow": "authorization_code", "issuer": "https://login.example", "client_id": "a", "authorize_params": ["prompt"]}`:                               "authorize_params must be an object of strings",
		`{"type": "oauth2", "flow": "client_credentials", "token_url": "https://x.example/t", "client_id": "a", "client_secret": "b", "authorize_params": {"prompt": "x"}}`:   "authorize_params are for flow authorization_code",
	} {
		if _, err := ParseManifest(doc(auth)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", auth, err, want)
		}
	}
}

func mustQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// RFC 9207: an authorization response naming another issuer is refused;
// one naming none is refused only when the issuer's metadata says it
// always names itself; a client without an issuer takes any answer.
func TestOAuthCheckIssuer(t *testing.T) {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := strings.TrimPrefix(r.URL.Path, "/.well-known/oauth-authorization-server/")
		if tenant == r.URL.Path {
			http.NotFound(w, r)
			return
		}
		issuer := srv.URL + "/" + tenant
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/auth",
			"token_endpoint": issuer + "/token", "code_challenge_methods_supported": []string{"S256"},
			"authorization_response_iss_parameter_supported": tenant == "says"})
	}))
	defer srv.Close()
	ctx := context.Background()
	client := func(spec OAuth2) *OAuthClient {
		t.Helper()
		spec.Flow, spec.ClientID = FlowAuthorizationCode, "c"
		c, err := NewOAuthClient(ctx, AuthSpec{Type: AuthOAuth2, OAuth2: spec}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	says, silent := client(OAuth2{Issuer: srv.URL + "/says"}), client(OAuth2{Issuer: srv.URL + "/silent"})
	manual := client(OAuth2{AuthorizeURL: "https://as.example/auth", TokenURL: "https://as.example/token"})
	for _, tc := range []struct {
		c    *OAuthClient
		q    url.Values
		want string // "" accepted, else in the error
	}{
		{says, url.Values{"code": {"x"}, "iss": {srv.URL + "/says"}}, ""},
		{says, url.Values{"error": {"access_denied"}, "iss": {srv.URL + "/says"}}, ""},
		{says, url.Values{"code": {"x"}}, "does not name its server"},
		{says, url.Values{"code": {"x"}, "iss": {""}}, "names another server"},
		{says, url.Values{"code": {"x"}, "iss": {srv.URL + "/silent"}}, "names another server"},
		{says, url.Values{"code": {"x"}, "iss": {srv.URL + "/says/"}}, "names another server"}, // compared as strings, RFC 9207 §2.4
		{says, url.Values{"error": {"access_denied"}, "iss": {"https://evil.example"}}, "names another server"},
		{silent, url.Values{"code": {"x"}}, ""},
		{silent, url.Values{"code": {"x"}, "iss": {srv.URL + "/silent"}}, ""},
		{silent, url.Values{"code": {"x"}, "iss": {"https://evil.example"}}, "names another server"},
		{manual, url.Values{"code": {"x"}}, ""},
		{manual, url.Values{"code": {"x"}, "iss": {"https://evil.example"}}, ""},
	} {
		err := tc.c.CheckIssuer(tc.q)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %v: refused: %v", tc.c.Spec().Issuer, tc.q, err)
		case tc.want != "" && (err == nil || !errors.Is(err, ErrIssuerMismatch) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %v: %v, want %q", tc.c.Spec().Issuer, tc.q, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "evil"):
			t.Errorf("the refusal repeats the iss sent: %v", err)
		}
	}
}
