package deploy

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// OAuthCallbackPath is the one redirect URI of every OAuth connection:
// public_url + this path is what the client is registered with.
const OAuthCallbackPath = "/connect/oauth/callback"

type keyedError struct{ key, msg string }

// checkProviderOAuth refuses the OAuth settings a provider of your own
// API cannot use: its users have no connect links, so its organization
// credential may be a client-credentials token but not a user's.
func checkProviderOAuth(p ProviderConfig) *keyedError {
	if p.Auth.Type == tools.AuthOAuth2 && p.Auth.Flow == tools.FlowAuthorizationCode {
		return &keyedError{".auth.flow", "a provider's auth is the organization's credential: flow authorization_code is for toolkits (each user connects through a connect link); use client_credentials here"}
	}
	if p.RuntimeAuth.Type == tools.AuthOAuth2 {
		return &keyedError{".runtime_auth.type", "an OAuth access token the application passes in runtime_credentials goes as type bearer; oauth2 is for auth (client_credentials) or a toolkit's connections"}
	}
	return nil
}

var oauthEnvRef = regexp.MustCompile(`^\$\{([A-Za-z_][A-Za-z0-9_]*)\}$`)

// expandOAuthEnv expands a toolkit manifest's client_id and client_secret
// written as ${NAME}, so that the secret stays out of the manifest file.
func expandOAuthEnv(a *tools.AuthSpec) error {
	for _, f := range []struct {
		key string
		v   *string
	}{{"client_id", &a.ClientID}, {"client_secret", &a.ClientSecret}} {
		m := oauthEnvRef.FindStringSubmatch(strings.TrimSpace(*f.v))
		if m == nil {
			continue
		}
		v, ok := os.LookupEnv(m[1])
		if !ok || v == "" {
			return fmt.Errorf("auth.%s: the environment variable %s is unset or empty", f.key, m[1])
		}
		*f.v = v
	}
	return nil
}

// setupOAuth makes provider's OAuth client (discovering its endpoints
// from its issuer): a client-credentials one gives the invoker the
// organization's token; an authorization-code one is kept for the
// connections users make. An issuer that does not answer at start
// leaves the deployment degraded, not down: the client is unavailable
// (its calls refused with provider_unavailable, /readyz says so) and
// its metadata is read again in the background, with backoff, until it
// answers.
func (s *Deployment) setupOAuth(ctx context.Context, provider string, spec tools.AuthSpec) error {
	if spec.Type != tools.AuthOAuth2 {
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, oauthStartTimeout)
	defer cancel()
	c, err := tools.OpenOAuthClient(sctx, spec, tools.RedirectSafe(&http.Client{Timeout: 30 * time.Second}))
	if err != nil {
		return err
	}
	if why, down := c.Unavailable(); down {
		s.log.Warn("oauth authorization server unreachable at start: serving without it and retrying in the background",
			"provider", provider, "issuer", spec.Issuer, "why", why)
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			c.KeepDiscovering(s.ctx, oauthRetryMin, oauthRetryMax, s.log.With("provider", provider))
		}()
	}
	if s.authServers == nil {
		s.authServers = map[string]*tools.OAuthClient{}
	}
	s.authServers[provider] = c
	switch spec.Flow {
	case tools.FlowClientCredentials:
		s.invoker.SetOAuth(provider, c)
	case tools.FlowAuthorizationCode:
		if s.oauth == nil {
			s.oauth = map[string]*tools.OAuthClient{}
		}
		s.oauth[provider] = c
		s.invoker.AddSecrets(c.Secrets()...)
	}
	return nil
}

// How long the start waits for an issuer's metadata, and the bounds of
// the wait between two later tries (doubling, with jitter).
var (
	oauthStartTimeout = 10 * time.Second
	oauthRetryMin     = time.Second
	oauthRetryMax     = time.Minute
)
