package demo

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// mailQuery is a parsed Gmail-style search: operators (from:, to:, cc:,
// subject:, label:, is:, in:, has:, category:, filename:, after:, before:,
// newer_than:, older_than:), quoted phrases, free words, and "-" to negate
// a term. Terms are ANDed.
type mailQuery struct {
	terms []func(*mailMessage) bool
	// scoped says the query names trash or spam itself, so they are not
	// excluded by default.
	scoped bool
}

func (q mailQuery) match(m *mailMessage) bool {
	for _, t := range q.terms {
		if !t(m) {
			return false
		}
	}
	return true
}

// splitQuery splits on spaces outside double quotes and strips the quotes.
func splitQuery(s string) []string {
	var out []string
	var cur strings.Builder
	quoted := false
	for _, r := range s {
		switch {
		case r == '"':
			quoted = !quoted
		case (r == ' ' || r == '\t') && !quoted:
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}

func anyContains(xs []string, sub string) bool {
	for _, x := range xs {
		if containsFold(x, sub) {
			return true
		}
	}
	return false
}

func parseMailDate(v string) (time.Time, bool) {
	for _, layout := range []string{"2006/01/02", "2006-01-02", "2006/1/2"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t, true
		}
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return time.Unix(n, 0), true
	}
	return time.Time{}, false
}

// parseRelative parses newer_than/older_than values: 3d, 2w, 6m, 1y.
func parseRelative(v string, now time.Time) (time.Time, bool) {
	if len(v) < 2 {
		return time.Time{}, false
	}
	n, err := strconv.Atoi(v[:len(v)-1])
	if err != nil || n < 0 {
		return time.Time{}, false
	}
	switch v[len(v)-1] {
	case 'd':
		return now.AddDate(0, 0, -n), true
	case 'w':
		return now.AddDate(0, 0, -7*n), true
	case 'm':
		return now.AddDate(0, -n, 0), true
	case 'y':
		return now.AddDate(-n, 0, 0), true
	}
	return time.Time{}, false
}

func (st *mailState) parseQuery(s string) (mailQuery, error) {
	var q mailQuery
	for _, tok := range splitQuery(s) {
		neg := false
		if len(tok) > 1 && tok[0] == '-' {
			neg, tok = true, tok[1:]
		}
		if tok == "OR" || tok == "AND" {
			continue
		}
		term, err := st.term(tok, &q)
		if err != nil {
			return q, err
		}
		if neg {
			t := term
			term = func(m *mailMessage) bool { return !t(m) }
		}
		q.terms = append(q.terms, term)
	}
	return q, nil
}

func (st *mailState) term(tok string, q *mailQuery) (func(*mailMessage) bool, error) {
	op, v, ok := strings.Cut(tok, ":")
	if !ok || v == "" {
		return func(m *mailMessage) bool {
			return containsFold(m.Subject, tok) || containsFold(m.Body, tok) || containsFold(m.From, tok) || anyContains(m.To, tok)
		}, nil
	}
	hasLabel := func(id string) func(*mailMessage) bool { return func(m *mailMessage) bool { return m.has(id) } }
	bad := errf(http.StatusBadRequest, "Invalid search query: unsupported value in %q.", tok)
	switch strings.ToLower(op) {
	case "from":
		return func(m *mailMessage) bool { return containsFold(m.From, v) }, nil
	case "to":
		return func(m *mailMessage) bool { return anyContains(m.To, v) }, nil
	case "cc":
		return func(m *mailMessage) bool { return anyContains(m.Cc, v) }, nil
	case "subject":
		return func(m *mailMessage) bool { return containsFold(m.Subject, v) }, nil
	case "filename":
		return func(m *mailMessage) bool {
			for _, a := range m.Attachments {
				if containsFold(a.Filename, v) {
					return true
				}
			}
			return false
		}, nil
	case "label", "in":
		switch strings.ToLower(v) {
		case "anywhere":
			q.scoped = true
			return func(*mailMessage) bool { return true }, nil
		case "trash", "spam":
			q.scoped = true
		case "drafts":
			v = "DRAFT"
		}
		l := st.label(v)
		if l == nil {
			l = st.label(strings.ToUpper(v))
		}
		if l == nil {
			return func(*mailMessage) bool { return false }, nil
		}
		return hasLabel(l.ID), nil
	case "category":
		return hasLabel("CATEGORY_" + strings.ToUpper(v)), nil
	case "is":
		switch strings.ToLower(v) {
		case "unread":
			return hasLabel("UNREAD"), nil
		case "read":
			return func(m *mailMessage) bool { return !m.has("UNREAD") }, nil
		case "starred", "important", "sent", "draft":
			return hasLabel(strings.ToUpper(v)), nil
		}
		return nil, bad
	case "has":
		if strings.EqualFold(v, "attachment") {
			return func(m *mailMessage) bool { return len(m.Attachments) > 0 }, nil
		}
		return nil, bad
	case "after", "before":
		t, ok := parseMailDate(v)
		if !ok {
			return nil, bad
		}
		if strings.EqualFold(op, "after") {
			return func(m *mailMessage) bool { return !m.date.Before(t) }, nil
		}
		return func(m *mailMessage) bool { return m.date.Before(t) }, nil
	case "newer_than", "older_than":
		t, ok := parseRelative(v, st.now())
		if !ok {
			return nil, bad
		}
		if strings.EqualFold(op, "newer_than") {
			return func(m *mailMessage) bool { return m.date.After(t) }, nil
		}
		return func(m *mailMessage) bool { return !m.date.After(t) }, nil
	}
	return func(m *mailMessage) bool { return containsFold(m.Subject, tok) || containsFold(m.Body, tok) }, nil
}

// search returns the messages matching q, labelIds and the spam/trash
// rule, newest first.
func (st *mailState) search(a args) ([]*mailMessage, error) {
	q, err := st.parseQuery(a.str("q"))
	if err != nil {
		return nil, err
	}
	incl, _, err := a.boolean("includeSpamTrash")
	if err != nil {
		return nil, err
	}
	var labels []string
	for _, l := range a.strs("labelIds") {
		lb := st.label(l)
		if lb == nil {
			return nil, errf(http.StatusBadRequest, "Invalid label: %s", l)
		}
		labels = append(labels, lb.ID)
		if lb.ID == "TRASH" || lb.ID == "SPAM" {
			incl = true
		}
	}
	incl = incl || q.scoped
	out := []*mailMessage{}
	for _, m := range st.msgs {
		if !incl && (m.has("TRASH") || m.has("SPAM")) {
			continue
		}
		ok := q.match(m)
		for _, l := range labels {
			ok = ok && m.has(l)
		}
		if ok {
			out = append(out, m)
		}
	}
	return out, nil
}
