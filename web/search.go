package web

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
)

// searchTools runs the agent's search_tools without a model:
// {query, toolkit?, limit?} → the list the model would get.
func (s *Server) searchTools(c echo.Context) error {
	def, ok := s.agents.Get(c.Param("id"))
	if !ok {
		return notFound("no agent " + strconv.Quote(c.Param("id")))
	}
	var raw json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	ix, err := s.runner.SearchIndex(def, nil)
	if err != nil {
		return internal(err)
	}
	if ix == nil {
		return c.JSON(http.StatusOK, map[string]any{"results": []any{}})
	}
	out, err := ix.SearchTool(c.Request().Context(), raw, func(string) bool { return false })
	if err != nil {
		return badRequest(err.Error())
	}
	return c.JSONBlob(http.StatusOK, out)
}
