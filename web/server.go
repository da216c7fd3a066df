// Package web is trawl's HTTP server: the Echo routes of the API, admin-key
// and session auth, one central error renderer, the chat and workflow
// stream endpoints, the connect page and the Studio console's embedded
// assets. It serves a deploy.Deployment — what a config assembles without
// HTTP (package web/deploy) — taking the parts it serves from it once.
//
//	cfg, err := deploy.LoadConfig("trawl.yaml") // or deploy.DemoConfig()
//	srv, err := web.New(ctx, cfg, web.Options{})
//	err = srv.Run(ctx) // until ctx is cancelled; then a graceful shutdown
package web

import (
	"cmp"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web/deploy"
	"github.com/trawl-dev/trawl/web/mcpserver"
)

// Options are the process-level settings of a Server. The zero value is
// usable.
type Options struct {
	// Logger receives operational logs. Zero: slog.Default().
	Logger *slog.Logger
	// Stdout receives the start-up banner (where trawl listens, a newly
	// generated admin key). Zero: os.Stdout.
	Stdout io.Writer
	// BodyLimit bounds request bodies, in bytes. Zero: 4 MiB.
	BodyLimit int64
	// Timeouts bound how long the HTTP server waits on a client. Zero
	// fields keep the defaults.
	Timeouts Timeouts
	// Model replaces the configured model (tests, embedding). Zero: the
	// model the config names.
	Model agent.Model
	// Now is the deployment's clock (sessions, connect links, rate
	// limits, thread stamps). Zero: time.Now.
	Now func() time.Time
	// Runs are the run host's clock and waits. Zero: the defaults.
	Runs deploy.RunTimings
	// Version is the build MCP clients see in serverInfo (the same as
	// `trawl mcp` gives). Zero: "dev".
	Version string
}

// Timeouts bound how long the HTTP server waits on a client. Responses
// have no write deadline: a turn's stream lasts as long as the turn.
type Timeouts struct {
	// Header: a request's headers must arrive within it. Zero: 10 s.
	Header time.Duration
	// Body: a request's body must arrive within it once its headers did
	// (the connect form's within at most 10 s). Zero: 30 s.
	Body time.Duration
	// Idle: a keep-alive connection idle this long is closed. Zero: 60 s.
	Idle time.Duration
}

func (t Timeouts) withDefaults() Timeouts {
	if t.Header <= 0 {
		t.Header = 10 * time.Second
	}
	if t.Body <= 0 {
		t.Body = 30 * time.Second
	}
	if t.Idle <= 0 {
		t.Idle = 60 * time.Second
	}
	return t
}

// Server serves one deploy.Deployment over HTTP: the routes, admin-key
// and session auth, the streams of its runs (chat turns and workflow
// runs, detached from their requests) and a graceful shutdown.
type Server struct {
	dep *deploy.Deployment
	// evals are the eval runs (evals.go).
	evals evalRuns
	// The parts of the deployment the handlers serve, taken once.
	cfg          *deploy.Config
	log          *slog.Logger
	out          io.Writer
	catalog      *tools.Catalog
	engine       *loop.Engine
	results      *loop.Retrieval
	activity     *tools.ActivityLog
	agents       *agent.Registry
	runner       *agent.Runner
	model        agent.Model // nil when no model is configured
	threads      agent.ThreadStore
	sessions     deploy.SessionStore
	events       stream.EventLog
	conns        *deploy.Connections
	workflows    *workflow.Runner
	workflowDefs deploy.Records
	workflowRuns workflow.RunStore
	runs         *deploy.RunHost
	tel          *deploy.Telemetry
	mcp          *mcpserver.Server // the agents' tools over MCP

	echo      *echo.Echo
	timeouts  Timeouts
	proxies   []netip.Prefix  // trusted reverse proxies
	origins   map[string]bool // CORS allowed origins
	authFails *failLimiter
	streams   *streamCap // streams open per session token
	// draining is set when shutdown begins: /readyz answers 503 and new
	// turns and runs are refused.
	draining atomic.Bool
}

