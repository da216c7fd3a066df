package tools

import (
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"gopkg.in/yaml.v3"
)

// OAuth 2.0 flows an AuthOAuth2 spec may name.
const (
	// FlowAuthorizationCode: each user connects their own account through
	// a connect link (authorization code with PKCE); the tokens are kept
	// sealed per user and refreshed.
	FlowAuthorizationCode = "authorization_code"
	// FlowClientCredentials: one organization token, fetched with the
	// client's own credentials and cached until it expires.
	FlowClientCredentials = "client_credentials"
)

// Token endpoint client authentication methods (RFC 7591 names).
const (
	ClientSecretBasic = "client_secret_basic"
	ClientSecretPost  = "client_secret_post"
)

// OAuth2 is the OAuth 2.0 part of an AuthSpec of type oauth2:
//
//	auth: {type: oauth2, flow: authorization_code, issuer: https://login.example,
//	       client_id: …, client_secret: ${CLIENT_SECRET}, scopes: [crm.read]}
//
// With Issuer, the authorization server's RFC 8414 metadata fills the
// URLs left empty. Its ClientSecret is a secret (the scrubber masks it).
type OAuth2 struct {
	Flow         string `json:"flow,omitempty" yaml:"flow,omitempty"`
	Issuer       string `json:"issuer,omitempty" yaml:"issuer,omitempty"`
	AuthorizeURL string `json:"authorize_url,omitempty" yaml:"authorize_url,omitempty"`
	TokenURL     string `json:"token_url,omitempty" yaml:"token_url,omitempty"`
	RevokeURL    string `json:"revoke_url,omitempty" yaml:"revoke_url,omitempty"`
	ClientID     string `json:"client_id,omitempty" yaml:"client_id,omitempty"`
	ClientSecret string `json:"client_secret,omitempty" yaml:"client_secret,omitempty"`
	Scopes       Scopes `json:"scopes,omitempty" yaml:"scopes,omitempty"`
	// Audience is sent as the audience parameter (Auth0 and others name
	// the API a token is for that way).
	Audience string `json:"audience,omitempty" yaml:"audience,omitempty"`
	// AuthorizeParams are extra parameters of the authorization request
	// only, for providers that need them to issue a refresh token or to
	// ask again (Google: {access_type: offline, prompt: consent}).
	AuthorizeParams Params `json:"authorize_params,omitempty" yaml:"authorize_params,omitempty"`
	// PKCE false turns PKCE off for an authorization server that refuses
	// it. Zero: on (S256).
	PKCE *bool `json:"pkce,omitempty" yaml:"pkce,omitempty"`
	// TokenAuthMethod is how the client authenticates at the token and
	// revocation endpoints. Zero: client_secret_basic.
	TokenAuthMethod string `json:"token_auth_method,omitempty" yaml:"token_auth_method,omitempty"`
}

// Scopes are OAuth scopes, written as a list or as one space-separated
// string; kept space-separated, so that an AuthSpec stays comparable.
type Scopes string

// List is the scopes one by one.
func (s Scopes) List() []string { return strings.Fields(string(s)) }

// UnmarshalJSON accepts a list of strings or one string.
func (s *Scopes) UnmarshalJSON(b []byte) error {
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		*s = Scopes(strings.Join(list, " "))
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err != nil {
		return errors.New("scopes must be a list of strings or one space-separated string")
	}
	*s = Scopes(strings.Join(strings.Fields(one), " "))
	return nil
}

// MarshalJSON writes the list.
func (s Scopes) MarshalJSON() ([]byte, error) { return json.Marshal(s.List()) }

// UnmarshalYAML accepts a sequence of strings or one string.
func (s *Scopes) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.SequenceNode:
		var list []string
		if err := n.Decode(&list); err != nil {
			return errors.New("scopes must be a list of strings or one space-separated string")
		}
		*s = Scopes(strings.Join(list, " "))
	case yaml.ScalarNode:
		*s = Scopes(strings.Join(strings.Fields(n.Value), " "))
	default:
		return errors.New("scopes must be a list of strings or one space-separated string")
	}
	return nil
}

// Params are extra request parameters, written as a map of strings;
// kept URL-encoded (sorted), so that an AuthSpec stays comparable.
type Params string

// Values is the parameters as url.Values.
func (p Params) Values() url.Values {
	v, _ := url.ParseQuery(string(p))
	return v
}

func paramsFrom(m map[string]string) Params {
	v := url.Values{}
	for k, x := range m {
		v.Set(k, x)
	}
	return Params(v.Encode())
}

// UnmarshalJSON accepts an object of strings.
func (p *Params) UnmarshalJSON(b []byte) error {
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return errors.New(`authorize_params must be an object of strings, such as {"access_type": "offline"}`)
	}
	*p = paramsFrom(m)
	return nil
}

// MarshalJSON writes the object.
func (p Params) MarshalJSON() ([]byte, error) {
	m := map[string]string{}
	for k, v := range p.Values() {
		m[k] = v[0]
	}
	return json.Marshal(m)
}

