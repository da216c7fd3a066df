package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/web/deploy"
)

// principal is who a request acts for: the admin, or a session's user.
type principal struct {
	Admin       bool
	UserID      string            // "" for the admin
	Credentials map[string]string // runtime credentials per provider id
	CacheScope  string
	// Session is the hash of the session token ("" for the admin): what
	// binds a connect code to the session that asked for it.
	Session string
	// Expires is when the session token expires (zero for the admin).
	Expires time.Time
}

const principalKey = "trawl.principal"

func principalOf(c echo.Context) principal {
	p, _ := c.Get(principalKey).(principal)
	return p
}

func sealKey(token string) []byte {
	sum := sha256.Sum256([]byte("trawl-session-credentials:" + token))
	return sum[:]
}

// seal and unseal keep a session's runtime credentials, under a key
// derived from its token (so only its holder's requests open them).
func seal(token string, creds map[string]string) ([]byte, error) {
	plain, err := json.Marshal(creds)
	if err != nil {
		return nil, err
	}
	s, err := deploy.NewSealer(sealKey(token))
	if err != nil {
		return nil, err
	}
	return s.Seal(plain, nil)
}

func unseal(token string, sealed []byte) (map[string]string, error) {
	if len(sealed) == 0 {
		return nil, nil
	}
	s, err := deploy.NewSealer(sealKey(token))
	if err != nil {
		return nil, err
	}
	plain, err := s.Open(sealed, nil)
	if err != nil {
		return nil, fmt.Errorf("sealed credentials: %w", err)
	}
	var creds map[string]string
	return creds, json.Unmarshal(plain, &creds)
}

type sessionRequest struct {
	UserID             string            `json:"user_id"`
	RuntimeCredentials map[string]string `json:"runtime_credentials"`
	CacheScope         string            `json:"cache_scope"`
	TTLSeconds         int               `json:"ttl_seconds"`
}

// createSession mints a user session (admin only).
func (s *Server) createSession(c echo.Context) error {
	var req sessionRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	switch {
	case req.UserID == "" || len(req.UserID) > 200:
		return badRequest("user_id is required (at most 200 characters)")
	case req.TTLSeconds < 0 || req.TTLSeconds > 30*24*3600:
		return badRequest("ttl_seconds must be between 1 and 2592000 (30 days)")
	case len(req.CacheScope) > 200:
		return badRequest("cache_scope is at most 200 characters")
	}
	for p := range req.RuntimeCredentials {
		if len(s.catalog.Provider(p)) == 0 {
			return badRequest(fmt.Sprintf("runtime_credentials: unknown provider %q", p))
		}
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if ttl == 0 {
		ttl = 12 * time.Hour
	}
	token := "trawl_sess_" + randomHex(32)
	sealed, err := seal(token, req.RuntimeCredentials)
	if err != nil {
		return internal(err)
	}
	expires := s.now().Add(ttl).UTC().Truncate(time.Second)
	if err := s.sessions.PutSession(c.Request().Context(), deploy.TokenHash(token), deploy.Session{
		UserID: req.UserID, CacheScope: req.CacheScope, Sealed: sealed, Expires: expires}); err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusCreated, map[string]any{"token": token, "expires_at": expires})
}

// requireUser admits the admin key or a live session token.
func (s *Server) requireUser(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		client := s.clientAddr(c.Request())
		tok, _ := bearer(c.Request())
		if err := s.authAllowed(c, client, tok); err != nil {
			return err
		}
		p, ok, err := s.authenticate(c.Request().Context(), c.Request())
		if err != nil {
			return err
		}
		if !ok {
			s.authFails.fail(client, tok)
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			return unauthorized()
		}
		c.Set(principalKey, p)
		return next(c)
	}
}

// authenticate finds who a request's bearer token acts for.
func (s *Server) authenticate(ctx context.Context, r *http.Request) (principal, bool, error) {
	tok, ok := bearer(r)
	if !ok {
		return principal{}, false, nil
	}
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.AdminKey())) == 1 {
		return principal{Admin: true}, true, nil
	}
	sess, found, err := s.liveSession(ctx, deploy.TokenHash(tok))
	if err != nil || !found {
		return principal{}, false, err
	}
	creds, err := unseal(tok, sess.Sealed)
	if err != nil {
		return principal{}, false, internal(fmt.Errorf("unsealing session credentials: %w", err))
	}
	return principal{UserID: sess.UserID, Credentials: creds, CacheScope: sess.CacheScope, Session: deploy.TokenHash(tok),
		Expires: sess.Expires}, true, nil
}

// liveSession returns the session stored under hash unless it expired
// (an expired one is deleted).
func (s *Server) liveSession(ctx context.Context, hash string) (deploy.Session, bool, error) {
	sess, found, err := s.sessions.GetSession(ctx, hash)
	if err != nil {
		return deploy.Session{}, false, internal(err)
	}
	if found && s.now().After(sess.Expires) {
		_ = s.sessions.DeleteSession(context.WithoutCancel(ctx), hash)
		found = false
	}
	return sess, found, nil
}

// revokeSession ends a session: DELETE /v1/sessions/{token}, with the
// admin key or the session's own token. Another session's token answers
// 404 alike, whether it exists or not.
func (s *Server) revokeSession(c echo.Context) error {
	p := principalOf(c)
	hash := deploy.TokenHash(c.Param("token"))
	if !p.Admin && subtle.ConstantTimeCompare([]byte(hash), []byte(p.Session)) != 1 {
		return notFound("no such session")
	}
	ctx := c.Request().Context()
	if _, found, err := s.liveSession(ctx, hash); err != nil {
		return err
	} else if !found {
		return notFound("no such session")
	}
	if err := s.sessions.DeleteSession(ctx, hash); err != nil {
		return internal(err)
	}
	return c.NoContent(http.StatusNoContent)
}

func unauthorized() error {
	return apiErr(http.StatusUnauthorized, "unauthorized", "a valid admin key or session token is required (Authorization: Bearer <token>)")
}
