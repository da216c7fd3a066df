package paginate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// errInconsistent marks a response whose pagination data cannot be
// trusted (a continuation field of the wrong type, an unreadable body, a
// Link header that does not parse). The walk stops as
// inconsistent_pagination rather than guess.
var errInconsistent = errors.New("inconsistent pagination")

func inconsistentf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInconsistent, fmt.Sprintf(format, args...))
}

// more is a tri-state continuation flag.
type more int8

const (
	moreUnknown more = iota
	moreYes
	moreNo
)

// signals is what one successful response says about the walk: its items
// and every continuation signal the plan names, read without decoding
// the items.
type signals struct {
	items        [][]byte    // raw items, sub-slices of the body
	page         *query.Page // what the walk's Pass made of items; nil without one
	itemsMissing bool        // the plan's items path was absent or null

	flag     more   // MoreFlag, after MoreInverted
	hasToken bool   // the NextToken field is present and non-empty
	token    string // its value (a number is kept as its literal)
	hasURL   bool   // the NextURLField is present and non-empty
	// tokenSeen and urlSeen: the field is in the body, even null or
	// empty — an explicit "no more", unlike an absent field.
	tokenSeen, urlSeen bool
	nextURL            string // resolved against the request URL
	link               linkSignal

	total      int // server-reported item count; -1 when absent
	totalPages int // server-reported page count; -1 when absent
}

// readPage reads one successful response. base is the URL the request
// went to, for resolving relative next URLs. dst is reused for the
// items; pass, when not nil, filters and projects them as they are
// checked (signals.page). An error wrapping errInconsistent means the
// page's pagination data cannot be trusted; the items read so far are
// still returned.
func readPage(p Plan, body []byte, header http.Header, base *url.URL, dst [][]byte, pass *query.Pass) (signals, error) {
	s := signals{items: dst[:0], total: -1, totalPages: -1}
	env := body // where the continuation signals are looked up
	empty := len(bytes.TrimSpace(body)) == 0

	switch {
	case !p.ItemsFound || empty:
		s.itemsMissing = true
	case p.Items == "":
		items, page, err := pass.AppendElements(s.items, body)
		if err != nil {
			return s, inconsistentf("the body is not the JSON array the plan expects")
		}
		s.items, s.page = items, page
	default:
		// One checking pass over the page finds the array and splits it.
		items, page, err := pass.AppendElementsAt(s.items, body, p.Items)
		if err != nil {
			raw, ok := query.Get(body, p.Items)
			switch {
			case errors.Is(err, query.ErrNotFound) && !query.Valid(body):
				return s, inconsistentf("the body is not valid JSON")
			case errors.Is(err, query.ErrNotFound) || ok && string(raw) == "null":
				// Absent or null: an empty page (some APIs omit empty arrays).
				s.items, s.itemsMissing = s.items[:0], true
			case ok && raw[0] != '[':
				return s, inconsistentf("%q is not an array", p.Items)
			default:
				return s, inconsistentf("the body is not valid JSON")
			}
			break
		}
		s.items, s.page = items, page
		env = withoutItems(body, items)
	}

	var err error
	if !empty {
		err = s.readBodySignals(p, env, base)
	}
	if p.Strategy == LinkHeader || header.Get("Link") != "" {
		link, lerr := readLinkHeader(header, base)
		if lerr != nil {
			return s, fmt.Errorf("%w: %v", errInconsistent, lerr)
		}
		s.link = link
	}
	return s, err
}

