package deploy

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/sync/singleflight"

	"github.com/trawl-dev/trawl/tools"
)

// An OAuth connection is kept like a pasted token — sealed per user and
// toolkit under connKey — as oauthMagic followed by its oauthRecord in
// JSON, so that every token in it is sealed at rest (in bbolt or Redis).
var oauthMagic = []byte("\x00oauth2\x00")

// oauthRecord is a user's OAuth connection to a toolkit.
type oauthRecord struct {
	Access   string    `json:"access,omitempty"`
	Refresh  string    `json:"refresh,omitempty"`
	Expiry   time.Time `json:"expiry,omitzero"`   // of Access; zero: unknown
	Obtained time.Time `json:"obtained,omitzero"` // when Access was issued
	Scopes   string    `json:"scopes,omitempty"`  // as granted
	// Connected is when the user connected; LastRefresh when the tokens
	// were last refreshed (zero: never).
	Connected   time.Time `json:"connected,omitzero"`
	LastRefresh time.Time `json:"last_refresh,omitzero"`
	// Broken says why the connection stopped working (a refresh the
	// provider refused); its tokens are then gone.
	Broken string `json:"broken,omitempty"`
}

// refreshLocker serializes the refreshes of one credential across the
// replicas (Redis) or within the process (the embedded store).
type refreshLocker interface {
	// Lock holds key until the returned unlock is called, or ttl passes.
	Lock(ctx context.Context, key string, ttl time.Duration) (unlock func(), err error)
}

// memLocks is refreshLocker within one process.
type memLocks struct {
	mu   sync.Mutex
	held map[string]chan struct{}
}

