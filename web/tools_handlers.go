package web

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web/deploy"
)

func (s *Server) listTools(c echo.Context) error {
	all := s.catalog.All()
	out := make([]deploy.ToolView, 0, len(all))
	kind := c.QueryParam("kind")
	for _, t := range all {
		if kind != "" && string(t.Kind) != kind {
			continue
		}
		out = append(out, s.dep.ViewOf(t))
	}
	body := map[string]any{"tools": out}
	if imported := s.dep.ImportWarnings(); len(imported) > 0 {
		// What each provider's lenient OpenAPI import repaired or skipped.
		body["importWarnings"] = imported
	}
	return c.JSON(http.StatusOK, body)
}

func (s *Server) getTool(c echo.Context) error {
	t, ok := s.catalog.Get(c.Param("tool_id"))
	if !ok {
		return notFound("no tool " + strconv.Quote(c.Param("tool_id")))
	}
	return c.JSON(http.StatusOK, s.dep.ViewOf(t))
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
	if conv := c.QueryParam("conversation"); conv != "" {
		// An MCP client's conversation (its _thread) is a thread of its own.
		if c.QueryParam("agent_id") == "" || c.QueryParam("chat_id") != "" {
			return badRequest("conversation needs agent_id (and user_id for a user's), and excludes chat_id")
		}
		thread = agent.ConversationKey(c.QueryParam("user_id"), c.QueryParam("agent_id"), conv)
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
