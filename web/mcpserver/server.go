// Package mcpserver serves an agent's tools over the Model Context
// Protocol, with the MCP Go SDK: Streamable HTTP (mounted by package web
// at /v1/agents/{id}/mcp) and stdio (`trawl mcp`). Every MCP client then
// gets what chat gets — looping, verdicts, the size guard, stored results
// and tool search — through the same engine call as a chat step
// (agent.Runner.ConversationCall), with trawl holding the credentials.
//
// Both revisions are served, negotiated per request: 2026-07-28
// (stateless, no initialize handshake, elicitation by multi-round-trip
// input requests, list changes through subscriptions/listen) and
// 2025-11-25 (sessions, elicitation/create). State kept between calls —
// stored results and the tools load_tool made callable — belongs to a
// conversation: the caller (the organization, or a session token's
// user) plus the handle the tools take as `_thread` (one default per
// caller), kept in the deployment's thread store, so it exists in both
// revisions and on every replica. An MCP session is never the key.
//
//	srv := mcpserver.New(d, mcpserver.Options{})
//	// HTTP: after authenticating the request
//	srv.ServeHTTP(w, r.WithContext(mcpserver.WithRequest(ctx, "demo", caller)))
//	// stdio
//	err := srv.ServeStdio(ctx, "demo", mcpserver.OrgCaller(), os.Stdin, os.Stdout)
package mcpserver

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/web/deploy"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Options configure a Server. The zero value is usable.
type Options struct {
	// Logger receives operational logs. Zero: the deployment's.
	Logger *slog.Logger
	// Version is the server version clients see. Zero: "dev".
	Version string
	// PageSize is how many tools one tools/list page holds (a client
	// follows nextCursor for the rest). Zero: DefaultPageSize.
	PageSize int
	// SessionIdle closes a 2025-11-25 session idle this long. Zero:
	// DefaultSessionIdle.
	SessionIdle time.Duration
	// MaxBody bounds one request's body, in bytes. Zero: 4 MiB.
	MaxBody int64
	// Connections returns the connected apps of a caller (the HTTP
	// server's user connections). Nil: the organization's.
	Connections func(Caller) agent.Connections
	// NoInbox says no one can reach this server's approvals inbox (`trawl
	// mcp`: its store is its own and ends with it). A call needing
	// approval is then refused in words saying so, unless the client
	// takes elicitation.
	NoInbox bool
	// ShutdownGrace is how long, once ServeStdio's context ends, its
	// running tool calls may go on before they are cancelled (each then
	// answers with what it fetched). Zero: DefaultShutdownGrace.
	ShutdownGrace time.Duration
}

// Defaults of Options.
const (
	DefaultPageSize    = 50
	DefaultSessionIdle = 30 * time.Minute
	// DefaultShutdownGrace is the default of Options.ShutdownGrace (as
	// `trawl serve`'s shutdown_grace).
	DefaultShutdownGrace = 20 * time.Second
)

// Server serves the agents of one deployment over MCP. It is safe for
// concurrent use.
type Server struct {
	warned  sync.Map // what firstWarning has seen
	dep     *deploy.Deployment
	opt     Options
	log     *slog.Logger
	sdkLog  *slog.Logger // the SDK's: warnings and errors only (it logs every session at info)
	runner  *agent.Runner
	agents  *agent.Registry
	threads agent.ThreadStore
	tracer  trace.Tracer // nil: traces off
	calls   metric.Int64Counter
	warm    *warmPool // runs the tool calls

	// active counts the tool calls running; answering the HTTP requests
	// of tool calls, until their response is written (a call's handler
	// returns before its response is out).
	active, answering atomic.Int64
	// draining is set by Drain: new tool calls are refused; drainingCtx
	// ends with it (pending elicitations are withdrawn).
	draining    atomic.Bool
	drainingCtx context.Context
	drain       context.CancelFunc
	// stopping ends when Close begins: every running tool call is
	// cancelled with it.
	stopping context.Context
	stop     context.CancelFunc

	mu       sync.Mutex
	closed   bool
	handlers map[string]*agentHandlers // by agent id
	running  map[string][]*runningCall // 2026-07-28 tool calls by caller and JSON-RPC id
	swept    time.Time                 // when running was last swept
	entries  map[string]*list.Element  // by entryKey; values are *entry
	lru      *list.List                // entries, most recently used first
}

