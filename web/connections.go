package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web/deploy"
)

// connectCookie holds an attempt's binding to the browser that opened
// the link.
const connectCookie = "trawl_connect"

// connectStyle is the page's only style; the CSP admits it by hash.
const connectStyle = `body{font:16px system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#1d2330}
input{width:100%;padding:.6rem;font:inherit;margin:.5rem 0 1rem;box-sizing:border-box}
button{padding:.6rem 1.2rem;font:inherit}.ok{color:#17703a}.err{color:#a3261b}code{font-size:.95em}`

// connectCSP admits nothing but the page's own style and a form posted to
// itself (and, on an OAuth toolkit's page, the redirect that post makes
// to the provider's authorize origin); no frame may hold the page.
func connectCSP(formOrigin string) string {
	sum := sha256.Sum256([]byte(connectStyle))
	action := "'self'"
	if formOrigin != "" {
		action += " " + formOrigin
	}
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; form-action " + action + "; frame-ancestors 'none'; base-uri 'none'"
}

var connectPage = template.Must(template.New("connect").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Connect {{.Name}} — trawl</title>
<style>` + connectStyle + `</style></head>
<body><h1>Connect {{.Name}}</h1>
{{if .Done}}<p class="ok">{{.Name}} is connected for account <code>{{.Account}}</code>. You can close this page and go back to the chat.</p>
{{else if .Invalid}}<p class="err">{{.Invalid}}</p>
{{else}}<p>{{.Description}}</p>
<p>This connects <strong>{{.Name}}</strong> (<code>{{.Toolkit}}</code>) for account <code>{{.Account}}</code>.
If that is not your account, close this page.</p>
<form method="post"><input type="hidden" name="csrf" value="{{.CSRF}}">
{{if .OAuth}}<button type="submit">Continue to sign in to {{.Name}}</button></form>
<p>{{.Name}}'s sign-in page opens next; the account you sign in with there is connected to <code>{{.Account}}</code>.</p>
{{else}}<label>Access token for {{.Name}}<input name="credential" type="password" autocomplete="off" required></label>
<button type="submit">Connect</button></form>
<p>The token is stored encrypted and used only for this account's requests to {{.Name}}.</p>{{end}}{{end}}
</body></html>`))

type connectView struct {
	Name, Description, Toolkit, Account, CSRF string
	Invalid                                   string // why the page cannot be used
	Done                                      bool
	OAuth                                     bool // the form confirms, then the provider's sign-in
}

// Why a connect page cannot be used.
const (
	connectExpired = "This link has expired, was already opened, or was opened in another browser. Ask the assistant for a new one and open it here."
	connectForeign = "This form was not sent from trawl's own connect page, so nothing was stored."
	connectEnded   = "The chat session that asked for this link has ended. Ask the assistant for a new one."
)

func accountName(user string) string {
	if user == "" {
		return "(the admin key)"
	}
	return user
}

func (s *Server) toolkitInfo(toolkit string) (name, desc string, ok bool) {
	for _, t := range s.catalog.Provider(toolkit) {
		if t.Kind == tools.KindApp {
			return t.ToolkitName, t.ToolkitDescription, true
		}
	}
	if s.catalog.PerUser(toolkit) { // an MCP server each user connects
		return toolkit, "", true
	}
	return "", "", false
}

// connectHeaders keeps the connect page out of frames, caches, referrers
// and content sniffing, and runs nothing but its own style.
func connectHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", connectCSP(""))
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

func (s *Server) renderConnect(c echo.Context, status int, v connectView) error {
	c.Response().Header().Set("Content-Type", "text/html; charset=utf-8")
	c.Response().WriteHeader(status)
	return connectPage.Execute(c.Response(), v)
}

// sessionLive reports whether the session a grant is bound to still
// lives (the admin key always does).
func (s *Server) sessionLive(ctx context.Context, g deploy.ConnectGrant) (bool, error) {
	if g.Session == "" {
		return true, nil
	}
	sess, ok, err := s.liveSession(ctx, g.Session)
	return ok && sess.UserID == g.User, err
}

// connectForm serves the connect page. With ?code= (the link the
// assistant gave) it spends the code, binds the attempt to this browser
// with a cookie and redirects to the bare page, so the code stays out of
// the history; without it, the cookie's attempt shows the form.
func (s *Server) connectForm(c echo.Context) error {
	tk := c.Param("toolkit")
	name, desc, ok := s.toolkitInfo(tk)
	if !ok {
		return notFound("no toolkit " + tk)
	}
	ctx := c.Request().Context()
	if code := c.QueryParam("code"); code != "" {
		if down, err := s.oauthUnavailable(c, tk, name); down {
			return err
		}
		cookie, g, ok, err := s.conns.Open(ctx, code, tk)
		if errors.Is(err, deploy.ErrTooManyPending) {
			return apiErr(http.StatusServiceUnavailable, "unavailable", err.Error())
		} else if err != nil {
			return internal(err)
		}
		if !ok {
			return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name, Invalid: connectExpired})
		}
		if live, err := s.sessionLive(ctx, g); err != nil {
			return err
		} else if !live {
			return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name, Invalid: connectEnded})
		}
		c.SetCookie(s.connectCookie(c, tk, cookie, int(deploy.ConnectAttemptTTL/time.Second)))
		return c.Redirect(http.StatusSeeOther, connectPath(tk))
	}
	g, ok, err := s.conns.Attempt(ctx, cookieValue(c), tk, false)
	if err != nil {
		return internal(err)
	}
	if !ok {
		return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name, Invalid: connectExpired})
	}
	v := connectView{Name: name, Description: desc, Toolkit: tk, Account: accountName(g.User), CSRF: g.CSRF}
	if client, isOAuth := s.conns.OAuthClient(tk); isOAuth {
		v.OAuth = true
		c.Response().Header().Set("Content-Security-Policy", connectCSP(authorizeOrigin(client)))
	}
	return s.renderConnect(c, http.StatusOK, v)
}

// connectSubmit stores the credential a user entered: only a same-origin
// post, with the attempt's cookie and its CSRF token, while the session
// that asked lives; the attempt is then spent.
func (s *Server) connectSubmit(c echo.Context) error {
	tk := c.Param("toolkit")
	name, _, ok := s.toolkitInfo(tk)
	if !ok {
		return notFound("no toolkit " + tk)
	}
	if !s.sameOrigin(c.Request()) {
		return s.renderConnect(c, http.StatusForbidden, connectView{Name: name, Invalid: connectForeign})
	}
	client := s.clientAddr(c.Request())
	cookie, ctx := cookieValue(c), c.Request().Context()
	if err := s.authAllowed(c, client, cookie); err != nil {
		return err
	}
	g, ok, err := s.conns.Attempt(ctx, cookie, tk, false)
	if err != nil {
		return internal(err)
	}
	if !ok || subtle.ConstantTimeCompare([]byte(c.FormValue("csrf")), []byte(g.CSRF)) != 1 {
		s.authFails.fail(client, cookie)
		return s.renderConnect(c, http.StatusForbidden, connectView{Name: name, Invalid: connectExpired})
	}
	oauthClient, isOAuth := s.conns.OAuthClient(tk)
	if isOAuth {
		if down, err := s.oauthUnavailable(c, tk, name); down {
			return err // the attempt is left for when it answers
		}
	}
	cred := strings.TrimSpace(c.FormValue("credential"))
	if cred == "" && !isOAuth {
		return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name, Toolkit: tk,
			Account: accountName(g.User), CSRF: g.CSRF, Description: "Enter the access token."})
	}
	if live, err := s.sessionLive(ctx, g); err != nil {
		return err
	} else if !live {
		_, _, _ = s.conns.Attempt(ctx, cookie, tk, true)
		return s.renderConnect(c, http.StatusBadRequest, connectView{Name: name, Invalid: connectEnded})
	}
	if _, ok, err := s.conns.Attempt(ctx, cookie, tk, true); err != nil {
		return internal(err)
	} else if !ok {
		// Spent by a concurrent post with the same cookie.
		return s.renderConnect(c, http.StatusForbidden, connectView{Name: name, Invalid: connectExpired})
	}
	c.SetCookie(s.connectCookie(c, tk, "", -1))
	if isOAuth {
		return s.startOAuth(c, oauthClient, g) // connect_oauth.go
	}
	if err := s.conns.Store(ctx, g.User, tk, cred); err != nil {
		return internal(err)
	}
	return s.renderConnect(c, http.StatusOK, connectView{Name: name, Account: accountName(g.User), Done: true})
}

func connectPath(toolkit string) string { return "/connect/" + url.PathEscape(toolkit) }

func cookieValue(c echo.Context) string {
	ck, err := c.Cookie(connectCookie)
	if err != nil {
		return ""
	}
	return ck.Value
}

// connectCookie binds an attempt to the browser: HttpOnly, sent only to
// this toolkit's page, and SameSite=Lax so another site's form post does
// not carry it (the page itself is reached by a top-level link).
func (s *Server) connectCookie(c echo.Context, toolkit, value string, maxAge int) *http.Cookie {
	secure := c.Request().TLS != nil || strings.HasPrefix(s.cfg.PublicURL, "https://")
	return &http.Cookie{Name: connectCookie, Value: value, Path: connectPath(toolkit), MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode}
}

// sameOrigin reports whether a form post comes from this deployment's own
// page. Sec-Fetch-Site, which a page cannot forge, decides when the
// browser sends it: same-origin only (Origin is then "null", because the
// page's Referrer-Policy is no-referrer, or names this host). Without it,
// Origin must name this host (or public_url); a post with neither is
// refused.
func (s *Server) sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin":
		return origin == "" || origin == "null" || s.ownOrigin(r, origin)
	case "":
		return origin != "" && origin != "null" && s.ownOrigin(r, origin)
	}
	return false
}

// ownOrigin reports whether origin is this deployment's: the request's
// host, or public_url's origin.
func (s *Server) ownOrigin(r *http.Request, origin string) bool {
	if pu, err := url.Parse(s.cfg.PublicURL); err == nil && s.cfg.PublicURL != "" &&
		strings.EqualFold(origin, pu.Scheme+"://"+pu.Host) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && strings.EqualFold(u.Host, r.Host)
}

// connectionsFor adapts the store to the runner for one user's turn.
type userConnections struct {
	s           *Server
	user        string
	session     map[string]string // the session's runtime credentials
	sessionHash string            // binds the connect links it mints
}

func (u userConnections) Connected(ctx context.Context, toolkit string) (bool, error) {
	return u.s.conns.Connected(ctx, u.user, u.session, toolkit)
}

func (u userConnections) Credential(ctx context.Context, toolkit string) (string, error) {
	if c := u.session[toolkit]; c != "" {
		return c, nil
	}
	c, _, err := u.s.conns.AccessToken(ctx, u.user, toolkit)
	return c, err
}

// RefreshCredential refreshes the user's OAuth token for toolkit that an
// upstream refused (the invoker's TokenRefresher).
func (u userConnections) RefreshCredential(ctx context.Context, toolkit, stale string) (string, error) {
	tok, err := u.s.conns.Refresh(ctx, u.user, toolkit, stale)
	if err == nil {
		tools.AddCallSecrets(ctx, u.CredentialSecrets(ctx, toolkit)...) // a rotated refresh token
	}
	return tok, err
}

// CredentialSecrets are the secrets of the user's connection to toolkit
// that go with its access token unsent (the refresh token), for the
// call's scrubber.
func (u userConnections) CredentialSecrets(ctx context.Context, toolkit string) []string {
	if u.session[toolkit] != "" {
		return nil
	}
	return u.s.conns.Secrets(ctx, u.user, toolkit)
}

// Broken says why the user's connection to toolkit stopped working.
func (u userConnections) Broken(ctx context.Context, toolkit string) (string, error) {
	return u.s.conns.Broken(ctx, u.user, toolkit)
}

func (u userConnections) ConnectLink(ctx context.Context, toolkit string) (string, error) {
	code, err := u.s.conns.Code(ctx, u.user, u.sessionHash, toolkit)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(u.s.publicURL(), "/") + connectPath(toolkit) + "?code=" + code, nil
}

// publicURL is where users reach this deployment.
func (s *Server) publicURL() string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	return "http://" + s.cfg.Listen
}
