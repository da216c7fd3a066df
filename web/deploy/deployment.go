package deploy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// Deployment is what a config assembles, apart from any HTTP: the stores
// (openStores picks embedded or Redis, in one place), the tool catalog
// and invoker, the looping engine, the agents and the runner, workflows
// and connections, the run host, and one clock. `trawl serve` wraps it in
// a web.Server; `trawl call` and `trawl replay` open only the parts they
// need.
type Deployment struct {
	cfg      *Config
	parts    Parts
	calls    bool // Options.Calls
	log      *slog.Logger
	out      io.Writer
	stores   *stores
	adminKey string
	keyIsNew bool
	catalog  *tools.Catalog
	imported map[string][]tools.ImportWarning // by provider: repairs and skips of its OpenAPI import
	invoker  *tools.Invoker
	limiter  tools.RateLimiter               // every provider's pace, shared by the invoker and MCP servers
	mcp      map[string]*tools.MCPSource     // by server id
	userMCP  map[string]*tools.MCPUserSource // by server id: those each user connects
	activity *tools.ActivityLog
	engine   *loop.Engine
	results  *loop.Retrieval
	cache    *loop.DatasetCache
	agents   *agent.Registry
	threads  agent.ThreadStore // nil for PartsCall and PartsReplay
	sessions SessionStore
	events   stream.EventLog
	model    agent.Model // nil when no model is configured
	runner   *agent.Runner
	conns    *Connections
	oauth    map[string]*tools.OAuthClient // toolkits users connect with OAuth (authorization code), by id
	// authServers are every OAuth client (authorization code and client
	// credentials), by provider or toolkit id, for /readyz.
	authServers map[string]*tools.OAuthClient
	// inbox is where approvals no chat answers wait (approvals.go).
	inbox *agent.Inbox
	// workflows runs workflow definitions (PartsServe).
	workflows *workflow.Runner
	// now is the deployment's one clock: sessions, connect links, rate
	// limits, thread stamps. Tests move it.
	now     func() time.Time
	tel     *Telemetry // traces and metrics; its providers are nil when off
	closers []func() error
	// runs hosts the turns and workflow runs (PartsServe).
	runs *RunHost

	evalState // evaluations (eval.go)

	bg sync.WaitGroup // background work that uses the stores
	// ctx outlives requests: background work and detached runs use it,
	// until Close.
	ctx    context.Context
	cancel context.CancelFunc
}

// Parts says what Open assembles.
type Parts int

const (
	// PartsServe is everything a server needs: the configured stores
	// (embedded or Redis), sessions, agents with their search indexes,
	// the model, workflows and connections.
	PartsServe Parts = iota
	// PartsCall is the catalog and the engine as the organization, its
	// state in memory: one tool call (trawl call, trawl tools). No store
	// is opened, no admin key made, no index built.
	PartsCall
	// PartsReplay is PartsCall plus the agents and a runner with the
	// deployment's options: replaying a transcript (trawl replay).
	PartsReplay
)

// Options are the process-level settings of a Deployment. The zero value
// is usable.
type Options struct {
	// Parts is what to assemble. Zero: PartsServe.
	Parts Parts
	// Logger receives operational logs. Zero: slog.Default().
	Logger *slog.Logger
	// Stdout receives the start-up banner. Zero: os.Stdout.
	Stdout io.Writer
	// Model replaces the configured model (tests, embedding).
	Model agent.Model
	// Now is the deployment's clock: sessions, connect links, thread
	// stamps. Zero: time.Now.
	Now func() time.Time
	// Runs are the run host's clock and waits. Zero: the defaults.
	Runs RunTimings
	// Calls says the deployment, other than PartsServe, sends its tool
	// calls to the providers (trawl call, trawl replay, trawl eval
	// against live upstreams): with redis_url it paces them in that
	// Redis, at the replicas' pace. A listing (trawl tools) sends none,
	// and an evaluation replaying a recording none to the providers.
	Calls bool
	// Upstream carries the tools' HTTP requests (an evaluation's
	// recording or replaying transport: eval.Upstream). Zero: the
	// invoker's own.
	Upstream http.RoundTripper
}

