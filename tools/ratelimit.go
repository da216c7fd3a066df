package tools

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RateLimit is a provider's configured pace (providers[].rate_limit, a
// toolkit manifest's rate_limit, mcp_servers[].rate_limit), enforced for
// the provider as a whole — every turn, walk, workflow and invoke of the
// deployment, on every replica. Zero fields mean no such bound; limits the
// upstream reports (see RateLimiter) apply whatever is configured.
type RateLimit struct {
	// RequestsPerSecond is the sustained rate. Zero: none.
	RequestsPerSecond float64 `json:"requests_per_second,omitempty" yaml:"requests_per_second"`
	// Burst is how many requests may start at once after a quiet spell.
	// Zero: 1, so requests are evenly spaced and no window of a second
	// sees more than RequestsPerSecond of them. Needs RequestsPerSecond.
	Burst int `json:"burst,omitempty" yaml:"burst"`
	// Concurrency bounds the requests in flight at once. Zero: none until
	// the upstream answers 429 (then it is learned, see RateLimiter).
	Concurrency int `json:"concurrency,omitempty" yaml:"concurrency"`
}

// Validate checks the limits' ranges.
func (r RateLimit) Validate() error {
	switch {
	case r.RequestsPerSecond < 0 || math.IsNaN(r.RequestsPerSecond) || r.RequestsPerSecond > 1e6:
		return fmt.Errorf("requests_per_second must be between 0 and 1000000, not %v", r.RequestsPerSecond)
	case r.Burst < 0:
		return fmt.Errorf("burst must not be negative")
	case r.Burst > 0 && r.RequestsPerSecond == 0:
		return fmt.Errorf("burst needs requests_per_second")
	case r.Concurrency < 0:
		return fmt.Errorf("concurrency must not be negative")
	}
	return nil
}

// BurstOrDefault is Burst with its default.
func (r RateLimit) BurstOrDefault() int {
	return max(r.Burst, 1)
}

// LimitScope is what one request counts against: its provider (with the
// provider's configured limits) and, when it carries a caller's runtime
// credential, that credential. Limits the upstream reports apply to the
// scope they were reported for: the credential's when the request carried
// one (that user is throttled, not everyone), else the provider's.
type LimitScope struct {
	Provider string
	// Credential is a one-way fingerprint of the runtime credential the
	// request carries (never the credential); "" for the organization's.
	Credential string
	Limit      RateLimit
}

// Permit is one request's slot, held from Acquire until its answer has
// been read.
type Permit interface {
	// Waited is how long Acquire waited for the slot.
	Waited() time.Duration
	// Release returns the slot and teaches the limiter what the upstream
	// answered. It is called once. It does not wait for another request;
	// a shared limiter may make one round trip to its store, bounded, to
	// tell the other replicas what they must know at once (a 429, a pause).
	Release(o Outcome)
}

// Outcome is what the upstream answered one request.
type Outcome struct {
	// Status is the HTTP status; 0 when no answer came (a transport
	// failure), which teaches nothing.
	Status int
	// Header is the answer's header: its rate-limit fields are read.
	Header http.Header
}

// RateLimiter paces upstream requests: the configured rate (a token
// bucket of RequestsPerSecond and Burst) and concurrency of each
// provider, and what the upstreams report. Retry-After pauses the scope
// until then; IETF RateLimit-Policy (quota q per window w) sets its rate to
// q/w with a burst of q; RateLimit, RateLimit-Remaining/-Reset and
// X-RateLimit-Remaining/-Reset give its quota until the reset, and a
// quota of 0 pauses the scope until the reset; a 429 halves the scope's
// concurrency (once per answer sent at the old bound), and each answer
// that is not an error grows it back by 1/(8·c), so by one after 8·c
// answers; a learned bound lapses 10 minutes after the last 429 that set
// it, or once it grows back to the configured one (64 when none is).
//
// Acquire waits within ctx's deadline (without one, 60 s): when the wait
// it would need is longer (a rate slot, a pause), it fails at once with a
// *RateLimitError, without waiting; a wait for a concurrency slot that
// outlasts the deadline fails with one too. Implementations must be safe
// for concurrent use; the embedded one is NewMemoryLimiter, the shared
// one (every replica on one Redis) tools/redislimit.
type RateLimiter interface {
	Acquire(ctx context.Context, s LimitScope) (Permit, error)
}

// ErrRateLimitWait marks a request that was not sent because waiting for
// its rate limit would have overrun the call's time budget.
var ErrRateLimitWait = errors.New("the rate limit's wait does not fit the time budget")