// maxEntries bounds the (agent, caller) servers kept; past it the least
// recently used goes (its open sessions keep working).
const maxEntries = 4096

// New returns the MCP server of d (opened with deploy.PartsServe).
func New(d *deploy.Deployment, opt Options) *Server {
	if opt.Logger == nil {
		opt.Logger = d.Logger()
	}
	if opt.Version == "" {
		opt.Version = "dev"
	}
	if opt.PageSize <= 0 {
		opt.PageSize = DefaultPageSize
	}
	if opt.SessionIdle <= 0 {
		opt.SessionIdle = DefaultSessionIdle
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = 4 << 20
	}
	if opt.ShutdownGrace <= 0 {
		opt.ShutdownGrace = DefaultShutdownGrace
	}
	s := &Server{dep: d, opt: opt, log: opt.Logger, sdkLog: slog.New(warnOnly{opt.Logger.Handler()}), runner: d.Runner(), agents: d.Agents(), threads: d.Threads(), warm: newWarmPool(),
		handlers: map[string]*agentHandlers{}, running: map[string][]*runningCall{}, entries: map[string]*list.Element{}, lru: list.New()}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.drainingCtx, s.drain = context.WithCancel(context.Background())
	if tp := d.Telemetry().TracerProvider(); tp != nil {
		s.tracer = tp.Tracer(instrumentation)
	}
	if mp := d.Telemetry().MeterProvider(); mp != nil {
		s.calls, _ = mp.Meter(instrumentation).Int64Counter("trawl.mcp.calls",
			metric.WithDescription("MCP tool calls, by agent and outcome (ok, tool_error, cancelled, failed)."))
	}
	return s
}

const instrumentation = "github.com/trawl-dev/trawl/web/mcpserver"

// Caller is who an MCP request acts for: the organization (the admin key,
// or stdio), or a session token's user with its runtime credentials and
// cache scope — exactly as in chat.
type Caller struct {
	// UserID is the session's user; "" for the organization.
	UserID      string
	CacheScope  string
	Credentials map[string]string
	// Session is the hash of the session token ("" for the
	// organization): what connect links bind to.
	Session string
	// Expires is when the session token expires (zero: never).
	Expires time.Time
}

// OrgCaller is the organization: the admin key, or `trawl mcp` over
// stdio (which runs as the config's org).
func OrgCaller() Caller { return Caller{} }

// binding names the caller for the MCP session binding: an MCP session
// made by one caller answers no other.
func (c Caller) binding() string {
	if c.UserID == "" {
		return "org"
	}
	return "user:" + c.UserID
}

type requestKey struct{}

type request struct {
	agentID string
	caller  Caller
}

// WithRequest returns ctx carrying the agent an HTTP request addresses
// and the caller it authenticated as: what ServeHTTP serves.
func WithRequest(ctx context.Context, agentID string, c Caller) context.Context {
	return context.WithValue(ctx, requestKey{}, request{agentID: agentID, caller: c})
}

func requestOf(ctx context.Context) (request, bool) {
	r, ok := ctx.Value(requestKey{}).(request)
	return r, ok
}

// ErrClosed is returned by ServeStdio once the server is closed.
var ErrClosed = errors.New("mcp server closed")

