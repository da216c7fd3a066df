package tools

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// orgToken is a provider's client-credentials token, fetched on first
// use and cached until shortly before it expires; one fetch at a time.
type orgToken struct {
	client   *OAuthClient
	provider string
	now      func() time.Time

	mu  sync.Mutex
	tok *oauth2.Token
	got time.Time // when tok was fetched
}

// token is the cached access token, fetched anew when it is (nearly)
// expired or is stale (the one a 401 refused).
func (o *orgToken) token(ctx context.Context, stale string) (string, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tok != nil && o.tok.AccessToken != stale && !expiring(o.tok.Expiry, o.got, o.now()) {
		return o.tok.AccessToken, false, nil
	}
	tok, err := o.client.ClientToken(ctx)
	var re *oauth2.RetrieveError
	// Not the authorization server's refusal: it was not reached, or
	// could not answer.
	unavailable := err != nil && (!errors.As(err, &re) || authServerTrouble(re))
	if unavailable && ctx.Err() == nil && o.tok != nil && o.tok.AccessToken != stale && o.now().Before(o.tok.Expiry) {
		// A new token could not be had now, but the one held works
		// until it expires: it is sent, and the next call asks again.
		return o.tok.AccessToken, false, nil
	}
	switch {
	case unavailable:
		return "", false, ProviderUnavailable(o.provider, OAuthFailure(err))
	case err != nil:
		return "", false, &RefusedError{Code: CodeNotConnected, Msg: "the organization's OAuth token could not be obtained: " + OAuthFailure(err)}
	}
	o.tok, o.got = tok, o.now()
	return tok.AccessToken, true, nil
}

// authServerTrouble reports a token endpoint's answer that is its own
// trouble rather than a refusal of trawl's client: a 5xx or 429, or
// temporarily_unavailable or server_error (RFC 6749 §4.1.2.1).
func authServerTrouble(re *oauth2.RetrieveError) bool {
	if re.Response != nil && (re.Response.StatusCode >= 500 || re.Response.StatusCode == http.StatusTooManyRequests) {
		return true
	}
	return re.ErrorCode == "temporarily_unavailable" || re.ErrorCode == "server_error"
}

// expiring reports whether a token that expires at exp (zero: never)
// and was obtained at got is to be replaced at now: within a quarter of
// its lifetime of the end, and at most a minute before it.
func expiring(exp, got, now time.Time) bool {
	if exp.IsZero() {
		return false
	}
	skew := min(time.Minute, exp.Sub(got)/4)
	return !now.Before(exp.Add(-skew))
}

// TokenExpiring is expiring for the connections store: whether a user's
// token obtained at got and expiring at exp is to be refreshed now.
func TokenExpiring(exp, got, now time.Time) bool { return expiring(exp, got, now) }

// SetOAuth gives provider's organization credential as an OAuth client
// (flow client_credentials): its token is fetched when first needed,
// cached until it nearly expires, and fetched again once when the
// upstream answers 401 for it. The client's secret joins the scrubber.
func (inv *Invoker) SetOAuth(provider string, c *OAuthClient) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.oauth == nil {
		inv.oauth = map[string]*orgToken{}
	}
	inv.oauth[provider] = &orgToken{client: c, provider: provider, now: time.Now}
	inv.secrets = append(inv.secrets, c.Secrets()...)
	inv.scrub, inv.perCall = nil, nil
}

func (inv *Invoker) orgOAuth(provider string) *orgToken {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.oauth[provider]
}

// orgOAuthToken is provider's client-credentials token ("" when it has
// none); a newly fetched one joins the scrubber's secrets.
func (inv *Invoker) orgOAuthToken(ctx context.Context, provider, stale string) (string, error) {
	o := inv.orgOAuth(provider)
	if o == nil {
		return "", nil
	}
	tok, fresh, err := o.token(ctx, stale)
	if err != nil {
		return "", err
	}
	if fresh {
		inv.RememberToken(provider, tok)
	}
	return tok, nil
}