// UnmarshalYAML accepts a mapping of strings.
func (p *Params) UnmarshalYAML(n *yaml.Node) error {
	var m map[string]string
	if n.Kind != yaml.MappingNode || n.Decode(&m) != nil {
		return errors.New("authorize_params must be a mapping of strings, such as {access_type: offline}")
	}
	*p = paramsFrom(m)
	return nil
}

// reservedAuthorizeParams are the authorization request's own
// parameters, which authorize_params may not set.
var reservedAuthorizeParams = map[string]string{
	"client_id": "client_id", "redirect_uri": "the callback", "response_type": "flow", "state": "the connect link",
	"scope": "scopes", "code_challenge": "pkce", "code_challenge_method": "pkce", "resource": "the MCP server's URL", "audience": "audience",
}

// pkce reports whether the authorization-code flow uses PKCE.
func (o OAuth2) pkce() bool { return o.PKCE == nil || *o.PKCE }

func (a AuthSpec) validateOAuth2() error {
	o := a.OAuth2
	if a.Token != "" || a.Username != "" || a.Password != "" {
		return errors.New("auth type oauth2 takes no token, username or password: trawl obtains the access token (set client_id and client_secret)")
	}
	switch o.Flow {
	case FlowAuthorizationCode, FlowClientCredentials:
	case "":
		return fmt.Errorf("auth type oauth2 needs flow: %s (each user connects their account) or %s (one organization token)", FlowAuthorizationCode, FlowClientCredentials)
	default:
		return fmt.Errorf("auth flow %q is not one of %s, %s", o.Flow, FlowAuthorizationCode, FlowClientCredentials)
	}
	if o.ClientID == "" {
		return errors.New("auth type oauth2 needs client_id (the client registered at the authorization server)")
	}
	for k := range o.AuthorizeParams.Values() {
		if by, ok := reservedAuthorizeParams[strings.ToLower(k)]; ok {
			return fmt.Errorf("authorize_params may not set %s: trawl sets it (from %s)", k, by)
		}
	}
	if o.AuthorizeParams != "" && o.Flow != FlowAuthorizationCode {
		return errors.New("authorize_params are for flow authorization_code (the authorization request)")
	}
	switch o.TokenAuthMethod {
	case "", ClientSecretBasic, ClientSecretPost:
	default:
		return fmt.Errorf("token_auth_method %q is not one of %s, %s", o.TokenAuthMethod, ClientSecretBasic, ClientSecretPost)
	}
	if o.Flow == FlowClientCredentials {
		switch {
		case o.ClientSecret == "":
			return errors.New("flow client_credentials needs client_secret")
		case o.AuthorizeURL != "":
			return errors.New("flow client_credentials takes no authorize_url (there is no user to send to it)")
		case o.PKCE != nil:
			return errors.New("flow client_credentials takes no pkce (PKCE is for the authorization-code flow)")
		}
	}
	for _, u := range []struct{ key, v string }{{"issuer", o.Issuer}, {"authorize_url", o.AuthorizeURL}, {"token_url", o.TokenURL}, {"revoke_url", o.RevokeURL}} {
		if u.v == "" {
			continue
		}
		if err := checkOAuthURL(u.v); err != nil {
			return fmt.Errorf("%s: %w", u.key, err)
		}
	}
	if o.Issuer == "" {
		switch {
		case o.TokenURL == "":
			return errors.New("auth type oauth2 needs token_url, or issuer to discover it (RFC 8414 metadata)")
		case o.Flow == FlowAuthorizationCode && o.AuthorizeURL == "":
			return errors.New("flow authorization_code needs authorize_url, or issuer to discover it (RFC 8414 metadata)")
		}
	}
	return nil
}

// checkOAuthURL accepts an absolute https URL, or http on a loopback
// host (development and tests).
func checkOAuthURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("%q is not an absolute http(s) URL", raw)
	}
	if u.User != nil {
		return errors.New("the URL must not carry user:password@ (client credentials go in client_id and client_secret)")
	}
	if u.Scheme == "http" && !loopbackHost(u.Hostname()) {
		return fmt.Errorf("%q must be https (plain http is for loopback hosts only)", raw)
	}
	return nil
}

func loopbackHost(h string) bool {
	return h == "localhost" || h == "::1" || strings.HasPrefix(h, "127.")
}

// OAuthClient is one provider's OAuth 2.0 client: its endpoints resolved
// and golang.org/x/oauth2 doing every exchange. It is safe for
// concurrent use.
type OAuthClient struct {
	conf OAuth2 // as configured: with an issuer, URLs may be left to discovery
	http *http.Client
	// ep are the endpoints resolved; nil while the issuer's metadata has
	// not been read (OpenOAuthClient), and why says what failed.
	ep  atomic.Pointer[oauthEndpoints]
	why atomic.Pointer[string]
	// resource is the RFC 8707 resource indicator sent with every token
	// request ("" none): an MCP server's URL.
	resource string
	// setup, when set, completes conf before its issuer's metadata is
	// read: an MCP server's authorization server found and its client
	// registered (newMCPOAuthClient); stale is a registered client_id the
	// server refused, to be replaced (Registrar).
	setup func(ctx context.Context, stale string) (OAuth2, error)
	// stale is the registered client_id the token endpoint last refused
	// (invalid_client) until a setup replaces it (reregister).
	stale atomic.Pointer[string]
	// kept, when set, answers the client_id the deployment keeps
	// registered now (another replica may have replaced it): Resume
	// takes that one when it is not this client's.
	kept func(ctx context.Context, issuer string) (string, error)
}

