package deploy

import (
	"context"
	"fmt"
	"sort"

	"github.com/trawl-dev/trawl/tools"
)

// loadCatalog imports every tool source of the config and registers each
// provider's credentials with the invoker.
func (s *Deployment) loadCatalog(ctx context.Context) (*tools.Catalog, error) {
	cfg := s.cfg
	cat := tools.NewCatalog()
	for i, p := range cfg.Providers {
		at := fmt.Sprintf("providers[%d]", i)
		opt := tools.ImportOptions{ProviderID: p.ID, BaseURL: p.BaseURL}
		var r *tools.ImportReport
		var err error
		if p.specData != nil {
			r, err = tools.ImportOpenAPIDataReport(p.specData, opt)
		} else {
			r, err = tools.ImportOpenAPIReport(ctx, p.OpenAPI, opt)
		}
		if err != nil {
			return nil, cfg.errAt(at+".openapi", err.Error())
		}
		s.logImport(p.ID, r)
		if err := cat.Add(r.Tools...); err != nil {
			return nil, cfg.errAt(at, err.Error())
		}
		s.invoker.SetAuth(p.ID, tools.ProviderAuth{Org: p.Auth, Runtime: p.RuntimeAuth})
		if err := s.setupOAuth(ctx, p.ID, p.Auth); err != nil {
			return nil, cfg.errAt(at+".auth", err.Error())
		}
		s.invoker.SetRateLimit(p.ID, p.RateLimit)
	}
	manifests := make([][]byte, 0, len(cfg.toolkitData))
	manifests = append(manifests, cfg.toolkitData...)
	for i, path := range cfg.Toolkits {
		m, err := tools.LoadManifest(path)
		if err != nil {
			return nil, cfg.errAt(fmt.Sprintf("toolkits[%d]", i), err.Error())
		}
		if err := s.addToolkit(ctx, cat, m); err != nil {
			return nil, cfg.errAt(fmt.Sprintf("toolkits[%d]", i), err.Error())
		}
	}
	for _, data := range manifests {
		m, err := tools.ParseManifest(data)
		if err != nil {
			return nil, fmt.Errorf("built-in toolkit: %w", err)
		}
		if err := s.addToolkit(ctx, cat, m); err != nil {
			return nil, fmt.Errorf("built-in toolkit %s: %w", m.Toolkit, err)
		}
	}
	for i, mc := range cfg.MCPServers {
		if err := s.connectMCP(ctx, cat, mc); err != nil {
			return nil, cfg.errAt(fmt.Sprintf("mcp_servers[%d]", i), err.Error())
		}
	}
	return cat, nil
}

// logImport keeps a provider's import warnings for GET /v1/tools and
// summarises them in the start-up log: one line per provider, with the
// first few warnings when the document needed repairs or skips.
func (s *Deployment) logImport(provider string, r *tools.ImportReport) {
	if len(r.Warnings) == 0 {
		s.log.Debug("provider imported", "provider", provider, "tools", len(r.Tools))
		return
	}
	if s.imported == nil {
		s.imported = map[string][]tools.ImportWarning{}
	}
	s.imported[provider] = r.Warnings
	const shown = 3
	first := make([]string, 0, shown)
	for _, w := range r.Warnings[:min(shown, len(r.Warnings))] {
		first = append(first, w.String())
	}
	s.log.Warn("provider imported leniently: "+r.Summary()+" (GET /v1/tools lists every repair and skip)",
		"provider", provider, "tools", len(r.Tools), "repaired", r.Count(tools.Repaired),
		"skipped", r.Count(tools.Skipped), "first", first)
}