// RateLimitError is a request that was not sent: its provider's (or its
// credential's) rate limit would have made it wait past the call's
// deadline. A walk stops on it as budget_time and says the rate limit
// was the cause.
type RateLimitError struct {
	Provider string
	// Wait is the wait that did not fit; zero when the request waited for
	// a concurrency slot until the deadline.
	Wait time.Duration
	// Cause says what made it wait: "rate", "paused" (Retry-After or an
	// exhausted quota until its reset) or "concurrency".
	Cause string
}

func (e *RateLimitError) Error() string {
	switch e.Cause {
	case "concurrency":
		return fmt.Sprintf("waiting for %s's rate limit (every concurrent slot was taken) used up the time budget", e.Provider)
	case "paused":
		return fmt.Sprintf("%s's rate limit pauses requests for %s, longer than the time budget left", e.Provider, roundWait(e.Wait))
	}
	return fmt.Sprintf("waiting for %s's rate limit would take %s, longer than the time budget left", e.Provider, roundWait(e.Wait))
}

func (e *RateLimitError) Unwrap() error { return ErrRateLimitWait }

func roundWait(d time.Duration) time.Duration {
	if d >= 10*time.Second {
		return d.Round(time.Second)
	}
	return d.Round(100 * time.Millisecond)
}

// Limiter tuning shared by every implementation (the Redis one's script
// uses the same numbers).
const (
	// DefaultLimitWait bounds a wait when ctx has no deadline.
	DefaultLimitWait = 60 * time.Second
	// DefaultPermitLease is how long a permit of the embedded limiter
	// counts against concurrency when it is never released (a caller's
	// bug: in one process, a holder does not die apart from its
	// limiter). The Redis limiter's lease is renewed while its request
	// runs, and shorter (redislimit.DefaultPermitLease).
	DefaultPermitLease = 2 * time.Minute
	// LearnedLimitTTL is how long a learned concurrency bound or rate
	// outlives the answer that set it.
	LearnedLimitTTL = 10 * time.Minute
	// ConcurrencyCeiling is the learned concurrency at which a provider
	// without a configured one is unbounded again.
	ConcurrencyCeiling = 64
	// ConcurrencyGrowth: each good answer grows a learned bound c by
	// 1/(ConcurrencyGrowth·c).
	ConcurrencyGrowth = 8
)

// Learned is what one answer teaches its scope, read from its status and
// header at the given time: the form every implementation applies.
type Learned struct {
	// TooMany: the answer was a 429. OK: a status below 400, which grows
	// a learned concurrency bound back.
	TooMany, OK bool
	// PauseUntil: no request before then (Retry-After); zero for none.
	PauseUntil time.Time
	// Remaining is the quota left until Reset; -1 when not said.
	Remaining int64
	Reset     time.Time
	// Rate (per second) and Burst from RateLimit-Policy; zero when none.
	Rate  float64
	Burst int
}

// Learn reads what o teaches, at now.
func Learn(o Outcome, now time.Time) Learned {
	l := Learned{Remaining: -1, TooMany: o.Status == http.StatusTooManyRequests, OK: o.Status > 0 && o.Status < 400}
	if o.Status == 0 {
		return l
	}
	h := o.Header
	if o.Status == http.StatusTooManyRequests || o.Status == http.StatusServiceUnavailable {
		if d, ok := RetryAfter(h, now); ok && d > 0 {
			l.PauseUntil = now.Add(d)
		}
	}
	// Remaining and reset: the IETF field (structured or the older
	// "limit=, remaining=, reset=" list), then the separate fields of the
	// IETF drafts, then the X- convention.
	if rem, reset, ok := parseRateLimitField(h.Get("RateLimit")); ok {
		l.Remaining, l.Reset = rem, now.Add(reset)
	} else if rem, ok := headerInt(h, "RateLimit-Remaining"); ok {
		if d, ok := headerSeconds(h, "RateLimit-Reset"); ok {
			l.Remaining, l.Reset = rem, now.Add(d)
		}
	} else if rem, ok := headerInt(h, "X-RateLimit-Remaining"); ok {
		if at, ok := xReset(h, now); ok {
			l.Remaining, l.Reset = rem, at
		}
	}
	if l.Remaining >= 0 && !l.Reset.After(now) {
		l.Remaining = -1 // a reset already past says nothing of what is left
	}
	if l.Remaining < 0 {
		l.Reset = time.Time{}
	}
	l.Rate, l.Burst = parsePolicy(h.Get("RateLimit-Policy"))
	return l
}

