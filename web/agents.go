package web

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
)

func (s *Server) listAgents(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"agents": s.agents.List()})
}

func (s *Server) getAgent(c echo.Context) error {
	d, ok := s.agents.Get(c.Param("id"))
	if !ok {
		return notFound("no agent " + strconv.Quote(c.Param("id")))
	}
	return c.JSON(http.StatusOK, d)
}

// putAgent creates or replaces an agent: the config's agent shape.
func (s *Server) putAgent(c echo.Context) error {
	var d agent.Definition
	if err := decodeJSON(c, &d); err != nil {
		return err
	}
	if d.ID == "" {
		d.ID = c.Param("id")
	}
	if d.ID != c.Param("id") {
		return badRequest("id in the body differs from the id in the path")
	}
	if err := s.agents.Put(c.Request().Context(), d); err != nil {
		return definitionError(err)
	}
	got, _ := s.agents.Get(d.ID)
	return c.JSON(http.StatusOK, got)
}

func (s *Server) deleteAgent(c echo.Context) error {
	err := s.agents.Delete(c.Request().Context(), c.Param("id"))
	if errors.Is(err, agent.ErrNotFound) {
		return notFound("no agent " + strconv.Quote(c.Param("id")))
	}
	if err != nil {
		return internal(err)
	}
	return c.NoContent(http.StatusNoContent)
}

// patchBinding changes one binding — what a console's "Allow response
// looping for this tool" switch calls.
func (s *Server) patchBinding(c echo.Context) error {
	var p agent.BindingPatch
	if err := decodeJSON(c, &p); err != nil {
		return err
	}
	toolID := c.Param("tool_id")
	if _, ok := s.catalog.Get(toolID); !ok {
		return notFound("no tool " + strconv.Quote(toolID))
	}
	d, err := s.agents.PatchBinding(c.Request().Context(), c.Param("id"), toolID, func(id string) string {
		if t, ok := s.catalog.Get(id); ok && t.Toolkit != "" {
			return t.Toolkit
		}
		return ""
	}, p)
	if errors.Is(err, agent.ErrNotFound) {
		return notFound("no agent " + strconv.Quote(c.Param("id")))
	}
	if errors.Is(err, agent.ErrEditConflict) {
		return errConflict(err.Error())
	}
	if err != nil {
		return definitionError(err)
	}
	return c.JSON(http.StatusOK, d)
}

// definitionError renders a definition problem as a 400 naming the field.
func definitionError(err error) error {
	var fe *agent.FieldError
	if errors.As(err, &fe) {
		return apiErr(http.StatusBadRequest, "invalid_field", fe.Field+": "+fe.Msg)
	}
	return internal(err)
}
