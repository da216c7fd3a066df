package deploy

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

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
		Caller:    s.observeCaller(tools.Router{HTTP: s.invoker, MCP: s.mcp, UserMCP: s.userMCP}),
		Scrub:     s.invoker.Scrubber,
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
	t, err := s.findTool(toolID)
	if err != nil {
		return nil, err
	}
	return s.engine.Call(ctx, loop.Call{
		Tool: t, Args: args, Scope: loop.Scope{Org: s.cfg.Org, Thread: "cli"},
		Binding: loop.Binding{LoopResponses: true}, Progress: progress,
	})
}

// UnknownToolError: no tool has the id, or the unique model-facing name,
// a caller asked for. Similar are the ids it most likely meant.
type UnknownToolError struct {
	Name    string
	Similar []string
}

func (e *UnknownToolError) Error() string {
	msg := fmt.Sprintf("no tool %q", e.Name)
	if len(e.Similar) > 0 {
		q := make([]string, len(e.Similar))
		for i, s := range e.Similar {
			q[i] = strconv.Quote(s)
		}
		msg += " (did you mean " + strings.Join(q, " or ") + "?)"
	}
	return msg
}

// findTool is the tool with id toolID, else the one whose model-facing
// name it is (when unique), else an *UnknownToolError naming the ids it
// most likely meant.
func (s *Deployment) findTool(toolID string) (*tools.Tool, error) {
	if t, ok := s.catalog.Get(toolID); ok {
		return t, nil
	}
	if t := s.toolByName(toolID); t != nil {
		return t, nil
	}
	var ids []string
	byID := map[string]string{}
	for _, t := range s.catalog.All() {
		ids = append(ids, t.ID, t.Name)
		byID[t.ID], byID[t.Name] = t.ID, t.ID
	}
	e := &UnknownToolError{Name: toolID}
	best := -1
	lower := strings.ToLower(toolID)
	for _, near := range tools.Similar(toolID, ids) {
		// The nearest only: a second as near is worth naming, a farther one is noise.
		d := tools.EditDistance(lower, strings.ToLower(near))
		if best >= 0 && d > best {
			break
		}
		best = d
		if id := byID[near]; !slices.Contains(e.Similar, id) && len(e.Similar) < 3 {
			e.Similar = append(e.Similar, id)
		}
	}
	return nil, e
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