// RetryAfter reads a Retry-After header: delay-seconds or an HTTP-date
// relative to now (a date in the past means no wait). Waits are capped at
// a day.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseFloat(v, 64); err == nil {
		if n < 0 || math.IsNaN(n) {
			return 0, false
		}
		if n >= 86400 { // before the conversion, which would overflow
			return 24 * time.Hour, true
		}
		return time.Duration(n * float64(time.Second)), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), 24*time.Hour), true
}

func headerInt(h http.Header, name string) (int64, bool) {
	v := strings.TrimSpace(h.Get(name))
	if i := strings.IndexByte(v, ','); i >= 0 { // several policies: the first
		v = strings.TrimSpace(v[:i])
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

func headerSeconds(h http.Header, name string) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get(name))
	n, err := strconv.ParseFloat(v, 64)
	if err != nil || n < 0 || math.IsNaN(n) || n > maxLimitWindow.Seconds() {
		return 0, false
	}
	return time.Duration(n * float64(time.Second)), true
}

// xReset reads X-RateLimit-Reset as the conventions use it: epoch
// milliseconds, epoch seconds (GitHub) or seconds from now; or
// X-RateLimit-Reset-After (seconds from now).
func xReset(h http.Header, now time.Time) (time.Time, bool) {
	if d, ok := headerSeconds(h, "X-RateLimit-Reset-After"); ok {
		return now.Add(d), true
	}
	v := strings.TrimSpace(h.Get("X-RateLimit-Reset"))
	n, err := strconv.ParseFloat(v, 64)
	var at time.Time
	switch {
	case err != nil || n < 0 || math.IsNaN(n):
		t, err := http.ParseTime(v)
		if err != nil {
			return time.Time{}, false
		}
		at = t
	case n > 1e12:
		if n > 1e15 { // past the year 33658: not milliseconds
			return time.Time{}, false
		}
		at = time.UnixMilli(int64(n))
	case n > 1e9:
		at = time.Unix(int64(n), int64((n-math.Floor(n))*1e9))
	case n <= maxLimitWindow.Seconds():
		return now.Add(time.Duration(n * float64(time.Second))), true
	default:
		return time.Time{}, false
	}
	if at.Sub(now) > maxLimitWindow {
		return time.Time{}, false
	}
	return at, true
}

// parseRateLimitField reads the IETF RateLimit field: structured
// (`"default";r=50;t=30`, several items: the lowest remaining) or the
// older draft's `limit=100, remaining=50, reset=30`.
func parseRateLimitField(v string) (remaining int64, reset time.Duration, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, 0, false
	}
	best := int64(-1)
	var bestReset time.Duration
	consider := func(rem int64, t float64, hasR, hasT bool) {
		if hasR && hasT && (best < 0 || rem < best) {
			best, bestReset = rem, time.Duration(t*float64(time.Second))
		}
	}
	if strings.Contains(v, "remaining=") {
		var rem int64
		var t float64
		var hasR, hasT bool
		for _, p := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' }) {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.ToLower(strings.TrimSpace(k)) {
			case "remaining":
				rem, hasR = parseNonNeg(val)
			case "reset":
				t, hasT = parseNonNegFloat(val)
			}
		}
		consider(rem, t, hasR, hasT)
	} else {
		for _, item := range strings.Split(v, ",") {
			var rem int64
			var t float64
			var hasR, hasT bool
			for _, p := range strings.Split(item, ";")[1:] {
				k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
				switch strings.TrimSpace(k) {
				case "r":
					rem, hasR = parseNonNeg(val)
				case "t":
					t, hasT = parseNonNegFloat(val)
				}
			}
			consider(rem, t, hasR, hasT)
		}
	}
	if best < 0 || bestReset > maxLimitWindow {
		return 0, 0, false
	}
	return best, bestReset, true
}

// parsePolicy reads RateLimit-Policy: structured items
// (`"burst";q=100;w=60`) or the older draft's (`100;w=60`), and returns
// the lowest rate per second and the lowest quota as its burst: with
// several policies each must hold, so a long window's rate must not
// bring its large quota as a burst past a short window's (`"burst";q=10;
// w=1, "day";q=10000;w=86400` is 10000/86400 per second with a burst of
// 10, not 10000). A window longer than maxLimitWindow says nothing (its
// rate would hold every request back for ages).
func parsePolicy(v string) (rate float64, burst int) {
	for _, item := range strings.Split(v, ",") {
		parts := strings.Split(item, ";")
		var q, w float64
		hasQ := false
		if n, ok := parseNonNegFloat(parts[0]); ok { // the older draft: quota first
			q, hasQ = n, true
		}
		for _, p := range parts[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(p), "=")
			switch strings.TrimSpace(k) {
			case "q":
				q, hasQ = parseNonNegFloat(val)
			case "w":
				w, _ = parseNonNegFloat(val)
			}
		}
		if !hasQ || q < 1 || w <= 0 || w > maxLimitWindow.Seconds() {
			continue
		}
		if r := q / w; rate == 0 || r < rate {
			rate = r
		}
		if b := int(math.Min(q, 1e6)); burst == 0 || b < burst {
			burst = b
		}
	}
	return rate, burst
}

