package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web/deploy"
)

// oauthCookiePrefix names the cookies that bind authorization requests
// to the browser that confirmed the connect page: one per request (its
// name ends in a short id of its state, oauthCookieName), so that two
// links opened in one browser do not overwrite each other's; each is
// sent only to the callback.
const oauthCookiePrefix = "trawl_oauth_"

// oauthCookieName is the cookie of the authorization request of state.
func oauthCookieName(state string) string {
	sum := sha256.Sum256([]byte(state))
	return oauthCookiePrefix + hex.EncodeToString(sum[:4])
}

// Why an OAuth callback stores nothing.
const (
	oauthExpired = "This sign-in was not started in this browser, was already used, or has expired. Ask the assistant for a new link and open it here."
)

// oauthRedirectURI is the one redirect URI every OAuth client of this
// deployment is registered with.
func (s *Server) oauthRedirectURI() string {
	return strings.TrimRight(s.publicURL(), "/") + deploy.OAuthCallbackPath
}

func (s *Server) oauthCookie(c echo.Context, state, value string, maxAge int) *http.Cookie {
	secure := c.Request().TLS != nil || strings.HasPrefix(s.cfg.PublicURL, "https://")
	return &http.Cookie{Name: oauthCookieName(state), Value: value, Path: deploy.OAuthCallbackPath, MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
}

// startOAuth sends the browser that confirmed the connect page of an
// OAuth toolkit to the provider's authorize URL: state bound to the
// link's user and session and, by a cookie of its own, to this browser;
// a PKCE challenge.
func (s *Server) startOAuth(c echo.Context, client *tools.OAuthClient, g deploy.ConnectGrant) error {
	browser := deploy.RandomHex(32)
	state, verifier, err := s.conns.StartOAuth(c.Request().Context(), g, browser)
	if err != nil {
		return internal(err)
	}
	to, err := client.AuthCodeURL(state, verifier, s.oauthRedirectURI())
	if err != nil {
		return internal(err) // checked before the link was spent (oauthUnavailable)
	}
	c.SetCookie(s.oauthCookie(c, state, browser, int(deploy.ConnectAttemptTTL/time.Second)))
	return c.Redirect(http.StatusSeeOther, to)
}

// oauthUnavailable answers the connect link of an OAuth toolkit whose
// authorization server has not been reached since the start (its
// metadata unread) with a page that says so, before the link is spent:
// the same link works once the server answers.
func (s *Server) oauthUnavailable(c echo.Context, toolkit, name string) (bool, error) {
	client, isOAuth := s.conns.OAuthClient(toolkit)
	if !isOAuth {
		return false, nil
	}
	client.Resume(c.Request().Context()) // a client registered anew (here, or by another replica)
	if _, down := client.Unavailable(); !down {
		return false, nil
	}
	return true, s.renderConnect(c, http.StatusServiceUnavailable, connectView{Name: name,
		Invalid: name + "'s sign-in cannot be reached right now; nothing was connected. Try this same link again in a few minutes."})
}

// oauthCallback is where the provider sends the browser back: the state
// is spent once, from the browser that started it (its cookie compared
// first: a callback without it spends nothing), while the session
// that asked lives; the code is then exchanged (with the PKCE verifier)
// and the tokens sealed for the user. What the user can act on — access
// denied, an exchange the provider refused — is said in words, on the
// page and to the model on the next call (the connection is marked
// broken with the reason, unless one works already). An answer whose iss
// is not the issuer's (RFC 9207) is refused before either is read.
func (s *Server) oauthCallback(c echo.Context) error {
	ctx := c.Request().Context()
	q := c.QueryParams()
	cookie := ""
	if ck, err := c.Cookie(oauthCookieName(q.Get("state"))); err == nil {
		cookie = ck.Value
	}
	g, verifier, ok, err := s.conns.FinishOAuth(ctx, q.Get("state"), cookie)
	if err != nil {
		return internal(err)
	}
	if !ok {
		return s.renderConnect(c, http.StatusBadRequest, connectView{Name: "an app", Invalid: oauthExpired})
	}
	c.SetCookie(s.oauthCookie(c, q.Get("state"), "", -1))
	name, _, _ := s.toolkitInfo(g.Toolkit)
	if name == "" {
		name = g.Toolkit
	}
	if live, err := s.sessionLive(ctx, g); err != nil {
		return err
	} else if !live {
		return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name, Invalid: connectEnded})
	}
	client, ok := s.conns.OAuthClient(g.Toolkit)
	if !ok {
		return notFound("no OAuth toolkit " + g.Toolkit)
	}
	fail := func(why string) error {
		s.noteOAuthFailure(ctx, g, why)
		return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name,
			Invalid: "Nothing was connected: " + why + ". Go back to the chat and ask the assistant for a new link to try again."})
	}
	// A response another authorization server may have sent (a mix-up,
	// RFC 9207) is not used at all: neither its code nor its error's words.
	if err := client.CheckIssuer(q); err != nil {
		s.log.Warn("oauth callback refused", "toolkit", g.Toolkit, "err", err)
		return fail(err.Error())
	}
	if e := q.Get("error"); e != "" {
		// The provider's code and words are free text from the query:
		// scrubbed (the client secret, this request's state and PKCE
		// verifier), bounded, and escaped by the page.
		return fail(tools.OAuthCallbackFailure(e, q.Get("error_description"), s.dep.Scrubber(q.Get("state"), verifier)))
	}
	code := q.Get("code")
	if code == "" {
		return fail("the provider sent no authorization code")
	}
	tok, err := client.Exchange(ctx, code, verifier, s.oauthRedirectURI())
	if err != nil {
		return fail(tools.OAuthFailure(err))
	}
	if err := s.conns.StoreOAuth(ctx, g.User, g.Toolkit, tok); err != nil {
		return internal(err)
	}
	// An MCP server no user had connected lists its tools now, with this
	// user's session; after a failure it waits for the next connection
	// or restart.
	if err := s.dep.PrimeUserMCP(ctx, g.Toolkit, tok.AccessToken); err != nil {
		s.log.Warn("mcp server's tools could not be listed after connecting", "mcp", g.Toolkit, "err", err)
	}
	return s.renderConnect(c, http.StatusOK, connectView{Name: name, Account: accountName(g.User), Done: true})
}