// Open assembles what cfg describes: it opens the stores, imports every
// tool source and checks every agent binding. Close it.
func Open(ctx context.Context, cfg *Config, opt Options) (_ *Deployment, err error) {
	d := &Deployment{cfg: cfg, parts: opt.Parts, calls: opt.Calls, log: opt.Logger, out: opt.Stdout, mcp: map[string]*tools.MCPSource{},
		now: opt.Now}
	if d.now == nil {
		d.now = time.Now
	}
	d.ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	if d.log == nil {
		d.log = slog.Default()
	}
	var inv atomic.Pointer[tools.Invoker] // the scrubber of the logs, once there is one
	d.log = scrubbedLogger(withContextIDs(d.log), &inv)
	if d.out == nil {
		d.out = os.Stdout
	}
	defer func() {
		if err != nil {
			d.Close()
		}
	}()
	if cfg.demo {
		if err := d.startDemo(cfg); err != nil {
			return nil, err
		}
	}
	if err := cfg.checkAdminKey(); err != nil {
		return nil, err
	}
	if err := d.setupTelemetry(ctx, os.LookupEnv); err != nil {
		return nil, err
	}
	st, err := d.openStores(ctx)
	if err != nil {
		return nil, err
	}
	d.stores = st
	d.closers = append(d.closers, st.close)
	d.adminKey, d.keyIsNew = st.adminKey, st.keyIsNew
	d.threads, d.sessions, d.events = st.threads, st.sessions, st.events
	d.inbox = d.newInbox(st)
	d.activity = tools.NewActivityLog(st.activity, 0)
	limiter := st.limiter
	if limiter == nil {
		limiter = tools.NewMemoryLimiter(tools.LimiterOptions{})
	}
	d.limiter = d.tel.wrapLimiter(limiter)
	// Secrets no byte coming back may carry (the invoker's scrubber).
	client := d.tel.httpClient(false)
	if opt.Upstream != nil {
		client = &http.Client{Transport: opt.Upstream}
	}
	d.invoker = tools.NewInvoker(tools.InvokerOptions{Log: d.activity, Client: client, Limiter: d.limiter, ScopeKey: st.scopeKey(),
		Secrets: deploymentSecrets(cfg, st)})
	inv.Store(d.invoker)
	if d.catalog, err = d.loadCatalog(ctx); err != nil {
		return nil, err
	}
	if err := d.checkBindings(); err != nil {
		return nil, err
	}
	if d.engine, err = d.newEngine(); err != nil {
		return nil, err
	}
	if d.parts == PartsCall {
		return d, nil
	}
	check := func(b agent.Binding) error { return d.checkBinding(b.ToolID, b.ProviderID, b.Toolkit) }
	if d.agents, err = agent.NewRegistry(ctx, cfg.Agents, st.defs, check); err != nil {
		return nil, err
	}
	if d.parts == PartsReplay {
		return d, nil
	}
	if err := d.newAgents(opt.Model); err != nil {
		return nil, err
	}
	d.workflows = workflow.NewRunner(workflow.RunnerOptions{Engine: d.engine, Catalog: d.catalog, Logger: d.log})
	d.runs = newRunHost(d.ctx, runHostOptions{Registry: st.runs, Events: d.events, Logger: d.log, Lease: cfg.RunLease,
		OnLapsed: d.endLapsedRun, LapsedText: lapsedText, Timings: opt.Runs, Records: st.runRecords})
	prune := map[string]pruner{}
	if p, ok := d.threads.(pruner); ok {
		prune["threads past their age"] = p
	}
	if st.workflowRuns != nil {
		prune["workflow runs past their age"] = st.workflowRuns
	}
	if p, ok := st.datasets.(pruner); ok {
		prune["expired cached datasets"] = p
	}
	if len(prune) > 0 {
		d.bg.Add(1)
		go d.pruneHourly(prune)
	}
	return d, nil
}

// openStores opens the stores the parts need: for one call or a replay,
// memory only (nothing on disk, no admin key); for a server, the
// configured ones.
func (d *Deployment) openStores(ctx context.Context) (*stores, error) {
	if d.parts == PartsServe {
		return openStores(ctx, d.cfg, d.tel, d.log)
	}
	st := &stores{kind: "memory", pingers: map[string]pinger{}}
	// A call (trawl call) sends its requests to the providers as a
	// replica would: with redis_url, at the replicas' pace.
	if d.calls && d.cfg.RedisURL != "" {
		// The secret key fingerprints runtime credentials as the
		// replicas' does, so the limits learned per credential are
		// shared too.
		key, err := d.cfg.secretKey()
		if err != nil {
			return nil, err
		}
		st.secretKey = key
		redisLogOnce.Do(func() { redis.SetLogger(redisLogger{d.log}) })
		st.shareLimits(ctx, d.cfg, d.log, time.Now)
	}
	return st, nil
}

