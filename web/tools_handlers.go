package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
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

func (s *Deployment) view(t *tools.Tool) ToolView {
	return ToolView{
		ID: t.ID, Name: t.Name, Description: t.Description, Kind: t.Kind, Provider: t.Provider,
		Toolkit: t.Toolkit, Method: t.Method, Path: t.Path, OperationID: t.OperationID,
		Effect:      paginate.EffectOf(t, s.engine.Plan(t)),
		InputSchema: s.engine.Schema(t, loop.Binding{LoopResponses: true}),
		Pagination:  s.engine.Plan(t),
	}
}

// ToolViews is every tool of the catalog as GET /v1/tools shows it.
func (s *Deployment) ToolViews() []ToolView {
	all := s.catalog.All()
	out := make([]ToolView, 0, len(all))
	for _, t := range all {
		out = append(out, s.view(t))
	}
	return out
}

func (s *Server) listTools(c echo.Context) error {
	all := s.catalog.All()
	out := make([]ToolView, 0, len(all))
	kind := c.QueryParam("kind")
	for _, t := range all {
		if kind != "" && string(t.Kind) != kind {
			continue
		}
		out = append(out, s.view(t))
	}
	body := map[string]any{"tools": out}
	if len(s.imported) > 0 {
		// What each provider's lenient OpenAPI import repaired or skipped.
		body["importWarnings"] = s.imported
	}
	return c.JSON(http.StatusOK, body)
}

func (s *Server) getTool(c echo.Context) error {
	t, ok := s.catalog.Get(c.Param("tool_id"))
	if !ok {
		return notFound("no tool " + strconv.Quote(c.Param("tool_id")))
	}
	return c.JSON(http.StatusOK, s.view(t))
}

func (s *Server) listActivity(c echo.Context) error {
	limit := 100
	if v := c.QueryParam("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return badRequest("limit must be a whole number from 1 to 1000")
		}
		limit = n
	}
	thread := c.QueryParam("thread_id")
	if chat := c.QueryParam("chat_id"); chat != "" {
		// A chat's calls are kept under its thread key.
		if c.QueryParam("agent_id") == "" {
			return badRequest("chat_id needs agent_id (and user_id for a user's chat)")
		}
		thread = agent.ThreadKey(c.QueryParam("user_id"), c.QueryParam("agent_id"), chat)
	}
	acts, err := s.activity.List(c.Request().Context(), thread, limit)
	if err != nil {
		return internal(err)
	}
	if acts == nil {
		acts = []tools.Activity{}
	}
	return c.JSON(http.StatusOK, map[string]any{"activity": acts})
}
