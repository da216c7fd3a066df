package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// MCPUserSource is an MCP server over HTTP that each user connects with
// their own account (auth flow authorization_code): every user's calls
// go over a session of their own, authorized with their access token
// (Request.Credential, which the connections store keeps sealed and
// refreshes before it expires). A session whose token the server refuses
// with a 401 gets a fresh one once, through the call's TokenRefresher
// (WithTokenRefresh: single flight, rotation, a broken connection told
// to reconnect), and the call is sent again.
//
// The server's tool list is the one the first user's session read (the
// tools are PerUser); until a user has connected, it has none. Sessions
// unused for a while are closed. It is safe for concurrent use.
type MCPUserSource struct {
	cfg      MCPConfig
	opt      MCPOptions
	idle     time.Duration
	maxUsers int

	mu       sync.Mutex
	sessions map[string]*userMCP // by TokenHash of an access token it was given
	all      []*userMCP          // each session once
	tools    []*Tool
	closed   bool
}

// userMCP is one user's session.
type userMCP struct {
	src  *MCPSource
	auth *userMCPAuth
	used time.Time
}

// Bounds of the per-user sessions: closed after mcpUserIdle unused, and
// the least recently used closed beyond mcpUserMax.
const (
	mcpUserIdle = 10 * time.Minute
	mcpUserMax  = 256
)

// NewMCPUserSource is the per-user source of cfg (cfg.PerUser()); it
// connects nothing until a user's call or Prime.
func NewMCPUserSource(cfg MCPConfig, opt MCPOptions) (*MCPUserSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.PerUser() {
		return nil, fmt.Errorf("mcp server %q: not one each user connects (auth flow authorization_code)", cfg.ID)
	}
	return &MCPUserSource{cfg: cfg, opt: opt, idle: mcpUserIdle, maxUsers: mcpUserMax, sessions: map[string]*userMCP{}}, nil
}

// ID is the server id.
func (u *MCPUserSource) ID() string { return u.cfg.ID }

// Tools are the server's tools as the first user's session listed them
// (none before a user connected).
func (u *MCPUserSource) Tools() []*Tool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.tools)
}

// Prime opens a session with a user's access token (just connected, or
// kept from before a restart) so that the server's tools are known; it
// answers them.
func (u *MCPUserSource) Prime(ctx context.Context, token string) ([]*Tool, error) {
	if _, err := u.session(ctx, token); err != nil {
		return nil, err
	}
	return u.Tools(), nil
}

// Call sends req over the session of the user whose access token is
// req.Credential.
func (u *MCPUserSource) Call(ctx context.Context, req Request) (*Response, error) {
	if req.Credential == "" {
		return nil, NeedsCredential(req.Tool)
	}
	us, err := u.session(ctx, req.Credential)
	if err != nil {
		return nil, err
	}
	us.auth.use(ctx, req.Credential)
	resp, err := us.src.Call(ctx, req)
	// The connection broke on the way (the SDK answers the call with a
	// transport error): the user reconnects.
	if refused := us.auth.takeRefusal(); refused != nil {
		return nil, refused
	}
	return resp, err
}

// session is the user's session for token, made when there is none:
// connecting reads the server's tool list, the source's own when it has
// none yet.
func (u *MCPUserSource) session(ctx context.Context, token string) (*userMCP, error) {
	key := tokenKey(token)
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil, fmt.Errorf("mcp server %q: %w", u.cfg.ID, ErrMCPClosed)
	}
	reaped := u.reapLocked(time.Now())
	us, ok := u.sessions[key]
	if ok {
		us.used = time.Now()
	}
	u.mu.Unlock()
	closeAll(reaped)
	if ok {
		return us, nil
	}
	a := &userMCPAuth{provider: u.cfg.ID, token: token}
	a.use(ctx, token)
	opt := u.opt
	opt.OnChange = func(ts []*Tool) { u.setTools(ts) }
	// The session outlives the call that made it: it is made under a
	// context of its own (cancelled with the call's while connecting),
	// which carries none of the call's values.
	cctx, cancel := context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	src, err := connectMCP(cctx, u.cfg, opt, a)
	stop()
	cancel() // the session keeps going (its upkeep does not take cancellation)
	if err != nil {
		if refused := a.takeRefusal(); refused != nil {
			return nil, refused
		}
		return nil, err
	}
	us = &userMCP{src: src, auth: a, used: time.Now()}
	a.rekey = func(fresh string) { u.alias(us, fresh) }
	u.mu.Lock()
	if prev, ok := u.sessions[key]; ok || u.closed { // made meanwhile, or closed
		u.mu.Unlock()
		_ = src.Close()
		if !ok {
			return nil, fmt.Errorf("mcp server %q: %w", u.cfg.ID, ErrMCPClosed)
		}
		return prev, nil
	}
	u.sessions[key] = us
	u.all = append(u.all, us)
	if u.tools == nil {
		u.tools = src.Tools()
	}
	reaped = u.reapLocked(time.Now())
	u.mu.Unlock()
	closeAll(reaped)
	return us, nil
}