// New assembles a deployment from cfg (deploy.Open with PartsServe) and
// the server around it. Nothing listens yet.
func New(ctx context.Context, cfg *deploy.Config, opt Options) (*Server, error) {
	d, err := deploy.Open(ctx, cfg, deploy.Options{Logger: opt.Logger, Stdout: opt.Stdout, Model: opt.Model, Now: opt.Now, Runs: opt.Runs})
	if err != nil {
		return nil, err
	}
	s := &Server{dep: d, cfg: d.Config(), log: d.Logger(), out: d.Stdout(), catalog: d.Catalog(), engine: d.Engine(),
		results: d.Results(), activity: d.Activity(), agents: d.Agents(), runner: d.Runner(), model: d.Model(),
		threads: d.Threads(), sessions: d.Sessions(), events: d.Events(), conns: d.Connections(), workflows: d.Workflows(),
		workflowDefs: d.WorkflowDefs(), workflowRuns: d.WorkflowRuns(), runs: d.Runs(), tel: d.Telemetry(), timeouts: opt.Timeouts.withDefaults()}
	if s.proxies, err = cfg.ProxyPrefixes(); err != nil {
		d.Close()
		return nil, err
	}
	s.origins = map[string]bool{}
	for _, o := range cfg.CORS.AllowedOrigins {
		s.origins[strings.ToLower(o)] = true
	}
	s.authFails = newFailLimiter(func() time.Time { return s.now() })
	s.streams = newStreamCap(cfg.Limits.StreamsPerSession)
	s.mcp = mcpserver.New(d, mcpserver.Options{Logger: s.log, Version: opt.Version, PageSize: cfg.MCP.PageSize, SessionIdle: cfg.MCP.SessionIdle,
		MaxBody:     opt.BodyLimit,
		Connections: s.mcpConnections})
	s.echo = s.routes(opt)
	// Turns a dead replica (or a restart) interrupted go on from here.
	s.runs.Continue(map[string]deploy.Continuer{deploy.KindTurn: s.continueTurn, deploy.KindWorkflow: s.continueWorkflow})
	return s, nil
}

// Deployment is the deployment the server serves.
func (s *Server) Deployment() *deploy.Deployment { return s.dep }

// AdminKey is the key that authorises the admin API.
func (s *Server) AdminKey() string { return s.dep.AdminKey() }

// now reads the deployment's clock.
func (s *Server) now() time.Time { return s.dep.Now() }

// Handler is the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.echo }

