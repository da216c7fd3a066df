package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
)

type invokeRequest struct {
	Args          map[string]any `json:"args"`
	ThreadID      string         `json:"thread_id"`
	LoopResponses *bool          `json:"loop_responses"`
	Experiment    bool           `json:"experiment"`
	// AgentID applies that agent's binding of the tool (loop_responses
	// then must be absent); with ChatID the call, and a
	// queryToolResult, is scoped to that chat's thread.
	AgentID string `json:"agent_id"`
	ChatID  string `json:"chat_id"`
	// Bulk lets a write take _for_each (without agent_id there is no
	// binding to say so).
	Bulk bool `json:"bulk"`
	// ApprovalID is the approval a call that needs one comes back with
	// (agent_id only; see approvals.go).
	ApprovalID string `json:"approval_id"`
}

// invokeTool runs one tool call through the engine, no model involved.
// loop_responses defaults to true here.
func (s *Server) invokeTool(c echo.Context) error {
	var req invokeRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	id := c.Param("tool_id")
	scope, err := s.invokeScope(req)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if id == loop.QueryToolResult || id == loop.FetchToolResult {
		args, _ := json.Marshal(req.Args)
		out, err := s.results.Call(ctx, scope, id, args)
		if err != nil {
			return retrievalError(err)
		}
		return c.JSONBlob(http.StatusOK, out)
	}
	t, ok := s.catalog.Get(id)
	if !ok {
		return notFound("no tool " + strconv.Quote(id))
	}
	binding, err := s.invokeBinding(req, t)
	if err != nil {
		return err
	}
	call := loop.Call{Tool: t, Args: req.Args, Scope: scope, Experiment: req.Experiment, Binding: binding}
	if err := s.invokeApproval(ctx, req, call); err != nil {
		return err
	}
	if wantsEventStream(c.Request()) {
		return s.invokeStream(c, call)
	}
	out, err := s.engine.Call(tools.WithCallID(ctx, "invoke_"+randomHex(8)), call)
	if err != nil {
		return toolError(err)
	}
	return c.JSONBlob(http.StatusOK, out.View)
}

// decodeJSON reads a JSON request body strictly: unknown fields and
// trailing data are errors naming what is wrong.
func decodeJSON(c echo.Context, v any) error {
	dec := json.NewDecoder(c.Request().Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return apiErr(http.StatusRequestEntityTooLarge, "too_large", "request body too large")
		}
		return badRequest("invalid JSON body: " + err.Error())
	}
	if dec.More() {
		return badRequest("invalid JSON body: trailing data after the object")
	}
	return nil
}
