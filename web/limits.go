package web

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
)

const (
	// connectBodyTimeout bounds the connect form's arrival (Timeouts.Body
	// bounds the API's).
	connectBodyTimeout = 10 * time.Second
	// connectBodyLimit bounds the connect form (a code, a CSRF token and
	// one credential).
	connectBodyLimit = 16 << 10
)

// readBody reads a request's body whole before the handler runs (after
// authentication: routes add it behind their auth middleware): a body
// over limit bytes answers 413 (declared or chunked alike), one that does
// not arrive within timeout answers 408. The read deadline is then lifted,
// so a response that streams for minutes is never cut by it; the handler
// reads the buffered copy.
func readBody(limit int64, timeout time.Duration) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
				return next(c)
			}
			if r.ContentLength > limit {
				return tooLarge(limit)
			}
			rc := http.NewResponseController(c.Response().Writer)
			_ = rc.SetReadDeadline(time.Now().Add(timeout)) // unsupported (a recorder): no deadline
			data, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
			_ = rc.SetReadDeadline(time.Time{})
			switch {
			case errors.Is(err, os.ErrDeadlineExceeded):
				c.Response().Header().Set("Connection", "close")
				return apiErr(http.StatusRequestTimeout, codeForStatus(http.StatusRequestTimeout), fmt.Sprintf("the request body did not arrive within %s", timeout))
			case err != nil:
				return badRequest("reading the request body: " + err.Error())
			case int64(len(data)) > limit:
				c.Response().Header().Set("Connection", "close")
				return tooLarge(limit)
			}
			r.Body.Close()
			r.Body = &bufferedBody{bytes.NewReader(data)}
			r.ContentLength = int64(len(data))
			return next(c)
		}
	}
}

// bufferedBody is a body readBody has read.
type bufferedBody struct{ *bytes.Reader }

func (*bufferedBody) Close() error { return nil }

func tooLarge(limit int64) error {
	return apiErr(http.StatusRequestEntityTooLarge, codeForStatus(http.StatusRequestEntityTooLarge), fmt.Sprintf("the request body is over the limit of %d bytes", limit))
}

// Failed-authentication allowance of one client address: it may fail
// authFailBurst times at once, and regains one attempt every
// authFailEvery.
const (
	authFailBurst = 20
	authFailEvery = 3 * time.Second
	// authFailClients bounds the addresses tracked.
	authFailClients = 1 << 16
)

// failLimiter counts failed authentications per client address, as a
// token bucket: each failure takes a token; tokens come back at a fixed
// rate up to the burst. While an address has no token left, every
// authenticated request from it is refused — valid credentials too, so a
// guesser learns nothing from the answer. IPv6 addresses count per /64
// (what one host usually holds). Safe for concurrent use; it holds at most
// authFailClients addresses (then it forgets the ones that recovered, and
// if none has, an arbitrary one).
type failLimiter struct {
	burst float64
	every time.Duration
	now   func() time.Time

	mu sync.Mutex
	m  map[netip.Addr]*failBucket
}

type failBucket struct {
	tokens float64
	at     time.Time
}

func newFailLimiter(now func() time.Time) *failLimiter {
	return &failLimiter{burst: authFailBurst, every: authFailEvery, now: now, m: map[netip.Addr]*failBucket{}}
}

func clientKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

// refill brings b up to date; l.mu is held.
func (l *failLimiter) refill(b *failBucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(l.burst, b.tokens+float64(d)/float64(l.every))
		b.at = now
	}
}

// blocked reports whether a has no attempt left, and when it gets one.
func (l *failLimiter) blocked(a netip.Addr) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[clientKey(a)]
	if b == nil {
		return 0, false
	}
	now := l.now()
	l.refill(b, now)
	if b.tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - b.tokens) * float64(l.every)), true
}

// fail records a failed authentication from a.
func (l *failLimiter) fail(a netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k, now := clientKey(a), l.now()
	b := l.m[k]
	if b == nil {
		if len(l.m) >= authFailClients {
			l.sweep(now)
		}
		b = &failBucket{tokens: l.burst, at: now}
		l.m[k] = b
	}
	l.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
}

// sweep forgets the addresses that recovered, or one arbitrary address;
// l.mu is held.
func (l *failLimiter) sweep(now time.Time) {
	for k, b := range l.m {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.m, k)
		}
	}
	for k := range l.m {
		if len(l.m) < authFailClients {
			break
		}
		delete(l.m, k)
	}
}

// authAllowed answers 429 with Retry-After when client has used up its
// failed attempts.
func (s *Server) authAllowed(c echo.Context, client netip.Addr) error {
	wait, blocked := s.authFails.blocked(client)
	if !blocked {
		return nil
	}
	secs := int(math.Ceil(wait.Seconds()))
	c.Response().Header().Set("Retry-After", strconv.Itoa(max(secs, 1)))
	return apiErr(http.StatusTooManyRequests, "rate_limited", "too many failed authentication attempts from this address; retry later")
}

// clientAddr is the address a request comes from: the connection's peer,
// or — when the peer is a trusted proxy — the nearest address in
// X-Forwarded-For that is not one (read right to left, since a client
// may write anything on the left of what its proxies append).
func (s *Server) clientAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.IPv4Unspecified()
	}
	addr := ap.Addr().Unmap()
	if !s.trusted(addr) {
		return addr
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return addr // malformed: the last proxy is the best we know
		}
		addr = a.Unmap()
		if !s.trusted(addr) {
			return addr
		}
	}
	return addr
}

func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