// Catalog is the deployment's tool catalog.
func (d *Deployment) Catalog() *tools.Catalog { return d.catalog }

// AdminKey is the key that authorises the admin API ("" unless
// PartsServe).
func (d *Deployment) AdminKey() string { return d.adminKey }

// StoreKind is where the deployment's state lives: "embedded", "redis",
// or "memory" (one call or replay).
func (d *Deployment) StoreKind() string { return d.stores.kind }

// pruner is a store that deletes what is past its age (the thread and
// workflow run stores, the embedded dataset cache: Redis expires cached
// datasets itself).
type pruner interface {
	Prune(ctx context.Context) (int, error)
}

// pruneInterval is how often stores are pruned.
const pruneInterval = time.Hour

// pruneHourly prunes each store now and then hourly, until the deployment
// closes.
func (d *Deployment) pruneHourly(stores map[string]pruner) {
	defer d.bg.Done()
	t := time.NewTicker(pruneInterval)
	defer t.Stop()
	for {
		for what, p := range stores {
			if n, err := p.Prune(d.ctx); err != nil && d.ctx.Err() == nil {
				d.log.Error("pruning "+what, "err", err)
			} else if n > 0 {
				d.log.Info("pruned "+what, "count", n)
			}
		}
		select {
		case <-d.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops the running turns and workflow runs (they save their
// state) and background work, and releases the stores and the demo
// upstream.
func (d *Deployment) Close() error {
	if d.runs != nil {
		d.runs.StopAll()
	}
	if d.cancel != nil {
		d.cancel()
	}
	d.bg.Wait()
	var errs []error
	for i := len(d.closers) - 1; i >= 0; i-- {
		errs = append(errs, d.closers[i]())
	}
	d.closers = nil
	return errors.Join(errs...)
}

// newAgents builds the model and the runner, each agent's search index
// and the connections.
func (d *Deployment) newAgents(model agent.Model) error {
	var err error
	if model == nil {
		if model, err = d.newModel(); err != nil {
			return err
		}
	}
	d.model = model
	opts, err := d.runnerOptions(model, true)
	if err != nil {
		return err
	}
	d.runner = agent.NewRunner(opts)
	// Build each agent's search index now rather than on its first turn.
	for _, def := range d.agents.List() {
		if _, err := d.runner.SearchIndex(def, nil); err != nil {
			return fmt.Errorf("agent %s: %w", def.ID, err)
		}
	}
	orgToolkits := map[string]bool{}
	for _, t := range d.catalog.All() {
		if t.Kind == tools.KindApp && d.invoker.HasOrgCredential(t.Provider) {
			orgToolkits[t.Provider] = true
		}
	}
	d.conns, err = newConnections(d.stores.connections, d.stores.grants, d.stores.secretKey,
		func(tk string) bool { return orgToolkits[tk] }, func() time.Time { return d.now() })
	if err == nil && len(d.oauth) > 0 {
		d.conns.SetOAuth(d.oauth, d.stores.locks)
		d.primeUserMCPs()
	}
	return err
}

// runnerOptions are the runner's options for model: the deployment's
// engine, catalog, discovery budget, search and telemetry — one set for
// served turns and replays alike. semantic adds the embeddings ranking
// when the config names one.
func (d *Deployment) runnerOptions(model agent.Model, semantic bool) (agent.RunnerOptions, error) {
	opts := agent.RunnerOptions{
		Model: model, ModelName: d.cfg.Model.Name, Engine: d.engine, Retrieval: d.results,
		Catalog: d.catalog, Logger: d.log, DirectBudget: d.cfg.Discovery.DirectBudget, Scrub: d.invoker.Scrubber,
		TracerProvider: d.tel.tracerProvider(), MeterProvider: d.tel.meterProvider(), RecordContent: d.cfg.Telemetry.RecordContent,
	}
	if semantic {
		search, err := d.searchOptions()
		if err != nil {
			return opts, err
		}
		opts.Search = search
	}
	return opts, nil
}
