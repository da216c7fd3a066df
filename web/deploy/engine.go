package deploy

import (
	"context"
	"fmt"

	"github.com/trawl-dev/trawl/loop"
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
		Budget:    s.cfg.Limits.Budget(),
		ViewChars: s.cfg.Limits.ViewChars,
		Results:   s.results,
		Cache:     cache,
		ScopeKey:  s.stores.scopeKey(),
		Logger:    s.log,

		TracerProvider: s.tel.tracerProvider(), MeterProvider: s.tel.meterProvider(),
	}), nil
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