// ServeHTTP serves the Streamable HTTP transport of the agent and caller
// WithRequest put in the request's context (the route and the
// authentication are the HTTP server's). A request at 2026-07-28 or later
// (its Mcp-Protocol-Version header) is served statelessly; an older one
// in a session of its own, bound to its caller.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req, ok := requestOf(r.Context())
	if !ok {
		http.Error(w, "mcpserver: request without an agent and caller", http.StatusInternalServerError)
		return
	}
	h, err := s.handlersFor(req.agentID)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	r, msg := s.readMessage(w, r)
	if msg.Method == "tools/call" {
		// Counted until the response is written: Close waits for it.
		s.answering.Add(1)
		defer s.answering.Add(-1)
	}
	if modern(r.Header.Get("Mcp-Protocol-Version")) {
		r, done, streams := s.cancellable(r, msg, req.caller)
		defer done()
		if streams {
			h.stateless.ServeHTTP(w, r)
		} else {
			h.statelessJSON.ServeHTTP(w, r)
		}
		return
	}
	h.stateful.ServeHTTP(w, r)
}

// cancellable serves what a session would on 2026-07-28, where every
// request is a POST of its own: a tools/call's context ends when the
// client closes its stream (the SDK propagates it) and also when the
// same caller posts notifications/cancelled naming it (to this replica).
// done forgets the call. streams reports whether the answer may need
// more than its one response, and so a stream of events: a request
// with a progress token (its notifications/progress go before the
// response), subscriptions/listen, or anything not read as one request.
// The rest is answered as one JSON body: on this revision a server
// sends a client nothing else about a request (no server-to-client
// requests: elicitation is an input request in the result; list
// changes go to subscriptions/listen), and a JSON body is cheaper for
// both ends than the same bytes framed as an event.
func (s *Server) cancellable(r *http.Request, msg message, c Caller) (_ *http.Request, done func(), streams bool) {
	if !msg.read {
		return r, func() {}, true
	}
	streams = msg.Method == "subscriptions/listen" || len(msg.Params.Meta.ProgressToken) > 0 && string(msg.Params.Meta.ProgressToken) != "null"
	switch msg.Method {
	case "tools/call":
		if len(msg.ID) == 0 {
			break
		}
		key := c.binding() + "\x00" + string(msg.ID)
		ctx, cancel := context.WithCancel(r.Context())
		call := &runningCall{cancel: cancel, thread: threadOf(msg.Params.Arguments)}
		s.mu.Lock()
		s.sweepRunning()
		s.running[key] = append(s.running[key], call)
		s.mu.Unlock()
		return r.WithContext(ctx), func() {
			s.mu.Lock()
			call.ended = time.Now()
			s.mu.Unlock()
			cancel()
		}, streams
	case "notifications/cancelled":
		var thread string
		if len(msg.Params.Meta.Thread) > 0 {
			_ = json.Unmarshal(msg.Params.Meta.Thread, &thread)
		}
		if cancel := s.cancelTarget(c.binding()+"\x00"+string(msg.Params.RequestID), thread); cancel != nil {
			cancel()
		}
	}
	return r, func() {}, streams
}

// message is what ServeHTTP reads of a POSTed JSON-RPC message.
type message struct {
	read   bool            // a POST whose body is one JSON-RPC message
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
			Thread        json.RawMessage `json:"trawl/thread"`
		} `json:"_meta"`
	} `json:"params"`
}

// readMessage reads a POST's body (bounded by MaxBody; the SDK answers a
// short read) and what it needs of it; r's body reads it again.
func (s *Server) readMessage(w http.ResponseWriter, r *http.Request) (*http.Request, message) {
	var msg message
	if r.Method != http.MethodPost || r.Body == nil {
		return r, msg
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opt.MaxBody))
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || json.Unmarshal(body, &msg) != nil {
		return r, message{}
	}
	msg.read = true
	return r, msg
}

// runningCall is a 2026-07-28 tool call a notifications/cancelled may
// name: its cancel, its conversation handle, and when it ended (zero
// while it runs; an ended call is remembered for cancelWindow).
type runningCall struct {
	cancel context.CancelFunc
	thread string
	ended  time.Time
}

// cancelWindow is how long an ended call still counts when a
// notifications/cancelled is matched: a client's notice for a call that
// just ended (the Go SDK closes the call's stream, then sends the notice)
// must not be taken for another client's call with the same id.
const cancelWindow = time.Minute

