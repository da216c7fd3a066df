// Package web is trawl's HTTP server: the Echo routes of the API, admin-key
// and session auth, one central error renderer, the chat stream endpoints,
// and the Studio console's embedded assets. It also assembles a deployment
// from its Config: the embedded store, the tool catalog, the invoker, the
// looping engine and the agents.
//
//	cfg, err := web.LoadConfig("trawl.yaml") // or web.DemoConfig()
//	srv, err := web.New(ctx, cfg, web.Options{})
//	err = srv.Run(ctx) // until ctx is cancelled; then a graceful shutdown
package web

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	bolt "go.etcd.io/bbolt"
)

// Options are the process-level settings of a Server. The zero value is
// usable.
type Options struct {
	// Logger receives operational logs. Zero: slog.Default().
	Logger *slog.Logger
	// Stdout receives the start-up banner (where trawl listens, a newly
	// generated admin key). Zero: os.Stdout.
	Stdout io.Writer
	// BodyLimit bounds request bodies. Zero: "4M".
	BodyLimit string
	// Model replaces the configured model (tests, embedding). Zero: the
	// model the config names.
	Model agent.Model
}

// Server is one trawl deployment.
type Server struct {
	cfg       *Config
	log       *slog.Logger
	out       io.Writer
	db        *bolt.DB
	adminKey  string
	keyIsNew  bool
	catalog   *tools.Catalog
	invoker   *tools.Invoker
	mcp       map[string]*tools.MCPSource // by server id
	activity  *tools.ActivityLog
	engine    *loop.Engine
	results   *loop.Retrieval
	cache     *loop.DatasetCache
	agents    *agent.Registry
	threads   agent.ThreadStore
	sessions  SessionStore
	events    stream.EventLog
	model     agent.Model // nil when no model is configured
	runner    *agent.Runner
	conns     *connections
	workflows *workflow.Runner
	runs      runSet
	now       func() time.Time // session expiry; tests move it
	echo      *echo.Echo
	closers   []func() error

	// baseCtx outlives requests: turns run on it, detached from the
	// request that started them, until Close.
	baseCtx    context.Context
	cancelBase context.CancelFunc
}

// New assembles a deployment from cfg: it opens the store, imports every
// tool source and checks every agent binding. Nothing listens yet.
func New(ctx context.Context, cfg *Config, opt Options) (*Server, error) {
	s := &Server{cfg: cfg, log: opt.Logger, out: opt.Stdout, mcp: map[string]*tools.MCPSource{}, now: time.Now}
	var err error
	s.baseCtx, s.cancelBase = context.WithCancel(context.WithoutCancel(ctx))
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.out == nil {
		s.out = os.Stdout
	}
	ready := false
	defer func() {
		if !ready {
			s.Close()
		}
	}()
	if cfg.demo {
		if err := s.startDemo(cfg); err != nil {
			return nil, err
		}
	}
	if s.db, err = openStore(cfg.DataDir); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.db.Close)
	if s.adminKey, s.keyIsNew, err = adminKey(cfg.AdminKey, cfg.DataDir); err != nil {
		return nil, err
	}
	astore, err := tools.NewBoltActivityStore(s.db, 0)
	if err != nil {
		return nil, err
	}
	s.activity = tools.NewActivityLog(astore, 0)
	s.invoker = tools.NewInvoker(tools.InvokerOptions{Log: s.activity})
	if s.catalog, err = s.loadCatalog(ctx); err != nil {
		return nil, err
	}
	if err := s.checkBindings(); err != nil {
		return nil, err
	}
	if s.engine, err = s.newEngine(); err != nil {
		return nil, err
	}
	if err := s.newAgents(ctx, opt.Model); err != nil {
		return nil, err
	}
	if err := s.initWorkflows(); err != nil {
		return nil, err
	}
	s.echo = s.routes(opt)
	ready = true
	return s, nil
}

// Handler is the server's HTTP handler (for tests and embedding).
func (s *Server) Handler() http.Handler { return s.echo }

