package deploy

import (
	"strings"
	"testing"
)

func TestConfigOAuth(t *testing.T) {
	lookup := func(k string) (string, bool) {
		v, ok := map[string]string{"CC_SECRET": "s3cret"}[k]
		return v, ok
	}
	ok := "providers:\n  - id: crm\n    openapi: x.yaml\n    auth:\n      type: oauth2\n      flow: client_credentials\n      issuer: https://login.example\n      client_id: trawl\n      client_secret: ${CC_SECRET}\n      scopes: [crm.read]\n"
	cfg, err := ParseConfig("trawl.yaml", []byte(ok), lookup)
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Providers[0].Auth; a.ClientSecret != "s3cret" || a.Scopes != "crm.read" || a.Issuer != "https://login.example" {
		t.Errorf("auth: %+v", a.OAuth2)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"unknown oauth key", "providers:\n  - id: a\n    openapi: x\n    auth: {type: oauth2, flow: client_credentials, client_id: a, client_secret: b, tokenurl: x}\n",
			`trawl.yaml:4: providers[0].auth.tokenurl: unknown key "tokenurl" (did you mean "token_url"?)`},
		{"no flow", "providers:\n  - id: a\n    openapi: x\n    auth: {type: oauth2, client_id: a, token_url: 'https://t.example/t'}\n",
			"providers[0].auth: auth type oauth2 needs flow"},
		{"no token url", "providers:\n  - id: a\n    openapi: x\n    auth: {type: oauth2, flow: client_credentials, client_id: a, client_secret: b}\n",
			"needs token_url, or issuer to discover it"},
		{"authorization code on a provider", "providers:\n  - id: a\n    openapi: x\n    auth: {type: oauth2, flow: authorization_code, client_id: a, issuer: 'https://l.example'}\n",
			"providers[0].auth.flow: a provider's auth is the organization's credential: flow authorization_code is for toolkits"},
		{"oauth2 runtime auth", "providers:\n  - id: a\n    openapi: x\n    runtime_auth: {type: oauth2, flow: client_credentials, client_id: a, client_secret: b, token_url: 'https://t.example/t'}\n",
			"providers[0].runtime_auth.type: an OAuth access token the application passes"},
		{"oauth settings on bearer", "providers:\n  - id: a\n    openapi: x\n    auth: {type: bearer, client_id: a}\n",
			"providers[0].auth: auth type \"bearer\" takes no OAuth 2.0 settings"},
	} {
		_, err := ParseConfig("trawl.yaml", []byte(tc.text), lookup)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
