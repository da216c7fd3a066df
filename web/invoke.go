package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// newEngine builds the looping engine with the deployment's budgets,
// result store and dataset cache.
func (s *Deployment) newEngine() (*loop.Engine, error) {
	s.results = loop.NewRetrieval(loop.RetrievalOptions{Budget: s.cfg.Limits.ViewChars, Store: s.stores.results})
	cache, err := loop.NewDatasetCache(loop.CacheOptions{Mode: loop.CacheMode(s.cfg.Cache.Mode), Store: s.stores.datasets, Shared: s.stores.walks})
	if err != nil {
		return nil, err
	}
	s.cache = cache
	return loop.New(loop.Options{
		Caller:    s.observeCaller(tools.Router{HTTP: s.invoker, MCP: s.mcp}),
		Scrub:     s.invoker.Scrubber,
		Budget:    budgetOf(s.cfg.Limits.Limits),
		ViewChars: s.cfg.Limits.ViewChars,
		Results:   s.results,
		Cache:     cache,
		ScopeKey:  s.stores.scopeKey(),
		Logger:    s.log,

		TracerProvider: s.tel.tracerProvider(), MeterProvider: s.tel.meterProvider(),
	}), nil
}

// budgetOf converts config limits to walk budgets.
func budgetOf(l agent.Limits) paginate.Budget {
	return paginate.Budget{
		Pages: l.Pages, Requests: l.Requests, Items: l.Items, Bytes: l.Bytes,
		Time: time.Duration(l.Seconds * float64(time.Second)), ForEachValues: l.ForEachValues,
	}
}

type invokeRequest struct {
	Args          map[string]any `json:"args"`
	ThreadID      string         `json:"thread_id"`
	LoopResponses *bool          `json:"loop_responses"`
	Experiment    bool           `json:"experiment"`
	// AgentID applies that agent's binding of the tool (loop_responses
	// then must be absent); with ChatID the call, and a
	// queryToolResult, is scoped to that chat's thread.
	AgentID string `json:"agent_id"`
	ChatID  string `json:"chat_id"`
	// Bulk lets a write take _for_each (without agent_id there is no
	// binding to say so).
	Bulk bool `json:"bulk"`
}

// invokeTool runs one tool call through the engine, no model involved.
// loop_responses defaults to true here.
func (s *Server) invokeTool(c echo.Context) error {
	var req invokeRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	id := c.Param("tool_id")
	scope, err := s.invokeScope(req)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if id == loop.QueryToolResult || id == loop.FetchToolResult {
		args, _ := json.Marshal(req.Args)
		out, err := s.results.Call(ctx, scope, id, args)
		if err != nil {
			return retrievalError(err)
		}
		return c.JSONBlob(http.StatusOK, out)
	}
	t, ok := s.catalog.Get(id)
	if !ok {
		return notFound("no tool " + strconv.Quote(id))
	}
	binding, err := s.invokeBinding(req, t)
	if err != nil {
		return err
	}
	call := loop.Call{Tool: t, Args: req.Args, Scope: scope, Experiment: req.Experiment, Binding: binding}
	if wantsEventStream(c.Request()) {
		return s.invokeStream(c, call)
	}
	out, err := s.engine.Call(tools.WithCallID(ctx, "invoke_"+randomHex(8)), call)
	if err != nil {
		return toolError(err)
	}
	return c.JSONBlob(http.StatusOK, out.View)
}

// toolError renders an engine error with its code (invalid_filter,
// invalid_for_each_key, upstream_error …): what the caller can fix is a
// 400, an upstream failure a 502, anything else internal.
func toolError(err error) error {
	var te *loop.ToolError
	if !errors.As(err, &te) {
		return internal(err)
	}
	status := http.StatusBadRequest
	if te.Code == loop.CodeUpstream || te.Code == loop.CodeOutcomeUnknown {
		status = http.StatusBadGateway
	}
	return apiErr(status, te.Code, te.Message)
}

func retrievalError(err error) error {
	var ae *loop.RetrievalArgError
	switch {
	case errors.As(err, &ae):
		return apiErr(http.StatusBadRequest, ae.ErrorCode(), strings.TrimPrefix(ae.Error(), ae.ErrorCode()+": "))
	case errors.Is(err, loop.ErrResultNotFound), errors.Is(err, loop.ErrResultExpired):
		return apiErr(http.StatusNotFound, "not_found", err.Error())
	}
	return internal(err)
}

// decodeJSON reads a JSON request body strictly: unknown fields and
// trailing data are errors naming what is wrong.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiErr(http.StatusRequestEntityTooLarge, "too_large", "request body too large")
		}
		return badRequest("invalid JSON body: " + err.Error())
	}
	if dec.More() {
		return badRequest("invalid JSON body: trailing data after the object")
	}
	return nil
}

// CallTool runs one tool call through the engine with looping on, as
// `trawl call` does: no model, the organization's credentials, progress
// reported to progress (may be nil).
func (s *Deployment) CallTool(ctx context.Context, toolID string, args map[string]any, progress func(loop.Progress)) (*loop.Outcome, error) {
	t, ok := s.catalog.Get(toolID)
	if !ok {
		if byName := s.toolByName(toolID); byName != nil {
			t = byName
		} else {
			return nil, fmt.Errorf("no tool %q (see GET /v1/tools)", toolID)
		}
	}
	return s.engine.Call(ctx, loop.Call{
		Tool: t, Args: args, Scope: loop.Scope{Org: s.cfg.Org, Thread: "cli"},
		Binding: loop.Binding{LoopResponses: true}, Progress: progress,
	})
}

// toolByName finds a tool by its model-facing name when that is unique.
func (s *Deployment) toolByName(name string) *tools.Tool {
	var found *tools.Tool
	for _, t := range s.catalog.All() {
		if t.Name == name {
			if found != nil {
				return nil
			}
			found = t
		}
	}
	return found
}
