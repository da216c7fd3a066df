package loop

import (
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
	// walks of every user holding the same CacheScope share cache entries.
	CacheScope string
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
// by the tenant named in CacheScope when the session asserted one.
func (s Scope) DatasetScope(runtime bool) (string, error) {
	if s.Org == "" {
		return "", ErrNoOrg
	}
	org := "o=" + url.PathEscape(s.Org)
	switch {
	case !runtime:
		return org, nil
	case s.CacheScope != "":
		return org + ";c=" + url.PathEscape(s.CacheScope), nil
	case s.User != "":
		return org + ";u=" + url.PathEscape(s.User), nil
	}
	return "", ErrNoCacheScope
}