// readBodySignals reads the continuation fields of env (the body, with
// the items array blanked out so that each lookup skips it cheaply).
func (s *signals) readBodySignals(p Plan, env []byte, base *url.URL) error {
	checked := false
	// absent reports whether a missing field is really missing: a field
	// cannot be "absent" from a body that does not parse.
	absent := func() error {
		if !checked {
			checked = true
			if !query.Valid(env) {
				return inconsistentf("the body is not valid JSON")
			}
		}
		return nil
	}

	if p.MoreFlag != "" {
		raw, ok := query.Get(env, p.MoreFlag)
		switch {
		case !ok:
			if err := absent(); err != nil {
				return err
			}
		case string(raw) == "null":
		case string(raw) == "true" || string(raw) == `"true"`:
			// The strings "true" and "false" too, as some APIs send them
			// (like counts sent as strings).
			s.flag = moreYes
		case string(raw) == "false" || string(raw) == `"false"`:
			s.flag = moreNo
		default:
			return inconsistentf("%q is not a boolean", p.MoreFlag)
		}
		if p.MoreInverted && s.flag != moreUnknown {
			s.flag = 3 - s.flag // moreYes <-> moreNo
		}
	}
	if p.NextToken != "" {
		raw, ok := query.Get(env, p.NextToken)
		s.tokenSeen = ok
		if !ok {
			if err := absent(); err != nil {
				return err
			}
		} else if string(raw) != "null" {
			tok, isStr, err := scalarText(raw)
			if err != nil || (!isStr && !isNumber(raw)) {
				return inconsistentf("%q is neither a string nor a number", p.NextToken)
			}
			s.token, s.hasToken = tok, tok != ""
		}
	}
	if p.NextURLField != "" {
		raw, ok := query.Get(env, p.NextURLField)
		s.urlSeen = ok
		if !ok {
			if err := absent(); err != nil {
				return err
			}
		} else if string(raw) != "null" {
			u, isStr, err := scalarText(raw)
			if err != nil || !isStr {
				return inconsistentf("%q is not a string", p.NextURLField)
			}
			if u != "" {
				ref, err := url.Parse(u)
				if err != nil {
					return inconsistentf("%q is not a URL", p.NextURLField)
				}
				if base != nil {
					ref = base.ResolveReference(ref)
				}
				s.nextURL, s.hasURL = ref.String(), true
			}
		}
	}
	var err error
	if s.total, err = readCount(env, p.Total); err != nil {
		return err
	}
	if s.totalPages, err = readCount(env, p.TotalPages); err != nil {
		return err
	}
	return nil
}

// readCount reads a non-negative integer count (a number, or a string
// holding one, as some APIs send) at path; -1 when path is "" or the
// value is absent or null.
func readCount(env []byte, path string) (int, error) {
	if path == "" {
		return -1, nil
	}
	raw, ok := query.Get(env, path)
	if !ok || string(raw) == "null" {
		return -1, nil
	}
	text, _, err := scalarText(raw)
	if err == nil {
		if f, perr := strconv.ParseFloat(text, 64); perr == nil && f >= 0 && f == math.Trunc(f) && f < 1<<53 {
			return int(f), nil
		}
	}
	return -1, inconsistentf("%q is not a non-negative integer", path)
}

// scalarText returns the text of a JSON string (unquoted) or the literal
// of any other scalar; isStr tells which. Objects and arrays are errors.
func scalarText(raw []byte) (text string, isStr bool, err error) {
	if len(raw) == 0 {
		return "", false, errors.New("empty value")
	}
	switch raw[0] {
	case '"':
		if bytes.IndexByte(raw, '\\') < 0 {
			return string(raw[1 : len(raw)-1]), true, nil
		}
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", true, err
		}
		return s, true, nil
	case '{', '[':
		return "", false, errors.New("not a scalar")
	}
	return string(raw), false, nil
}

