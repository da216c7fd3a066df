package deploy

import (
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// ToolView is a tool as the tools API (and `trawl tools`) shows it.
type ToolView struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Kind        tools.Kind     `json:"kind"`
	Effect      tools.Effect   `json:"effect"`
	Provider    string         `json:"provider"`
	Toolkit     string         `json:"toolkit,omitempty"`
	Method      string         `json:"method,omitempty"`
	Path        string         `json:"path,omitempty"`
	OperationID string         `json:"operationId,omitempty"`
	InputSchema map[string]any `json:"inputSchema"`
	Pagination  paginate.Plan  `json:"pagination"`
}

// ViewOf is t as the tools API shows it.
func (s *Deployment) ViewOf(t *tools.Tool) ToolView {
	return ToolView{
		ID: t.ID, Name: t.Name, Description: t.Description, Kind: t.Kind, Provider: t.Provider,
		Toolkit: t.Toolkit, Method: t.Method, Path: t.Path, OperationID: t.OperationID,
		Effect:      s.engine.Effect(t, loop.Binding{}),
		InputSchema: s.engine.Schema(t, loop.Binding{LoopResponses: true}),
		Pagination:  s.engine.Plan(t),
	}
}

// ToolViews is every tool of the catalog as GET /v1/tools shows it.
func (s *Deployment) ToolViews() []ToolView {
	all := s.catalog.All()
	out := make([]ToolView, 0, len(all))
	for _, t := range all {
		out = append(out, s.ViewOf(t))
	}
	return out
}