// AdminKey is the key that authorises the admin API.
func (s *Server) AdminKey() string { return s.adminKey }

// Catalog is the deployment's tool catalog.
func (s *Server) Catalog() *tools.Catalog { return s.catalog }

// Run listens on the configured address and serves until ctx ends, then
// shuts down gracefully (in-flight requests get up to 10 s).
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.cfg.Listen, err)
	}
	return s.Serve(ctx, ln)
}

// Serve is Run on an existing listener.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.echo, ReadHeaderTimeout: 10 * time.Second}
	s.banner(ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Stop the turns first: their streams then end (with an abort), so
	// the handlers serving them can finish within the shutdown grace.
	s.cancelBase()
	s.runs.stopAll()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := hs.Shutdown(sctx)
	if e := <-errc; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}

func (s *Server) banner(addr string) {
	fmt.Fprintf(s.out, "trawl listening on http://%s\n", addr)
	if s.cfg.demo {
		fmt.Fprintf(s.out, "demo: the Acme sample API and toolkits, agent %q\n", "demo")
	}
	if s.keyIsNew {
		fmt.Fprintf(s.out, "admin key (generated, saved in %s; shown once): %s\n", s.cfg.DataDir, s.adminKey)
	} else if s.cfg.AdminKey == "" {
		fmt.Fprintf(s.out, "admin key: saved in %s/admin_key\n", s.cfg.DataDir)
	}
	fmt.Fprintf(s.out, "studio: http://%s/studio/\n", addr)
	fmt.Fprintf(s.out, "try: curl -H 'Authorization: Bearer <admin key>' http://%s/v1/tools\n", addr)
}

// Close stops the running turns (they save their threads), releases the
// store and stops the demo upstream.
func (s *Server) Close() error {
	if s.cancelBase != nil {
		s.cancelBase()
	}
	s.runs.stopAll()
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i]())
	}
	s.closers = nil
	return errors.Join(errs...)
}

func (s *Server) routes(opt Options) *echo.Echo {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(s.log)
	limit := opt.BodyLimit
	if limit == "" {
		limit = "4M"
	}
	e.Use(middleware.Recover())
	e.Use(middleware.BodyLimit(limit))

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	e.GET("/", redirectStudio)
	e.GET("/studio", redirectStudio)
	e.Match([]string{http.MethodGet, http.MethodHead}, "/studio/*", serveStudio)

	admin := e.Group("/v1", s.requireAdmin)
	admin.GET("/tools", s.listTools)
	admin.GET("/tools/:tool_id", s.getTool)
	admin.POST("/tools/:tool_id/invoke", s.invokeTool)
	admin.GET("/activity", s.listActivity)
	admin.GET("/info", s.info)
	admin.POST("/sessions", s.createSession)
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
	admin.POST("/workflows/:id/runs", s.startWorkflowRun)
	admin.GET("/workflows/:id/runs", s.listWorkflowRuns)
	admin.GET("/workflows/:id/runs/:runId", s.getWorkflowRun)
	admin.GET("/workflows/:id/runs/:runId/stream", s.resumeWorkflowRun)
	admin.POST("/workflows/:id/runs/:runId/stop", s.stopWorkflowRun)
	e.GET("/connect/:toolkit", s.connectForm)
	e.POST("/connect/:toolkit", s.connectSubmit)

	user := e.Group("/v1/agents/:id", s.requireUser)
	user.POST("/chat", s.chat, s.requireModel)
	user.GET("/chat/:chatId/stream", s.resume)
	user.POST("/chat/:chatId/stop", s.stop)
	user.GET("/chats", s.listChats)
	user.GET("/chats/:chatId", s.getChat)
	return e
}

func (s *Server) readyz(c echo.Context) error {
	err := s.db.View(func(*bolt.Tx) error { return nil })
	if err != nil {
		return &APIError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "store unavailable", Cause: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// requireAdmin admits requests bearing the admin key.
func (s *Server) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		tok, ok := bearer(c.Request())
		if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.adminKey)) != 1 {
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