// ErrClientReregistered is (wrapped) the error of a token request the
// authorization server refused with invalid_client when trawl's client
// there was one trawl registered itself (RFC 7591): the server no longer
// knows it (or its secret expired), so trawl registers a new one. The
// user's grant belonged to the old client and is gone with it: the user
// connects again, with the new client.
var ErrClientReregistered = errors.New("the authorization server no longer accepts the client trawl registered there; trawl registers a new one")

type clientReregistered struct{ err error }

func (e *clientReregistered) Error() string {
	return ErrClientReregistered.Error() + ": " + e.err.Error()
}
func (e *clientReregistered) Unwrap() []error { return []error{ErrClientReregistered, e.err} }

// reregister answers err, a token request's with the client of ep; when
// it is invalid_client, trawl registered that client, it worked before,
// and a probe of the token endpoint with the same client (a refresh
// token that cannot exist) is refused as invalid_client too, the
// authorization server no longer knows the client: it is dropped (its
// endpoints unresolved) and set up again at once, a new client
// registered, and the error says so (ErrClientReregistered). A client
// that never worked (one just registered) is not replaced again, so a
// refusal that is not the server forgetting the client (a proxy, an
// authentication method it will not take) registers one client at
// most; a refusal the probe does not repeat changes nothing. A setup
// that fails now is tried again by the next token request or connect
// page (Resume).
func (c *OAuthClient) reregister(ctx context.Context, ep *oauthEndpoints, err error) error {
	if err == nil || c.setup == nil || c.conf.ClientID != "" || !invalidClient(err) || !ep.worked.Load() && time.Since(ep.made) < reregisterAfter {
		return err
	}
	if c.ep.Load() == ep && !c.forgotten(ctx, ep) {
		return err
	}
	if c.ep.CompareAndSwap(ep, nil) {
		id := ep.spec.ClientID
		c.stale.Store(&id)
		why := "it no longer accepts the client trawl registered there; registering a new one"
		c.why.Store(&why)
		_ = c.Discover(ctx)
	}
	return &clientReregistered{err: err}
}

// reregisterAfter: a client that has not worked in this process (kept
// from before a restart) may be replaced once it is this old here.
var reregisterAfter = 10 * time.Minute

func invalidClient(err error) bool {
	var re *oauth2.RetrieveError
	return errors.As(err, &re) && re.ErrorCode == "invalid_client"
}

// forgotten reports whether the token endpoint refuses ep's client
// itself: a refresh with a token no one issued is answered invalid_grant
// by a server that knows the client, invalid_client by one that does
// not.
func (c *OAuthClient) forgotten(ctx context.Context, ep *oauthEndpoints) bool {
	_, err := c.refresh(ctx, ep, "trawl-probe-"+crand.Text())
	return invalidClient(err)
}

// Resume sets the client up again when a re-registration (reregister)
// has not completed yet, or when the deployment now keeps another
// registered client than this one (SetKept: another replica replaced
// it); otherwise it does nothing. A connect page calls it before it
// asks whether the client is Unavailable.
func (c *OAuthClient) Resume(ctx context.Context) {
	if ep := c.ep.Load(); ep != nil && c.kept != nil && c.setup != nil && c.conf.ClientID == "" {
		if id, err := c.kept(ctx, ep.spec.Issuer); err == nil && id != "" && id != ep.spec.ClientID && c.ep.CompareAndSwap(ep, nil) {
			old := ep.spec.ClientID
			c.stale.Store(&old)
		}
	}
	if c.ep.Load() == nil && c.stale.Load() != nil {
		_ = c.Discover(ctx)
	}
}

// SetKept gives a client trawl registers the deployment's record of the
// client_id registered now (Resume). Call it before the client is used.
func (c *OAuthClient) SetKept(kept func(ctx context.Context, issuer string) (string, error)) {
	c.kept = kept
}

// oauthEndpoints are a client's settings, its URLs resolved, and how it
// authenticates at the token endpoint.
type oauthEndpoints struct {
	// worked: a token request with this client succeeded (reregister
	// replaces only a client that worked, never one just registered).
	worked atomic.Bool
	made   time.Time // when this process set it up
	spec   OAuth2
	method string // client_secret_basic or client_secret_post
	// issParam: the issuer's metadata says every authorization response
	// names it in iss (RFC 9207).
	issParam bool
}

// ErrAuthServerUnavailable is (wrapped) the error of every exchange of a
// client whose authorization server's metadata could not be read yet
// (OpenOAuthClient): the server did not answer at start.
var ErrAuthServerUnavailable = errors.New("authorization server unavailable")