func isNumber(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// withoutItems returns body with the array holding items (sub-slices of
// body, in order) replaced by an empty array: the envelope alone, so that
// looking up continuation fields does not scan the items again. When the
// array cannot be placed exactly it returns body, which reads the same,
// only slower.
func withoutItems(body []byte, items [][]byte) []byte {
	if len(items) == 0 {
		return body // an empty array costs nothing to skip
	}
	first, ok1 := query.OffsetIn(body, items[0])
	last, ok2 := query.OffsetIn(body, items[len(items)-1])
	if !ok1 || !ok2 {
		return body
	}
	vs := first - 1
	for vs >= 0 && isJSONSpace(body[vs]) {
		vs--
	}
	ve := last + len(items[len(items)-1])
	for ve < len(body) && isJSONSpace(body[ve]) {
		ve++
	}
	if vs < 0 || body[vs] != '[' || ve >= len(body) || body[ve] != ']' {
		return body
	}
	ve++
	if ve-vs < 64 {
		return body // not worth a copy
	}
	env := make([]byte, 0, len(body)-(ve-vs)+2)
	env = append(env, body[:vs]...)
	env = append(env, "[]"...)
	return append(env, body[ve:]...)
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// itemField returns the text of the scalar field path of one raw item
// (an id, a cursor); ok is false when the field is absent, null or not a
// scalar.
func itemField(item []byte, path string) (string, bool) {
	raw, ok := query.Get(item, path)
	if !ok || string(raw) == "null" {
		return "", false
	}
	text, _, err := scalarText(raw)
	if err != nil || text == "" {
		return "", false
	}
	return text, true
}

// itemID returns the raw JSON value of an item's id field (path). Items
// reach it already checked by the scanner, so when the item opens with
// the field in compact form — {"id":"…" or {"id":123 — the value is cut
// out directly, the common case at a few nanoseconds; anything else goes
// through query.Get.
func itemID(item []byte, path string) ([]byte, bool) {
	return readID(item, path, plainID(path))
}

// plainID reports an id path that is one member name needing no escape,
// which readID may find by its spelling at the start of an item.
func plainID(path string) bool { return !strings.ContainsAny(path, ".\\\"") }

// readID is itemID with plainID(path) worked out once for many items.
func readID(item []byte, path string, plain bool) ([]byte, bool) {
	n := len(path)
	if plain && n > 0 && len(item) > n+5 && item[0] == '{' && item[1] == '"' && item[n+2] == '"' && item[n+3] == ':' &&
		string(item[2:n+2]) == path {
		v := item[n+4:]
		switch c := v[0]; {
		case c == '"':
			// An id is short: one loop to its closing quote, giving up at
			// a backslash before it, costs less than two IndexByte calls.
		str:
			for i := 1; i < len(v); i++ {
				switch v[i] {
				case '"':
					return v[:i+1], true
				case '\\':
					break str
				}
			}
		case c == '-' || c >= '0' && c <= '9':
			end := 1
			for end < len(v) && (v[end] >= '0' && v[end] <= '9' || v[end] == '.' || v[end] == 'e' || v[end] == 'E' || v[end] == '+' || v[end] == '-') {
				end++
			}
			return v[:end], true
		}
	}
	return query.Get(item, path)
}

// errorBodyOK reports a 2xx body that says it failed ({"ok": false, …},
// Slack's convention). It is only consulted when a page has no items, so
// that ordinary pages are not scanned for it.
func errorBodyOK(body []byte) bool {
	raw, ok := query.Get(body, "ok")
	return ok && string(raw) == "false"
}

// cursorWords and rejectWords find an error body that says the cursor
// was refused ("invalid cursor", "page token expired", …).
var (
	cursorWords = regexp.MustCompile(`(?i)cursor|page.?token|continuation|next.?token|starting.?after|marker`)
	rejectWords = regexp.MustCompile(`(?i)invalid|expired|not valid|no longer valid|unknown|malformed|stale|bad`)
)

// cursorRejected reports an error body that blames the cursor.
func cursorRejected(body []byte) bool {
	if len(body) > 4096 {
		body = body[:4096]
	}
	return cursorWords.Match(body) && rejectWords.Match(body)
}

// messageFields are where JSON error bodies usually say what went wrong.
var messageFields = []string{"error.message", "message", "error_description", "error", "detail", "title", "errors.0.message"}

// snippet is a short, safe rendering of an upstream error body for an
// error message: the body's own message field when it has one, else its
// start, on one line, printable, at most 200 characters, passed through
// scrub (the Caller's scrubber; the body already was, but a message field
// is read decoded from its JSON escapes) before it is cut.
func snippet(body []byte, scrub *tools.Scrubber) string {
	text := ""
	for _, f := range messageFields {
		if raw, ok := query.Get(body, f); ok {
			if s, isStr, err := scalarText(raw); err == nil && isStr && s != "" {
				text = s
				break
			}
		}
	}
	if text == "" {
		if len(body) > 1024 {
			body = body[:1024]
		}
		text = string(body)
	}
	text = scrub.String(text)
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(text, "") {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if b.Len() >= 200 {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// safeCause words a transport error without the URL a *url.Error quotes
// (it may carry credentials in its query).
func safeCause(err error) string {
	var refused *tools.RefusedError
	if errors.As(err, &refused) {
		return refused.Msg // names at most an origin
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		if ue.Timeout() {
			return "timed out"
		}
		err = ue.Err
	}
	msg := err.Error()
	if strings.Contains(msg, "://") {
		return "request failed"
	}
	return msg
}
