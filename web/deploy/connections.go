package deploy

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Connections keeps the connected-app credentials users store on the
// connect page, sealed with the deployment's own key (saved in data_dir),
// and the short-lived codes and attempts that guard that page.
//
// A connect link carries a code bound to the user and the session that
// asked for it. Opening the link spends the code: it becomes an attempt
// bound to that browser by a cookie, with a CSRF token in the form; only
// the cookie and the token together, same-origin, within the attempt's
// TTL and while the session lives, store a credential — once. So a link
// someone else opens first or a form posted from another site stores
// nothing, and the page names the account it connects.
type Connections struct {
	sealed Records // sealed credentials by connKey
	grants grants  // codes ("code:<hash>") and attempts ("attempt:<hash>")
	sealer *Sealer
	orgTKs func(toolkit string) bool // toolkits with an organization credential
	now    func() time.Time
	oauth  *oauthState // nil: no toolkit connects with OAuth (connections_oauth.go)
}

// ConnectGrant is what a code or an attempt lets its holder do: store a
// credential for User's Toolkit while Session lives.
type ConnectGrant struct {
	User, Toolkit string
	Session       string // hash of the session token; "" for the admin key
	CSRF          string // attempts only
	Expires       time.Time
}

// ConnectCodeTTL is how long a connect link works; ConnectAttemptTTL is
// how long the page, once opened, accepts the form; connectPending
// bounds the codes and attempts held at once.
const (
	ConnectCodeTTL    = 10 * time.Minute
	ConnectAttemptTTL = 10 * time.Minute
	connectPending    = 10000
)

func newConnections(sealed Records, grants grants, key []byte, orgTKs func(string) bool, now func() time.Time) (*Connections, error) {
	sealer, err := NewSealer(key)
	if err != nil {
		return nil, err
	}
	return &Connections{sealed: sealed, grants: grants, sealer: sealer, orgTKs: orgTKs, now: now}, nil
}

// deploymentKey is a 256-bit key generated on first start and kept in
// data_dir, for sealing stored credentials.
func deploymentKey(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, "secret_key")
	if b, err := os.ReadFile(path); err == nil {
		if k, err := hex.DecodeString(strings.TrimSpace(string(b))); err == nil && len(k) == 32 {
			return k, nil
		}
		return nil, fmt.Errorf("%s is damaged: it must hold 64 hex digits", path)
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("saving the deployment key: %w", err)
	}
	return k, nil
}

func connKey(user, toolkit string) string {
	return "u=" + url.PathEscape(user) + ";t=" + url.PathEscape(toolkit)
}

// Credential returns the credential user stored for toolkit, if any.
func (c *Connections) Credential(ctx context.Context, user, toolkit string) (string, bool, error) {
	sealed, ok, err := c.sealed.Get(ctx, connKey(user, toolkit))
	if err != nil || !ok || len(sealed) == 0 {
		return "", false, err
	}
	plain, err := c.sealer.Open(sealed, []byte(connKey(user, toolkit)))
	if err != nil {
		return "", false, fmt.Errorf("opening a stored connection (damaged): %w", err)
	}
	cred, _, ok := oauthCredential(plain, c.now()) // an OAuth connection's access token; a broken one is none
	return cred, ok, nil
}

// Store seals credential and keeps it as user's for toolkit.
func (c *Connections) Store(ctx context.Context, user, toolkit, credential string) error {
	sealed, err := c.sealer.Seal([]byte(credential), []byte(connKey(user, toolkit)))
	if err != nil {
		return err
	}
	return c.sealed.Put(ctx, connKey(user, toolkit), sealed)
}

// Connected reports whether toolkit's calls have a credential for user:
// the organization's, the session's runtime one, or one stored here.
func (c *Connections) Connected(ctx context.Context, user string, session map[string]string, toolkit string) (bool, error) {
	if c.orgTKs(toolkit) || session[toolkit] != "" {
		return true, nil
	}
	_, ok, err := c.Credential(ctx, user, toolkit)
	return ok, err
}

// ErrTooManyPending refuses a connect link while too many are pending.
var ErrTooManyPending = errors.New("too many connect links are pending; try again in a few minutes")

// put stores g under a new random secret of kind ("code", "attempt")
// until g expires, and returns the secret.
func (c *Connections) put(ctx context.Context, kind string, g ConnectGrant) (string, error) {
	v, err := json.Marshal(g)
	if err != nil {
		return "", err
	}
	secret := RandomHex(20)
	stored, err := c.grants.PutGrant(ctx, kind+":"+TokenHash(secret), v, g.Expires.Sub(c.now()))
	if err != nil {
		return "", err
	}
	if !stored {
		return "", ErrTooManyPending
	}
	return secret, nil
}

// take returns the unexpired grant of kind for toolkit stored under
// secret; spend removes it (a grant for another toolkit is left alone).
func (c *Connections) take(ctx context.Context, kind, secret, toolkit string, spend bool) (ConnectGrant, bool, error) {
	if secret == "" {
		return ConnectGrant{}, false, nil
	}
	k := kind + ":" + TokenHash(secret)
	read := func(spend bool) (ConnectGrant, bool, error) {
		var g ConnectGrant
		v, ok, err := c.grants.TakeGrant(ctx, k, spend)
		if err != nil || !ok {
			return g, false, err
		}
		if err := json.Unmarshal(v, &g); err != nil {
			return g, false, fmt.Errorf("a stored connect grant is damaged: %w", err)
		}
		return g, g.Toolkit == toolkit && !c.now().After(g.Expires), nil
	}
	g, ok, err := read(false)
	if !ok || !spend {
		return g, ok, err
	}
	return read(true) // of two concurrent spends, one gets it
}

// Code mints a connect code for the user of a session and toolkit.
func (c *Connections) Code(ctx context.Context, user, session, toolkit string) (string, error) {
	return c.put(ctx, "code", ConnectGrant{User: user, Toolkit: toolkit, Session: session, Expires: c.now().Add(ConnectCodeTTL)})
}

// Open spends a code and starts an attempt: it returns the attempt's
// cookie value. The attempt's page names the account it connects; an
// OAuth toolkit's confirms, and its post starts the authorization
// request (StartOAuth) and spends the attempt.
func (c *Connections) Open(ctx context.Context, code, toolkit string) (string, ConnectGrant, bool, error) {
	g, ok, err := c.take(ctx, "code", code, toolkit, true)
	if !ok || err != nil {
		return "", g, false, err
	}
	g.CSRF, g.Expires = RandomHex(32), c.now().Add(ConnectAttemptTTL)
	cookie, err := c.put(ctx, "attempt", g)
	return cookie, g, err == nil, err
}

// Attempt returns the attempt a cookie binds; spend ends it.
func (c *Connections) Attempt(ctx context.Context, cookie, toolkit string, spend bool) (ConnectGrant, bool, error) {
	return c.take(ctx, "attempt", cookie, toolkit, spend)
}
