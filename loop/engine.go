package loop

import (
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
)

// Options configures an Engine. Only Caller is required; every other zero
// value means a default.
type Options struct {
	// Caller sends upstream requests (a *tools.Invoker).
	Caller paginate.Caller
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
	// FanOut bounds the _for_each values fetched at once. Zero: 4.
	FanOut int
	// Logger receives operational logs. Nil: slog.Default().
	Logger *slog.Logger
}

// Engine runs tool calls: it strips and applies the reserved arguments,
// walks pages and fans out, projects, filters, guards the size, keeps the
// full payload and caches complete walks. It is safe for concurrent use.
type Engine struct {
	opt   Options
	clock paginate.Clock
	log   *slog.Logger

	plans sync.Map // tool pointer → paginate.Plan
}

// New returns an Engine.
func New(opt Options) *Engine {
	e := &Engine{opt: opt, clock: opt.Clock, log: opt.Logger}
	if e.clock == nil {
		e.clock = paginate.SystemClock{}
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
}

// Call is one tool call.
type Call struct {
	Tool *tools.Tool
	// Args are the arguments as the model sent them, reserved ones
	// included. They are not modified.
	Args    map[string]any
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
	// Progress receives progress reports of a looping call; it must not
	// block for long.
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

// Outcome is what a call produced: the view the model receives and the
// verdict a workflow or a runner branches on.
type Outcome struct {
	// View is the JSON the model receives: the tool's payload shape with
	// the envelope keys of DESIGN.md §5.
	View []byte
	// Truncated reports that the size guard cut the view; the runner then
	// restricts the next step to the retrieval tools.
	Truncated bool
	ResultID  string
	// Looped reports that the reserved arguments applied (the binding
	// loops); the verdict fields below are meaningful then.
	Looped    bool
	Complete  bool
	StoppedBy string
	Requests  int
	Items     int // rows in the view before the size guard, after _filter
	Note      string
	CacheHit  bool
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

// Schema is t's input schema as the model sees it under a binding.
func (e *Engine) Schema(t *tools.Tool, looping bool) map[string]any {
	return Schema(t, e.Plan(t), looping)
}

// Call runs one tool call. A failure the model can act on (a bad
// argument, an upstream error on the first page) is a *ToolError; other
// errors are the engine's own.
func (e *Engine) Call(ctx context.Context, c Call) (*Outcome, error) {
	if c.Tool == nil {
		return nil, errors.New("loop: Call.Tool is nil")
	}
	own, r, err := splitArgs(c.Args)
	if err != nil {
		return nil, err
	}
	if !c.Binding.LoopResponses {
		// Reserved arguments are stripped but ignored: one plain call,
		// size-guarded.
		return e.plainCall(ctx, c, own)
	}
	budget := e.opt.Budget.Merge(c.Binding.Budget).Resolved()
	var values []any
	if r.forEach != nil {
		if values, err = forEachValues(c.Tool, r.forEach, budget.ForEachValues); err != nil {
			return nil, err
		}
	}
	var fields *query.Fields
	if len(r.fields) > 0 {
		fields, _ = query.CompileFields(r.fields) // checked by splitArgs
	}
	var filter *query.Filter
	if len(r.filter) > 0 {
		filter, _ = query.CompileFilter(r.filter)
	}
	req := walkRequest{call: c, own: own, r: r, values: values, budget: budget, plan: e.Plan(c.Tool)}
	data, hit, err := e.fetch(ctx, req)
	if err != nil {
		return nil, err
	}
	return e.present(ctx, req, data, hit, fields, filter)
}

// walkRequest is one looping call, parsed.
type walkRequest struct {
	call   Call
	own    map[string]any
	r      reserved
	values []any // _for_each values, coerced and de-duplicated; nil without
	budget paginate.Budget
	plan   paginate.Plan
}

// walked is what one looping call collected: the merged, unprojected,
// unfiltered rows and the verdict. The cache keeps it as a Dataset.
type walked struct {
	Envelope  []byte   // the first page's body (continuation fields removed after a walk)
	ItemsPath string   // path of the primary array in Envelope; "" bare array
	HasItems  bool     // the payload has a primary array
	Items     [][]byte // merged rows
	walkStats
}

// walkStats is the verdict and the counters of a walk.
type walkStats struct {
	Complete  bool           `json:"complete"`
	StoppedBy string         `json:"stoppedBy"`
	Requests  int            `json:"requests"`
	Pages     int            `json:"pages"`
	Retries   int            `json:"retries,omitempty"`
	Dups      int            `json:"duplicates,omitempty"`
	PageSize  int            `json:"pageSize,omitempty"`
	Bytes     int64          `json:"bytes"`
	Total     *int           `json:"total,omitempty"`
	Mismatch  bool           `json:"totalMismatch,omitempty"`
	LastCur   string         `json:"lastCursor,omitempty"`
	Uninsp    string         `json:"uninspected,omitempty"`
	Errors    []ForEachError `json:"forEachErrors,omitempty"`
	Values    int            `json:"values,omitempty"` // fan-out values asked (0 without _for_each)
	AllPages  bool           `json:"allPages"`
	Plan      paginate.Plan  `json:"plan"`
}

// dataset is w as the cache keeps it.
func (w *walked) dataset() *Dataset {
	stats, _ := json.Marshal(w.walkStats)
	return &Dataset{Envelope: w.Envelope, ItemsPath: w.ItemsPath, HasItems: w.HasItems, Items: w.Items,
		Stats: stats, Complete: w.Complete}
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
	cacheable := e.opt.Cache != nil && (q.r.allPages || q.values != nil) && (!c.Workflow || c.CacheTTL > 0)
	if !cacheable {
		w, err := e.walk(ctx, q)
		return w, nil, err
	}
	ttl := c.Binding.DatasetTTL
	if c.Workflow {
		ttl = c.CacheTTL
	}
	req := CacheRequest{ToolID: c.Tool.ID, Args: c.Args, Scope: c.Scope.WithCredential(c.Credential), Runtime: c.Credential != "",
		TTL: ttl, Refresh: q.r.refresh, Experiment: c.Experiment}
	if q.values != nil {
		req.ForEachKey, req.ForEachValues = q.r.forEach.Key, q.values
	}
	d, hit, err := e.opt.Cache.Walk(ctx, req, func(ctx context.Context) (*Dataset, error) {
		w, err := e.walk(ctx, q)
		if err != nil {
			return nil, err
		}
		return w.dataset(), nil
	})
	if err != nil {
		return nil, nil, err
	}
	w, err := walkedFrom(d)
	return w, hit, err
}

// ForEachError is one failed fan-out value.
type ForEachError struct {
	Value any    `json:"value"`
	Error string `json:"error"`
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
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(e.opt.FanOut)
	for i, v := range values {
		args := q.own
		if q.values != nil {
			args = maps.Clone(q.own)
			args[q.r.forEach.Key] = v
		}
		var fe *ForEachProgress
		if q.values != nil {
			fe = &ForEachProgress{Key: q.r.forEach.Key, Value: v, Index: i, Total: len(values)}
		}
		g.Go(func() error {
			res, err := paginate.Walk(gctx, paginate.WalkOptions{
				Caller: e.opt.Caller, Clock: e.clock, Tool: c.Tool, Args: args, Plan: q.plan,
				AllPages: q.r.allPages, Meter: meter, Budget: q.budget,
				Credential: c.Credential, ThreadID: c.Scope.Thread,
				Progress: func(p paginate.Progress) {
					if c.Progress == nil {
						return
					}
					progMu.Lock()
					defer progMu.Unlock()
					c.Progress(Progress{Progress: p, ForEach: fe})
				},
			})
			results[i], errs[i] = res, err
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return e.merge(q, values, results, errs)
}

// merge combines the walks of every value into one walked set.
func (e *Engine) merge(q walkRequest, values []any, results []*paginate.Result, errs []error) (*walked, error) {
	w := &walked{walkStats: walkStats{Complete: true, AllPages: q.r.allPages, Plan: q.plan}}
	if q.values != nil {
		w.Values = len(q.values)
	}
	failed := 0
	for i, res := range results {
		if err := errs[i]; err != nil {
			failed++
			if q.values == nil {
				return nil, upstreamError(q.call.Tool, err)
			}
			w.Errors = append(w.Errors, ForEachError{Value: values[i], Error: upstreamError(q.call.Tool, err).Message})
			w.Complete = false
			if w.StoppedBy == "" || paginate.IsComplete(w.StoppedBy) {
				w.StoppedBy = stoppedByOf(err)
			}
			continue
		}
		items := res.Items
		if !res.Plan.ItemsFound && len(items) == 0 && res.FirstBody != nil {
			// Detection found no primary array it could vouch for (no
			// response schema, an unusual name): take the body's largest
			// array, as the size guard would, rather than lose its rows.
			if path, ok := itemsPathOf(res.Plan, res.FirstBody); ok {
				arr := res.FirstBody
				if path != "" {
					arr, _ = query.Get(res.FirstBody, path)
				}
				if els, err := query.Elements(arr); err == nil {
					items = els
					res.Plan.Items, res.Plan.ItemsFound = path, true
				}
			}
		}
		if w.Envelope == nil && res.FirstBody != nil {
			w.Envelope = res.FirstBody
			w.Plan = res.Plan
		}
		if q.values != nil {
			items = tagRows(items, q.r.forEach.Key, values[i])
		}
		w.Items = append(w.Items, items...)
		w.Requests += res.Requests
		w.Pages += res.Pages
		w.Retries += res.Retries
		w.Dups += res.Duplicates
		w.Bytes += res.Bytes
		w.Mismatch = w.Mismatch || res.TotalMismatch
		if res.PageSize > w.PageSize {
			w.PageSize = res.PageSize
		}
		if res.Total != nil && q.values == nil {
			w.Total = res.Total
		}
		if !res.Complete {
			if w.Complete || w.StoppedBy == "" {
				w.StoppedBy = res.StoppedBy
				w.LastCur = res.LastCursor
				w.Uninsp = res.Uninspected
			}
			w.Complete = false
		} else if w.StoppedBy == "" {
			w.StoppedBy = res.StoppedBy
		}
	}
	if failed == len(results) {
		return nil, &ToolError{Code: CodeUpstream, Message: fmt.Sprintf("every _for_each value failed; first error: %s", w.Errors[0].Error)}
	}
	w.ItemsPath, w.HasItems = itemsPathOf(w.Plan, w.Envelope)
	if w.HasItems && w.AllPages && w.Plan.Paginated() {
		w.Envelope = stripPaths(w.Envelope, w.Plan.NextToken, w.Plan.NextURLField, w.Plan.MoreFlag)
	}
	if w.HasItems && q.values != nil {
		// The first value's totals are not the merged set's.
		w.Envelope = stripPaths(w.Envelope, w.Plan.Total, w.Plan.TotalPages)
	}
	return w, nil
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
			return "", len(body) > 0 && firstByte(body) == '['
		}
		if v, ok := query.Get(body, p.Items); ok && firstByte(v) == '[' {
			return p.Items, true
		}
	}
	if firstByte(body) == '[' {
		return "", true
	}
	if path, _, ok := primaryArray(body, ""); ok {
		return path, true
	}
	return "", false
}

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
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
	member := append(appendJSONString(nil, key), ':')
	member = appendJSONValue(member, value)
	out := make([][]byte, len(rows))
	for i, row := range rows {
		if firstByte(row) != '{' {
			out[i] = row
			continue
		}
		if _, has := query.Get(row, query.JoinPath(key)); has {
			out[i] = row
			continue
		}
		out[i] = insertFirstMember(row, member)
	}
	return out
}
