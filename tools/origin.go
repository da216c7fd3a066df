package tools

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Origin is the scheme://host:port of u, lower-cased, with the scheme's
// default port made explicit (http 80, https 443); "" when u has no host.
// It is the one origin comparison of trawl: redirects, continuation URLs
// and a walk's next links are all judged by it.
func Origin(u *url.URL) string {
	if u == nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// OriginOf is Origin of a URL string; "" when it does not parse or has no
// host.
func OriginOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return Origin(u)
}

// SameOrigin reports whether a and b share scheme, host and port. A URL
// without a host shares no origin, not even with itself.
func SameOrigin(a, b *url.URL) bool {
	oa := Origin(a)
	return oa != "" && oa == Origin(b)
}

// MaxRedirects is how many same-origin redirects one request follows.
const MaxRedirects = 5

// ErrRefused marks a request trawl refused to send (or to carry on):
// repeating it cannot succeed, so it is never retried.
var ErrRefused = errors.New("request refused")

// Codes of RefusedError.
const (
	CodeNotConnected        = "not_connected"         // the provider needs the caller's credential, and the caller has none
	CodeCrossOriginRedirect = "cross_origin_redirect" // the upstream redirected to another origin
	CodeTooManyRedirects    = "too_many_redirects"    // more than MaxRedirects redirects
	CodeUserInfoURL         = "userinfo_url"          // a URL with user:password@ in it
	CodeForeignURL          = "foreign_url"           // a continuation URL off the tool's origin
)

// RefusedError is a request trawl did not send, or a redirect it did not
// follow. Its message is for the model and the user: it names at most an
// origin (scheme, host, port), never a path, query or credential.
type RefusedError struct {
	Code string // one of the Code* constants above
	Msg  string
}

func (e *RefusedError) Error() string { return e.Msg }

// Is makes every RefusedError match ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// NeedsCredential is the refusal of a call whose provider needs the
// caller's own credential when the caller has none. A connected app's
// message points the model at connect_toolkit; another provider's says
// the session lacks the credential.
func NeedsCredential(t *Tool) *RefusedError {
	name := t.ToolkitName
	if name == "" {
		name = t.Provider
	}
	if t.UserConnected() {
		return &RefusedError{Code: CodeNotConnected, Msg: fmt.Sprintf(
			"this needs your %s account: it is not connected for this user; call connect_toolkit with {\"toolkit\": %q} and give the user the link",
			name, t.Provider)}
	}
	return &RefusedError{Code: CodeNotConnected, Msg: fmt.Sprintf(
		"this needs your %s account: this session carries no credential for %q (the application that opened the session passes it in runtime_credentials); tell the user, and do not retry",
		name, t.Provider)}
}

func userInfoRefused() *RefusedError {
	return &RefusedError{Code: CodeUserInfoURL, Msg: "the URL carries user information (user:password@host), which trawl refuses: credentials belong in the provider's auth"}
}

// checkRedirect is the CheckRedirect of every client trawl sends
// credentials with. It follows a redirect only to the origin of the
// first request (scheme, host and port), at most MaxRedirects times,
// never to a URL with user information, and never sends a Referer. A
// same-origin redirect keeps the request's credentials: headers are
// carried by net/http (it strips them only when the host changes, which
// cannot happen here) and a query credential is put back on the new URL.
func checkRedirect(req *http.Request, via []*http.Request) error {
	req.Header.Del("Referer")
	if len(via) == 0 {
		return nil
	}
	switch {
	case req.URL.User != nil:
		return userInfoRefused()
	case !SameOrigin(req.URL, via[0].URL):
		target := Origin(req.URL)
		if target == "" {
			target = "a URL without a host"
		}
		return &RefusedError{Code: CodeCrossOriginRedirect, Msg: fmt.Sprintf(
			"the upstream redirected to another origin (%s); trawl follows redirects only within the provider's origin (%s), so the redirect was not followed and no credential was sent there",
			target, Origin(via[0].URL))}
	case len(via) > MaxRedirects:
		return &RefusedError{Code: CodeTooManyRedirects, Msg: fmt.Sprintf("the upstream redirected more than %d times", MaxRedirects)}
	}
	if qc, ok := req.Context().Value(queryCredentialKey{}).(queryCredential); ok {
		q := req.URL.Query()
		q.Set(qc.name, qc.value)
		req.URL.RawQuery = q.Encode()
	}
	return nil
}

// queryCredential is an api_key credential sent in the query, carried in
// the request's context so that checkRedirect can put it back on a
// same-origin redirect's URL.
type queryCredential struct{ name, value string }

type queryCredentialKey struct{}

func withQueryCredential(ctx context.Context, name, value string) context.Context {
	return context.WithValue(ctx, queryCredentialKey{}, queryCredential{name, value})
}

// RedirectSafe returns a client that sends like c (its transport, jar and
// timeout) but follows redirects by trawl's policy (see checkRedirect).
// Nil c means a client on http.DefaultTransport.
func RedirectSafe(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	out.CheckRedirect = checkRedirect
	return out
}
