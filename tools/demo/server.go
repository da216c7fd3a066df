package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Options configures a Server. The zero value is an open server with no
// faults.
type Options struct {
	// Token, when set, is the bearer token every request must carry
	// (Authorization: Bearer <Token>); others get 401. Zero: no auth.
	Token string
	// APIKey, when set, is accepted in the X-Api-Key header as an
	// alternative to Token (or as the only credential when Token is
	// empty). Zero: the header is ignored.
	APIKey string
	// Faults makes chosen endpoints misbehave, for tests. Zero: none.
	Faults Faults
	// Latency delays every answer by that long (a request whose client
	// goes away stops waiting), so that a walk's progress can be
	// watched. Zero: none.
	Latency time.Duration
	// Now stamps the objects the toolkit backends create (sent mail,
	// new CRM records, calendar quick-add). Zero: time.Now. The
	// generated data never depends on it.
	Now func() time.Time
}

// RecordedRequest is one request the server received, as tests see it.
type RecordedRequest struct {
	Method   string
	Path     string
	RawQuery string
	// Header is the request's header without Authorization, X-Api-Key,
	// Cookie and Proxy-Authorization.
	Header http.Header
	// Body is the request body (up to 1 MiB), "" for none.
	Body string
	// Status is the status the server answered, 0 while in flight.
	Status int
}

// Server is the Acme sample upstream: the Acme REST API at the root and
// the connected-app backends under /mail, /chat, /crm and /calendar. It
// implements http.Handler; Start runs it on a listener of its own. It is
// safe for concurrent use.
type Server struct {
	opt   Options
	data  *dataset
	mux   *http.ServeMux
	ticks cursorCodec
	mail  *store[mailState]
	chat  *store[chatState]
	crm   *store[crmState]
	cal   *store[calendarState]

	mu     sync.Mutex
	gen    int // bumped by Reset; stale in-flight log entries are dropped
	log    []RecordedRequest
	counts map[string]int // by concrete path and by route pattern
	walk   walkState
	srv    *http.Server
}

const maxBody = 1 << 20

// NewServer returns a server with freshly generated state. Two servers
// built with the same Options answer the same requests with the same bytes.
func NewServer(opt Options) *Server {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	// The fault maps are copied so that a caller reusing its Options
	// cannot race with the handlers.
	f := &opt.Faults
	f.RateLimit, f.Transient5xx = maps.Clone(f.RateLimit), maps.Clone(f.Transient5xx)
	f.Persistent5xx, f.Unauthorized = maps.Clone(f.Persistent5xx), maps.Clone(f.Unauthorized)
	s := &Server{
		opt:    opt,
		data:   acmeData(),
		mux:    http.NewServeMux(),
		ticks:  cursorCodec{key: []byte("acme-tickets-v1")},
		mail:   newStore(func() *mailState { return newMailState(opt.Now) }),
		chat:   newStore(func() *chatState { return newChatState(opt.Now) }),
		crm:    newStore(func() *crmState { return newCRMState(opt.Now) }),
		cal:    newStore(func() *calendarState { return newCalendarState(opt.Now) }),
		counts: map[string]int{},
	}
	s.routeAcme()
	s.routeMail()
	s.routeChat()
	s.routeCRM()
	s.routeCalendar()
	return s
}

// Requests returns a copy of every request received since NewServer or the
// last Reset, in arrival order.
func (s *Server) Requests() []RecordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]RecordedRequest, len(s.log))
	for i, r := range s.log {
		r.Header = r.Header.Clone()
		out[i] = r
	}
	return out
}

// Count returns how many requests reached path: a concrete path
// ("/properties/p_2/bookings") or a route pattern
// ("/properties/{property_id}/bookings").
func (s *Server) Count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[path]
}

// Reset forgets the recorded requests and per-endpoint counters, rewinds
// every fault to its first request, and restores the toolkit backends'
// data to its generated state.
func (s *Server) Reset() {
	s.mu.Lock()
	s.gen++
	s.log = nil
	s.counts = map[string]int{}
	s.walk = walkState{}
	s.mu.Unlock()
	s.mail.reset()
	s.chat.reset()
	s.crm.reset()
	s.cal.reset()
}

