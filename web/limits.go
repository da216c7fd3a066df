package web

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
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

// Failed-authentication allowance: an address may fail with new
// credentials authFailBurst times at once, and one credential may fail
// authFailBurst times from one address; each regains one attempt every
// authFailEvery.
const (
	authFailBurst = 20
	authFailEvery = 3 * time.Second
	// authFailClients bounds the addresses tracked, and the (address,
	// credential) pairs.
	authFailClients = 1 << 16
)

// failLimiter counts failed authentications as token buckets keyed on
// the client address and on the credential presented. A failure with a
// credential the address has not failed with lately takes a token from
// the address's bucket and starts the pair's; a repeat of one it has
// takes from the pair's bucket only. So a guesser trying new credentials
// runs out at the address's rate, while one client retrying the same bad
// key (a stale session token in a browser behind a shared NAT) spends only
// its own allowance: everyone else behind that address keeps signing in.
// While an address or the pair has no token left, every request from it
// (from that pair) is refused before authentication — valid credentials
// too, so a guesser learns nothing from the answer. IPv6 addresses count
// per /64 (what one host usually holds). Credentials are kept only as a
// keyed fingerprint. Safe for concurrent use; it holds at most
// authFailClients of each (then it forgets the ones that recovered, and
// arbitrary ones down to seven eighths).
type failLimiter struct {
	burst float64
	every time.Duration
	now   func() time.Time
	key   []byte // keys the fingerprints of presented credentials

	mu    sync.Mutex
	addrs map[netip.Addr]*failBucket
	pairs map[failPair]*failBucket
}

// failPair is an address and the fingerprint of a credential it presented.
type failPair struct {
	addr netip.Addr
	cred [16]byte
}

type failBucket struct {
	tokens float64
	at     time.Time
}

func newFailLimiter(now func() time.Time) *failLimiter {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return &failLimiter{burst: authFailBurst, every: authFailEvery, now: now, key: key,
		addrs: map[netip.Addr]*failBucket{}, pairs: map[failPair]*failBucket{}}
}

func clientKey(a netip.Addr) netip.Addr {
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return a
}

func (l *failLimiter) pair(a netip.Addr, cred string) failPair {
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte(cred))
	p := failPair{addr: clientKey(a)}
	copy(p.cred[:], m.Sum(nil))
	return p
}

// refill brings b up to date; l.mu is held.
func (l *failLimiter) refill(b *failBucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.tokens = math.Min(l.burst, b.tokens+float64(d)/float64(l.every))
		b.at = now
	}
}

// wait is how long b has no token left; l.mu is held.
func (l *failLimiter) wait(b *failBucket, now time.Time) time.Duration {
	if b == nil {
		return 0
	}
	l.refill(b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) * float64(l.every))
}

// blocked reports whether a presenting cred has no attempt left, and when
// it gets one.
func (l *failLimiter) blocked(a netip.Addr, cred string) (time.Duration, bool) {
	p := l.pair(a, cred)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	w := max(l.wait(l.addrs[p.addr], now), l.wait(l.pairs[p], now))
	return w, w > 0
}

// fail records a failed authentication from a presenting cred.
func (l *failLimiter) fail(a netip.Addr, cred string) {
	p := l.pair(a, cred)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if b := l.pairs[p]; b != nil {
		l.refill(b, now)
		b.tokens = math.Max(0, b.tokens-1)
		return
	}
	if len(l.pairs) >= authFailClients {
		sweep(l, l.pairs, now)
	}
	l.pairs[p] = &failBucket{tokens: l.burst - 1, at: now}
	b := l.addrs[p.addr]
	if b == nil {
		if len(l.addrs) >= authFailClients {
			sweep(l, l.addrs, now)
		}
		b = &failBucket{tokens: l.burst, at: now}
		l.addrs[p.addr] = b
	}
	l.refill(b, now)
	b.tokens = math.Max(0, b.tokens-1)
}

// sweep forgets the entries of m that recovered and, while more than
// seven eighths of authFailClients remain, arbitrary ones (so that a full
// map is swept once per authFailClients/8 new entries); l.mu is held.
func sweep[K comparable](l *failLimiter, m map[K]*failBucket, now time.Time) {
	for k, b := range m {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(m, k)
		}
	}
	for k := range m {
		if len(m) <= authFailClients*7/8 {
			break
		}
		delete(m, k)
	}
}

// authAllowed answers 429 with Retry-After when client, presenting cred,
// has used up its failed attempts.
func (s *Server) authAllowed(c echo.Context, client netip.Addr, cred string) error {
	wait, blocked := s.authFails.blocked(client, cred)
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