// maxLimitWindow bounds what an upstream's rate-limit fields may say:
// a reset or a policy window further ahead is read as saying nothing, as
// an epoch in the wrong unit (microseconds) would otherwise pause the
// provider for centuries.
const maxLimitWindow = 366 * 24 * time.Hour

func parseNonNeg(s string) (int64, bool) {
	n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(s), `"`), 10, 64)
	return n, err == nil && n >= 0
}

func parseNonNegFloat(s string) (float64, bool) {
	n, err := strconv.ParseFloat(strings.Trim(strings.TrimSpace(s), `"`), 64)
	return n, err == nil && n >= 0 && !math.IsNaN(n) && !math.IsInf(n, 0)
}

// LimitWait is a request made to wait by its rate limit: what a progress
// line shows ("waiting for acme's rate limit (2 s)").
type LimitWait struct {
	Provider string
	// Cause is what makes it wait: "rate", "paused" (Retry-After or a
	// spent quota until its reset) or "concurrency" (every slot taken).
	Cause string
	// Wait is how long the limiter expects the wait to last; zero when it
	// cannot tell (a concurrency slot comes back when a request ends).
	Wait time.Duration
}

type limitWaitKey struct{}

// WithLimitWait returns ctx carrying f, which a limiter calls when a
// request made under ctx starts waiting for its slot; f returns the
// function the limiter calls when that wait ends (the slot granted, or
// the wait given up). f is called from the request's goroutine and must
// not block.
func WithLimitWait(ctx context.Context, f func(LimitWait) (end func())) context.Context {
	return context.WithValue(ctx, limitWaitKey{}, f)
}

// LimitWaitStarted tells ctx's observer (WithLimitWait) that a request
// starts waiting as w says, and returns the function to call when the
// wait ends; never nil. Limiters call it around every wait they make.
func LimitWaitStarted(ctx context.Context, w LimitWait) (end func()) {
	if f, ok := ctx.Value(limitWaitKey{}).(func(LimitWait) func()); ok && f != nil {
		if end := f(w); end != nil {
			return end
		}
	}
	return func() {}
}

type limitGrantKey struct{}

// WithLimitGrant returns ctx carrying f, which the Caller of a request
// made under ctx calls once the request holds its rate-limit slot, just
// before sending it (at once when no limiter paces it): a walk that sends
// several requests at once lets each take its slot only after the one it
// needs before it has taken its own. When f returns an error the request
// is not sent: the Caller releases its slot and returns that error. f is
// called from the request's goroutine, once per try, and must not block.
func WithLimitGrant(ctx context.Context, f func() error) context.Context {
	return context.WithValue(ctx, limitGrantKey{}, f)
}

// LimitGranted tells ctx's observer (WithLimitGrant) that the request
// holds its slot; an error says not to send it. Callers that pace
// requests (Invoker, MCPSource) call it once the limiter granted the
// slot, or without a limiter before sending.
func LimitGranted(ctx context.Context) error {
	if f, ok := ctx.Value(limitGrantKey{}).(func() error); ok && f != nil {
		return f()
	}
	return nil
}

// LimitWaitContext gives ctx a deadline DefaultLimitWait ahead when it
// has none, so that no wait for a slot is unbounded; limiters' Acquire
// runs under it.
func LimitWaitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, DefaultLimitWait)
}

// LimitWaitLeft is how long a request under ctx (from LimitWaitContext)
// may still wait for its slot.
func LimitWaitLeft(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl)
	}
	return DefaultLimitWait
}

// LimitFingerprint is the one-way fingerprint of a runtime credential a
// limiter keys its scope by: HMAC-SHA256 under key (nil: a fixed key),
// first 16 bytes in hex; "" for "".
func LimitFingerprint(key []byte, credential string) string {
	if credential == "" {
		return ""
	}
	if key == nil {
		key = []byte("trawl rate limit scope v1")
	}
	h := hmac.New(sha256.New, key)
	h.Write([]byte(credential))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
