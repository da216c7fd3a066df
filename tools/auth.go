package tools

import (
	"fmt"
	"log/slog"
	"strings"
)

// Auth types an AuthSpec may name.
const (
	AuthNone   = "none"    // no credential (also the meaning of an empty Type)
	AuthBearer = "bearer"  // Authorization: Bearer <token>
	AuthAPIKey = "api_key" // the token in the header or query parameter named by Header or Query
	AuthBasic  = "basic"   // Authorization: Basic <username:password>
	AuthOAuth2 = "oauth2"  // Authorization: Bearer <an OAuth 2.0 access token trawl obtains> (oauth.go)
)

// AuthSpec says how requests to a provider or toolkit carry a credential,
// and may hold the credential itself (an organization-level one from
// config). A toolkit manifest usually names only the Type; the secret then
// comes from config or from a user's session at request time.
//
// An AuthSpec holds secrets: its String, GoString and LogValue methods
// redact them, so printing or logging one is safe; marshalling it is not.
type AuthSpec struct {
	// Type is one of AuthBearer, AuthAPIKey, AuthBasic, AuthNone. Zero
	// means AuthNone.
	Type string `json:"type,omitempty" yaml:"type,omitempty"`
	// Header and Query name where an api_key credential goes; exactly one
	// is set for AuthAPIKey and neither for the other types.
	Header string `json:"header,omitempty" yaml:"header,omitempty"`
	Query  string `json:"query,omitempty" yaml:"query,omitempty"`
	// Token is the bearer token or API key. Empty: supplied at request time.
	Token string `json:"token,omitempty" yaml:"token,omitempty"`
	// Username and Password are the basic credentials.
	Username string `json:"username,omitempty" yaml:"username,omitempty"`
	Password string `json:"password,omitempty" yaml:"password,omitempty"`
	// The OAuth 2.0 settings of AuthOAuth2 (see oauth.go).
	OAuth2 `yaml:",inline"`
}

// Validate checks the spec's shape: a known type, and a header or query
// name exactly when the type is api_key. Credentials may be empty (they
// can arrive at request time), so they are not checked.
func (a AuthSpec) Validate() error {
	switch a.Type {
	case "", AuthNone, AuthBearer, AuthBasic, AuthOAuth2:
		if a.Header != "" || a.Query != "" {
			return fmt.Errorf("auth type %q takes no header or query name (those are for %s)", a.typeName(), AuthAPIKey)
		}
		if a.Type == AuthOAuth2 {
			return a.validateOAuth2()
		}
		if a.OAuth2 != (OAuth2{}) {
			return fmt.Errorf("auth type %q takes no OAuth 2.0 settings (flow, token_url, client_id, …): those are for type %s", a.typeName(), AuthOAuth2)
		}
	case AuthAPIKey:
		switch {
		case a.Header == "" && a.Query == "":
			return fmt.Errorf("auth type %s needs a header or a query parameter name", AuthAPIKey)
		case a.Header != "" && a.Query != "":
			return fmt.Errorf("auth type %s takes a header or a query parameter name, not both", AuthAPIKey)
		case a.Header != "" && !ValidHeaderName(a.Header):
			return fmt.Errorf("auth header name %q is not a valid HTTP header name", a.Header)
		case a.OAuth2 != (OAuth2{}):
			return fmt.Errorf("auth type %s takes no OAuth 2.0 settings (flow, token_url, client_id, …): those are for type %s", AuthAPIKey, AuthOAuth2)
		}
	default:
		return fmt.Errorf("auth type %q is not one of %s, %s, %s, %s, %s", a.Type, AuthBearer, AuthAPIKey, AuthBasic, AuthOAuth2, AuthNone)
	}
	return nil
}

func (a AuthSpec) typeName() string {
	if a.Type == "" {
		return AuthNone
	}
	return a.Type
}

// String describes the spec without its secrets.
func (a AuthSpec) String() string {
	var b strings.Builder
	b.WriteString("auth{type=" + a.typeName())
	if a.Header != "" {
		b.WriteString(" header=" + a.Header)
	}
	if a.Query != "" {
		b.WriteString(" query=" + a.Query)
	}
	if a.Username != "" {
		b.WriteString(" username=" + a.Username)
	}
	if a.Flow != "" {
		b.WriteString(" flow=" + a.Flow)
	}
	if a.ClientID != "" {
		b.WriteString(" client_id=" + a.ClientID)
	}
	if a.Token != "" || a.Password != "" || a.ClientSecret != "" {
		b.WriteString(" credential=redacted")
	}
	b.WriteString("}")
	return b.String()
}

// GoString is String, so %#v does not print secrets either.
func (a AuthSpec) GoString() string { return a.String() }

// LogValue keeps secrets out of slog output.
func (a AuthSpec) LogValue() slog.Value { return slog.StringValue(a.String()) }

// ValidHeaderName reports whether name is an HTTP field name (RFC 9110
// token characters).
func ValidHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