// RememberToken keeps provider's newly obtained OAuth access token in the
// scrubber, with the one before it (a response in flight may hold it),
// forgetting older ones.
func (inv *Invoker) RememberToken(provider, tok string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.oauthTokens == nil {
		inv.oauthTokens = map[string][2]string{}
	}
	inv.oauthTokens[provider] = [2]string{tok, inv.oauthTokens[provider][0]}
	inv.scrub, inv.perCall = nil, nil
}

// TokenRefresher gets a fresh access token for a user's connection to
// provider when the upstream refused stale with a 401 (see
// WithTokenRefresh). An error that is a *RefusedError goes to the model
// as it is (a broken connection: reconnect).
type TokenRefresher func(ctx context.Context, provider, stale string) (string, error)

type refresherKey struct{}

// WithTokenRefresh lets the invoker refresh a runtime OAuth credential
// once when an upstream answers 401 for it.
func WithTokenRefresh(ctx context.Context, f TokenRefresher) context.Context {
	return context.WithValue(ctx, refresherKey{}, f)
}

// reauthorize decides, after a 401, whether the call goes once more with
// a fresh token: the organization's client-credentials token fetched
// anew, or the user's refreshed through the context's TokenRefresher.
// It answers the credential to send (runtime: the new one) and whether
// to retry; err refuses the call (the connection is broken).
func (inv *Invoker) reauthorize(ctx context.Context, req Request, resp *Response, used string) (string, bool, error) {
	if resp.Status != http.StatusUnauthorized || !TokenExpired(resp.Header) {
		return "", false, nil
	}
	a := inv.providerAuth(req.Tool.Provider)
	if req.Credential == "" {
		if a.Org.Type != AuthOAuth2 || inv.orgOAuth(req.Tool.Provider) == nil {
			return "", false, nil
		}
		if _, err := inv.orgOAuthToken(ctx, req.Tool.Provider, used); err != nil {
			return "", false, err
		}
		return "", true, nil
	}
	f, _ := ctx.Value(refresherKey{}).(TokenRefresher)
	if a.Runtime.Type != AuthOAuth2 || f == nil {
		return "", false, nil
	}
	fresh, err := f(ctx, req.Tool.Provider, req.Credential)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			return "", false, refused
		}
		return "", false, err
	}
	return fresh, fresh != "" && fresh != req.Credential, nil
}

// callSecrets are the secrets that go with a call's runtime credential
// without being sent (an OAuth connection's refresh token): the call's
// scrubber masks them as it masks the credential.
type callSecrets struct {
	mu   sync.Mutex
	list []string
}

type callSecretsKey struct{}

// WithCallSecrets gives the calls made with ctx secrets of their own,
// masked by their scrubber with the runtime credential; AddCallSecrets
// adds more on the way (a rotated refresh token).
func WithCallSecrets(ctx context.Context, secrets ...string) context.Context {
	return context.WithValue(ctx, callSecretsKey{}, &callSecrets{list: slices.Clone(secrets)})
}

// AddCallSecrets adds secrets to the ones WithCallSecrets gave ctx (none
// when it gave none).
func AddCallSecrets(ctx context.Context, secrets ...string) {
	if cs, ok := ctx.Value(callSecretsKey{}).(*callSecrets); ok {
		cs.mu.Lock()
		cs.list = append(cs.list, secrets...)
		cs.mu.Unlock()
	}
}

// callScrubber is the scrubber of a call made with ctx and runtime
// credential cred: the deployment's, cred's and the call's own secrets.
func (inv *Invoker) callScrubber(ctx context.Context, cred string) *Scrubber {
	runtime := []string{cred}
	if cs, ok := ctx.Value(callSecretsKey{}).(*callSecrets); ok {
		cs.mu.Lock()
		runtime = append(runtime, cs.list...)
		cs.mu.Unlock()
	}
	return inv.Scrubber(runtime...)
}
