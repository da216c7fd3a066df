package deploy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// An MCP server each user connects (auth flow authorization_code) is a
// toolkit of the connections store like an app's: its OAuth client joins
// the store's clients under the server's id, so that connect_toolkit,
// the connect page, the callback, refresh and disconnect serve it as
// they serve an app. Its calls go over each user's own session
// (tools.MCPUserSource). Without a client_id in the config, trawl
// registers its client at the authorization server (RFC 7591) once per
// deployment and keeps it sealed in the connections store, so that every
// replica and every restart reuses it.

// connectUserMCP sets up the MCP server mc that each user connects. A
// server (or authorization server) that does not answer at start
// leaves the deployment degraded, not down, as an OAuth toolkit's
// issuer does (setupOAuth): its connect links say sign-in cannot be
// reached, /readyz lists it unreachable under auth_servers, agents are
// told why in list_connections, and the setup is tried again in the
// background, with backoff, until it completes.
func (s *Deployment) connectUserMCP(ctx context.Context, cat *tools.Catalog, mc tools.MCPConfig) error {
	hc := tools.RedirectSafe(&http.Client{Timeout: 30 * time.Second})
	sctx, cancel := context.WithTimeout(ctx, oauthStartTimeout)
	defer cancel()
	client, err := tools.OpenMCPOAuthClient(sctx, mc, hc, s.registrar(mc, hc))
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	if mc.Auth.ClientID == "" {
		client.SetKept(s.keptClientID(mc.ID))
	}
	if s.oauth == nil {
		s.oauth = map[string]*tools.OAuthClient{}
	}
	s.oauth[mc.ID] = client
	if s.authServers == nil {
		s.authServers = map[string]*tools.OAuthClient{}
	}
	s.authServers[mc.ID] = client
	s.invoker.AddSecrets(client.Secrets()...)
	src, err := tools.NewMCPUserSource(mc, tools.MCPOptions{
		Logger: s.log.With("mcp", mc.ID), Log: s.activity, HTTPClient: s.tel.mcpClient(s.cfg.Telemetry, mc.ID), Limiter: s.limiter,
		Scrub:    s.invoker.Scrubber,
		OnChange: s.applyMCPTools(cat, mc.ID),
	})
	if err != nil {
		return err
	}
	if s.userMCP == nil {
		s.userMCP = map[string]*tools.MCPUserSource{}
	}
	s.userMCP[mc.ID] = src
	s.closers = append(s.closers, src.Close)
	cat.SetPerUser(mc.ID)
	const perUser = "each user connects it with their own account; its tools are listed once one has"
	why, down := client.Unavailable()
	if !down {
		cat.SetWaiting(mc.ID, perUser)
		return nil
	}
	cat.SetWaiting(mc.ID, "its sign-in cannot be reached right now ("+why+"); nobody can connect it until it answers, and trawl keeps trying")
	s.log.Warn("mcp server's OAuth setup failed at start: serving without it and retrying in the background", "mcp", mc.ID, "why", why)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		client.KeepDiscovering(s.ctx, oauthRetryMin, oauthRetryMax, s.log.With("mcp", mc.ID))
		if _, down := client.Unavailable(); down {
			return // the deployment closed
		}
		s.invoker.AddSecrets(client.Secrets()...) // a client registered now
		if _, waiting := cat.Waiting(mc.ID); waiting && len(cat.Provider(mc.ID)) == 0 {
			cat.SetWaiting(mc.ID, perUser)
		}
	}()
	return nil
}

// UserMCP is the MCP server id that each user connects, or nil.
func (s *Deployment) UserMCP(id string) *tools.MCPUserSource { return s.userMCP[id] }

