package web

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/labstack/echo/v4"
)

// defaultStreamsPerSession is how many streams one session token may hold
// open at once when limits.streams_per_session is unset: far more than any
// user's tabs need, few enough that one token cannot tie up a replica.
const defaultStreamsPerSession = 200

// streamCap counts the streams each session holds open on this replica.
// Safe for concurrent use; it holds an entry only while a stream is open.
type streamCap struct {
	max int

	mu   sync.Mutex
	open map[string]int // by session (the token's hash)
}

func newStreamCap(max int) *streamCap {
	if max <= 0 {
		max = defaultStreamsPerSession
	}
	return &streamCap{max: max, open: map[string]int{}}
}

// acquire takes one of session's streams, unless it holds them all.
func (sc *streamCap) acquire(session string) bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.open[session] >= sc.max {
		return false
	}
	sc.open[session]++
	return true
}

func (sc *streamCap) release(session string) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.open[session]--; sc.open[session] <= 0 {
		delete(sc.open, session)
	}
}

// capStreams holds one of the caller's streams while the handler runs: a
// session token that already holds limits.streams_per_session open gets
// 429 too_many_streams with Retry-After. The admin key is not capped.
func (s *Server) capStreams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p := principalOf(c)
		if p.Admin || p.Session == "" {
			return next(c)
		}
		if !s.streams.acquire(p.Session) {
			c.Response().Header().Set("Retry-After", strconv.Itoa(retryAfterStreams))
			return apiErr(http.StatusTooManyRequests, "too_many_streams", fmt.Sprintf(
				"this session already holds %d streams open (limits.streams_per_session); close one before opening another", s.streams.max))
		}
		defer s.streams.release(p.Session)
		return next(c)
	}
}

// retryAfterStreams is the Retry-After of too_many_streams, in seconds.
const retryAfterStreams = 5