// Run listens on the configured address and serves until ctx ends, then
// shuts down as Serve does.
func (s *Server) Run(ctx context.Context) error {
	if err := CheckListenAddr(s.cfg.Listen); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return ListenError(s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// CheckListenAddr says what is wrong with a listen address, and what to
// give instead, before anything listens.
func CheckListenAddr(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err == nil {
		if n, perr := strconv.Atoi(port); perr != nil || n < 0 || n > 65535 {
			return fmt.Errorf("listen %q: the port %q is not a number from 0 to 65535; give host:port, such as 127.0.0.1:8080", addr, port)
		}
		return nil
	}
	if n, perr := strconv.Atoi(addr); perr == nil && n >= 0 && n <= 65535 {
		return fmt.Errorf("listen %q: a port alone is not an address; give host:port: 127.0.0.1:%d (this machine only) or :%d (every interface)", addr, n, n)
	}
	return fmt.Errorf("listen %q: not a host:port address; give one such as 127.0.0.1:8080 (this machine only) or :8080 (every interface)", addr)
}

// ListenError words a failure to listen on addr with what to do.
func ListenError(addr string, err error) error {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("listen %s: the port is already in use (another trawl, or another program, listens there): stop it, or choose another port with --listen (listen: in the config), such as --listen %s", addr, nextPort(addr))
	case errors.Is(err, syscall.EACCES):
		return fmt.Errorf("listen %s: permission denied (ports below 1024 need privileges): choose a port above 1024 with --listen, such as --listen 127.0.0.1:8080", addr)
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("listen %s: this machine has no such address: listen on 127.0.0.1 (this machine only) or leave the host out (every interface), such as --listen 127.0.0.1:8080", addr)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}

// nextPort is addr with the port after its own.
func nextPort(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	n, perr := strconv.Atoi(port)
	if err != nil || perr != nil || n <= 0 || n >= 65535 {
		return "127.0.0.1:8081"
	}
	return net.JoinHostPort(host, strconv.Itoa(n+1))
}

// Shutdown timings.
const (
	// streamsEndTimeout is how long, once the runs are cancelled, the
	// handlers get to write their last chunks before the connections are
	// closed.
	streamsEndTimeout = 5 * time.Second
	// DefaultShutdownGrace is how long running turns may go on after the
	// shutdown began (config shutdown_grace).
	DefaultShutdownGrace = 20 * time.Second
	// retryAfterDraining is the Retry-After of a request refused because
	// the server is shutting down.
	retryAfterDraining = "5"
)

// Serve is Run on an existing listener. When ctx ends it shuts down:
// /readyz answers 503 (for shutdown_delay, when set, before anything
// else), the listener closes, new turns and workflow runs are refused
// with 503 and Retry-After, running ones get shutdown_grace to finish and
// are then cancelled (each ends with an abort chunk and is saved), and
// the remaining connections get a few more seconds to end.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.echo, ReadHeaderTimeout: s.timeouts.Header, IdleTimeout: s.timeouts.Idle,
		MaxHeaderBytes: 64 << 10, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelDebug)}
	s.banner(ln.Addr().String())
	if err := s.listenMetrics(ctx); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.mcp.Drain()
	if d := s.cfg.ShutdownDelay; d > 0 {
		s.log.Info("shutting down: /readyz answers 503", "delay", d)
		select {
		case <-time.After(d):
		case err := <-errc:
			return err
		}
	}
	// Shutdown closes the listener and the idle connections at once, then
	// waits for the active ones: the streams of the running turns.
	sctx, cancelShutdown := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelShutdown()
	shut := make(chan error, 1)
	go func() { shut <- hs.Shutdown(sctx) }()
	grace := s.cfg.ShutdownGrace
	if grace == 0 {
		grace = DefaultShutdownGrace
	}
	n := s.runs.Count()
	s.log.Info("shutting down: the listener is closed", "running", n, "grace", grace)
	// With replicas, each turn is handed off at its next checkpoint and
	// another replica continues it at once.
	s.runs.Drain()
	deadline := time.Now().Add(grace)
	if !s.runs.WaitIdle(grace) {
		s.log.Info("shutdown grace is over: leaving the running turns to be continued from their checkpoints", "running", s.runs.Count())
	}
	// MCP sessions end within the grace too: running tool calls get what
	// is left of it, then every session (and its open streams) is closed.
	if !s.mcp.WaitIdle(max(time.Until(deadline), 0)) {
		s.log.Info("shutdown grace is over: cancelling the running MCP tool calls")
	}
	s.mcp.Close()
	s.runs.HandOffAll()
	var err error
	select {
	case err = <-shut:
	case <-time.After(streamsEndTimeout):
		cancelShutdown()
		<-shut
		err = hs.Close()
	}
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

func (s *Server) banner(addr string) {
	fmt.Fprintf(s.out, "trawl listening on http://%s\n", addr)
	if s.cfg.IsDemo() {
		fmt.Fprintf(s.out, "demo: the Acme sample API and toolkits, agent %q\n", "demo")
	}
	switch {
	case s.dep.AdminKeyIsNew():
		fmt.Fprintf(s.out, "admin key (generated, saved in %s; shown once): %s\n", s.cfg.DataDir, s.AdminKey())
	case s.cfg.AdminKey == "":
		fmt.Fprintf(s.out, "admin key: saved in %s/admin_key\n", s.cfg.DataDir)
	}
	if s.dep.StoreKind() == "redis" {
		fmt.Fprintf(s.out, "state: shared in Redis (prefix %q); replicas on the same redis_url serve one deployment\n", cmp.Or(s.cfg.RedisPrefix, deploy.DefaultRedisPrefix))
	}
	fmt.Fprintf(s.out, "studio: http://%s/studio/\n", addr)
	fmt.Fprintf(s.out, "try: curl -H 'Authorization: Bearer <admin key>' http://%s/v1/tools\n", addr)
}

// Close stops the running turns (they save their threads) and closes the
// deployment.
func (s *Server) Close() error { return s.dep.Close() }

