package demo

import (
	"fmt"
	"net/http"
)

// Faults makes the server misbehave in the ways real upstreams do, so the
// looping engine's guards can be tested against a live HTTP server. The
// zero value injects nothing.
//
// The per-endpoint faults (RateLimit, Transient5xx, Persistent5xx,
// Unauthorized) are keyed by endpoint path: a concrete path ("/orders",
// "/properties/p_2/bookings") or a route pattern
// ("/properties/{property_id}/bookings"); a concrete key wins. Requests
// are numbered per key from 1 in arrival order, counting every request —
// including those a fault answered — so {AtRequest: 3, Times: 1} fails the
// third request and lets the fourth (a retry of the same page) through.
// When several apply to one request, the first in field order wins.
//
// The remaining fields shape the Acme list endpoints named in their docs.
// Reset rewinds every fault to its first request.
type Faults struct {
	// RateLimit answers 429 Too Many Requests with a Retry-After header.
	RateLimit map[string]RateLimit
	// Transient5xx answers a 5xx for a few requests, then recovers.
	Transient5xx map[string]Transient
	// Persistent5xx answers a 5xx on every request from one on.
	Persistent5xx map[string]Persistent
	// Unauthorized answers 401 (or 403) as if the credential had been
	// revoked, whatever the request carries.
	Unauthorized map[string]Unauthorized

	// ExpireCursorAfter, when positive, makes GET /tickets honour at most
	// that many cursor-bearing requests after each cursor-less (first
	// page) request; later cursors get 400 {"error":"cursor_expired"}.
	ExpireCursorAfter int
	// CursorCycle makes GET /tickets answer the third page with the
	// cursor of the second page as next_cursor, so a walker that does not
	// remember cursors loops forever.
	CursorCycle bool
	// FirstPageEmptyWithCursor makes the first page of GET /tickets (the
	// request without a cursor) answer no tickets but a next_cursor; the
	// cursor leads to the real first page.
	FirstPageEmptyWithCursor bool
	// MalformedContinuation makes GET /tickets answer next_cursor as a
	// JSON object ({"position":…,"token":…}) instead of the declared
	// string, on every page that has a next page.
	MalformedContinuation bool
	// EmptyPagesWithMore makes GET /customers answer empty pages that
	// still say has_more:true.
	EmptyPagesWithMore EmptyPages
	// InsertDuringWalk inserts customers at the front of GET /customers
	// in the middle of a walk, so every offset shifts.
	InsertDuringWalk Insert
	// ForeignNextURL makes every rel="next" link of GET /events point to
	// another origin (ForeignOrigin) with the same path and query.
	ForeignNextURL bool
	// WrongTotal, when non-zero, is added to the total GET /orders reports
	// (-400 reports 2000 of 2400 orders; +100 reports 2500).
	WrongTotal int
	// CapPageSize, when positive, silently caps the page size of every
	// paginated Acme list (per_page, limit) to it, whatever was asked and
	// whatever the spec's maximum says: the client sees pages shorter
	// than it asked for although more rows follow.
	CapPageSize int
	// DuplicateItem makes the second page of every paginated Acme list
	// start with the last item of the first page in place of its own first
	// item, as a store with an unstable sort order does: a walk sees one id
	// twice and misses one row. "Second page" is the page starting right
	// after a full first page (page=2, offset=limit, the first cursor).
	DuplicateItem bool
}

// ForeignOrigin is the origin of the next links Faults.ForeignNextURL makes.
const ForeignOrigin = "https://mirror.acme-cdn.example"

// RateLimit is a window of 429 answers.
type RateLimit struct {
	// AtRequest is the number of the first limited request. Zero: 1.
	AtRequest int
	// Times is how many consecutive requests are limited. Zero: 1;
	// negative: every request from AtRequest on.
	Times int
	// RetryAfter is the Retry-After value, in delay-seconds ("2") or as an
	// HTTP-date (time.Format(http.TimeFormat)). Zero: "1".
	RetryAfter string
	// NoRetryAfter sends no Retry-After header at all.
	NoRetryAfter bool
}

// Transient is a window of server errors after which the endpoint recovers.
type Transient struct {
	// AtRequest is the number of the first failing request. Zero: 1.
	AtRequest int
	// Times is how many consecutive requests fail. Zero: 1.
	Times int
	// Status is the status answered. Zero: 503.
	Status int
}

// Persistent is a server error that never recovers.
type Persistent struct {
	// FromRequest is the number of the first failing request. Zero: 1.
	FromRequest int
	// Status is the status answered. Zero: 500.
	Status int
}

// Unauthorized is a window of auth failures.
type Unauthorized struct {
	// AtRequest is the number of the first rejected request. Zero: 1.
	AtRequest int
	// Times is how many consecutive requests are rejected. Zero: 1;
	// negative: every request from AtRequest on.
	Times int
	// Status is 401 or 403. Zero: 401.
	Status int
}

