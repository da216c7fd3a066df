package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// An MCP server over HTTP behind OAuth (the MCP authorization spec) is
// reached either with the organization's client — auth {type: oauth2,
// flow: client_credentials, client_id, client_secret}, a pre-registered
// client — or by each user with their own account — flow
// authorization_code, connected through connect links like an app's
// toolkit (MCPUserSource, oauth_mcp_user.go), with a pre-registered
// client or one registered dynamically (RFC 7591) when no client_id is
// set. Without issuer or token_url, the authorization server is the
// first the server names in its protected-resource metadata (RFC 9728:
// the resource_metadata of its 401's challenge, else the well-known
// URI), whose RFC 8414 metadata gives the endpoints; the authorization
// request and every token request (code exchange, refresh, client
// credentials) carry the server's URL as their resource indicator (RFC
// 8707). The organization's token is cached until near its expiry
// and fetched again once when the server answers 401 (the MCP SDK's
// OAuthHandler retry).

func (c MCPConfig) validateAuth() error {
	if c.Auth == (AuthSpec{}) {
		return nil
	}
	if c.URL == "" {
		return errors.New("is for a server over HTTP (url), not a command")
	}
	if c.Auth.Type != AuthOAuth2 {
		return errors.New("an MCP server's auth is type oauth2: flow client_credentials (the organization's client) or authorization_code (each user connects their account)")
	}
	v := c.Auth
	if mcpDiscovers(v) {
		v.Issuer = c.URL // found in the server's protected-resource metadata; checked like an issuer URL
	}
	if v.Flow == FlowAuthorizationCode && v.ClientID == "" {
		if v.ClientSecret != "" {
			return errors.New("client_secret without client_id: set both (a pre-registered client), or neither (trawl registers its client, RFC 7591)")
		}
		v.ClientID = "registered" // dynamic client registration: checked as a pre-registered client would be
	}
	return v.Validate()
}

// mcpDiscovers reports whether an MCP server's auth leaves its
// authorization server to the server's protected-resource metadata: no
// issuer, and no token_url (nor, for the authorization-code flow,
// authorize_url) to do without one. A URL the config sets wins over the
// discovered one.
func mcpDiscovers(a AuthSpec) bool {
	return a.Issuer == "" && (a.TokenURL == "" || a.Flow == FlowAuthorizationCode && a.AuthorizeURL == "")
}

// PerUser reports whether each user connects the server with their own
// account (auth flow authorization_code).
func (c MCPConfig) PerUser() bool {
	return c.Auth.Type == AuthOAuth2 && c.Auth.Flow == FlowAuthorizationCode
}

// mcpOAuth is an MCP server's auth.OAuthHandler (the SDK's interface).
type mcpOAuth struct {
	cfg     MCPConfig
	hc      *http.Client
	onToken func(string)

	mu  sync.Mutex
	org *orgToken // nil until the client is resolved
}

func newMCPOAuth(cfg MCPConfig, hc *http.Client, onToken func(string)) *mcpOAuth {
	if cfg.Auth.Type != AuthOAuth2 {
		return nil
	}
	return &mcpOAuth{cfg: cfg, hc: hc, onToken: onToken}
}

func (h *mcpOAuth) client(ctx context.Context) (*orgToken, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.org != nil {
		return h.org, nil
	}
	c, err := NewMCPOAuthClient(ctx, h.cfg, h.hc, nil)
	if err != nil {
		return nil, err
	}
	h.org = &orgToken{client: c, provider: h.cfg.ID, now: time.Now}
	return h.org, nil
}

func (h *mcpOAuth) token(ctx context.Context, stale string) (string, error) {
	o, err := h.client(ctx)
	if err != nil {
		return "", err
	}
	tok, fresh, err := o.token(ctx, stale)
	if err != nil {
		return "", err
	}
	if fresh && h.onToken != nil {
		h.onToken(tok)
	}
	return tok, nil
}

// TokenSource is the current token (auth.OAuthHandler).
func (h *mcpOAuth) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	tok, err := h.token(ctx, "")
	if err != nil {
		return nil, err
	}
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok, TokenType: "Bearer"}), nil
}

// Authorize gets a new token after the server refused the one sent
// (auth.OAuthHandler); the transport then retries once.
func (h *mcpOAuth) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !TokenExpired(resp.Header) {
		return fmt.Errorf("the MCP server refused the organization's token (%s)", resp.Status)
	}
	stale, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	_, err := h.token(ctx, stale)
	return err
}

// Registrar gives an MCP server's OAuth client its client_id and
// client_secret when the config sets none: the client registered for
// the deployment at the authorization server's registration endpoint
// (RFC 7591), kept and reused (see RegisterOAuthClient).
//
// stale, when set, is a client_id the Registrar gave before that the
// authorization server no longer accepts (its token endpoint answered
// invalid_client: it forgot the registration, or the secret expired):
// the registration kept with it is dropped and a new one made — or the
// one another replica made since is taken.
type Registrar func(ctx context.Context, issuer, registrationEndpoint, stale string) (clientID, clientSecret string, err error)