func (s *Server) routes(opt Options) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(s.log, s.draining.Load)
	limit := opt.BodyLimit
	if limit <= 0 {
		limit = 4 << 20
	}
	e.Pre(s.requestID)
	e.Pre(s.cors)
	e.Use(middleware.Recover())
	e.Use(s.countStreams)
	// Bodies are read once the caller is authenticated, so an anonymous
	// client cannot make the server buffer them.
	body := readBody(limit, s.timeouts.Body)

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/", redirectStudio)
	e.GET("/metrics", s.serveMetrics, s.requireAdmin)
	e.GET("/studio", redirectStudio)
	e.Match([]string{http.MethodGet, http.MethodHead}, "/studio/*", serveStudio)

	admin := e.Group("/v1", s.requireAdmin, body, s.syncAgents)
	admin.GET("/tools", s.listTools)
	admin.GET("/tools/:tool_id", s.getTool)
	admin.POST("/tools/:tool_id/invoke", s.invokeTool)
	admin.GET("/approvals", s.listApprovals)
	admin.GET("/approvals/:id", s.getApproval)
	admin.POST("/approvals/:id", s.answerApproval)
	admin.GET("/activity", s.listActivity)
	admin.GET("/info", s.info)
	admin.POST("/sessions", s.createSession)
	e.DELETE("/v1/sessions/:token", s.revokeSession, s.requireUser)
	admin.GET("/agents", s.listAgents)
	admin.GET("/agents/:id", s.getAgent)
	admin.PUT("/agents/:id", s.putAgent)
	admin.DELETE("/agents/:id", s.deleteAgent)
	admin.PATCH("/agents/:id/tools/:tool_id", s.patchBinding)

	admin.POST("/agents/:id/search_tools", s.searchTools)
	admin.GET("/workflows", s.listWorkflows)
	admin.PUT("/workflows/:id", s.putWorkflow)
	admin.GET("/workflows/:id", s.getWorkflow)
	admin.DELETE("/workflows/:id", s.deleteWorkflow)
	admin.POST("/workflows/:id/runs", s.startWorkflowRun, s.refuseWhenDraining)
	admin.GET("/workflows/:id/runs", s.listWorkflowRuns)
	admin.GET("/workflows/:id/runs/:runId", s.getWorkflowRun)
	admin.GET("/workflows/:id/runs/:runId/stream", s.resumeWorkflowRun)
	admin.POST("/evals", s.startEval, s.refuseWhenDraining)
	admin.GET("/evals", s.listEvals)
	admin.GET("/evals/:id", s.getEval)
	admin.GET("/evals/:id/stream", s.resumeEval)
	admin.POST("/workflows/:id/runs/:runId/stop", s.stopWorkflowRun)
	e.GET("/connect/:toolkit", s.connectForm, connectHeaders)
	e.GET(deploy.OAuthCallbackPath, s.oauthCallback, connectHeaders)
	e.GET("/v1/connections", s.listConnections, s.requireUser)
	e.DELETE("/v1/connections/:toolkit", s.disconnect, s.requireUser)
	e.POST("/connect/:toolkit", s.connectSubmit, connectHeaders, readBody(connectBodyLimit, min(s.timeouts.Body, connectBodyTimeout)))

	user := e.Group("/v1/agents/:id", s.requireUser, body, s.syncAgents)
	user.POST("/chat", s.chat, s.refuseWhenDraining, s.requireModel, s.capStreams)
	user.GET("/chat/:chatId/stream", s.resume, s.capStreams)
	user.POST("/chat/:chatId/stop", s.stop)
	user.GET("/chats", s.listChats)
	user.GET("/chats/:chatId", s.getChat)
	user.Match([]string{http.MethodGet, http.MethodPost, http.MethodDelete}, "/mcp", s.serveMCP, s.refuseWhenDraining)
	return e
}

// syncAgents brings the agent definitions up to date before a request
// (one read of a version on Redis; nothing on the embedded store), so an
// edit on another replica applies to this one's next request. A store
// that does not answer fails the request with 503.
func (s *Server) syncAgents(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := s.agents.Sync(c.Request().Context()); err != nil {
			return internal(err)
		}
		return next(c)
	}
}

// refuseWhenDraining answers 503 with Retry-After once shutdown began,
// so a client retries elsewhere or after the restart.
func (s *Server) refuseWhenDraining(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.draining.Load() {
			return errDraining(c)
		}
		return next(c)
	}
}

func errDraining(c echo.Context) error {
	c.Response().Header().Set("Retry-After", retryAfterDraining)
	return apiErr(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down; retry shortly")
}

// requireAdmin admits requests bearing the admin key.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		client := s.clientAddr(c.Request())
		tok, ok := bearer(c.Request())
		if err := s.authAllowed(c, client, tok); err != nil {
			return err
		}
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.AdminKey())) != 1 {
			s.authFails.fail(client, tok)
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="trawl"`)
			return apiErr(http.StatusUnauthorized, "unauthorized", "a valid admin key is required (Authorization: Bearer <key>)")
		}
		return next(c)
	}
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}
