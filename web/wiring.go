package web

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// newAgents builds the agent registry, thread and session stores, the
// event log and the runner.
func (s *Server) newAgents(ctx context.Context, model agent.Model) error {
	store, err := agent.NewBoltStore(s.db, s.cfg.retention())
	if err != nil {
		return err
	}
	s.threads = store
	check := func(b agent.Binding) error { return s.checkBinding(b.ToolID, b.ProviderID, b.Toolkit) }
	if s.agents, err = agent.NewRegistry(ctx, s.cfg.Agents, store, check); err != nil {
		return err
	}
	if s.sessions, err = newBoltSessions(s.db); err != nil {
		return err
	}
	mem := stream.NewMemoryLog(stream.MemoryLogOptions{})
	s.events = s.tel.wrapEvents(mem)
	if model == nil {
		if model, err = s.newModel(); err != nil {
			return err
		}
	}
	s.model = model
	s.runner = agent.NewRunner(agent.RunnerOptions{
		Model: model, ModelName: s.cfg.Model.Name, Engine: s.engine, Retrieval: s.results,
		Catalog: s.catalog, Logger: s.log, DirectBudget: s.cfg.Discovery.DirectBudget,
		TracerProvider: s.tel.tracerProvider(), MeterProvider: s.tel.meterProvider(), RecordContent: s.cfg.Telemetry.RecordContent,
	})
	// Build each agent's search index now rather than on its first turn.
	for _, def := range s.agents.List() {
		if _, err := s.runner.SearchIndex(def, nil); err != nil {
			return fmt.Errorf("agent %s: %w", def.ID, err)
		}
	}
	orgToolkits := map[string]bool{}
	for _, t := range s.catalog.All() {
		if t.Kind == tools.KindApp && s.invoker.HasOrgCredential(t.Provider) {
			orgToolkits[t.Provider] = true
		}
	}
	s.conns, err = newConnections(s.db, s.cfg.DataDir, func(tk string) bool { return orgToolkits[tk] }, func() time.Time { return s.now() })
	return err
}

// requireModel answers 503 when no model is configured.
func (s *Server) requireModel(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.model == nil {
			return apiErr(http.StatusServiceUnavailable, "no_model",
				"no model is configured: set model.api_key (or OPENAI_API_KEY) or model.provider: replay")
		}
		return next(c)
	}
}
