package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/discovery"
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
	s.events = mem
	if model == nil {
		if model, err = s.newModel(); err != nil {
			return err
		}
	}
	s.model = model
	// Secrets no upstream byte may carry back (the invoker's scrubber).
	s.invoker.AddSecrets(s.cfg.Model.APIKey, s.cfg.Discovery.Embeddings.APIKey, s.adminKey)
	search, err := s.searchOptions()
	if err != nil {
		return err
	}
	s.runner = agent.NewRunner(agent.RunnerOptions{
		Model: model, ModelName: s.cfg.Model.Name, Engine: s.engine, Retrieval: s.results,
		Catalog: s.catalog, Logger: s.log, DirectBudget: s.cfg.Discovery.DirectBudget, Search: search,
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

// searchOptions are search_tools' index options: semantic ranking when
// discovery.embeddings names a model, its tool vectors cached in the
// store. The endpoint defaults to the model's, and so does the key when
// the endpoint is the model's.
func (s *Server) searchOptions() (discovery.IndexOptions, error) {
	e := s.cfg.Discovery.Embeddings
	if e.Model == "" {
		return discovery.IndexOptions{}, nil
	}
	base, key := cmp.Or(e.BaseURL, s.cfg.Model.BaseURL), e.APIKey
	if key == "" && base == s.cfg.Model.BaseURL {
		key = s.cfg.Model.APIKey
	}
	emb, err := agent.NewOpenAIEmbedder(agent.OpenAIEmbedderOptions{Model: e.Model, BaseURL: base, APIKey: key})
	if err != nil {
		return discovery.IndexOptions{}, s.cfg.errAt("discovery.embeddings", err.Error())
	}
	cache, err := discovery.NewBoltVectors(s.db, 0)
	if err != nil {
		return discovery.IndexOptions{}, err
	}
	return discovery.IndexOptions{Semantic: &discovery.Semantic{Embedder: emb, Model: e.Model, Cache: cache, Logger: s.log}}, nil
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