// EmptyPages configures Faults.EmptyPagesWithMore.
type EmptyPages struct {
	// Count is how many empty pages (with has_more:true) are answered
	// before the real data: the first Count list requests get them.
	Count int
	// Forever answers every list request with an empty page and
	// has_more:true, so only a budget ends the walk.
	Forever bool
}

// Insert configures Faults.InsertDuringWalk.
type Insert struct {
	// AfterRequests is how many GET /customers list requests are answered
	// before the insertion; the next request sees the new rows.
	AfterRequests int
	// Count is how many customers are inserted (once). Zero: the fault is
	// off. New customers are numbered after the generated ones
	// (cus_1338, …) and sort first, newest first.
	Count int
}

// walkState is what the list faults remember between requests; guarded by
// Server.mu.
type walkState struct {
	cursorPages   int        // ticket requests with a cursor since the last one without
	emptyServed   int        // empty customer pages answered for EmptyPagesWithMore
	customerLists int        // GET /customers answers so far
	inserted      []customer // rows InsertDuringWalk added, newest first
}

// window reports whether request n falls in [at, at+times).
func window(n, at, times int) bool {
	if at <= 0 {
		at = 1
	}
	if times == 0 {
		times = 1
	}
	return n >= at && (times < 0 || n < at+times)
}

// lookup finds the fault for path or route and the request number it
// counts; concrete paths win over patterns.
func lookup[T any](m map[string]T, path, route string, counts map[string]int) (T, int, bool) {
	if f, ok := m[path]; ok {
		return f, counts[path], true
	}
	if f, ok := m[route]; ok && route != "" {
		return f, counts[route], true
	}
	var zero T
	return zero, 0, false
}

// pick returns the response a per-endpoint fault makes for the request
// just counted, or nil. The caller holds Server.mu.
func (f *Faults) pick(path, route string, counts map[string]int) func(http.ResponseWriter) {
	if u, n, ok := lookup(f.Unauthorized, path, route, counts); ok && window(n, u.AtRequest, u.Times) {
		status := u.Status
		if status == 0 {
			status = http.StatusUnauthorized
		}
		return func(w http.ResponseWriter) {
			if status == http.StatusForbidden {
				writeError(w, status, "forbidden", "The credential does not grant access to this resource.")
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="acme", error="invalid_token"`)
			writeError(w, status, "unauthorized", "The access token has been revoked or has expired.")
		}
	}
	if rl, n, ok := lookup(f.RateLimit, path, route, counts); ok && window(n, rl.AtRequest, rl.Times) {
		return func(w http.ResponseWriter) {
			ra := rl.RetryAfter
			if ra == "" {
				ra = "1"
			}
			if !rl.NoRetryAfter {
				w.Header().Set("Retry-After", ra)
			}
			w.Header().Set("X-RateLimit-Limit", "60")
			w.Header().Set("X-RateLimit-Remaining", "0")
			writeError(w, http.StatusTooManyRequests, "rate_limited", "Rate limit exceeded: 60 requests per minute. Retry after the time given in Retry-After.")
		}
	}
	if p, n, ok := lookup(f.Persistent5xx, path, route, counts); ok {
		from := max(p.FromRequest, 1)
		if n >= from {
			return serverError(p.Status, http.StatusInternalServerError)
		}
	}
	if t, n, ok := lookup(f.Transient5xx, path, route, counts); ok && window(n, t.AtRequest, t.Times) {
		return serverError(t.Status, http.StatusServiceUnavailable)
	}
	return nil
}

func serverError(status, def int) func(http.ResponseWriter) {
	if status == 0 {
		status = def
	}
	return func(w http.ResponseWriter) {
		writeError(w, status, "server_error", fmt.Sprintf("Something went wrong on our side (%d %s). Please retry.", status, http.StatusText(status)))
	}
}

// pageSize applies the endpoint's default and maximum and the CapPageSize
// fault to a requested size (0 when not given).
func (f *Faults) pageSize(asked, def, maxSize int) int {
	n := asked
	if n == 0 {
		n = def
	}
	n = min(n, maxSize)
	if f.CapPageSize > 0 {
		n = min(n, f.CapPageSize)
	}
	return n
}

// pageOf returns all[start:start+size] as a fresh slice, applying the
// DuplicateItem fault to the second page.
func pageOf[T any](f *Faults, all []T, start, size int) []T {
	if start >= len(all) {
		return []T{}
	}
	end := min(start+size, len(all))
	page := append([]T(nil), all[start:end]...)
	if f.DuplicateItem && start > 0 && start == size {
		page[0] = all[start-1]
	}
	return page
}