// NewOAuthClient resolves spec's endpoints — from the authorization
// server's metadata when spec names an issuer — and returns its client.
// hc sends every request to the authorization server (nil: a client of
// its own with a 30 s timeout).
func NewOAuthClient(ctx context.Context, spec AuthSpec, hc *http.Client) (*OAuthClient, error) {
	c, err := newOAuthClient(spec, hc)
	if err != nil {
		return nil, err
	}
	if err := c.Discover(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// OpenOAuthClient is NewOAuthClient for a deployment that starts whether
// or not the authorization server answers: a spec that is wrong is an
// error, but an issuer whose metadata cannot be read now is not — the
// client is then unavailable (Unavailable says why; every exchange fails
// with ErrAuthServerUnavailable) until Discover or KeepDiscovering reads
// it.
func OpenOAuthClient(ctx context.Context, spec AuthSpec, hc *http.Client) (*OAuthClient, error) {
	c, err := newOAuthClient(spec, hc)
	if err != nil {
		return nil, err
	}
	_ = c.Discover(ctx) // kept in Unavailable
	return c, nil
}

func newOAuthClient(spec AuthSpec, hc *http.Client) (*OAuthClient, error) {
	if spec.Type != AuthOAuth2 {
		return nil, fmt.Errorf("auth type %q is not %s", spec.Type, AuthOAuth2)
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &OAuthClient{conf: spec.OAuth2, http: hc}, nil
}

// Discover resolves the client's endpoints, reading the issuer's
// metadata when the spec names one (again, when an earlier try failed);
// a client whose endpoints are resolved answers nil at once.
func (c *OAuthClient) Discover(ctx context.Context) error {
	if c.ep.Load() != nil {
		return nil
	}
	o := c.conf
	stale := c.stale.Load()
	if c.setup != nil {
		id := ""
		if stale != nil {
			id = *stale
		}
		spec, err := c.setup(ctx, id)
		if err != nil {
			why := setupCause(err)
			c.why.Store(&why)
			return err
		}
		o = spec
	}
	issParam := false
	if o.Issuer != "" {
		meta, err := discoverIssuer(ctx, o.Issuer, c.http)
		if err != nil {
			why := "its metadata could not be read: " + safeCause(err)
			c.why.Store(&why)
			return err
		}
		fill := func(dst *string, v string) {
			if *dst == "" {
				*dst = v
			}
		}
		fill(&o.AuthorizeURL, meta.AuthorizationEndpoint)
		fill(&o.TokenURL, meta.TokenEndpoint)
		fill(&o.RevokeURL, meta.RevocationEndpoint)
		if o.TokenAuthMethod == "" && len(meta.TokenEndpointAuthMethodsSupported) > 0 &&
			!slices.Contains(meta.TokenEndpointAuthMethodsSupported, ClientSecretBasic) && slices.Contains(meta.TokenEndpointAuthMethodsSupported, ClientSecretPost) {
			o.TokenAuthMethod = ClientSecretPost
		}
		var err2 error
		for _, u := range []struct{ key, discovered, v string }{
			{"authorization_endpoint", meta.AuthorizationEndpoint, o.AuthorizeURL},
			{"token_endpoint", meta.TokenEndpoint, o.TokenURL},
			{"revocation_endpoint", meta.RevocationEndpoint, o.RevokeURL},
		} {
			// A URL the metadata gave (not one the config set) is held to
			// the config's rule: the client secret and the codes go there.
			if u.v != "" && u.v == u.discovered && err2 == nil {
				if err := checkOAuthURL(u.v); err != nil {
					err2 = fmt.Errorf("issuer %s: its metadata's %s %w", o.Issuer, u.key, err)
				}
			}
		}
		switch {
		case err2 != nil:
		case o.TokenURL == "":
			err2 = fmt.Errorf("issuer %s: its metadata names no token_endpoint; set token_url", o.Issuer)
		case o.Flow == FlowAuthorizationCode && o.AuthorizeURL == "":
			err2 = fmt.Errorf("issuer %s: its metadata names no authorization_endpoint; set authorize_url", o.Issuer)
		}
		if err2 != nil {
			why := err2.Error()
			c.why.Store(&why)
			return err2
		}
		issParam = meta.AuthorizationResponseIssParameterSupported
	}
	ep := &oauthEndpoints{spec: o, method: o.TokenAuthMethod, issParam: issParam, made: time.Now()}
	if ep.method == "" {
		ep.method = ClientSecretBasic
	}
	if c.ep.CompareAndSwap(nil, ep) {
		c.stale.CompareAndSwap(stale, nil)
	}
	return nil
}

// Unavailable reports whether the client's endpoints are still unknown
// (its issuer's metadata could not be read), and why.
func (c *OAuthClient) Unavailable() (string, bool) {
	if c.ep.Load() != nil {
		return "", false
	}
	if why := c.why.Load(); why != nil {
		return *why, true
	}
	return "its metadata has not been read yet", true
}

// KeepDiscovering tries Discover until it succeeds or ctx ends, waiting
// longer between attempts (doubling from min to max, with jitter, as MCP
// servers are reconnected); log hears of each failure and of the
// success.
func (c *OAuthClient) KeepDiscovering(ctx context.Context, lo, hi time.Duration, log *slog.Logger) {
	delay := lo
	for attempt := 1; ; attempt++ {
		err := c.Discover(ctx)
		if err == nil {
			log.Info("oauth authorization server reached: its connections work", "issuer", c.Spec().Issuer, "attempt", attempt)
			return
		}
		if ctx.Err() != nil {
			return
		}
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay)))
		log.Warn("oauth authorization server unreachable; trying again", "issuer", c.conf.Issuer, "resource", c.resource, "attempt", attempt,
			"in", wait.Round(time.Millisecond), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		delay = min(2*delay, hi)
	}
}

// endpoints are the resolved endpoints, or ErrAuthServerUnavailable.
func (c *OAuthClient) endpoints() (*oauthEndpoints, error) {
	if ep := c.ep.Load(); ep != nil {
		return ep, nil
	}
	why, _ := c.Unavailable()
	return nil, &authServerDown{issuer: c.conf.Issuer, resource: c.resource, why: why}
}

// setupCause words why an MCP server's OAuth setup failed: a transport
// error without its URL; trawl's own words (a server that publishes no
// metadata, offers no registration, refused it) as they are.
func setupCause(err error) string {
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return safeCause(err)
	}
	return err.Error()
}