// alias files us also under the token it was refreshed to, so that the
// user's next call (made with it) takes the same session.
func (u *MCPUserSource) alias(us *userMCP, fresh string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.closed {
		u.sessions[tokenKey(fresh)] = us
	}
}

// setTools follows a session's new tool list.
func (u *MCPUserSource) setTools(ts []*Tool) {
	u.mu.Lock()
	u.tools = ts
	u.mu.Unlock()
	if u.opt.OnChange != nil {
		u.opt.OnChange(ts)
	}
}

// reapLocked takes out the sessions unused for u.idle and, beyond
// u.maxUsers, the least recently used; it answers them to be closed.
func (u *MCPUserSource) reapLocked(now time.Time) []*MCPSource {
	var gone []*userMCP
	u.all = slices.DeleteFunc(u.all, func(us *userMCP) bool {
		idle := now.Sub(us.used) > u.idle
		if idle {
			gone = append(gone, us)
		}
		return idle
	})
	if len(u.all) > u.maxUsers {
		slices.SortFunc(u.all, func(a, b *userMCP) int { return b.used.Compare(a.used) }) // most recent first
		gone = append(gone, u.all[u.maxUsers:]...)
		u.all = u.all[:u.maxUsers]
	}
	if len(gone) == 0 {
		return nil
	}
	out := make([]*MCPSource, 0, len(gone))
	for _, us := range gone {
		out = append(out, us.src)
	}
	maps.DeleteFunc(u.sessions, func(_ string, us *userMCP) bool { return slices.Contains(gone, us) })
	return out
}

// closeAll closes sessions taken out (in the background: a server slow
// to end a session must not hold up the call that reaped it).
func closeAll(srcs []*MCPSource) {
	for _, src := range srcs {
		go func() { _ = src.Close() }()
	}
}

// Close ends every user's session.
func (u *MCPUserSource) Close() error {
	u.mu.Lock()
	u.closed = true
	all := u.all
	u.all, u.sessions = nil, map[string]*userMCP{}
	u.mu.Unlock()
	var errs []error
	for _, us := range all {
		errs = append(errs, us.src.Close())
	}
	return errors.Join(errs...)
}

// userMCPAuth authorizes one user's session (auth.OAuthHandler): the
// user's current access token, and after a 401 a fresh one from the
// TokenRefresher of the call being sent.
type userMCPAuth struct {
	provider string
	rekey    func(fresh string) // files the session under a refreshed token

	mu      sync.Mutex
	token   string
	refresh TokenRefresher // of the latest call; nil: none
	ctx     context.Context
	refused *RefusedError // why the last refresh failed (a broken connection)
}

// use notes the call about to be sent: its token (refreshed before it
// expired, the connections store gives the new one) and its refresher.
func (a *userMCPAuth) use(ctx context.Context, token string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token = token
	if f, ok := ctx.Value(refresherKey{}).(TokenRefresher); ok {
		a.refresh, a.ctx = f, ctx
	}
}

func (a *userMCPAuth) takeRefusal() *RefusedError {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.refused
	a.refused = nil
	return r
}

// TokenSource is the user's current token (auth.OAuthHandler).
func (a *userMCPAuth) TokenSource(context.Context) (oauth2.TokenSource, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return oauth2.StaticTokenSource(&oauth2.Token{AccessToken: a.token, TokenType: "Bearer"}), nil
}

// Authorize refreshes the user's token once after the server refused it
// with a 401 that says it expired (auth.OAuthHandler); the transport
// then sends the request again.
func (a *userMCPAuth) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !TokenExpired(resp.Header) {
		return fmt.Errorf("the MCP server refused the user's token (%s)", resp.Status)
	}
	stale, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	f, fctx := a.refresh, a.ctx
	a.mu.Unlock()
	if g, ok := ctx.Value(refresherKey{}).(TokenRefresher); ok {
		f, fctx = g, ctx
	}
	if f == nil {
		return fmt.Errorf("the MCP server refused the user's token (%s) and it cannot be refreshed here", resp.Status)
	}
	if fctx.Err() != nil {
		fctx = context.WithoutCancel(fctx)
	}
	fresh, err := f(fctx, a.provider, stale)
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			a.mu.Lock()
			a.refused = refused
			a.mu.Unlock()
		}
		return err
	}
	if fresh == "" || fresh == stale {
		return fmt.Errorf("the MCP server refused the user's token (%s)", resp.Status)
	}
	AddCallSecrets(fctx, fresh)
	a.mu.Lock()
	a.token = fresh
	a.mu.Unlock()
	if a.rekey != nil {
		a.rekey(fresh)
	}
	return nil
}

// tokenKey names a session by the access token it was given (the whole
// SHA-256: two users' tokens never share a session).
func tokenKey(token string) string {
	sum := sha256.Sum256([]byte("trawl-mcp-session:" + token))
	return hex.EncodeToString(sum[:])
}