// PrimeUserMCP lists the tools of the MCP server toolkit that each user
// connects, with the access token a user just connected, when they are
// not known yet; a toolkit that is no such server is left alone.
func (s *Deployment) PrimeUserMCP(ctx context.Context, toolkit, token string) error {
	src := s.userMCP[toolkit]
	if src == nil || len(src.Tools()) > 0 {
		return nil
	}
	ts, err := src.Prime(ctx, token)
	if err != nil {
		return err
	}
	if err := s.catalog.ReplaceProvider(toolkit, ts); err != nil {
		return err
	}
	s.catalog.SetWaiting(toolkit, "")
	return nil
}

// PrimeUserMCPsFor lists, before user's turn, the tools of each MCP
// server each user connects whose tools are not known here yet (another
// replica listed them) when user has connected it.
func (s *Deployment) PrimeUserMCPsFor(ctx context.Context, user string) {
	for id, src := range s.userMCP {
		if len(src.Tools()) > 0 || s.conns == nil {
			continue
		}
		tok, ok, err := s.conns.AccessToken(ctx, user, id)
		if err != nil || !ok {
			continue
		}
		if err := s.PrimeUserMCP(ctx, id, tok); err != nil {
			s.log.Debug("mcp server's tools could not be listed with the user's connection", "mcp", id, "err", err)
		}
	}
}

// primeUserMCPs lists, in the background, the tools of each MCP server
// each user connects with the connection of a user who connected it
// before (a restart, another replica); a server no user has connected
// waits for the first.
func (s *Deployment) primeUserMCPs() {
	for id := range s.userMCP {
		go func() {
			ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
			defer cancel()
			user, ok, err := s.conns.someUser(ctx, id)
			if err != nil || !ok {
				return
			}
			tok, ok, err := s.conns.AccessToken(ctx, user, id)
			if err != nil || !ok {
				return
			}
			if err := s.PrimeUserMCP(ctx, id, tok); err != nil {
				s.log.Warn("mcp server's tools could not be listed with a stored connection; they are when a user calls it", "mcp", id, "err", err)
			}
		}()
	}
}

// someUser is a user with a working connection to toolkit.
func (c *Connections) someUser(ctx context.Context, toolkit string) (string, bool, error) {
	suffix := ";t=" + url.PathEscape(toolkit)
	errFound := errors.New("found")
	var user string
	err := c.sealed.ForEach(ctx, func(k string, sealed []byte) error {
		u, ok := strings.CutSuffix(k, suffix)
		if !ok || !strings.HasPrefix(u, "u=") {
			return nil
		}
		plain, err := c.sealer.Open(sealed, []byte(k))
		if err != nil {
			return nil
		}
		if _, _, works := oauthCredential(plain, c.now()); !works {
			return nil
		}
		if user, err = url.PathUnescape(strings.TrimPrefix(u, "u=")); err != nil {
			return nil
		}
		return errFound
	})
	if errors.Is(err, errFound) {
		return user, true, nil
	}
	return "", false, err
}

