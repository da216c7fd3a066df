package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Activity is one upstream call as the activity log keeps it. Nothing in
// it is secret: the path has secret query values removed and a cursor is
// kept only as a fingerprint.
type Activity struct {
	Time     time.Time `json:"time"`
	ThreadID string    `json:"threadId,omitempty"`
	// CallID is the tool call the request served (a chat's toolCallId, a
	// workflow step's, an invoke's), so a trace can group the requests
	// under their call; see WithCallID.
	CallID     string `json:"callId,omitempty"`
	Tool       string `json:"tool"`
	Method     string `json:"method"`
	Path       string `json:"path"` // path and query, secrets removed
	Status     int    `json:"status"`
	Page       int    `json:"page,omitempty"`
	Cursor     string `json:"cursorFingerprint,omitempty"`
	Bytes      int64  `json:"bytes"`
	DurationMs int64  `json:"durationMs"`
	Retry      int    `json:"retry,omitempty"`
	// WaitMs is how long the request waited for its provider's rate
	// limit before it was sent.
	WaitMs int64  `json:"waitMs,omitempty"`
	Error  string `json:"error,omitempty"` // transport failure, in safe words
	// Effect is the call's effect; Writes marks a call that may have
	// changed data (write or destructive).
	Effect Effect `json:"effect,omitempty"`
	Writes bool   `json:"writes,omitempty"`
	// Verdict is set on the record that ends a tool call its client
	// cancelled mid-walk (an MCP client): that call's partial verdict and
	// where its rows are kept. Such a record is no request (no method).
	Verdict string `json:"verdict,omitempty"`
}

// ActivityStore persists activity records. Implementations must be safe
// for concurrent use. The embedded default is NewBoltActivityStore.
type ActivityStore interface {
	AppendActivity(ctx context.Context, a Activity) error
	// ListActivity returns the newest records first, at most limit, only
	// those of threadID when it is not empty.
	ListActivity(ctx context.Context, threadID string, limit int) ([]Activity, error)
}

// ActivityLog records upstream calls: the newest ones in a bounded ring in
// memory, and every one in an optional persistent store. It is safe for
// concurrent use.
type ActivityLog struct {
	store ActivityStore // may be nil
	max   int

	mu   sync.Mutex
	ring []Activity // oldest first, at most max
}

// NewActivityLog returns a log keeping at most max records in memory
// (zero means 1,000) and writing each record to store when store is not
// nil.
func NewActivityLog(store ActivityStore, max int) *ActivityLog {
	if max <= 0 {
		max = 1000
	}
	return &ActivityLog{store: store, max: max}
}

// Record adds a. A failure to persist is returned but the record is kept
// in memory all the same.
func (l *ActivityLog) Record(ctx context.Context, a Activity) error {
	l.mu.Lock()
	if len(l.ring) == l.max {
		copy(l.ring, l.ring[1:])
		l.ring = l.ring[:l.max-1]
	}
	l.ring = append(l.ring, a)
	l.mu.Unlock()
	if l.store == nil {
		return nil
	}
	return l.store.AppendActivity(context.WithoutCancel(ctx), a)
}

// List returns the newest records first (at most limit; zero means 100),
// only those of threadID when it is not empty. It reads the persistent
// store when there is one, else the memory ring.
func (l *ActivityLog) List(ctx context.Context, threadID string, limit int) ([]Activity, error) {
	if limit <= 0 {
		limit = 100
	}
	if l.store != nil {
		return l.store.ListActivity(ctx, threadID, limit)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Activity
	for i := len(l.ring) - 1; i >= 0 && len(out) < limit; i-- {
		if threadID == "" || l.ring[i].ThreadID == threadID {
			out = append(out, l.ring[i])
		}
	}
	return out, nil
}

type callIDKey struct{}

// WithCallID returns ctx carrying the id of the tool call whose upstream
// requests are made under it; the activity log records it with each.
func WithCallID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, callIDKey{}, id)
}

// CallIDFrom is the tool call id WithCallID put in ctx, "" when none.
func CallIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(callIDKey{}).(string)
	return id
}

// Fingerprint is the short, non-reversible form of a cursor or token that
// logs and boundary statements may show: the first 12 hex digits of its
// SHA-256.
func Fingerprint(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// secretQueryNames are query parameter names whose values are never
// logged, compared case-insensitively after removing '-' and '_'; any name
// ending in one of secretSuffixes is secret too.
var (
	secretQueryNames = []string{"key", "auth", "authorization", "sig", "code", "session", "sessionid", "credential", "credentials", "pwd", "passwd"}
	secretSuffixes   = []string{"token", "apikey", "secret", "password", "signature"}
)

// nameSeparators drops a name's hyphens and underscores (built once: a
// Replacer is safe for concurrent use, and isSecretName runs for every
// parameter of every request).
var nameSeparators = strings.NewReplacer("-", "", "_", "")

func isSecretName(name string) bool {
	n := strings.ToLower(nameSeparators.Replace(name))
	for _, s := range secretQueryNames {
		if n == s {
			return true
		}
	}
	for _, s := range secretSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// RedactURL returns u's path and query with the values of secret-looking
// query parameters (and of the names in extra, and of any value equal to
// one of secrets) replaced by "REDACTED".
func RedactURL(u *url.URL, extra []string, secrets ...string) string {
	if u == nil {
		return ""
	}
	p := u.EscapedPath()
	if u.RawQuery == "" {
		return p
	}
	q := u.Query()
	for name, vals := range q {
		secret := isSecretName(name)
		for _, e := range extra {
			if strings.EqualFold(e, name) {
				secret = true
			}
		}
		for i, v := range vals {
			if secret || containsSecret(v, secrets) {
				vals[i] = "REDACTED"
			}
		}
	}
	return p + "?" + q.Encode()
}

func containsSecret(v string, secrets []string) bool {
	for _, s := range secrets {
		if s != "" && strings.Contains(v, s) {
			return true
		}
	}
	return false
}