// cancelTarget is the call a notifications/cancelled of key (caller and
// JSON-RPC id) names, or nil. On 2026-07-28 over HTTP closing a call's
// stream is the cancellation; the notice names only a JSON-RPC id, which
// two clients of one caller may both use (ids count from small numbers),
// so it is honoured only when unambiguous: exactly one call of that
// caller with that id, running, and none ended lately — and, when the
// notice's _meta names a conversation handle, in that conversation.
// Otherwise it is ignored (cancellation is advisory): a notice never
// reaches another client's call.
func (s *Server) cancelTarget(key, thread string) context.CancelFunc {
	s.mu.Lock()
	defer s.mu.Unlock()
	var match *runningCall
	n := 0
	for _, call := range s.running[key] {
		if thread != "" && call.thread != thread {
			continue
		}
		if call.ended.IsZero() || time.Since(call.ended) < cancelWindow {
			n++
			match = call
		}
	}
	if n != 1 || !match.ended.IsZero() {
		return nil
	}
	return match.cancel
}

// sweepRunning forgets the calls that ended over cancelWindow ago (at
// most once a cancelWindow). The caller holds s.mu.
func (s *Server) sweepRunning() {
	now := time.Now()
	if now.Sub(s.swept) < cancelWindow {
		return
	}
	s.swept = now
	for key, calls := range s.running {
		calls = slices.DeleteFunc(calls, func(c *runningCall) bool { return !c.ended.IsZero() && now.Sub(c.ended) >= cancelWindow })
		if len(calls) == 0 {
			delete(s.running, key)
		} else {
			s.running[key] = calls
		}
	}
}

// modern reports whether a protocol version is 2026-07-28 or later (the
// stateless revision).
func modern(version string) bool { return version >= "2026-07-28" }

// agentHandlers are the SDK's Streamable HTTP handlers for one agent:
// sessions (2025-11-25), and stateless (2026-07-28) answering with events
// or with one JSON body (see cancellable).
type agentHandlers struct {
	stateful, stateless, statelessJSON http.Handler
}

func (s *Server) handlersFor(agentID string) (*agentHandlers, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if h, ok := s.handlers[agentID]; ok {
		return h, nil
	}
	getServer := func(r *http.Request) *mcp.Server {
		req, ok := requestOf(r.Context())
		if !ok {
			return nil
		}
		e, err := s.entryFor(req.agentID, req.caller)
		if err != nil {
			s.log.Warn("mcp: no server for the request", "agent", req.agentID, "err", err)
			return nil
		}
		s.prime(r.Context(), e, req.caller)
		return e.srv
	}
	verify := func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		req, ok := requestOf(r.Context())
		if !ok {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: req.caller.binding(), Expiration: req.caller.Expires,
			Extra: map[string]any{callerExtra: req.caller}}, nil
	}
	bearer := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})
	h := &agentHandlers{
		stateful: bearer(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			SessionTimeout: s.opt.SessionIdle, MaxRequestBodyBytes: s.opt.MaxBody, Logger: s.sdkLog})),
		stateless: bearer(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Stateless: true, MaxRequestBodyBytes: s.opt.MaxBody, PropagateRequestCancellation: true, Logger: s.sdkLog})),
		statelessJSON: bearer(mcp.NewStreamableHTTPHandler(getServer, &mcp.StreamableHTTPOptions{
			Stateless: true, JSONResponse: true, MaxRequestBodyBytes: s.opt.MaxBody, PropagateRequestCancellation: true, Logger: s.sdkLog})),
	}
	s.handlers[agentID] = h
	return h, nil
}

// callerExtra is the TokenInfo.Extra key of the request's Caller.
const callerExtra = "trawl.caller"