// registeredClient is a client trawl registered at an authorization
// server (RFC 7591), kept sealed in the connections store.
type registeredClient struct {
	Issuer       string `json:"issuer"`
	RedirectURI  string `json:"redirect_uri"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
}

func registeredKey(id string) string { return "oauth-client;mcp=" + url.PathEscape(id) }

// registrar registers the client of MCP server mc when its config sets
// none: once per deployment — the one kept (for the same authorization
// server and redirect URI) is reused, and the registration is made under
// the refresh lock, so that replicas starting together register one. A
// kept client the server no longer accepts (stale) is replaced, once:
// the replicas that find it refused after another replaced it take the
// new one. The scrubber learns every client secret it hands out.
func (s *Deployment) registrar(mc tools.MCPConfig, hc *http.Client) tools.Registrar {
	return func(ctx context.Context, issuer, endpoint, stale string) (string, string, error) {
		sealer, err := NewSealer(s.stores.secretKey)
		if err != nil {
			return "", "", err
		}
		redirect := strings.TrimRight(s.publicURL(), "/") + OAuthCallbackPath
		key := registeredKey(mc.ID)
		load := func() (registeredClient, bool, error) {
			rc, ok, err := s.keptClient(ctx, sealer, mc.ID)
			if err != nil || !ok {
				return rc, false, err
			}
			return rc, rc.Issuer == issuer && rc.RedirectURI == redirect && (stale == "" || rc.ClientID != stale), nil
		}
		kept := func(rc registeredClient) (string, string, error) {
			s.invoker.AddSecrets(tools.ClientSecrets(rc.ClientID, rc.ClientSecret)...)
			return rc.ClientID, rc.ClientSecret, nil
		}
		if rc, ok, err := load(); err != nil {
			return "", "", err
		} else if ok {
			return kept(rc)
		}
		locks := s.stores.locks
		if locks == nil {
			locks = &memLocks{}
		}
		unlock, err := locks.Lock(ctx, "oauth-register:"+TokenHash(key), refreshLockTTL)
		if err != nil {
			return "", "", fmt.Errorf("waiting for another replica's client registration: %w", err)
		}
		defer unlock()
		if rc, ok, err := load(); err != nil {
			return "", "", err
		} else if ok { // registered meanwhile
			return kept(rc)
		}
		id, secret, err := tools.RegisterOAuthClient(ctx, endpoint, redirect, mc.Auth.Scopes, hc)
		if err != nil {
			return "", "", err
		}
		plain, err := json.Marshal(registeredClient{Issuer: issuer, RedirectURI: redirect, ClientID: id, ClientSecret: secret})
		if err != nil {
			return "", "", err
		}
		sealed, err := sealer.Seal(plain, []byte(key))
		if err != nil {
			return "", "", err
		}
		if err := s.stores.connections.Put(context.WithoutCancel(ctx), key, sealed); err != nil {
			return "", "", err
		}
		if stale != "" {
			s.log.Warn("the MCP server's authorization server no longer accepted trawl's registered OAuth client (invalid_client): registered a new one; its users connect again", "mcp", mc.ID, "issuer", issuer)
		} else {
			s.log.Info("registered trawl's OAuth client at the MCP server's authorization server (RFC 7591)", "mcp", mc.ID, "issuer", issuer)
		}
		return kept(registeredClient{ClientID: id, ClientSecret: secret})
	}
}

// keptClient is the client registered for MCP server id, as kept.
func (s *Deployment) keptClient(ctx context.Context, sealer *Sealer, id string) (registeredClient, bool, error) {
	var rc registeredClient
	key := registeredKey(id)
	sealed, ok, err := s.stores.connections.Get(ctx, key)
	if err != nil || !ok {
		return rc, false, err
	}
	plain, err := sealer.Open(sealed, []byte(key))
	if err != nil {
		return rc, false, fmt.Errorf("opening the registered OAuth client (damaged): %w", err)
	}
	if err := json.Unmarshal(plain, &rc); err != nil {
		return rc, false, fmt.Errorf("the registered OAuth client is damaged: %w", err)
	}
	return rc, true, nil
}

// keptClientID is the client_id kept registered for MCP server id (""
// none), for the client's Resume: a replica takes the client another
// one registered in its place.
func (s *Deployment) keptClientID(id string) func(context.Context, string) (string, error) {
	return func(ctx context.Context, issuer string) (string, error) {
		sealer, err := NewSealer(s.stores.secretKey)
		if err != nil {
			return "", err
		}
		rc, _, err := s.keptClient(ctx, sealer, id)
		if rc.Issuer != issuer || rc.RedirectURI != strings.TrimRight(s.publicURL(), "/")+OAuthCallbackPath {
			return "", err // another deployment's: not one this one would take
		}
		return rc.ClientID, err
	}
}

// publicURL is where users reach the deployment (its connect links and
// OAuth callback).
func (s *Deployment) publicURL() string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	return "http://" + s.cfg.Listen
}
