package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Options configures an Engine. Only Caller is required; every other zero
// value means a default.
type Options struct {
	// Caller sends upstream requests (a *tools.Invoker).
	Caller paginate.Caller
	// Scrub is the Caller's scrubber, for the given runtime credential
	// (tools.Invoker.Scrubber): what the engine renders from an answer
	// passes through it too. Nil: nothing more is masked.
	Scrub func(runtime ...string) *tools.Scrubber
	// Clock reads time for budgets, TTLs and Retry-After. Nil: the system
	// clock.
	Clock paginate.Clock
	// Budget holds the deployment's overrides of the walk budgets.
	Budget paginate.Budget
	// ViewChars is the size guard's budget. Zero: DefaultViewBudget.
	ViewChars int
	// Results keeps full payloads for queryToolResult/fetchToolResult.
	// Nil: nothing is kept and no _resultId is given.
	Results *Retrieval
	// Cache serves complete walks again within their TTL. Nil: no cache.
	Cache *DatasetCache
	// ScopeKey keys the credential fingerprints in cache scopes (derive
	// it from a deployment secret): without it, whoever reads the cache's
	// keys could test guessed tokens against them. Nil: a fixed key.
	ScopeKey []byte
	// FanOut bounds the _for_each values fetched at once. Zero: 4.
	FanOut int
	// Logger receives operational logs. Nil: slog.Default().
	Logger *slog.Logger
	// TracerProvider and MeterProvider receive a span and metrics per
	// tool call (see observe.go). Nil: none, at no cost.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}

// Engine runs tool calls: it strips and applies the reserved arguments,
// walks pages and fans out, projects, filters, guards the size, keeps the
// full payload and caches complete walks. It is safe for concurrent use.
type Engine struct {
	opt   Options
	clock paginate.Clock
	log   *slog.Logger

	plans sync.Map // tool pointer → paginate.Plan
	obs   *instrumentation
}

// scrubber is the Caller's scrubber for a call with credential; nil
// without Options.Scrub.
func (e *Engine) scrubber(credential string) *tools.Scrubber {
	if e.opt.Scrub == nil {
		return nil
	}
	return e.opt.Scrub(credential)
}

// New returns an Engine.
func New(opt Options) *Engine {
	e := &Engine{opt: opt, clock: opt.Clock, log: opt.Logger, obs: newInstrumentation(opt.TracerProvider, opt.MeterProvider)}
	if e.clock == nil {
		e.clock = tools.SystemClock()
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.opt.FanOut <= 0 {
		e.opt.FanOut = 4
	}
	return e
}

// Binding is how an agent (or the invoke endpoint) holds a tool.
type Binding struct {
	// LoopResponses turns on the reserved arguments.
	LoopResponses bool
	// DatasetTTL overrides the cache TTL of complete walks. Zero: 24 h
	// with organization credentials, 1 h with runtime ones.
	DatasetTTL time.Duration
	// Budget overrides the deployment's walk budgets.
	Budget paginate.Budget
	// Effect overrides the tool's effect ("" keeps it).
	Effect tools.Effect
	// Bulk lets a write take _for_each, at most BulkValues values (zero:
	// DefaultBulkValues). A read ignores both.
	Bulk       bool
	BulkValues int
}

// DefaultBulkValues bounds the _for_each values of a bulk write.
const DefaultBulkValues = 10

// Effect is t's effect under binding b (a zero Binding: the tool's own):
// paginate.Effect, the one resolver, on t's detected plan with b's
// override.
func (e *Engine) Effect(t *tools.Tool, b Binding) tools.Effect {
	return paginate.Effect(t, e.Plan(t), b.Effect)
}

// checkWrite refuses the reserved arguments a write does not take: a
// write never walks pages, is never cached and its answer is not
// filtered; it fans out only under a bulk binding.
func checkWrite(t *tools.Tool, effect tools.Effect, r Request, b Binding) error {
	refuse := func(arg, why string) error {
		return &ToolError{Code: CodeWriteArgument, Message: fmt.Sprintf("%s is not taken by %s, which %s: %s", arg, t.Name, effectWords(effect), why)}
	}
	switch {
	case r.AllPages:
		return refuse(ArgAllPages, "a write is sent once and never walks pages")
	case r.Refresh:
		return refuse(ArgRefresh, "a write is never cached, so there is nothing to refresh")
	case r.Filter != nil:
		return refuse(ArgFilter, "filter what a read returns, then act on the objects you chose")
	case r.Aggregate != nil:
		return refuse(ArgAggregate, "aggregate what a read returns")
	case r.ForEach != nil && b.Bulk && !b.LoopResponses:
		// bulk is set: what is missing is looping, which _for_each is part of.
		return refuse(ArgForEach, "_for_each is a looping argument, and this binding has loop_responses off (bulk: true alone does not turn it on); turn on loop_responses for the binding, or call it once per object")
	case r.ForEach != nil && !b.Bulk:
		return refuse(ArgForEach, "one change per call unless the agent's binding sets bulk: true; call it once per object, after saying how many objects and which scope")
	}
	return nil
}

// effectWords is an effect as a clause: "changes data", "may delete data".
func effectWords(e tools.Effect) string {
	if e == tools.EffectDestructive {
		return "may delete or overwrite data"
	}
	return "changes data"
}

// Call is one tool call.
type Call struct {
	Tool *tools.Tool
	// Args are the arguments as the model sent them, reserved ones
	// included; ParseRequest reads the reserved ones. They are not
	// modified.
	Args map[string]any
	// Request, when set, is the loop request already parsed (a workflow's
	// loop block): reserved arguments in Args are then stripped and
	// ignored.
	Request *Request
	Binding Binding
	Scope   Scope
	// Credential is the user's runtime credential for the tool's
	// provider; "" uses the organization's.
	Credential string
	// ViewChars overrides the engine's view budget (an agent's setting).
	ViewChars int
	// Experiment marks an evaluation run: it never reads the cache.
	Experiment bool
	// Workflow marks a workflow step: no result is kept aside and the view
	// is not cut (the walk's byte budget is the only limit); the cache is
	// used only when CacheTTL is set.
	Workflow bool
	CacheTTL time.Duration
	// Progress receives progress reports of a looping call, and of any
	// call the upstream's own (Progress.Upstream, an MCP tool's); it
	// must not block for long.
	Progress func(Progress)
}

// Progress is a progress report of one looping call: the walk's, plus the
// fan-out value being fetched.
type Progress struct {
	paginate.Progress
	// ForEach says which fan-out value is being fetched; nil without one.
	ForEach *ForEachProgress
}

// ForEachProgress is the fan-out part of a Progress.
type ForEachProgress struct {
	Key   string
	Value any
	Index int // 0-based
	Total int
}

// Outcome is what a call produced: the view the model receives and, for
// a looping call, the typed verdict it was rendered from.
type Outcome struct {
	// View is the JSON the model receives: the tool's payload shape with
	// the envelope keys of DESIGN.md §5 (a workflow step: the _loop
	// block).
	View []byte
	// Truncated reports that the size guard cut the view; the runner then
	// restricts the next step to the retrieval tools.
	Truncated bool
	ResultID  string
	// Verdict is the looping call's verdict; nil when the binding does
	// not loop (a plain call claims nothing).
	Verdict *Verdict
	// Aggregate is what _aggregate computed, with the verdict of the rows
	// it ran over; nil without _aggregate.
	Aggregate *Aggregated
}

// Plan returns the pagination detected for t (computed once per tool).
func (e *Engine) Plan(t *tools.Tool) paginate.Plan {
	if p, ok := e.plans.Load(t); ok {
		return p.(paginate.Plan)
	}
	p := paginate.Detect(t)
	e.plans.Store(t, p)
	return p
}

// Schema is t's input schema as the model sees it under binding b: a
// write is offered no reserved argument but _fields, and _for_each only
// under bulk.
func (e *Engine) Schema(t *tools.Tool, b Binding) map[string]any {
	effect := e.Effect(t, b)
	return SchemaFor(t, e.Plan(t), b.LoopResponses, effect, b.Bulk, bulkValues(b), e.opt.Cache.Serves())
}

func bulkValues(b Binding) int {
	if b.BulkValues > 0 {
		return b.BulkValues
	}
	return DefaultBulkValues
}

// Call runs one tool call: the model-facing entry. The reserved
// arguments in c.Args are parsed by ParseRequest (or c.Request is used),
// the tool's own arguments are checked against its schema before any
// request, and the call is walked, merged, projected and filtered. A
// failure the model can act on (a bad argument, an upstream error on the
// first page) is a *ToolError; other errors are the engine's own.
func (e *Engine) Call(ctx context.Context, c Call) (out *Outcome, err error) {
	if c.Tool == nil {
		return nil, errors.New("loop: Call.Tool is nil")
	}
	if c.Progress != nil {
		// A walk shared with other callers (the cache's collapsed walks)
		// goes on after this call returns; its reports must not reach a
		// caller that has gone (a finished HTTP response, an ended run).
		// The lock makes the return wait for a report under way.
		report, gone := c.Progress, &goneFlag{}
		defer gone.set()
		c.Progress = func(p Progress) {
			gone.mu.RLock()
			defer gone.mu.RUnlock()
			if !gone.v {
				report(p)
			}
		}
	}
	ctx, observed := e.obs.call(ctx, c.Tool, c.Binding.LoopResponses)
	defer func() { observed(out, err) }()
	p, err := e.prepare(c)
	if err != nil {
		return nil, err
	}
	if p.r.MaxChars > 0 {
		c.ViewChars = p.r.MaxChars // the caller's budget for this one result
	}
	if !c.Binding.LoopResponses {
		// Reserved arguments are stripped but ignored — and the model is
		// told so: one plain call, size-guarded.
		var ignored []string
		for _, k := range reservedArgs {
			if _, ok := c.Args[k]; ok && k != ArgMaxChars { // every call honours _max_chars
				ignored = append(ignored, k)
			}
		}
		return e.plainCall(ctx, c, p.own, p.unknown, ignored)
	}
	req := walkRequest{call: c, own: p.own, r: p.r, values: p.values, budget: p.budget, plan: e.Plan(c.Tool), effect: p.effect, unknown: p.unknown}
	data, hit, err := e.fetch(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.present(ctx, req, data, hit)
}

// walkRequest is one looping call, parsed.
type walkRequest struct {
	call   Call
	own    map[string]any
	r      Request
	values []any // _for_each values, coerced and de-duplicated; nil without
	budget paginate.Budget
	plan   paginate.Plan
	effect tools.Effect
	// unknown are the arguments the schema admits without declaring
	// them, listed in _unknownArgs.
	unknown []string
}

// walked is what one looping call collected: the merged, unprojected,
// unfiltered rows and the walk's counters. The cache keeps it as a
// Dataset.
type walked struct {
	Envelope  []byte   // the first page's body (continuation fields removed after a walk)
	ItemsPath string   // path of the primary array in Envelope; "" bare array
	HasItems  bool     // the payload is a list of rows (Items); false: an object, scalar or text
	Items     [][]byte // merged distinct rows
	// Worked is what the walk's query.Pass made of the pages' rows
	// (query.RunPages); nil for a fan-out, an aggregate or a cached
	// dataset. Not cached: it is this call's filter and projection.
	Worked []*query.Page
	walkStats
}

// walkStats are the counters and stop facts of a walk, from which the
// verdict is made.
type walkStats struct {
	Complete  bool           `json:"complete"` // every value's walk reached a complete_ end
	StoppedBy string         `json:"stoppedBy"`
	Requests  int            `json:"requests"`
	Pages     int            `json:"pages"`
	Retries   int            `json:"retries,omitempty"`
	Dups      int            `json:"duplicates,omitempty"`
	PageSize  int            `json:"pageSize,omitempty"`
	Bytes     int64          `json:"bytes"`
	Total     *int           `json:"total,omitempty"`
	Mismatch  bool           `json:"totalMismatch,omitempty"`
	Moved     bool           `json:"totalMoved,omitempty"`
	Resumed   bool           `json:"resumed,omitempty"` // a walk began past the start of its collection
	LastCur   string         `json:"lastCursor,omitempty"`
	Uninsp    string         `json:"uninspected,omitempty"`
	Cause     string         `json:"cause,omitempty"` // why the first partial walk stopped, in words
	Errors    []ForEachError `json:"forEachErrors,omitempty"`
	Skipped   []ForEachSkip  `json:"forEachSkipped,omitempty"`
	Partial   []ForEachCut   `json:"forEachPartial,omitempty"`
	Shifted   bool           `json:"shifted,omitempty"`    // rows moved across a page boundary (paginate.Result.Shifted)
	Unproven  string         `json:"unproven,omitempty"`   // why a complete walk could not prove it saw every row
	Probes    int            `json:"probes,omitempty"`     // requests made only to check the walk (in Requests)
	Unused    int            `json:"unused,omitempty"`     // requests fetched ahead whose page was never read (in Requests)
	Status    int            `json:"status,omitempty"`     // the HTTP status of the response that stopped a partial walk
	Values    int            `json:"values,omitempty"`     // fan-out values asked (0 without _for_each)
	Text      bool           `json:"text,omitempty"`       // the response was text, not JSON
	Likely    bool           `json:"likelyMore,omitempty"` // a walk that stopped short says more rows exist
	MoreSaid  bool           `json:"moreSaid,omitempty"`   // a first page only whose server said more rows exist
	AllPages  bool           `json:"allPages"`
	Plan      paginate.Plan  `json:"plan"`
}

// unstable reports that the collection changed during the walk, or that
// the walk could not prove it did not.
func (w *walked) unstable() bool {
	return w.Dups > 0 || w.Moved || w.Mismatch || w.Shifted || w.Unproven != ""
}

// dataset is w as the cache keeps it.
func (w *walked) dataset() *Dataset {
	stats, _ := json.Marshal(w.walkStats)
	// Only a complete walk is cached: not a partial one, nor one during
	// which the collection changed (unstable).
	return &Dataset{Envelope: w.Envelope, ItemsPath: w.ItemsPath, HasItems: w.HasItems, Items: w.Items,
		Stats: stats, Complete: w.Complete && !w.unstable() && len(w.Errors)+len(w.Skipped)+len(w.Partial) == 0}
}

func walkedFrom(d *Dataset) (*walked, error) {
	w := &walked{Envelope: d.Envelope, ItemsPath: d.ItemsPath, HasItems: d.HasItems, Items: d.Items}
	if err := json.Unmarshal(d.Stats, &w.walkStats); err != nil {
		return nil, fmt.Errorf("cached dataset: %w", err)
	}
	return w, nil
}

// fetch walks, through the dataset cache when the call may use it: a
// looping call that walks pages or fans out (a workflow step only with its
// own TTL).
func (e *Engine) fetch(ctx context.Context, q walkRequest) (*walked, *CacheHit, error) {
	c := q.call
	cacheable := e.opt.Cache != nil && !q.effect.Writes() && (q.r.AllPages || q.values != nil) && (!c.Workflow || c.CacheTTL > 0)
	if !cacheable {
		w, err := e.walk(ctx, q)
		return w, nil, err
	}
	ttl := c.Binding.DatasetTTL
	if c.Workflow {
		ttl = c.CacheTTL
	}
	req := CacheRequest{ToolID: c.Tool.ID, Args: c.Args, Scope: c.Scope.WithCredentialKeyed(e.opt.ScopeKey, c.Credential), Runtime: c.Credential != "",
		TTL: ttl, Refresh: q.r.Refresh, Experiment: c.Experiment}
	if q.values != nil {
		req.ForEachKey, req.ForEachValues = q.r.ForEach.Key, q.values
	}
	var fresh *walked // the walk run by this call, used as it is
	d, hit, err := e.opt.Cache.Walk(ctx, req, func(ctx context.Context) (*Dataset, error) {
		w, err := e.walk(ctx, q)
		if err != nil {
			return nil, err
		}
		fresh = w
		return w.dataset(), nil
	})
	if err != nil {
		return nil, nil, err
	}
	if fresh != nil && hit == nil {
		return fresh, nil, nil
	}
	// A hit (or a walk another call ran and shared): read the kept stats.
	w, err := walkedFrom(d)
	return w, hit, err
}

// walk fetches every value's pages under one shared meter.
func (e *Engine) walk(ctx context.Context, q walkRequest) (*walked, error) {
	c := q.call
	meter := paginate.NewMeter(e.clock.Now())
	values := q.values
	if values == nil {
		values = []any{nil}
	}
	results := make([]*paginate.Result, len(values))
	errs := make([]error, len(values))
	var progMu sync.Mutex
	sched := newFanOut(meter, q, e.opt.FanOut)
	var pass *query.Pass
	if q.values == nil && q.r.Aggregate == nil {
		// One walk whose rows present filters and projects as they are:
		// done per page while each is in cache, not over every row after.
		pass = query.NewPass(q.r.Fields, q.r.Filter)
	}
	g, gctx := errgroup.WithContext(ctx)
	for i, v := range values {
		args := q.own
		if q.values != nil {
			args = maps.Clone(q.own)
			args[q.r.ForEach.Key] = v
		}
		var fe *ForEachProgress
		if q.values != nil {
			fe = &ForEachProgress{Key: q.r.ForEach.Key, Value: v, Index: i, Total: len(values)}
		}
		lease, skip, err := sched.admit(gctx)
		if err != nil {
			break // cancelled: Wait returns the cause
		}
		if skip != "" {
			// Not started: the budget could not hold this value's walk.
			results[i] = &paginate.Result{StoppedBy: paginate.StopBudgetRequests, Cause: skip, LikelyMore: true,
				Uninspected: "the whole collection: " + skip, Plan: q.plan}
			continue
		}
		g.Go(func() error {
			res, err := paginate.Walk(gctx, paginate.WalkOptions{
				Caller: e.opt.Caller, Clock: e.clock, Tool: c.Tool, Args: args, Plan: q.plan, Effect: q.effect,
				AllPages: q.r.AllPages, Meter: meter, Lease: lease, Budget: q.budget,
				Credential: c.Credential, ThreadID: c.Scope.Thread, Scrub: e.scrubber(c.Credential), Pass: pass,
				Progress: func(p paginate.Progress) {
					if c.Progress == nil {
						return
					}
					progMu.Lock()
					defer progMu.Unlock()
					c.Progress(Progress{Progress: p, ForEach: fe})
				},
			})
			spent := 0
			var pe *paginate.PageError
			switch {
			case res != nil:
				spent = res.Requests
			case errors.As(err, &pe):
				spent = pe.Requests
			}
			sched.done(lease, spent)
			if err != nil && ctx.Err() != nil {
				if q.values == nil || !errors.Is(ctx.Err(), context.Canceled) {
					return ctx.Err()
				}
				// A fan-out value the cancellation reached before its
				// first page: never requested.
				res, err = cancelledValue(), nil
			}
			results[i], errs[i] = res, err
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range results {
		if results[i] == nil && errs[i] == nil && ctx.Err() != nil {
			results[i] = cancelledValue() // not started: the call was cancelled first
		}
	}
	if err := ctx.Err(); err != nil && !fetchedAny(results) {
		return nil, err // cancelled before anything came back
	}
	// A walk the caller cancelled mid-way is merged like any partial one:
	// its verdict says so (stopped by cancelled) and its rows are kept.
	return e.merge(q, values, results, errs)
}

// cancelledValue is a fan-out value the cancellation reached before its
// walk began: never requested (merge lists it in _forEachSkipped).
func cancelledValue() *paginate.Result {
	return &paginate.Result{StoppedBy: paginate.StopCancelled, Cause: "the call was cancelled before this value was fetched"}
}

// fetchedAny reports whether any walk fetched a page.
func fetchedAny(results []*paginate.Result) bool {
	for _, r := range results {
		if r != nil && r.Pages > 0 {
			return true
		}
	}
	return false
}

// fanOut starts the _for_each values of one call under their shared
// request budget. A value starts only where the budget can still finish
// it: with the requests the values finished so far needed at most (its
// estimate) set aside for it (a paginate.Lease), so the values running
// beside it cannot starve it. Until one value has finished nothing is
// known of the cost, so values run together only when the budget holds
// all of them at the most a walk may take (every page, and its probes);
// otherwise the first runs alone. A value the budget cannot hold — the
// estimate exceeds the requests left and no value is running to give any
// back — is skipped, not started: named in _forEachSkipped, never cut
// short mid-walk by its neighbours.
type fanOut struct {
	meter *paginate.Meter
	limit int // the requests budget
	slots int // values at once (Options.FanOut; 1 without a fan-out)
	worst int // the most requests one value's walk may take
	wake  chan struct{}

	mu      sync.Mutex
	running int
	est     int // the most requests a finished value took; 0 before one finished
}

func newFanOut(m *paginate.Meter, q walkRequest, slots int) *fanOut {
	f := &fanOut{meter: m, limit: q.budget.Requests, slots: slots, worst: 1, wake: make(chan struct{}, 1)}
	if q.values == nil {
		f.slots = 1
	}
	if q.r.AllPages && q.plan.Paginated() {
		f.worst = q.budget.Pages + 1 // every page, and an offset walk's closing probe
		if q.plan.Strategy == paginate.PageNumber {
			f.worst = 2 * q.budget.Pages // a probe after every page
		}
	}
	return f
}

// admit waits until the next value may start and returns its lease (nil
// when none is needed), or why it is skipped.
func (f *fanOut) admit(ctx context.Context) (lease *paginate.Lease, skip string, err error) {
	for {
		f.mu.Lock()
		if f.running < f.slots {
			free := f.meter.Free(f.limit)
			start := false
			switch {
			case free < 1 && f.running == 0:
				f.mu.Unlock()
				return nil, fmt.Sprintf("the request budget (%d per call, retries included) was spent", f.limit), nil
			case free < 1:
			case f.slots == 1 && f.est == 0:
				start = true // one walk at a time: nothing to share
			case f.est == 0 && (f.running == 0 || free >= f.slots*f.worst):
				start = true
			case f.est > 0 && free >= f.est:
				lease, _ = f.meter.Reserve(f.est, f.limit)
				start = true
			case f.est > 0 && f.running == 0:
				f.mu.Unlock()
				return nil, fmt.Sprintf("the request budget had %d of its %d requests left, fewer than one value's walk has taken (%d), so it was not started rather than cut short", free, f.limit, f.est), nil
			}
			if start {
				f.running++
				f.mu.Unlock()
				return lease, "", nil
			}
		}
		f.mu.Unlock()
		select {
		case <-f.wake:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
}

// done records a value's walk that ended having sent spent requests, and
// gives back what its lease still held.
func (f *fanOut) done(lease *paginate.Lease, spent int) {
	lease.Release()
	f.mu.Lock()
	f.running--
	f.est = max(f.est, spent)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// merge combines the walks of every value into one walked set. Every
// fan-out value ends in exactly one of: its rows, Errors, Skipped. The
// first value (in order) that did not complete gives the stop reason.
func (e *Engine) merge(q walkRequest, values []any, results []*paginate.Result, errs []error) (*walked, error) {
	w := &walked{walkStats: walkStats{Complete: true, AllPages: q.r.AllPages, Plan: q.plan}}
	fanOut := q.values != nil
	if fanOut {
		w.Values = len(q.values)
	}
	cause := func(stop, last, uninsp, why string) {
		if w.Complete {
			w.StoppedBy, w.LastCur, w.Uninsp, w.Cause = stop, last, uninsp, why
		}
		w.Complete = false
	}
	shaped := false // the first value that answered set the payload's shape
	objectRows := false
	emptied := false // a value of a list answered an empty page
	for i, res := range results {
		if err := errs[i]; err != nil {
			te := upstreamError(q.call.Tool, err)
			var pe *paginate.PageError
			if errors.As(err, &pe) {
				w.Requests += pe.Requests
				w.Retries += pe.Retries
			}
			if !fanOut {
				return nil, te
			}
			w.Errors = append(w.Errors, ForEachError{Value: values[i], Error: te.Message, Status: te.Status, Retryable: retryableFailure(err)})
			cause(stoppedByOf(err), "", "", "")
			continue
		}
		if fanOut && res.Pages == 0 && res.Requests == 0 {
			// The shared budget was spent before this value's turn.
			w.Skipped = append(w.Skipped, ForEachSkip{Value: values[i], Reason: res.Cause})
			cause(res.StoppedBy, "", "", res.Cause)
			continue
		}
		path, isRows := collectionOf(res.Plan, res.FirstBody)
		// A value of a list that answered an empty page ({}, {"data":
		// null}; one that is no page at all failed in its walk).
		listed := fanOut && !isRows && q.plan.Paginated()
		w.Requests += res.Requests
		w.Pages += res.Pages
		w.Probes += res.Probes
		w.Unused += res.Unused
		w.Retries += res.Retries
		w.Resumed = w.Resumed || res.Resumed
		w.Dups += res.Duplicates
		w.Bytes += res.Bytes
		w.Mismatch = w.Mismatch || res.TotalMismatch
		w.Moved = w.Moved || res.TotalMoved
		w.Shifted = w.Shifted || res.Shifted
		if w.Unproven == "" {
			w.Unproven = res.Unproven
		}
		w.PageSize = max(w.PageSize, res.PageSize)
		items := res.Items
		if isRows && len(items) == 0 && !res.Plan.ItemsFound && res.FirstBody != nil {
			// Detection found no primary array it could vouch for (no
			// response schema, an unusual name): take the body's array
			// rather than lose its rows.
			arr := res.FirstBody
			if path != "" {
				arr, _ = query.Get(res.FirstBody, path)
			}
			if els, err := query.Elements(arr); err == nil {
				items = els
				res.Plan.Items, res.Plan.ItemsFound = path, true
			}
		}
		if !shaped && !listed {
			shaped = true
			w.Plan = res.Plan
			w.Text = isText(res.FirstBody)
			objectRows = fanOut && !isRows
			if !objectRows {
				w.Envelope, w.HasItems, w.ItemsPath = res.FirstBody, isRows || fanOut, path
			}
		}
		switch {
		case listed:
			// An empty page of the list ({}, {"data": null}): a value
			// without rows.
			items, emptied = nil, true
		case fanOut && !isRows:
			// One object per value: the value's answer is its row.
			items = [][]byte{objectRow(res.FirstBody)}
		}
		if fanOut {
			items = tagRows(items, q.r.ForEach.Key, values[i])
		}
		w.Items = append(w.Items, items...)
		if !fanOut {
			w.Worked = res.Worked
		}
		if res.Total != nil && !fanOut {
			w.Total = res.Total
		}
		if !res.Complete {
			w.Likely = w.Likely || res.LikelyMore
			w.MoreSaid = w.MoreSaid || res.MoreSaid
			if w.Complete {
				w.Status = res.Status
			}
			cause(res.StoppedBy, res.LastCursor, res.Uninspected, res.Cause)
			if fanOut {
				// Its rows are merged, and it is named: a value cut short
				// is no value that succeeded.
				w.Partial = append(w.Partial, ForEachCut{Value: values[i], Rows: len(items), StopReason: res.StoppedBy,
					Resume: resumeOf(res)})
			}
		} else if w.StoppedBy == "" {
			w.StoppedBy = res.StoppedBy
		}
	}
	if fanOut && len(w.Errors) > 0 && len(w.Errors)+len(w.Skipped) == len(results) {
		return nil, &ToolError{Code: CodeUpstream, Status: w.Errors[0].Status,
			Message: fmt.Sprintf("every _for_each value failed; first error: %s", w.Errors[0].Error)}
	}
	if objectRows || emptied && !shaped {
		// Rows without a page to take the shape from (every value of the
		// list answered none): a bare list.
		w.Envelope, w.ItemsPath, w.HasItems = nil, "", true
	}
	if w.HasItems && w.AllPages && w.Plan.Paginated() && w.Envelope != nil {
		w.Envelope = stripPaths(w.Envelope, w.Plan.NextToken, w.Plan.NextURLField, w.Plan.MoreFlag)
	}
	if w.HasItems && fanOut && w.Envelope != nil {
		// The first value's totals are not the merged set's.
		w.Envelope = stripPaths(w.Envelope, w.Plan.Total, w.Plan.TotalPages)
	}
	return w, nil
}

// resumeOf says where a partial walk resumes, for _forEachPartial: the
// page or offset argument, or, for a cursor walk, that the cursor (not
// shown) was not followed.
func resumeOf(res *paginate.Result) string {
	switch {
	case res.StoppedBy == paginate.StopFirstPage:
		return "pass _all_pages: true to walk every page"
	case res.ResumeAt != "":
		return res.ResumeAt
	case res.LastCursor != "":
		return fmt.Sprintf("after page %d, at a cursor not shown: call again for this value to walk it whole", res.Pages)
	case res.Pages == 0:
		return "its first page"
	}
	return fmt.Sprintf("after page %d", res.Pages)
}

// collectionOf reports whether body is a list of rows, and where its
// primary array is: a bare array; the primary array of a paginated
// tool's response; or, for a tool without pagination, an object's
// primary array only when the object is not itself a record — an object
// with its own "id" (an order with its line items) is one object, and
// its arrays are part of it.
func collectionOf(p paginate.Plan, body []byte) (string, bool) {
	path, ok := itemsPathOf(p, body)
	if !ok || path == "" || p.Paginated() {
		return path, ok
	}
	if _, own := query.Get(body, "id"); own {
		return "", false
	}
	return path, true
}

// objectRow is a fan-out value's answer as one row: an object as it is,
// text as {"text": …}, any other value as {"result": …}.
func objectRow(body []byte) []byte {
	v := asJSON(body)
	if query.FirstByte(v) != '{' {
		return append(append([]byte(`{"result":`), v...), '}')
	}
	return v
}

// isText reports whether body is not JSON (a text result).
func isText(body []byte) bool {
	t := bytes.TrimSpace(body)
	return len(t) > 0 && !query.Valid(t)
}

// retryableFailure says whether calling again could help a failed
// fan-out value: a 5xx, a 429, a timeout or a transport failure; never a
// 4xx or a refused argument.
func retryableFailure(err error) bool {
	var ae *tools.ArgError
	if errors.As(err, &ae) {
		return false
	}
	var pe *paginate.PageError
	if !errors.As(err, &pe) {
		return false
	}
	switch {
	case pe.Status == 0:
		return pe.StoppedBy != paginate.StopCursorExpired
	case pe.Status == 429 || pe.Status >= 500:
		return true
	case pe.Status >= 200 && pe.Status < 300:
		// A success status with a body that failed: a proxy's page may
		// pass; an answer that is none of the list's pages (an error
		// object) will not.
		return pe.StoppedBy != paginate.StopInconsistent
	}
	return false
}

func stoppedByOf(err error) string {
	var pe *paginate.PageError
	if errors.As(err, &pe) && pe.StoppedBy != "" {
		return pe.StoppedBy
	}
	return paginate.StopHTTPError
}

// itemsPathOf finds the primary array of a payload: the plan's, else the
// document itself when it is an array, else the largest array at the top
// level or one level down.
func itemsPathOf(p paginate.Plan, body []byte) (string, bool) {
	if p.ItemsFound {
		if p.Items == "" {
			return "", len(body) > 0 && query.FirstByte(body) == '['
		}
		if v, ok := query.Get(body, p.Items); ok && query.FirstByte(v) == '[' {
			return p.Items, true
		}
	}
	if query.FirstByte(body) == '[' {
		return "", true
	}
	if path, _, ok := primaryArray(body, ""); ok {
		return path, true
	}
	return "", false
}

// stripPaths removes members from the first page's envelope — paging
// signals and totals that describe page one (or one fan-out value), not
// the merged set.
func stripPaths(env []byte, paths ...string) []byte {
	for _, path := range paths {
		if path == "" {
			continue
		}
		if out, err := query.Delete(env, path); err == nil {
			env = out
		}
	}
	return env
}

// tagRows adds key: value to every object row that lacks the field (the
// API's own answer wins).
func tagRows(rows [][]byte, key string, value any) [][]byte {
	if len(rows) == 0 {
		return rows
	}
	v := appendJSONValue(nil, value)
	out := make([][]byte, len(rows))
	for i, row := range rows {
		if query.FirstByte(row) != '{' {
			out[i] = row
			continue
		}
		if _, has := query.Get(row, query.JoinPath(key)); has {
			out[i] = row
			continue
		}
		out[i] = query.InsertFirst(row, key, v)
	}
	return out
}

// goneFlag marks a call that has returned.
type goneFlag struct {
	mu sync.RWMutex
	v  bool
}

func (g *goneFlag) set() {
	g.mu.Lock()
	g.v = true
	g.mu.Unlock()
}
