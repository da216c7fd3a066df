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
// reached with the organization's client: auth {type: oauth2, flow:
// client_credentials, client_id, client_secret} — a pre-registered
// client. Without issuer or token_url, the authorization server is the
// first the server names in its protected-resource metadata (RFC 9728),
// whose RFC 8414 metadata gives the token endpoint; every token request
// carries the server's URL as its resource indicator (RFC 8707). The
// token is cached until near its expiry and fetched again once when the
// server answers 401 (the MCP SDK's OAuthHandler retry).

func (c MCPConfig) validateAuth() error {
	if c.Auth == (AuthSpec{}) {
		return nil
	}
	if c.URL == "" {
		return errors.New("is for a server over HTTP (url), not a command")
	}
	if c.Auth.Type != AuthOAuth2 || c.Auth.Flow != FlowClientCredentials {
		return errors.New("an MCP server's auth is type oauth2 with flow client_credentials (the organization's pre-registered client); a user's own MCP connection is not supported")
	}
	v := c.Auth
	if v.Issuer == "" && v.TokenURL == "" {
		v.Issuer = c.URL // found in the server's protected-resource metadata; checked like an issuer URL
	}
	return v.Validate()
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
	spec := h.cfg.Auth
	if spec.Issuer == "" && spec.TokenURL == "" {
		issuer, err := mcpAuthServer(ctx, h.cfg.URL, h.hc)
		if err != nil {
			return nil, err
		}
		spec.Issuer = issuer
	}
	c, err := NewOAuthClient(ctx, spec, h.hc)
	if err != nil {
		return nil, err
	}
	c.resource = h.cfg.URL
	h.org = &orgToken{client: c, now: time.Now}
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

// mcpAuthServer is the authorization server an MCP server names in its
// protected-resource metadata (RFC 9728): at the well-known URI with the
// server's path after it, then at the origin's.
func mcpAuthServer(ctx context.Context, server string, hc *http.Client) (string, error) {
	u, err := url.Parse(server)
	if err != nil {
		return "", err
	}
	root := u.Scheme + "://" + u.Host
	candidates := []string{root + "/.well-known/oauth-protected-resource" + strings.TrimRight(u.Path, "/")}
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