// authServerDown is ErrAuthServerUnavailable with the issuer and why.
// Its issuer is "" for an MCP server's authorization server not found
// yet (resource is the server's URL).
type authServerDown struct{ issuer, resource, why string }

// name names the authorization server: its issuer, or whose it is.
func (e *authServerDown) name() string {
	if e.issuer == "" {
		return "the one of MCP server " + e.resource
	}
	return e.issuer
}

func (e *authServerDown) Error() string {
	return fmt.Sprintf("%s: authorization server %s has not been usable since trawl started (%s)", ErrAuthServerUnavailable, e.name(), e.why)
}

func (e *authServerDown) Is(target error) bool { return target == ErrAuthServerUnavailable }

// discoverIssuer reads an issuer's authorization server metadata: RFC
// 8414's well-known URI, then OpenID Connect Discovery's (both with the
// issuer's path after the well-known part, then OpenID's after it).
func discoverIssuer(ctx context.Context, issuer string, hc *http.Client) (*oauthex.AuthServerMeta, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("issuer %q does not parse", issuer)
	}
	path := strings.TrimRight(u.Path, "/")
	root := u.Scheme + "://" + u.Host
	candidates := []string{
		root + "/.well-known/oauth-authorization-server" + path,
		root + "/.well-known/openid-configuration" + path,
	}
	if path != "" {
		candidates = append(candidates, root+path+"/.well-known/openid-configuration")
	}
	var errs []error
	for _, m := range candidates {
		meta, err := oauthex.GetAuthServerMeta(ctx, m, issuer, hc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if meta != nil {
			return meta, nil
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("issuer %s: its metadata could not be read: %w", issuer, errors.Join(errs...))
	}
	return nil, fmt.Errorf("issuer %s publishes no authorization server metadata (RFC 8414 or OpenID Connect Discovery); set authorize_url and token_url instead", issuer)
}

// Spec is the client's settings, its URLs resolved (as configured while
// the client is Unavailable).
func (c *OAuthClient) Spec() OAuth2 {
	if ep := c.ep.Load(); ep != nil {
		return ep.spec
	}
	return c.conf
}

func (ep *oauthEndpoints) config(redirectURI string) *oauth2.Config {
	style := oauth2.AuthStyleInHeader
	if ep.method == ClientSecretPost {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID: ep.spec.ClientID, ClientSecret: ep.spec.ClientSecret, RedirectURL: redirectURI,
		Scopes:   ep.spec.Scopes.List(),
		Endpoint: oauth2.Endpoint{AuthURL: ep.spec.AuthorizeURL, TokenURL: ep.spec.TokenURL, AuthStyle: style},
	}
}

func (c *OAuthClient) ctx(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.http)
}

// extra are the parameters the authorization and code-exchange requests
// carry beside OAuth's own: the audience, and the resource indicator
// (RFC 8707) of an MCP server's client.
func (c *OAuthClient) extra() []oauth2.AuthCodeOption {
	var out []oauth2.AuthCodeOption
	if c.conf.Audience != "" {
		out = append(out, oauth2.SetAuthURLParam("audience", c.conf.Audience))
	}
	if c.resource != "" {
		out = append(out, oauth2.SetAuthURLParam("resource", c.resource))
	}
	return out
}

// NewVerifier is a fresh PKCE code verifier ("" when the client does not
// use PKCE).
func (c *OAuthClient) NewVerifier() string {
	if !c.conf.pkce() {
		return ""
	}
	return oauth2.GenerateVerifier()
}

