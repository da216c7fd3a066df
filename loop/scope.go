package loop

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
)

// Scope says on whose behalf a tool call runs. It decides who may read a
// stored result back (organization + thread) and who shares a cached
// dataset (the owner of the credential that fetched it). Every field is
// an identifier, never a secret: a scope string may sit in a storage key.
type Scope struct {
	// Org is the deployment's organization; every scope includes it.
	Org string
	// Thread is the conversation (or invoke call) the result belongs to.
	// Calls made without a thread share the organization's thread-less
	// scope.
	Thread string
	// User is the session's user, when the call runs under a user session.
	User string
	// CacheScope is the tenant-wide cache scope the backend asserted when
	// it minted the session ("" when it asserted none). Runtime-credential
	// walks of every user holding the same CacheScope and the same
	// credential share cache entries.
	CacheScope string
	// Credential is the fingerprint (CredentialFingerprint) of the runtime
	// credential the call carries, "" with the organization's: a user's
	// cached walks are kept apart per credential, so a changed token is
	// never served data fetched with the old one. Never the credential.
	Credential string
}

// CredentialFingerprint is a one-way fingerprint of a runtime credential
// for cache scopes: a keyed SHA-256 (HMAC, so it matches no plain hash of
// the token kept elsewhere), first 16 bytes in hex. "" for "".
func CredentialFingerprint(credential string) string {
	return CredentialFingerprintKeyed(nil, credential)
}

// defaultScopeKey keys fingerprints when the deployment gives no key.
var defaultScopeKey = []byte("trawl dataset cache scope v1")

// CredentialFingerprintKeyed is CredentialFingerprint under key (nil: a
// fixed key): with a deployment's secret, a store's reader cannot test
// guessed tokens against the scopes it sees.
func CredentialFingerprintKeyed(key []byte, credential string) string {
	if credential == "" {
		return ""
	}
	if key == nil {
		key = defaultScopeKey
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(credential))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// WithCredential is s carrying the fingerprint of credential (the call's
// runtime credential; "" for the organization's).
func (s Scope) WithCredential(credential string) Scope {
	return s.WithCredentialKeyed(nil, credential)
}

// WithCredentialKeyed is WithCredential with the fingerprint under key.
func (s Scope) WithCredentialKeyed(key []byte, credential string) Scope {
	s.Credential = CredentialFingerprintKeyed(key, credential)
	return s
}

// ErrNoCacheScope is returned by Scope.DatasetScope for a runtime-credential
// call that names neither a user nor a cache scope: such a walk could be
// shared with nobody safely, so it is not cached at all.
var ErrNoCacheScope = errors.New("runtime credentials without a user or cache scope")

// ErrNoOrg is returned when a scope has no organization.
var ErrNoOrg = errors.New("scope has no organization")

// ResultScope is the scope of stored results: the organization and the
// thread. Components are escaped, so no two scopes render alike.
func (s Scope) ResultScope() (string, error) {
	if s.Org == "" {
		return "", ErrNoOrg
	}
	return "o=" + url.PathEscape(s.Org) + ";t=" + url.PathEscape(s.Thread), nil
}

// DatasetScope is the scope of cached datasets. With the organization's
// credentials (runtime false) a walk is shared across the organization;
// with a user's runtime credentials it is private to that user, or shared
// by the tenant named in CacheScope when the session asserted one — and
// in both cases to the credential's fingerprint (Credential).
func (s Scope) DatasetScope(runtime bool) (string, error) {
	if s.Org == "" {
		return "", ErrNoOrg
	}
	org := "o=" + url.PathEscape(s.Org)
	var who string
	switch {
	case !runtime:
		return org, nil
	case s.CacheScope != "":
		who = org + ";c=" + url.PathEscape(s.CacheScope)
	case s.User != "":
		who = org + ";u=" + url.PathEscape(s.User)
	default:
		return "", ErrNoCacheScope
	}
	if s.Credential != "" {
		who += ";k=" + url.PathEscape(s.Credential)
	}
	return who, nil
}