func (m *memLocks) Lock(ctx context.Context, key string, _ time.Duration) (func(), error) {
	for {
		m.mu.Lock()
		if m.held == nil {
			m.held = map[string]chan struct{}{}
		}
		ch, busy := m.held[key]
		if !busy {
			ch = make(chan struct{})
			m.held[key] = ch
			m.mu.Unlock()
			return func() {
				m.mu.Lock()
				delete(m.held, key)
				m.mu.Unlock()
				close(ch)
			}, nil
		}
		m.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// oauthState is the state of the Connections' OAuth toolkits: their
// clients, the refresh lock and the in-process single flight.
type oauthState struct {
	clients map[string]*tools.OAuthClient // by toolkit
	locks   refreshLocker
	flight  singleflight.Group
}

// SetOAuth gives the toolkits users connect with OAuth and the lock
// their refreshes take.
func (c *Connections) SetOAuth(clients map[string]*tools.OAuthClient, locks refreshLocker) {
	if locks == nil {
		locks = &memLocks{}
	}
	c.oauth = &oauthState{clients: clients, locks: locks}
}

// OAuthClient is the OAuth client of toolkit, when its users connect it
// with OAuth (authorization code).
func (c *Connections) OAuthClient(toolkit string) (*tools.OAuthClient, bool) {
	if c.oauth == nil {
		return nil, false
	}
	cl, ok := c.oauth.clients[toolkit]
	return cl, ok
}

func (c *Connections) loadOAuth(ctx context.Context, user, toolkit string) (oauthRecord, bool, error) {
	var rec oauthRecord
	sealed, ok, err := c.sealed.Get(ctx, connKey(user, toolkit))
	if err != nil || !ok || len(sealed) == 0 {
		return rec, false, err
	}
	plain, err := c.sealer.Open(sealed, []byte(connKey(user, toolkit)))
	if err != nil {
		return rec, false, fmt.Errorf("opening a stored connection (damaged): %w", err)
	}
	body, isOAuth := bytes.CutPrefix(plain, oauthMagic)
	if !isOAuth {
		return rec, false, nil
	}
	if err := json.Unmarshal(body, &rec); err != nil {
		return rec, false, fmt.Errorf("a stored OAuth connection is damaged: %w", err)
	}
	return rec, true, nil
}

// oauthCredential reads an OAuth record out of an opened connection:
// its access token, and false when the connection is broken.
func oauthCredential(plain []byte, now time.Time) (cred string, isOAuth, ok bool) {
	body, isOAuth := bytes.CutPrefix(plain, oauthMagic)
	if !isOAuth {
		return string(plain), false, true
	}
	var rec oauthRecord
	if json.Unmarshal(body, &rec) != nil || rec.broken(now) != "" || rec.Access == "" {
		return "", true, false
	}
	return rec.Access, true, true
}

func (c *Connections) storeOAuth(ctx context.Context, user, toolkit string, rec oauthRecord) error {
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	sealed, err := c.sealer.Seal(append(bytes.Clone(oauthMagic), body...), []byte(connKey(user, toolkit)))
	if err != nil {
		return err
	}
	return c.sealed.Put(ctx, connKey(user, toolkit), sealed)
}

// StoreOAuth keeps the tokens an authorization-code exchange gave user
// for toolkit, sealed.
func (c *Connections) StoreOAuth(ctx context.Context, user, toolkit string, tok *oauth2.Token) error {
	// Under the refresh lock: a refresh of the old grant running now
	// would otherwise store its answer (or mark the connection broken)
	// over the new one.
	if c.oauth != nil {
		unlock, err := c.oauth.locks.Lock(ctx, "oauth-refresh:"+TokenHash(connKey(user, toolkit)), refreshLockTTL)
		if err != nil {
			return fmt.Errorf("waiting for a refresh of the old connection: %w", err)
		}
		defer unlock()
	}
	now := c.now()
	return c.storeOAuth(ctx, user, toolkit, oauthRecord{Access: tok.AccessToken, Refresh: tok.RefreshToken,
		Expiry: tok.Expiry, Obtained: now, Scopes: grantedScopes(tok), Connected: now})
}

func grantedScopes(tok *oauth2.Token) string {
	s, _ := tok.Extra("scope").(string)
	return strings.Join(strings.Fields(s), " ")
}

// broken says why the connection no longer works at now ("" when it
// does): the reason stored when a refresh was refused, or — for a
// connection the provider gave no refresh token — that its access token
// has expired, which nothing stored says until its next call.
func (r oauthRecord) broken(now time.Time) string {
	if r.Broken == "" && r.Refresh == "" && !r.Expiry.IsZero() && !now.Before(r.Expiry) {
		return tools.ErrNoRefreshToken.Error()
	}
	return r.Broken
}

// usable reports whether the record's access token is to be sent as it
// is at now: it is not near its expiry — or it is, but there is no
// refresh token to replace it with, and it has not expired yet (a grant
// without one is used to its last second, not declared ended a minute
// early).
func (r oauthRecord) usable(now time.Time) bool {
	if !tools.TokenExpiring(r.Expiry, r.Obtained, now) {
		return true
	}
	return r.Refresh == "" && now.Before(r.Expiry)
}

// BrokenRefusal is what the model reads of a broken connection.
func BrokenRefusal(toolkit, why string) *tools.RefusedError {
	return tools.ConnectionBroken(&tools.Tool{Provider: toolkit, Kind: tools.KindApp}, why)
}

// Broken says why user's connection to toolkit stopped working ("" when
// it works or there is none).
func (c *Connections) Broken(ctx context.Context, user, toolkit string) (string, error) {
	rec, ok, err := c.loadOAuth(ctx, user, toolkit)
	if err != nil || !ok {
		return "", err
	}
	return rec.broken(c.now()), nil
}

// AccessToken is user's credential for toolkit: a pasted one as it is;
// an OAuth access token refreshed first when it is near its expiry.
func (c *Connections) AccessToken(ctx context.Context, user, toolkit string) (string, bool, error) {
	if _, isOAuth := c.OAuthClient(toolkit); !isOAuth {
		return c.Credential(ctx, user, toolkit)
	}
	rec, ok, err := c.loadOAuth(ctx, user, toolkit)
	if err != nil || !ok {
		if err == nil {
			return c.Credential(ctx, user, toolkit) // a token pasted before the toolkit took OAuth
		}
		return "", false, err
	}
	if why := rec.broken(c.now()); why != "" {
		return "", false, BrokenRefusal(toolkit, why)
	}
	if rec.usable(c.now()) {
		return rec.Access, true, nil
	}
	tok, err := c.Refresh(ctx, user, toolkit, rec.Access)
	if err != nil && ctx.Err() == nil && refreshUnavailable(err) && c.now().Before(rec.Expiry) {
		// The refresh could not be made now (the authorization server
		// unavailable, another replica's refresh not answering), but the
		// token works until it expires: it is sent, and the next call
		// refreshes again.
		return rec.Access, true, nil
	}
	return tok, err == nil, err
}

// errRefreshLockWait is (wrapped) a refresh that could not take the
// refresh lock: another replica's refresh held it too long.
var errRefreshLockWait = errors.New("waiting for another replica's refresh")

// refreshUnavailable reports a refresh that failed for want of the
// authorization server (provider_unavailable) or of the lock — not one
// refused, nor a connection gone (disconnected meanwhile, broken).
func refreshUnavailable(err error) bool {
	var refused *tools.RefusedError
	return errors.Is(err, errRefreshLockWait) || errors.As(err, &refused) && refused.Code == tools.CodeProviderUnavailable
}

// Secrets are the secrets of user's OAuth connection to toolkit that are
// not its access token (the refresh token), for the scrubber of a call
// made with it; none for a pasted token or when it cannot be read.
func (c *Connections) Secrets(ctx context.Context, user, toolkit string) []string {
	if _, isOAuth := c.OAuthClient(toolkit); !isOAuth {
		return nil
	}
	rec, ok, err := c.loadOAuth(ctx, user, toolkit)
	if err != nil || !ok || rec.Refresh == "" {
		return nil
	}
	return []string{rec.Refresh}
}

// refreshLockTTL bounds how long a replica that died mid-refresh holds
// the others off.
const refreshLockTTL = 30 * time.Second

// refreshTimeout bounds a refresh once it holds the lock: the token
// request and the sealing of its answer. Shorter than refreshLockTTL, so
// that the lock outlives the refresh it guards.
const refreshTimeout = 20 * time.Second

// Refresh gets user a fresh access token for toolkit in place of stale
// (near its expiry, or refused with a 401): one refresh per credential at
// a time — in this process by single flight, across replicas by the
// lock — and none when another already replaced stale. A rotated refresh
// token is sealed with the new access token before the old one is
// dropped; the refresh runs detached from ctx (bounded by
// refreshTimeout), so that a caller who goes away while the token
// request is on its way — it then answers ctx's error — does not lose
// the rotated token the provider answers with. A refresh the provider
// definitely refuses (tools.RefreshRefused) marks the connection broken
// and answers BrokenRefusal; one it could not answer (unavailable, a
// 5xx, trawl's client misconfigured) keeps the connection and its
// tokens and answers provider_unavailable: the next call refreshes
// again.
func (c *Connections) Refresh(ctx context.Context, user, toolkit, stale string) (string, error) {
	client, ok := c.OAuthClient(toolkit)
	if !ok {
		return "", nil
	}
	key := connKey(user, toolkit)
	detached := context.WithoutCancel(ctx)
	ch := c.oauth.flight.DoChan(key+"\x00"+TokenHash(stale), func() (any, error) {
		lctx, cancel := context.WithTimeout(detached, refreshLockTTL)
		unlock, err := c.oauth.locks.Lock(lctx, "oauth-refresh:"+TokenHash(key), refreshLockTTL)
		cancel()
		if err != nil {
			return "", fmt.Errorf("%w: %w", errRefreshLockWait, err)
		}
		defer unlock()
		rctx, cancel := context.WithTimeout(detached, refreshTimeout)
		defer cancel()
		return c.refreshLocked(rctx, client, user, toolkit, stale)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(string), nil
	case <-ctx.Done():
		return "", ctx.Err() // the refresh goes on, and stores what it gets
	}
}

// refreshLocked is Refresh's work, under its lock.
func (c *Connections) refreshLocked(ctx context.Context, client *tools.OAuthClient, user, toolkit, stale string) (string, error) {
	rec, ok, err := c.loadOAuth(ctx, user, toolkit)
	switch {
	case err != nil:
		return "", err
	case !ok:
		return "", tools.NeedsCredential(&tools.Tool{Provider: toolkit, Kind: tools.KindApp})
	case rec.Broken != "":
		return "", BrokenRefusal(toolkit, rec.Broken)
	case rec.Access != stale && rec.usable(c.now()):
		return rec.Access, nil // refreshed meanwhile, here or on another replica
	}
	tok, err := client.Refresh(ctx, rec.Refresh)
	if err != nil {
		why := tools.OAuthFailure(err)
		if !tools.RefreshRefused(err) {
			// Not the user's grant refused: the connection and its
			// tokens are kept for the next try.
			return "", tools.ProviderUnavailable(toolkit, "its connection could not be refreshed: "+why)
		}
		broken := oauthRecord{Broken: why, Scopes: rec.Scopes, Connected: rec.Connected, LastRefresh: rec.LastRefresh}
		if err := c.storeOAuth(ctx, user, toolkit, broken); err != nil {
			return "", err
		}
		return "", BrokenRefusal(toolkit, why)
	}
	now := c.now()
	next := oauthRecord{Access: tok.AccessToken, Refresh: tok.RefreshToken, Expiry: tok.Expiry, Obtained: now,
		Scopes: rec.Scopes, Connected: rec.Connected, LastRefresh: now}
	if next.Refresh == "" {
		next.Refresh = rec.Refresh // not rotated
	}
	if s := grantedScopes(tok); s != "" {
		next.Scopes = s
	}
	// Sealed before the lock goes: the provider may have retired the old
	// refresh token already.
	if err := c.storeOAuth(ctx, user, toolkit, next); err != nil {
		return "", err
	}
	return next.Access, nil
}

// ConnectionInfo is one of a user's connections as the API lists it.
type ConnectionInfo struct {
	Toolkit     string     `json:"toolkit"`
	Kind        string     `json:"kind"` // "oauth2" or "token"
	Status      string     `json:"status"`
	Broken      string     `json:"broken,omitempty"`
	Scopes      []string   `json:"scopes,omitempty"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	LastRefresh *time.Time `json:"last_refresh,omitempty"`
	ConnectedAt *time.Time `json:"connected_at,omitempty"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// List is user's stored connections, by toolkit — never a token.
func (c *Connections) List(ctx context.Context, user string) ([]ConnectionInfo, error) {
	prefix := "u=" + url.PathEscape(user) + ";t="
	var out []ConnectionInfo
	err := c.sealed.ForEach(ctx, func(k string, sealed []byte) error {
		tkEsc, ok := strings.CutPrefix(k, prefix)
		if !ok || len(sealed) == 0 {
			return nil
		}
		tk, err := url.PathUnescape(tkEsc)
		if err != nil {
			return nil
		}
		plain, err := c.sealer.Open(sealed, []byte(k))
		if err != nil {
			return nil // damaged: not listed
		}
		info := ConnectionInfo{Toolkit: tk, Kind: "token", Status: "connected"}
		if body, isOAuth := bytes.CutPrefix(plain, oauthMagic); isOAuth {
			var rec oauthRecord
			if json.Unmarshal(body, &rec) != nil {
				return nil
			}
			info.Kind, info.Scopes = "oauth2", strings.Fields(rec.Scopes)
			info.ExpiresAt, info.LastRefresh, info.ConnectedAt = timePtr(rec.Expiry), timePtr(rec.LastRefresh), timePtr(rec.Connected)
			if why := rec.broken(c.now()); why != "" {
				info.Status, info.Broken, info.ExpiresAt = "broken", why, nil
			}
		}
		out = append(out, info)
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Toolkit < out[j].Toolkit })
	return out, err
}

// Disconnect ends user's connection to toolkit: an OAuth one's tokens
// are revoked at the provider first (RFC 7009, when it has a revocation
// endpoint), then the sealed record is deleted either way. found is
// false when there was none; revokeErr says why the provider did not
// revoke.
func (c *Connections) Disconnect(ctx context.Context, user, toolkit string) (found bool, revoked bool, revokeErr error, err error) {
	rec, isOAuth, err := c.loadOAuth(ctx, user, toolkit)
	if err != nil {
		return false, false, nil, err
	}
	if client, ok := c.OAuthClient(toolkit); ok && isOAuth && client.CanRevoke() && rec.Broken == "" {
		revokeErr = client.Revoke(ctx, rec.Refresh, "refresh_token")
		if revokeErr == nil {
			revokeErr = client.Revoke(ctx, rec.Access, "access_token")
		}
		revoked = revokeErr == nil
	}
	found, err = c.sealed.Delete(ctx, connKey(user, toolkit))
	return found, revoked, revokeErr, err
}

// oauthGrant binds an authorization request's state to the user and
// session that asked for the link and to the browser that opened it; it
// holds the PKCE verifier sealed (grants may live in Redis).
type oauthGrant struct {
	User, Toolkit string
	Session       string // hash of the session token; "" for the admin key
	Browser       string // hash of the browser's cookie
	Verifier      string // sealed, base64
	Expires       time.Time
}

// StartOAuth turns an opened connect link's grant into an authorization
// request: it returns the state and the PKCE verifier, bound to the
// browser whose cookie value is browser.
func (c *Connections) StartOAuth(ctx context.Context, g ConnectGrant, browser string) (state, verifier string, err error) {
	client, ok := c.OAuthClient(g.Toolkit)
	if !ok {
		return "", "", fmt.Errorf("toolkit %s is not connected with OAuth", g.Toolkit)
	}
	verifier = client.NewVerifier()
	state = RandomHex(32)
	sealedV, err := c.sealer.Seal([]byte(verifier), []byte("oauth-state:"+TokenHash(state)))
	if err != nil {
		return "", "", err
	}
	og := oauthGrant{User: g.User, Toolkit: g.Toolkit, Session: g.Session, Browser: TokenHash(browser),
		Verifier: base64.RawStdEncoding.EncodeToString(sealedV), Expires: c.now().Add(ConnectAttemptTTL)}
	v, err := json.Marshal(og)
	if err != nil {
		return "", "", err
	}
	stored, err := c.grants.PutGrant(ctx, "oauth:"+TokenHash(state), v, ConnectAttemptTTL)
	if err != nil {
		return "", "", err
	}
	if !stored {
		return "", "", ErrTooManyPending
	}
	return state, verifier, nil
}

// FinishOAuth spends the authorization request of state, once: ok only
// within its TTL and from the browser that started it. The browser is
// compared before the request is spent, so a callback without its
// cookie (another browser, a lure) leaves it for the right one. It
// returns the grant (User, Toolkit, Session) and the PKCE verifier.
func (c *Connections) FinishOAuth(ctx context.Context, state, browser string) (g ConnectGrant, verifier string, ok bool, err error) {
	if state == "" || browser == "" {
		return g, "", false, nil
	}
	read := func(spend bool) (oauthGrant, bool, error) {
		var og oauthGrant
		v, found, err := c.grants.TakeGrant(ctx, "oauth:"+TokenHash(state), spend)
		if err != nil || !found {
			return og, false, err
		}
		if err := json.Unmarshal(v, &og); err != nil {
			return og, false, fmt.Errorf("a stored OAuth grant is damaged: %w", err)
		}
		return og, !c.now().After(og.Expires) && subtle.ConstantTimeCompare([]byte(og.Browser), []byte(TokenHash(browser))) == 1, nil
	}
	if _, ok, err := read(false); !ok || err != nil {
		return g, "", false, err
	}
	og, ok, err := read(true) // of two concurrent callbacks, one gets it
	if !ok || err != nil {
		return g, "", false, err
	}
	sealedV, err := base64.RawStdEncoding.DecodeString(og.Verifier)
	if err != nil {
		return g, "", false, fmt.Errorf("a stored OAuth grant is damaged: %w", err)
	}
	plain, err := c.sealer.Open(sealedV, []byte("oauth-state:"+TokenHash(state)))
	if err != nil {
		return g, "", false, fmt.Errorf("a stored OAuth grant is damaged: %w", err)
	}
	return ConnectGrant{User: og.User, Toolkit: og.Toolkit, Session: og.Session, Expires: og.Expires}, string(plain), true, nil
}

// NoteFailure keeps why user's attempt to connect toolkit failed, as a
// broken connection, so that the model's next call says it in words.
func (c *Connections) NoteFailure(ctx context.Context, user, toolkit, why string) error {
	return c.storeOAuth(ctx, user, toolkit, oauthRecord{Broken: why})
}
