package web

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/tools"
)

// connections keeps the connected-app credentials users store on the
// connect page, sealed with the deployment's own key (saved in data_dir),
// and the short-lived codes that open that page.
type connections struct {
	db     *bolt.DB
	aead   cipher.AEAD
	orgTKs func(toolkit string) bool // toolkits with an organization credential

	mu    sync.Mutex
	codes map[string]connectCode // by code hash
}

type connectCode struct {
	User, Toolkit string
	Expires       time.Time
}

var bucketConnections = []byte("connections")

// connectCodeTTL is how long a connect link works.
const connectCodeTTL = 15 * time.Minute

func newConnections(db *bolt.DB, dataDir string, orgTKs func(string) bool) (*connections, error) {
	key, err := deploymentKey(dataDir)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketConnections)
		return err
	}); err != nil {
		return nil, err
	}
	return &connections{db: db, aead: aead, orgTKs: orgTKs, codes: map[string]connectCode{}}, nil
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

func connKey(user, toolkit string) []byte {
	return []byte("u=" + url.PathEscape(user) + ";t=" + url.PathEscape(toolkit))
}

// Credential returns the credential user stored for toolkit, if any.
func (c *connections) Credential(ctx context.Context, user, toolkit string) (string, bool, error) {
	var sealed []byte
	err := c.db.View(func(tx *bolt.Tx) error {
		sealed = append(sealed, tx.Bucket(bucketConnections).Get(connKey(user, toolkit))...)
		return nil
	})
	if err != nil || len(sealed) == 0 {
		return "", false, err
	}
	n := c.aead.NonceSize()
	if len(sealed) < n {
		return "", false, errors.New("stored connection is damaged")
	}
	plain, err := c.aead.Open(nil, sealed[:n], sealed[n:], connKey(user, toolkit))
	if err != nil {
		return "", false, fmt.Errorf("opening a stored connection: %w", err)
	}
	return string(plain), true, nil
}

func (c *connections) store(user, toolkit, credential string) error {
	nonce := make([]byte, c.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := c.aead.Seal(nonce, nonce, []byte(credential), connKey(user, toolkit))
	return c.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketConnections).Put(connKey(user, toolkit), sealed)
	})
}

// Connected reports whether toolkit's calls have a credential for user:
// the organization's, the session's runtime one, or one stored here.
func (c *connections) Connected(ctx context.Context, user string, session map[string]string, toolkit string) (bool, error) {
	if c.orgTKs(toolkit) || session[toolkit] != "" {
		return true, nil
	}
	_, ok, err := c.Credential(ctx, user, toolkit)
	return ok, err
}

// code mints a connect code for user and toolkit.
func (c *connections) code(user, toolkit string) string {
	code := randomHex(20)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for k, v := range c.codes {
		if now.After(v.Expires) {
			delete(c.codes, k)
		}
	}
	c.codes[tokenHash(code)] = connectCode{User: user, Toolkit: toolkit, Expires: now.Add(connectCodeTTL)}
	return code
}

// redeem checks a code; use consumes it.
func (c *connections) redeem(code, toolkit string, use bool) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := tokenHash(code)
	v, ok := c.codes[h]
	if !ok || v.Toolkit != toolkit || time.Now().After(v.Expires) {
		return "", false
	}
	if use {
		delete(c.codes, h)
	}
	return v.User, true
}

var connectPage = template.Must(template.New("connect").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Connect {{.Name}} — trawl</title>
<style>body{font:16px system-ui,sans-serif;max-width:34rem;margin:4rem auto;padding:0 1rem;color:#1d2330}
input{width:100%;padding:.6rem;font:inherit;margin:.5rem 0 1rem;box-sizing:border-box}
button{padding:.6rem 1.2rem;font:inherit}.ok{color:#17703a}.err{color:#a3261b}</style></head>
<body><h1>Connect {{.Name}}</h1>
{{if .Done}}<p class="ok">{{.Name}} is connected. You can close this page and go back to the chat.</p>
{{else if .Invalid}}<p class="err">This link has expired or was already used. Ask the assistant for a new one.</p>
{{else}}<p>{{.Description}}</p>
<form method="post"><input type="hidden" name="code" value="{{.Code}}">
<label>Access token for {{.Name}}<input name="credential" type="password" autocomplete="off" required></label>
<button type="submit">Connect</button></form>
<p>The token is stored encrypted and used only for your own requests to {{.Name}}.</p>{{end}}
</body></html>`))

type connectView struct {
	Name, Description, Code string
	Done, Invalid           bool
}

func (s *Server) toolkitInfo(toolkit string) (name, desc string, ok bool) {
	for _, t := range s.catalog.Provider(toolkit) {
		if t.Kind == tools.KindApp {
			return t.ToolkitName, t.ToolkitDescription, true
		}
	}
	return "", "", false
}

// connectForm shows the page where a user stores a toolkit credential.
func (s *Server) connectForm(c echo.Context) error {
	name, desc, ok := s.toolkitInfo(c.Param("toolkit"))
	if !ok {
		return notFound("no toolkit " + c.Param("toolkit"))
	}
	code := c.QueryParam("code")
	_, valid := s.conns.redeem(code, c.Param("toolkit"), false)
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Content-Type", "text/html; charset=utf-8")
	return connectPage.Execute(c.Response(), connectView{Name: name, Description: desc, Code: code, Invalid: !valid})
}

// connectSubmit stores the credential a user entered.
func (s *Server) connectSubmit(c echo.Context) error {
	tk := c.Param("toolkit")
	name, _, ok := s.toolkitInfo(tk)
	if !ok {
		return notFound("no toolkit " + tk)
	}
	cred := strings.TrimSpace(c.FormValue("credential"))
	user, valid := s.conns.redeem(c.FormValue("code"), tk, cred != "")
	c.Response().Header().Set("Cache-Control", "no-store")
	c.Response().Header().Set("Content-Type", "text/html; charset=utf-8")
	if !valid || cred == "" {
		c.Response().WriteHeader(http.StatusBadRequest)
		return connectPage.Execute(c.Response(), connectView{Name: name, Invalid: true})
	}
	if err := s.conns.store(user, tk, cred); err != nil {
		return internal(err)
	}
	return connectPage.Execute(c.Response(), connectView{Name: name, Done: true})
}

// connectionsFor adapts the store to the runner for one user's turn.
type userConnections struct {
	s       *Server
	user    string
	session map[string]string
}

func (u userConnections) Connected(ctx context.Context, toolkit string) (bool, error) {
	return u.s.conns.Connected(ctx, u.user, u.session, toolkit)
}

func (u userConnections) Credential(ctx context.Context, toolkit string) (string, error) {
	if c := u.session[toolkit]; c != "" {
		return c, nil
	}
	c, _, err := u.s.conns.Credential(ctx, u.user, toolkit)
	return c, err
}

func (u userConnections) ConnectLink(_ context.Context, toolkit string) (string, error) {
	code := u.s.conns.code(u.user, toolkit)
	return strings.TrimRight(u.s.publicURL(), "/") + "/connect/" + url.PathEscape(toolkit) + "?code=" + code, nil
}

// publicURL is where users reach this deployment.
func (s *Server) publicURL() string {
	if s.cfg.PublicURL != "" {
		return s.cfg.PublicURL
	}
	return "http://" + s.cfg.Listen
}