// Start serves on a new listener at addr ("127.0.0.1:0" picks a free port)
// and returns the base URL, e.g. "http://127.0.0.1:53211". A server starts
// at most once.
func (s *Server) Start(addr string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return "", errors.New("demo: server already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("demo: listen: %w", err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) //nolint:errcheck // ends with ErrServerClosed
	return "http://" + ln.Addr().String(), nil
}

// Close stops a started server at once, dropping open connections.
func (s *Server) Close() error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}

// Shutdown stops a started server gracefully, waiting for in-flight
// requests until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Shutdown(ctx)
}

var secretHeaders = []string{"Authorization", "X-Api-Key", "Cookie", "Proxy-Authorization"}

// ServeHTTP records the request, counts it, checks auth, applies faults
// and dispatches it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "The request body could not be read.")
		return
	}
	if len(body) > maxBody {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "Request bodies are limited to 1 MiB.")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	_, pattern := s.mux.Handler(r)
	route := pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		route = p
	}

	h := r.Header.Clone()
	for _, k := range secretHeaders {
		h.Del(k)
	}
	s.mu.Lock()
	gen, idx := s.gen, len(s.log)
	s.log = append(s.log, RecordedRequest{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Header: h, Body: string(body)})
	s.counts[r.URL.Path]++
	if route != "" && route != r.URL.Path {
		s.counts[route]++
	}
	fault := s.opt.Faults.pick(r.URL.Path, route, s.counts)
	s.mu.Unlock()

	// The status is recorded when the header is written, before the client
	// can see the response, so Requests never shows a finished call as
	// in flight.
	sw := &statusWriter{ResponseWriter: w, onStatus: func(code int) {
		s.mu.Lock()
		if s.gen == gen && idx < len(s.log) {
			s.log[idx].Status = code
		}
		s.mu.Unlock()
	}}

	if s.opt.Latency > 0 {
		t := time.NewTimer(s.opt.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch {
	case !s.authorized(r):
		sw.Header().Set("WWW-Authenticate", `Bearer realm="acme"`)
		writeError(sw, http.StatusUnauthorized, "unauthorized", "Missing or invalid credentials. Send Authorization: Bearer <token>.")
	case fault != nil:
		fault(sw)
	case pattern == "":
		s.notRouted(sw, r)
	default:
		s.mux.ServeHTTP(sw, r)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if s.opt.Token == "" && s.opt.APIKey == "" {
		return true
	}
	if s.opt.Token != "" {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && tok == s.opt.Token {
			return true
		}
	}
	return s.opt.APIKey != "" && r.Header.Get("X-Api-Key") == s.opt.APIKey
}

// notRouted answers a request no route matched with the mux's status (404,
// or 405 with Allow) in the JSON error shape.
func (s *Server) notRouted(w http.ResponseWriter, r *http.Request) {
	rec := &codeRecorder{header: http.Header{}}
	s.mux.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	if rec.code == http.StatusMethodNotAllowed {
		writeError(w, rec.code, "method_not_allowed", fmt.Sprintf("%s is not supported on %s.", r.Method, r.URL.Path))
		return
	}
	writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("No route for %s %s.", r.Method, r.URL.Path))
}

// codeRecorder keeps the status and header a handler writes, and drops
// its body.
type codeRecorder struct {
	header http.Header
	code   int
}

func (c *codeRecorder) Header() http.Header { return c.header }
func (c *codeRecorder) WriteHeader(code int) {
	if c.code == 0 {
		c.code = code
	}
}
func (c *codeRecorder) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return len(b), nil
}

type statusWriter struct {
	http.ResponseWriter
	onStatus func(int)
	wrote    bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.onStatus(code)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// writeJSON writes v as the response body. Encoding is deterministic:
// struct fields in declaration order, map keys sorted.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "The response could not be encoded.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

type apiError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// writeError writes the Acme error shape {"error": code, "message": text}.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: code, Message: msg})
}