// ServeStdio serves one client over stdio (newline-delimited JSON-RPC
// on in and out) as caller, until the client closes its end or ctx ends.
func (s *Server) ServeStdio(ctx context.Context, agentID string, caller Caller, in io.ReadCloser, out io.WriteCloser) error {
	if _, ok := s.agents.Get(agentID); !ok {
		return &UnknownAgentError{ID: agentID, Known: s.agentIDs()}
	}
	e, err := s.entryFor(agentID, caller)
	if err != nil {
		return err
	}
	// When ctx ends the server shuts down as `trawl serve` does: no new
	// call, the running ones get the grace to answer, then are cancelled
	// (each answers with what it fetched), then the session closes.
	run, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	defer context.AfterFunc(ctx, func() {
		s.Drain()
		if !s.WaitIdle(s.opt.ShutdownGrace) {
			s.log.Info("shutdown grace is over: cancelling the running MCP tool calls")
		}
		s.Close()
		cancel()
	})()
	s.prime(ctx, e, caller)
	err = e.srv.Run(run, &answerCounter{Transport: &mcp.IOTransport{Reader: in, Writer: out}, s: s})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// answerCounter counts, in Server.answering, the tool calls read from
// its connection until their response is written: a session closed
// before refuses to write it (the SDK's connection, once closing, writes
// nothing), so Close waits for them.
type answerCounter struct {
	mcp.Transport
	s *Server
}

func (t *answerCounter) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &countedConn{Connection: c, s: t.s, pending: map[any]bool{}}, nil
}

type countedConn struct {
	mcp.Connection
	s       *Server
	mu      sync.Mutex
	pending map[any]bool // the JSON-RPC ids of the tool calls not answered
}

func (c *countedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if req, ok := msg.(*jsonrpc.Request); ok {
		switch {
		case req.Method == "tools/call" && req.ID.IsValid():
			c.settle(req.ID.Raw(), true)
		case req.Method == "notifications/cancelled":
			// A cancelled call may get no response.
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &p) == nil {
				if f, ok := p.RequestID.(float64); ok {
					p.RequestID = int64(f)
				}
				c.settle(p.RequestID, false)
			}
		}
	}
	return msg, err
}

func (c *countedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	err := c.Connection.Write(ctx, msg)
	if r, ok := msg.(*jsonrpc.Response); ok {
		c.settle(r.ID.Raw(), false)
	}
	return err
}

func (c *countedConn) Close() error {
	c.mu.Lock()
	c.s.answering.Add(-int64(len(c.pending)))
	clear(c.pending)
	c.mu.Unlock()
	return c.Connection.Close()
}

// settle notes id as pending (or no longer) and counts it.
func (c *countedConn) settle(id any, pending bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[id] == pending {
		return
	}
	if pending {
		c.pending[id] = true
		c.s.answering.Add(1)
	} else {
		delete(c.pending, id)
		c.s.answering.Add(-1)
	}
}

// UnknownAgentError names an agent the deployment does not have.
type UnknownAgentError struct {
	ID    string
	Known []string
}

func (e *UnknownAgentError) Error() string {
	return "no agent " + quote(e.ID) + "; the deployment's agents: " + strings.Join(e.Known, ", ")
}

func (s *Server) agentIDs() []string {
	var ids []string
	for _, d := range s.agents.List() {
		ids = append(ids, d.ID)
	}
	return ids
}

// entry is the MCP server of one agent for one caller: its tools are
// registered as the caller's conversations need them (registered), and
// a change to that set sends notifications/tools/list_changed to the
// caller's sessions and subscriptions.
type entry struct {
	key     string
	agentID string
	caller  Caller // the caller it was made for (stdio's; HTTP calls carry their own)
	srv     *mcp.Server

	primed sync.Once // the default conversation's tools registered

	mu         sync.Mutex
	registered map[string]string // tool name → fingerprint of what was registered
	added      bool              // the last register added a tool (and so notified)
}

func entryKey(agentID string, c Caller) string { return agentID + "\x00" + c.binding() }