// connectMCP connects an MCP server and adds its tools; when the server
// announces a new tool list, the catalog follows it.
func (s *Deployment) connectMCP(ctx context.Context, cat *tools.Catalog, mc tools.MCPConfig) error {
	s.invoker.AddSecrets(mc.Secrets()...)
	if mc.PerUser() {
		return s.connectUserMCP(ctx, cat, mc) // mcp_oauth.go
	}
	src, err := tools.ConnectMCP(ctx, mc, tools.MCPOptions{
		Logger: s.log.With("mcp", mc.ID), Log: s.activity, HTTPClient: s.tel.mcpClient(s.cfg.Telemetry, mc.ID), Limiter: s.limiter,
		Scrub: s.invoker.Scrubber, OnToken: func(tok string) { s.invoker.RememberToken(mc.ID, tok) },
		// A server that does not answer at start leaves the deployment
		// degraded, not down: it is retried in the background, and its
		// tools join the catalog when it answers.
		Degraded: true,
		OnChange: s.applyMCPTools(cat, mc.ID),
	})
	if err != nil {
		return err
	}
	s.closers = append(s.closers, src.Close)
	s.mcp[mc.ID] = src
	if src.Connected() {
		return cat.ReplaceProvider(mc.ID, src.Tools())
	}
	// Marked before it is checked again: a connection made meanwhile
	// (OnChange) clears the mark, and so does this check.
	cat.SetWaiting(mc.ID, "its MCP server has not answered yet")
	if src.Connected() {
		cat.SetWaiting(mc.ID, "")
	}
	s.log.Warn("mcp server unreachable at start: serving without its tools and retrying in the background", "mcp", mc.ID, "err", src.Ping(ctx))
	return nil
}

func (s *Deployment) addToolkit(ctx context.Context, cat *tools.Catalog, m *tools.Manifest) error {
	ts, err := m.Tools()
	if err != nil {
		return err
	}
	if err := cat.Add(ts...); err != nil {
		return err
	}
	// A toolkit's manifest says how a user's credential is put on the
	// request; the credential itself arrives at run time. The demo
	// toolkits also carry an organization token.
	org := m.Auth
	if s.cfg.toolkitToken != "" && org.Token == "" && !s.cfg.toolkitNoOrgToken {
		org.Token = s.cfg.toolkitToken
	}
	if m.Auth.Type == tools.AuthOAuth2 {
		if err := expandOAuthEnv(&org); err != nil {
			return err
		}
	}
	s.invoker.SetAuth(m.Toolkit, tools.ProviderAuth{Org: org, Runtime: tools.AuthSpec{Type: m.Auth.Type, Header: m.Auth.Header, Query: m.Auth.Query}})
	if err := s.setupOAuth(ctx, m.Toolkit, org); err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	s.invoker.SetRateLimit(m.Toolkit, m.RateLimit)
	return nil
}

// checkBindings rejects agents bound to tools or toolkits that do not
// exist, naming the config line.
func (s *Deployment) checkBindings() error {
	for i, a := range s.cfg.Agents {
		for j, b := range a.AgentTools {
			at := fmt.Sprintf("agents[%d].agentTools[%d]", i, j)
			if err := s.checkBinding(b.ToolID, b.ProviderID, b.Toolkit); err != nil {
				return s.cfg.errAt(at, err.Error())
			}
		}
	}
	return nil
}

func (s *Deployment) checkBinding(toolID, providerID, toolkit string) error {
	if toolkit != "" {
		if _, waiting := s.catalog.Waiting(toolkit); waiting {
			return nil // an MCP server not reached yet
		}
		if len(s.catalog.Provider(toolkit)) == 0 {
			return fmt.Errorf("unknown toolkit %q (known: %v)", toolkit, s.toolkits())
		}
		return nil
	}
	t, ok := s.catalog.Get(toolID)
	if p, waiting := s.catalog.WaitingFor(toolID); !ok && waiting && (providerID == "" || providerID == p) {
		return nil // its MCP server has not answered yet: checked when it does
	}
	if !ok {
		return fmt.Errorf("unknown tool_id %q", toolID)
	}
	if providerID != "" && providerID != t.Provider {
		return fmt.Errorf("tool %q belongs to provider %q, not %q", toolID, t.Provider, providerID)
	}
	return nil
}

func (s *Deployment) toolkits() []string {
	seen := map[string]bool{}
	for _, t := range s.catalog.All() {
		if t.UserConnected() {
			seen[t.Provider] = true
		}
	}
	out := make([]string, 0, len(seen))
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// applyMCPTools is an MCP server's OnChange: its new tool list replaces
// its tools in cat, and it is no longer waiting.
func (s *Deployment) applyMCPTools(cat *tools.Catalog, id string) func([]*tools.Tool) {
	return func(ts []*tools.Tool) {
		if err := cat.ReplaceProvider(id, ts); err != nil {
			s.log.Error("mcp tool list changed but could not be applied", "mcp", id, "err", err)
			return
		}
		cat.SetWaiting(id, "")
	}
}