// AuthCodeURL is where the user's browser goes to authorize: state, the
// S256 challenge of verifier (when not ""), and redirectURI. It fails
// only while the client is Unavailable.
func (c *OAuthClient) AuthCodeURL(state, verifier, redirectURI string) (string, error) {
	ep, err := c.endpoints()
	if err != nil {
		return "", err
	}
	opts := c.extra()
	for k, v := range c.conf.AuthorizeParams.Values() {
		opts = append(opts, oauth2.SetAuthURLParam(k, v[0]))
	}
	if verifier != "" {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	return ep.config(redirectURI).AuthCodeURL(state, opts...), nil
}

// ErrIssuerMismatch is (wrapped) CheckIssuer's refusal of an
// authorization response that another authorization server may have sent.
var ErrIssuerMismatch = errors.New("the sign-in's answer does not come from the expected authorization server")

// CheckIssuer holds an authorization response (the callback's query) to
// RFC 9207, the defence against mix-up attacks: a client with an issuer
// refuses an iss other than that issuer, and a missing iss when the
// issuer's metadata says it always sends one; the response is then not
// used at all (no code exchanged, no error text repeated). A client
// configured with URLs and no issuer has nothing to compare with and
// takes any answer, as before. The iss sent is never repeated: it is
// whatever the request says.
func (c *OAuthClient) CheckIssuer(q url.Values) error {
	ep := c.ep.Load()
	if ep == nil || ep.spec.Issuer == "" {
		return nil
	}
	iss, present := q.Get("iss"), q.Has("iss")
	switch {
	case present && iss != ep.spec.Issuer:
		return fmt.Errorf("%w: it names another server (iss), not %s", ErrIssuerMismatch, ep.spec.Issuer)
	case !present && ep.issParam:
		return fmt.Errorf("%w: it does not name its server (iss), which %s always does", ErrIssuerMismatch, ep.spec.Issuer)
	}
	return nil
}

// Exchange trades an authorization code (and its PKCE verifier) for
// tokens.
func (c *OAuthClient) Exchange(ctx context.Context, code, verifier, redirectURI string) (*oauth2.Token, error) {
	c.Resume(ctx)
	ep, err := c.endpoints()
	if err != nil {
		return nil, err
	}
	opts := c.extra()
	if verifier != "" {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	tok, err := ep.config(redirectURI).Exchange(c.ctx(ctx), code, opts...)
	if err == nil {
		ep.worked.Store(true)
	}
	return tok, c.reregister(ctx, ep, c.scrubError(err, code, verifier))
}

// Refresh trades a refresh token for new tokens. The answer's refresh
// token is the rotated one, or the same when the server does not rotate.
func (c *OAuthClient) Refresh(ctx context.Context, refresh string) (*oauth2.Token, error) {
	if refresh == "" {
		return nil, ErrNoRefreshToken
	}
	c.Resume(ctx)
	ep, err := c.endpoints()
	if err != nil {
		return nil, err
	}
	tok, err := c.refresh(ctx, ep, refresh)
	if err == nil {
		ep.worked.Store(true)
	}
	return tok, c.reregister(ctx, ep, c.scrubError(err, refresh))
}

// refresh sends a refresh request with ep's client.
func (c *OAuthClient) refresh(ctx context.Context, ep *oauthEndpoints, refresh string) (*oauth2.Token, error) {
	hctx := c.ctx(ctx)
	if c.resource != "" {
		// RFC 8707 §2.2: the refresh names the resource too (x/oauth2
		// takes no parameters for a refresh; the request gets it on the
		// way).
		hc := *c.http
		hc.Transport = resourceParam{next: c.http.Transport, tokenURL: ep.spec.TokenURL, resource: c.resource}
		hctx = context.WithValue(ctx, oauth2.HTTPClient, &hc)
	}
	return ep.config("").TokenSource(hctx, &oauth2.Token{RefreshToken: refresh, Expiry: time.Unix(1, 0)}).Token()
}

// resourceParam adds the resource indicator to a refresh request sent to
// the token endpoint.
type resourceParam struct {
	next               http.RoundTripper
	tokenURL, resource string
}

func (r resourceParam) RoundTrip(req *http.Request) (*http.Response, error) {
	next := r.next
	if next == nil {
		next = http.DefaultTransport
	}
	if req.Method != http.MethodPost || req.URL.String() != r.tokenURL || req.Body == nil {
		return next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err == nil && form.Get("grant_type") == "refresh_token" && form.Get("resource") == "" {
		form.Set("resource", r.resource)
		body = []byte(form.Encode())
	}
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(strings.NewReader(string(body))), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(body))), nil }
	return next.RoundTrip(out)
}

// ClientToken fetches a client-credentials token.
func (c *OAuthClient) ClientToken(ctx context.Context) (*oauth2.Token, error) {
	ep, err := c.endpoints()
	if err != nil {
		return nil, err
	}
	style := oauth2.AuthStyleInHeader
	if ep.method == ClientSecretPost {
		style = oauth2.AuthStyleInParams
	}
	cc := clientcredentials.Config{ClientID: ep.spec.ClientID, ClientSecret: ep.spec.ClientSecret,
		TokenURL: ep.spec.TokenURL, Scopes: ep.spec.Scopes.List(), AuthStyle: style}
	cc.EndpointParams = url.Values{}
	if c.conf.Audience != "" {
		cc.EndpointParams.Set("audience", c.conf.Audience)
	}
	if c.resource != "" {
		cc.EndpointParams.Set("resource", c.resource)
	}
	tok, err := cc.Token(c.ctx(ctx))
	return tok, c.scrubError(err)
}