// entryFor returns the (agent, caller) server, made on first use.
func (s *Server) entryFor(agentID string, c Caller) (*entry, error) {
	key := entryKey(agentID, c)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if el, ok := s.entries[key]; ok {
		s.lru.MoveToFront(el)
		return el.Value.(*entry), nil
	}
	def, ok := s.agents.Get(agentID)
	if !ok {
		return nil, &UnknownAgentError{ID: agentID, Known: s.agentIDs()}
	}
	e := &entry{key: key, agentID: agentID, caller: c, registered: map[string]string{}}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	if len(s.upstreams(def)) > 0 {
		// Its MCP servers' resources and prompts, passed through.
		caps.Resources, caps.Prompts = &mcp.ResourceCapabilities{}, &mcp.PromptCapabilities{}
	}
	e.srv = mcp.NewServer(&mcp.Implementation{Name: "trawl", Title: "trawl: " + agentTitle(def), Version: s.opt.Version},
		&mcp.ServerOptions{
			Instructions: s.instructions(def),
			Logger:       s.sdkLog,
			Capabilities: caps,
		})
	e.srv.AddReceivingMiddleware(s.listMiddleware(e))
	s.entries[key] = s.lru.PushFront(e)
	if s.lru.Len() > maxEntries {
		old := s.lru.Back()
		s.lru.Remove(old)
		delete(s.entries, old.Value.(*entry).key)
	}
	return e, nil
}

// prime registers the default conversation's tools with a new entry
// before its first session runs: registered later, on the session's
// first tools/list or tools/call, they would send it a
// notifications/tools/list_changed when nothing changed. A failure is
// logged; the first request registers them then.
func (s *Server) prime(ctx context.Context, e *entry, c Caller) {
	e.primed.Do(func() {
		if err := s.registerFor(ctx, e, c, DefaultThread); err != nil {
			s.log.WarnContext(ctx, "mcp: listing the default conversation's tools", "agent", e.agentID, "err", err)
		}
	})
}

func agentTitle(d agent.Definition) string {
	if d.Name != "" {
		return d.Name
	}
	return "agent " + d.ID
}

// WaitIdle waits until no tool call runs or has its response still to
// write, at most d; it reports whether none does.
func (s *Server) WaitIdle(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for s.active.Load() > 0 || s.answering.Load() > 0 {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// Drain refuses new tool calls from now on (the HTTP server also refuses
// new requests while it drains); running calls go on, but those waiting
// for an elicitation's answer end as approval_required. It begins a
// shutdown, before WaitIdle and Close.
func (s *Server) Drain() {
	s.draining.Store(true)
	// A 2025-11-25 client's answer to an elicitation is a request of its
	// own, refused from now on: the calls waiting for one stop waiting
	// (their approvals wait in the inbox).
	s.drain()
}

// errDraining answers a tool call made once the shutdown began.
var errDraining = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the server is shutting down; retry shortly"}

// closeWait bounds how long Close waits for the cancelled calls to end
// (they stop at their next upstream request or page).
const closeWait = 5 * time.Second

// Close cancels every running tool call (each answers with what it
// fetched, noted as interrupted, and keeps its partial as a client's
// cancellation does), waits a little for those answers to be written,
// then ends every MCP session and refuses new ones. The HTTP server calls
// it at shutdown, after the grace.
func (s *Server) Close() {
	s.Drain()
	s.mu.Lock()
	s.closed = true
	var servers []*mcp.Server
	for el := s.lru.Front(); el != nil; el = el.Next() {
		servers = append(servers, el.Value.(*entry).srv)
	}
	s.mu.Unlock()
	s.stop()
	s.WaitIdle(closeWait)
	for _, srv := range servers {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	}
}

// warnOnly passes on warnings and errors only.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }

func (h warnOnly) WithGroup(name string) slog.Handler { return warnOnly{h.Handler.WithGroup(name)} }

// firstWarning reports whether the warning keyed key is new: a warning
// about a tool's schema is logged once, not on every tools/list.
func (s *Server) firstWarning(key string) bool {
	_, seen := s.warned.LoadOrStore(key, struct{}{})
	return !seen
}
