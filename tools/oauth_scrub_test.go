package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/trawl-dev/trawl/tools/leaktest"
)

// A token endpoint that echoes what it was sent — the refresh token, the
// PKCE verifier, the code, the client secret — in its error code, its
// description and its body: the errors of Refresh, Exchange and
// ClientToken hold none of them, in their text or their fields, and what
// the user is told (OAuthFailure) neither; the error stays an
// *oauth2.RetrieveError.
func TestOAuthTokenEndpointEchoIsScrubbed(t *testing.T) {
	const secret = "client-secret-3f9a1c"
	var sent []string
	var raw string // the last answer, as sent
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		var echo []string
		for _, k := range []string{"refresh_token", "code_verifier", "code", "client_secret"} {
			if v := r.PostForm.Get(k); v != "" {
				echo = append(echo, v)
			}
		}
		if _, pass, ok := r.BasicAuth(); ok {
			echo = append(echo, pass)
		}
		// Each also base64 (alone and at an offset inside a longer run),
		// percent-encoded character by character and JSON-escaped.
		var forms []string
		for _, v := range echo {
			var pct, js strings.Builder
			for i := range len(v) {
				fmt.Fprintf(&pct, "%%%02X", v[i])
				fmt.Fprintf(&js, `\u%04x`, v[i])
			}
			forms = append(forms, v, base64.StdEncoding.EncodeToString([]byte(v)),
				base64.RawURLEncoding.EncodeToString([]byte("k="+v+";")), pct.String(), js.String())
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo", strings.Join(forms, " "))
		w.WriteHeader(http.StatusBadRequest)
		desc, _ := json.Marshal("you sent " + strings.Join(forms, ", "))
		// The JSON escapes go in as written (an encoder would undo them).
		desc = []byte(strings.ReplaceAll(string(desc), `\\u`, `\u`))
		raw = fmt.Sprintf(`{"error":%q,"error_description":%s,"error_uri":%q}`, echo[0], desc, "https://as.example/e?t="+url.QueryEscape(echo[0]))
		_, _ = w.Write([]byte(raw))
	}))
	defer ts.Close()
	for _, method := range []string{ClientSecretBasic, ClientSecretPost} {
		for _, flow := range []string{FlowAuthorizationCode, FlowClientCredentials} {
			spec := AuthSpec{Type: AuthOAuth2, OAuth2: OAuth2{Flow: flow, ClientID: "trawl", ClientSecret: secret,
				AuthorizeURL: ts.URL + "/authorize", TokenURL: ts.URL + "/token", TokenAuthMethod: method}}
			if flow == FlowClientCredentials {
				spec.OAuth2.AuthorizeURL = ""
			}
			c, err := NewOAuthClient(context.Background(), spec, ts.Client())
			if err != nil {
				t.Fatal(err)
			}
			verifier := c.NewVerifier()
			refresh, code := "planted-refresh-7d2e9b41", "planted-code-a81c66"
			sent = []string{secret, refresh, verifier, code}
			errs := map[string]error{}
			if flow == FlowClientCredentials {
				_, errs["client token"] = c.ClientToken(context.Background())
			} else {
				_, errs["refresh"] = c.Refresh(context.Background(), refresh)
				_, errs["exchange"] = c.Exchange(context.Background(), code, verifier, "https://trawl.example/cb")
			}
			for name, err := range errs {
				var re *oauth2.RetrieveError
				if !errors.As(err, &re) {
					t.Fatalf("%s %s: %T %v; want an *oauth2.RetrieveError", method, name, err, err)
				}
				texts := map[string]string{"error": err.Error(), "body": string(re.Body), "code": re.ErrorCode,
					"description": re.ErrorDescription, "uri": re.ErrorURI, "words": OAuthFailure(err)}
				if re.Response != nil {
					texts["header"] = re.Response.Header.Get("X-Echo")
				}
				if !strings.Contains(re.ErrorDescription, Mask) {
					t.Errorf("%s %s: the description %q masks nothing", method, name, re.ErrorDescription)
				}
				if !strings.Contains(raw, `\u00`) || len(leaktest.Find([]byte(raw), secret)) < 5 {
					t.Errorf("%s %s: the answer does not echo the secret in its five spellings (the test proves less): %s", method, name, raw)
				}
				for field, text := range texts {
					for _, s := range sent {
						if s == "" {
							continue
						}
						if found := leaktest.Find([]byte(text), s); len(found) > 0 {
							t.Errorf("%s %s: its %s holds %q: %s", method, name, field, s, found[0])
						}
					}
				}
			}
		}
	}
}

// A call's own secrets (WithCallSecrets: an OAuth connection's refresh
// token, never sent) are masked in what the upstream answers like its
// runtime credential, and so is one added on the way (AddCallSecrets: a
// rotated refresh token).
func TestCallSecretsAreScrubbed(t *testing.T) {
	const access, refresh, rotated = "access-token-51c0e2", "refresh-token-9b77d1", "rotated-refresh-4e12aa"
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Echo", refresh)
		_, _ = w.Write([]byte(`{"auth":"` + r.Header.Get("Authorization") + `","refresh":"` + refresh + `","rotated":"` + rotated + `"}`))
	}))
	defer api.Close()
	inv := NewInvoker(InvokerOptions{})
	inv.SetAuth("crm", ProviderAuth{Runtime: AuthSpec{Type: AuthBearer}})
	tool := &Tool{ID: "crm.whoami", Provider: "crm", Method: "GET", Path: "/whoami", Origin: api.URL}

	resp, err := inv.Call(context.Background(), Request{Tool: tool, Credential: access})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp.Body), refresh) {
		t.Fatalf("without call secrets the refresh token is not echoed (the test proves nothing): %s", resp.Body)
	}
	ctx := WithCallSecrets(context.Background(), refresh)
	resp, err = inv.Call(ctx, Request{Tool: tool, Credential: access})
	if err != nil {
		t.Fatal(err)
	}
	body := string(resp.Body)
	if strings.Contains(body, access) || strings.Contains(body, refresh) || resp.Header.Get("X-Echo") != Mask {
		t.Errorf("with call secrets: %s %v", body, resp.Header)
	}
	if !strings.Contains(body, rotated) {
		t.Fatalf("the rotated token is masked before it was added: %s", body)
	}
	AddCallSecrets(ctx, rotated)
	resp, err = inv.Call(ctx, Request{Tool: tool, Credential: access})
	if err != nil {
		t.Fatal(err)
	}
	if body := string(resp.Body); strings.Contains(body, rotated) || strings.Contains(body, refresh) {
		t.Errorf("after AddCallSecrets: %s", body)
	}
}