// scrubError masks in a token request's error the client's secrets and
// these (the refresh token, PKCE verifier or code it sent), which a token
// endpoint may echo in its answer. A token endpoint's *oauth2.RetrieveError
// keeps its type, with its body, fields and headers masked.
func (c *OAuthClient) scrubError(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	s := NewScrubber(c.Secrets()...).With(secrets...)
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return s.Error(err)
	}
	out := &oauth2.RetrieveError{Body: s.Bytes(re.Body), ErrorCode: s.String(re.ErrorCode),
		ErrorDescription: s.String(re.ErrorDescription), ErrorURI: s.String(re.ErrorURI)}
	if re.Response != nil {
		out.Response = &http.Response{Status: s.String(re.Response.Status), StatusCode: re.Response.StatusCode,
			Proto: re.Response.Proto, Header: s.Header(re.Response.Header)}
	}
	return out
}

// CanRevoke reports whether the provider has a revocation endpoint (or,
// while the client is Unavailable, may have one: Revoke then fails).
func (c *OAuthClient) CanRevoke() bool {
	ep := c.ep.Load()
	return ep == nil && (c.conf.Issuer != "" || c.setup != nil) || ep != nil && ep.spec.RevokeURL != ""
}

// Revoke revokes token at the provider (RFC 7009); hint is
// "refresh_token" or "access_token". A provider without a revocation
// endpoint revokes nothing and Revoke answers nil.
func (c *OAuthClient) Revoke(ctx context.Context, token, hint string) error {
	if token == "" {
		return nil
	}
	ep, err := c.endpoints()
	if err != nil {
		return fmt.Errorf("revoking at the provider: %w", err)
	}
	if ep.spec.RevokeURL == "" {
		return nil
	}
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if ep.method == ClientSecretPost {
		form.Set("client_id", ep.spec.ClientID)
		form.Set("client_secret", ep.spec.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.spec.RevokeURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if ep.method == ClientSecretBasic {
		req.SetBasicAuth(url.QueryEscape(ep.spec.ClientID), url.QueryEscape(ep.spec.ClientSecret))
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("revoking at the provider: %s", safeCause(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	// RFC 7009 §2.2: 200 whether or not the token was valid.
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoking at the provider: it answered %s", resp.Status)
	}
	return nil
}

// Secrets are the client's secret values as they go on the wire.
// A client registered at its setup has them once it is available.
func (c *OAuthClient) Secrets() []string { return oauthSecrets(c.Spec()) }

// ClientSecrets are the wire forms of a client's secret (Secrets), for a
// client registered by a Registrar.
func ClientSecrets(clientID, clientSecret string) []string {
	return oauthSecrets(OAuth2{ClientID: clientID, ClientSecret: clientSecret})
}

func oauthSecrets(o OAuth2) []string {
	if o.ClientSecret == "" {
		return nil
	}
	return []string{o.ClientSecret, url.QueryEscape(o.ClientSecret),
		basicToken(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))}
}

// ErrNoRefreshToken is Refresh's answer for a connection the provider
// gave no refresh token: it lasts as long as its access token, and then
// the user connects again (RefreshRefused).
var ErrNoRefreshToken = errors.New("the provider gave this connection no refresh token, so it lasted only as long as its access token, which has expired or was refused")

// OAuthFailure words an authorization server's refusal for the user:
// what its error code means, never a token.
func OAuthFailure(err error) string {
	var re *oauth2.RetrieveError
	var down *authServerDown
	if errors.As(err, &down) {
		return "the provider's authorization server (" + down.name() + ") has not answered since trawl started (" + down.why + "); trawl keeps trying"
	}
	if errors.Is(err, ErrNoRefreshToken) {
		return ErrNoRefreshToken.Error()
	}
	if errors.Is(err, ErrClientReregistered) {
		return "the provider no longer knows the client trawl registered there (or its secret expired); trawl has registered a new one, and connections made with the old one no longer work"
	}
	if !errors.As(err, &re) {
		return "the provider could not be reached (" + safeCause(err) + ")"
	}
	if re.ErrorCode == "" && re.Response != nil && (re.Response.StatusCode >= 500 || re.Response.StatusCode == http.StatusTooManyRequests) {
		// A gateway's page, a server in trouble: no OAuth answer at all.
		return fmt.Sprintf("the provider's authorization server had a problem (it answered HTTP %d); try again in a moment", re.Response.StatusCode)
	}
	return OAuthErrorWords(re.ErrorCode)
}

// RefreshRefused reports whether err, a Refresh's, is the authorization
// server's definite refusal of the user's grant — a 4xx answering
// invalid_grant (revoked, expired, consent withdrawn) or
// unauthorized_client — after which the connection is broken and its
// tokens are useless. Anything else is not the user's connection
// failing: the server unavailable (a network failure, a 5xx or 429,
// temporarily_unavailable, server_error, an answer that is not OAuth's)
// or trawl's client misconfigured (invalid_client, invalid_request…:
// every user's refresh fails alike until the operator fixes it); the
// connection is then kept and refreshed again next time. The exception
// is invalid_client for a client trawl registered itself
// (ErrClientReregistered): the grant went with the old client.
func RefreshRefused(err error) bool {
	switch {
	case errors.Is(err, ErrClientReregistered):
		return true // the grant was the old client's
	case errors.Is(err, ErrNoRefreshToken):
		return true // nothing to refresh with: the connection has ended
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return false
	}
	if authServerTrouble(re) || re.Response != nil && re.Response.StatusCode < 400 {
		return false
	}
	return re.ErrorCode == "invalid_grant" || re.ErrorCode == "unauthorized_client"
}

// OAuthErrorWords says what an OAuth error code (RFC 6749 §4.1.2.1,
// §5.2; OpenID Connect Core §3.1.2.6) means to the user. A code it does
// not know is named only when it reads as one (a short word of
// [A-Za-z0-9_.-]): it is the provider's free text.
func OAuthErrorWords(code string) string {
	switch code {
	case "access_denied":
		return "access was denied at the provider (the user declined, or the account may not use this app)"
	case "account_selection_required":
		return "the provider needs the user to choose which account to connect: sign in there with the right account"
	case "invalid_grant":
		return "the provider no longer accepts this connection (access was revoked, consent withdrawn, or it expired)"
	case "invalid_client", "unauthorized_client":
		return "the provider refused trawl's client (client_id or client_secret is wrong, or the client may not use this flow): tell the operator"
	case "invalid_scope":
		return "the provider refused the requested scopes: tell the operator"
	case "login_required", "consent_required", "interaction_required":
		return "the provider needs the user to sign in and consent again"
	case "temporarily_unavailable", "server_error":
		return "the provider had a temporary problem; try again in a moment"
	case "invalid_request", "unsupported_response_type", "invalid_request_uri", "invalid_request_object", "request_not_supported":
		return "the provider refused the sign-in request (" + code + "): tell the operator"
	case "":
		return "the provider refused without saying why"
	}
	if !oauthCodeRe.MatchString(code) {
		return "the provider refused with an error code trawl does not know"
	}
	return "the provider refused (" + code + ")"
}

var oauthCodeRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// maxProviderSaid bounds how much of an authorization server's own words
// (error_description) trawl repeats, in bytes.
const maxProviderSaid = 200

// OAuthCallbackFailure words the error an authorization server sent the
// browser back with (the callback's error and error_description): what
// the code means (OAuthErrorWords) and, when it said more, its own
// words — free text from the query string, so masked by s (the
// deployment's scrubber and the request's secrets) before it is cut to
// maxProviderSaid bytes, on one line, with control characters and
// quotes dropped. The result is plain text: a page escapes it.
func OAuthCallbackFailure(code, description string, s *Scrubber) string {
	words := OAuthErrorWords(s.String(code))
	said := strings.Map(func(r rune) rune {
		switch {
		case r == '"' || r == '`' || r == utf8.RuneError || unicode.Is(unicode.Cf, r): // Cf: bidi overrides, zero-width
			return -1
		case unicode.IsControl(r) || unicode.IsSpace(r):
			return ' '
		}
		return r
	}, s.String(description))
	said = strings.Join(strings.Fields(said), " ")
	if len(said) > maxProviderSaid {
		cut := maxProviderSaid
		for cut > 0 && !utf8.RuneStart(said[cut]) {
			cut--
		}
		said = said[:cut] + "…"
	}
	if said == "" {
		return words
	}
	return words + `; the provider said: "` + said + `"`
}

// TokenExpired reports whether a 401's WWW-Authenticate challenge lets
// trawl take it for an expired or revoked access token (RFC 6750
// invalid_token, or a 401 with no Bearer error at all) rather than, say,
// a missing scope.
func TokenExpired(h http.Header) bool {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return true
	}
	for _, c := range cs {
		if !strings.EqualFold(c.Scheme, "bearer") {
			continue
		}
		if e := c.Params["error"]; e != "" && e != "invalid_token" {
			return false
		}
	}
	return true
}

// CodeProviderUnavailable: the provider's authorization server cannot be
// reached (it did not answer at start, or not when a token had to be
// fetched or refreshed); the connection is kept, and the call can be
// tried again later.
const CodeProviderUnavailable = "provider_unavailable"

// ProviderUnavailable is the refusal of a call to provider whose
// authorization server cannot be reached now (why: OAuthFailure).
func ProviderUnavailable(provider, why string) *RefusedError {
	return &RefusedError{Code: CodeProviderUnavailable, Msg: fmt.Sprintf(
		"%s cannot be used right now: %s. Nothing is wrong with the user's connection: tell the user %s is unavailable for the moment and try again in a minute; do not ask them to reconnect",
		provider, why, provider)}
}

// CodeConnectionBroken: the user's OAuth connection stopped working (the
// provider refused a refresh); the user reconnects through a fresh link.
const CodeConnectionBroken = "connection_broken"

// ConnectionBroken is the refusal of a call whose connection stopped
// working: why, and that the user reconnects with a fresh link.
func ConnectionBroken(t *Tool, why string) *RefusedError {
	name := t.ToolkitName
	if name == "" {
		name = t.Provider
	}
	return &RefusedError{Code: CodeConnectionBroken, Msg: fmt.Sprintf(
		"the user's %s connection no longer works: %s. Tell the user, call connect_toolkit with {\"toolkit\": %q} and give them the fresh link to reconnect; do not retry the call until they have",
		name, why, t.Provider)}
}