// NewMCPOAuthClient is the OAuth client of an MCP server behind OAuth:
// its authorization server found in the server's protected-resource
// metadata unless the config names it, its client registered through
// register when the config sets no client_id, and the server's URL its
// resource indicator (RFC 8707).
func NewMCPOAuthClient(ctx context.Context, cfg MCPConfig, hc *http.Client, register Registrar) (*OAuthClient, error) {
	c, err := newMCPOAuthClient(cfg, hc, register)
	if err != nil {
		return nil, err
	}
	if err := c.Discover(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// OpenMCPOAuthClient is NewMCPOAuthClient for a deployment that starts
// whether or not the MCP server and its authorization server answer (as
// OpenOAuthClient is NewOAuthClient's): a config that is wrong is an
// error, but a discovery or registration that fails now is not — the
// client is then Unavailable, saying why, until Discover or
// KeepDiscovering completes it.
func OpenMCPOAuthClient(ctx context.Context, cfg MCPConfig, hc *http.Client, register Registrar) (*OAuthClient, error) {
	c, err := newMCPOAuthClient(cfg, hc, register)
	if err != nil {
		return nil, err
	}
	_ = c.Discover(ctx) // kept in Unavailable
	return c, nil
}

// newMCPOAuthClient checks cfg and makes its client unresolved: its
// setup (Discover) finds the authorization server and registers the
// client as NewMCPOAuthClient says.
func newMCPOAuthClient(cfg MCPConfig, hc *http.Client, register Registrar) (*OAuthClient, error) {
	if cfg.Auth.Type != AuthOAuth2 {
		return nil, fmt.Errorf("auth type %q is not %s", cfg.Auth.Type, AuthOAuth2)
	}
	if err := cfg.validateAuth(); err != nil {
		return nil, err
	}
	if cfg.Auth.ClientID == "" && register == nil {
		return nil, errors.New("no client_id is set and the authorization server cannot be asked to register one (set client_id)")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	c := &OAuthClient{conf: cfg.Auth.OAuth2, http: hc, resource: cfg.URL}
	c.setup = func(ctx context.Context, stale string) (OAuth2, error) {
		spec := cfg.Auth
		if mcpDiscovers(spec) {
			issuer, err := mcpAuthServer(ctx, cfg.URL, hc)
			if err != nil {
				return OAuth2{}, err
			}
			spec.Issuer = issuer
		}
		if spec.ClientID == "" {
			if spec.Issuer == "" {
				return OAuth2{}, errors.New("no client_id is set and the MCP server names no authorization server to register one at (set client_id, or issuer)")
			}
			meta, err := discoverIssuer(ctx, spec.Issuer, hc)
			if err != nil {
				return OAuth2{}, err
			}
			if meta.RegistrationEndpoint == "" {
				return OAuth2{}, fmt.Errorf("no client_id is set and the authorization server %s offers no dynamic client registration (registration_endpoint): register trawl's client there and set client_id and client_secret", spec.Issuer)
			}
			if err := checkOAuthURL(meta.RegistrationEndpoint); err != nil {
				return OAuth2{}, fmt.Errorf("registration_endpoint: %w", err)
			}
			id, secret, err := register(ctx, spec.Issuer, meta.RegistrationEndpoint, stale)
			if err != nil {
				return OAuth2{}, err
			}
			spec.ClientID, spec.ClientSecret = id, secret
		}
		if err := spec.Validate(); err != nil {
			return OAuth2{}, err
		}
		return spec.OAuth2, nil
	}
	return c, nil
}

// RegisterOAuthClient registers a client for the authorization-code
// flow at registrationEndpoint (RFC 7591) with trawl's one redirect URI
// and answers its client_id and client_secret. Its errors name no
// secret (a server's answer is not quoted).
func RegisterOAuthClient(ctx context.Context, registrationEndpoint, redirectURI string, scopes Scopes, hc *http.Client) (clientID, clientSecret string, err error) {
	res, err := oauthex.RegisterClient(ctx, registrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{redirectURI}, ClientName: "trawl",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: ClientSecretBasic, Scope: string(scopes),
	}, hc)
	if err != nil {
		var re *oauthex.ClientRegistrationError
		if errors.As(err, &re) {
			return "", "", fmt.Errorf("the authorization server refused to register trawl's client: %s", OAuthErrorWords(re.ErrorCode))
		}
		return "", "", fmt.Errorf("registering trawl's client at %s failed (%s)", registrationEndpoint, safeCause(err))
	}
	return res.ClientID, res.ClientSecret, nil
}

// mcpAuthServer is the authorization server an MCP server names in its
// protected-resource metadata (RFC 9728): at the resource_metadata URL
// of the challenge it answers an unauthenticated request with, else at
// the well-known URI with the server's path after it, then at the
// origin's.
func mcpAuthServer(ctx context.Context, server string, hc *http.Client) (string, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	root := u.Scheme + "://" + u.Host
	var candidates []string
	if m := challengeMetadata(ctx, server, hc); m != "" {
		candidates = append(candidates, m)
	}
	candidates = append(candidates, root+"/.well-known/oauth-protected-resource"+strings.TrimRight(u.Path, "/"))
	if strings.Trim(u.Path, "/") != "" {
		candidates = append(candidates, root+"/.well-known/oauth-protected-resource")
	}
	var errs []error
	for _, m := range candidates {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, m, server, hc)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prm != nil && len(prm.AuthorizationServers) > 0 {
			return prm.AuthorizationServers[0], nil
		}
	}
	return "", fmt.Errorf("the MCP server publishes no protected-resource metadata naming its authorization server (set issuer or token_url): %w", errors.Join(errs...))
}

// challengeMetadata is the resource_metadata URL of the Bearer challenge
// an MCP server answers an unauthenticated request with ("" none): the
// MCP authorization spec's first place to look (RFC 9728 §5.1). Only a
// URL on the server's own origin is followed.
func challengeMetadata(ctx context.Context, server string, hc *http.Client) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return ""
	}
	cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	if err != nil {
		return ""
	}
	for _, c := range cs {
		m := c.Params["resource_metadata"]
		if !strings.EqualFold(c.Scheme, "bearer") || m == "" {
			continue
		}
		mu, err1 := url.Parse(m)
		su, err2 := url.Parse(server)
		if err1 == nil && err2 == nil && mu.Scheme == su.Scheme && strings.EqualFold(mu.Host, su.Host) {
			return m
		}
	}
	return ""
}
