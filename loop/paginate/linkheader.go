package paginate

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Link is one link-value of an RFC 8288 Link header field.
type Link struct {
	// URL is the target as written between < and >, not resolved.
	URL string
	// Rel holds the relation types, lower-cased: rel="next last" gives
	// ["next", "last"]. Only the first rel parameter counts (RFC 8288 §3.3).
	Rel []string
	// Params holds the other parameters by lower-cased name (first
	// occurrence wins), unquoted; nil when there are none. A parameter
	// without a value maps to "".
	Params map[string]string
}

// HasRel reports whether l has the relation type rel (case-insensitive).
func (l Link) HasRel(rel string) bool {
	for _, r := range l.Rel {
		if strings.EqualFold(r, rel) {
			return true
		}
	}
	return false
}

// ErrMalformedLink reports a Link header field that does not follow
// RFC 8288. ParseLinks wraps it with the position of the fault.
var ErrMalformedLink = errors.New("malformed Link header")

// ParseLinks parses the values of Link header fields (each value may
// hold several comma-separated link-values, as may repeated fields).
// It returns every well-formed link-value in order and, when any part of
// a value is malformed, an error wrapping ErrMalformedLink: a caller that
// decides "no next page" from a Link header must not decide it from a
// header it could not read.
func ParseLinks(values []string) ([]Link, error) {
	var links []Link
	var firstErr error
	for _, v := range values {
		p := linkParser{s: v}
		for {
			l, ok, err := p.next()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				if !p.skipToComma() {
					break
				}
				continue
			}
			if !ok {
				break
			}
			links = append(links, l)
		}
	}
	return links, firstErr
}

type linkParser struct {
	s string
	i int
}

func (p *linkParser) errorf(format string, args ...any) error {
	return fmt.Errorf("%w at byte %d: %s", ErrMalformedLink, p.i, fmt.Sprintf(format, args...))
}

func (p *linkParser) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

// next parses one link-value; ok is false at the end of the input.
func (p *linkParser) next() (l Link, ok bool, err error) {
	// #rule lists allow empty elements: skip whitespace and commas.
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
	if p.i >= len(p.s) {
		return Link{}, false, nil
	}
	if p.s[p.i] != '<' {
		return Link{}, false, p.errorf("expected '<', found %q", p.s[p.i])
	}
	end := strings.IndexByte(p.s[p.i+1:], '>')
	if end < 0 {
		return Link{}, false, p.errorf("unterminated target")
	}
	l.URL = strings.TrimSpace(p.s[p.i+1 : p.i+1+end])
	p.i += end + 2
	relSeen := false
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			return l, true, nil
		}
		switch p.s[p.i] {
		case ',':
			p.i++
			return l, true, nil
		case ';':
			p.i++
		default:
			return Link{}, false, p.errorf("expected ';' or ',', found %q", p.s[p.i])
		}
		p.skipSpace()
		name := strings.ToLower(p.token())
		if name == "" {
			if p.i >= len(p.s) || p.s[p.i] == ',' {
				continue // a trailing ';' is tolerated
			}
			return Link{}, false, p.errorf("expected a parameter name")
		}
		p.skipSpace()
		value := ""
		if p.i < len(p.s) && p.s[p.i] == '=' {
			p.i++
			p.skipSpace()
			if p.i < len(p.s) && p.s[p.i] == '"' {
				value, err = p.quoted()
				if err != nil {
					return Link{}, false, err
				}
			} else {
				value = p.token()
			}
		}
		if name == "rel" {
			if !relSeen {
				relSeen = true
				for _, r := range strings.Fields(value) {
					l.Rel = append(l.Rel, strings.ToLower(r))
				}
			}
			continue
		}
		if l.Params == nil {
			l.Params = map[string]string{}
		}
		if _, dup := l.Params[name]; !dup {
			l.Params[name] = value
		}
	}
}

// token reads an unquoted token. Besides RFC 9110 tchars it accepts
// what servers put in unquoted rel values (URIs: ':', '/', '?', '@').
func (p *linkParser) token() string {
	start := p.i
	for p.i < len(p.s) {
		switch c := p.s[p.i]; {
		case c == ';' || c == ',' || c == '=' || c == '"' || c == ' ' || c == '\t' || c < 0x21 || c == 0x7f:
			return p.s[start:p.i]
		}
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a quoted-string starting at '"', undoing backslash escapes.
func (p *linkParser) quoted() (string, error) {
	p.i++ // opening quote
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch c {
		case '"':
			p.i++
			return b.String(), nil
		case '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errorf("unterminated escape")
			}
			b.WriteByte(p.s[p.i+1])
			p.i += 2
			continue
		}
		b.WriteByte(c)
		p.i++
	}
	return "", p.errorf("unterminated quoted string")
}

// skipToComma moves past the next ',' outside quotes and angle brackets,
// so parsing can resume at the next link-value. It reports whether one
// was found.
func (p *linkParser) skipToComma() bool {
	inQuote, inAngle := false, false
	for p.i < len(p.s) {
		c := p.s[p.i]
		p.i++
		switch {
		case inQuote && c == '\\':
			p.i++
		case c == '"' && !inAngle:
			inQuote = !inQuote
		case c == '<' && !inQuote:
			inAngle = true
		case c == '>' && !inQuote:
			inAngle = false
		case c == ',' && !inQuote && !inAngle:
			return true
		}
	}
	return false
}

// linkSignal is what a response's Link header says about the next page.
type linkSignal struct {
	present bool   // the response carries a Link header with any link
	next    string // resolved rel="next" target; "" when none
	last    string // resolved rel="last" target; "" when none (only read for where a walk ends)
}

// readLinkHeader reads h's Link fields and resolves rel="next" against
// base (the URL of the request that produced h).
func readLinkHeader(h http.Header, base *url.URL) (linkSignal, error) {
	values := h.Values("Link")
	if len(values) == 0 {
		return linkSignal{}, nil
	}
	links, err := ParseLinks(values)
	if err != nil {
		return linkSignal{}, err
	}
	sig := linkSignal{present: len(links) > 0}
	for _, l := range links {
		if l.HasRel("last") && sig.last == "" && l.URL != "" {
			if u, err := url.Parse(l.URL); err == nil {
				if base != nil {
					u = base.ResolveReference(u)
				}
				sig.last = u.String()
			}
		}
		if !l.HasRel("next") {
			continue
		}
		if strings.EqualFold(l.Params["results"], "false") {
			// Sentry always sends rel="next" and says with results="false"
			// that it leads nowhere: the last page.
			continue
		}
		if l.URL == "" {
			return linkSignal{}, fmt.Errorf("%w: empty rel=\"next\" target", ErrMalformedLink)
		}
		u, err := url.Parse(l.URL)
		if err != nil {
			// The parse error quotes the URL; keep it out of messages.
			return linkSignal{}, fmt.Errorf("%w: unparsable rel=\"next\" target", ErrMalformedLink)
		}
		if base != nil {
			u = base.ResolveReference(u)
		}
		if next := u.String(); sig.next == "" {
			sig.next = next
		} else if sig.next != next {
			return linkSignal{}, fmt.Errorf("%w: two different rel=\"next\" targets", ErrMalformedLink)
		}
	}
	return sig, nil
}