// noteOAuthFailure keeps why a connect attempt failed, for the model's
// next call, unless the user has a working connection already.
func (s *Server) noteOAuthFailure(ctx context.Context, g deploy.ConnectGrant, why string) {
	if ok, err := s.conns.Connected(ctx, g.User, nil, g.Toolkit); err == nil && !ok {
		_ = s.conns.NoteFailure(context.WithoutCancel(ctx), g.User, g.Toolkit, why)
	}
}

// connectionsUser is whose connections a request names: a session's own
// user, or with the admin key the user_id parameter.
func connectionsUser(c echo.Context) (string, error) {
	p := principalOf(c)
	if p.Admin {
		u := c.QueryParam("user_id")
		if u == "" {
			return "", badRequest("with the admin key, name the user: ?user_id=<user>")
		}
		return u, nil
	}
	if u := c.QueryParam("user_id"); u != "" && u != p.UserID {
		return "", apiErr(http.StatusForbidden, "forbidden", "a session sees only its own user's connections (user_id is for the admin key)")
	}
	return p.UserID, nil
}

// listConnections answers GET /v1/connections: the user's stored
// connections with their scopes, expiry and last refresh — never a token.
func (s *Server) listConnections(c echo.Context) error {
	user, err := connectionsUser(c)
	if err != nil {
		return err
	}
	list, err := s.conns.List(c.Request().Context(), user)
	if err != nil {
		return internal(err)
	}
	if list == nil {
		list = []deploy.ConnectionInfo{}
	}
	return c.JSON(http.StatusOK, map[string]any{"user_id": user, "connections": list})
}

// disconnect answers DELETE /v1/connections/{toolkit}: an OAuth
// connection's tokens are revoked at the provider (RFC 7009), and the
// sealed record is deleted.
func (s *Server) disconnect(c echo.Context) error {
	user, err := connectionsUser(c)
	if err != nil {
		return err
	}
	tk := c.Param("toolkit")
	found, revoked, revokeErr, err := s.conns.Disconnect(c.Request().Context(), user, tk)
	if err != nil {
		return internal(err)
	}
	if !found {
		return notFound("no connection to " + tk + " for this user")
	}
	out := map[string]any{"toolkit": tk, "disconnected": true, "revoked": revoked}
	if revokeErr != nil {
		out["revoke_error"] = revokeErr.Error() // names no token (tools.OAuthClient.Revoke)
	}
	return c.JSON(http.StatusOK, out)
}

// authorizeOrigin is the origin of client's authorize URL, which the
// connect page's form is let to redirect to ("" when unknown).
func authorizeOrigin(client *tools.OAuthClient) string {
	u, err := url.Parse(client.Spec().AuthorizeURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return ""
	}
	return u.Scheme + "://" + u.Host
}
