package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
)

// The approvals inbox over HTTP, and the approval policy of the invoke
// API. The inbox (agent.Inbox) and the gate (agent.Gate) know nothing of
// HTTP: `trawl call --agent` (approvals_call.go) and the MCP server use
// them the same way, each with its own source.

// invokeApproval applies the agent's approval policy to an invoke with
// agent_id, as chat does (agent.Gate): nil when the call may run now,
// else the API error that says why not — 409 approval_required with the
// request beside it, 403 approval_denied, 400 approval_refused, or the
// call's own error when it can never run.
func (s *Server) invokeApproval(ctx context.Context, req invokeRequest, call loop.Call) error {
	if req.AgentID == "" {
		if req.ApprovalID != "" {
			return badRequest("approval_id needs agent_id: approvals follow an agent's binding (without agent_id the admin invoke runs tools as before)")
		}
		return nil
	}
	def, ok := s.agents.Get(req.AgentID)
	if !ok {
		return notFound("no agent " + strconv.Quote(req.AgentID))
	}
	_, err := s.dep.Gate("invoke").Admit(ctx, def, call, req.ApprovalID)
	return gateError(err)
}

// gateError renders what agent.Gate.Admit refused, as the API answers it.
func gateError(err error) error {
	var wait *agent.ApprovalWait
	var denial *agent.ApprovalDenial
	var te *loop.ToolError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		return toolError(err)
	case errors.As(err, &wait):
		a := wait.Approval
		msg := fmt.Sprintf("%s; it waits until %s: approve it (POST /v1/approvals/%s, or the Studio's Approvals page), then send the same call again with \"approval_id\": %q",
			err.Error(), a.Expires.UTC().Format(time.RFC3339), a.ID, a.ID)
		return &APIError{Status: toolStatus(agent.CodeApprovalRequired), Code: agent.CodeApprovalRequired, Message: msg,
			With: map[string]any{"approval": a}}
	case errors.As(err, &denial):
		return &APIError{Status: toolStatus(agent.CodeApprovalDenied), Code: agent.CodeApprovalDenied, Message: err.Error(),
			With: map[string]any{"approval": denial.Approval}}
	case errors.Is(err, agent.ErrApproval):
		return apiErr(toolStatus(agent.CodeApprovalRefused), agent.CodeApprovalRefused, err.Error())
	case errors.Is(err, agent.ErrNotBound):
		return apiErr(http.StatusBadRequest, "not_bound", err.Error())
	case errors.Is(err, agent.ErrInboxFull):
		return apiErr(http.StatusTooManyRequests, "inbox_full", err.Error())
	}
	return internal(err)
}

// listApprovals: GET /v1/approvals?status=pending (default), a comma
// list of statuses, or all.
func (s *Server) listApprovals(c echo.Context) error {
	var statuses []agent.ApprovalStatus
	switch q := c.QueryParam("status"); q {
	case "":
		statuses = []agent.ApprovalStatus{agent.ApprovalPending}
	case "all":
	default:
		for _, part := range strings.Split(q, ",") {
			st := agent.ApprovalStatus(strings.TrimSpace(part))
			switch st {
			case agent.ApprovalPending, agent.ApprovalApproved, agent.ApprovalDenied, agent.ApprovalUsed:
				statuses = append(statuses, st)
			default:
				return badRequest(fmt.Sprintf("status %q: want pending, approved, denied, used (comma-separated) or all", part))
			}
		}
	}
	list, err := s.dep.Inbox().List(c.Request().Context(), statuses...)
	if err != nil {
		return internal(err)
	}
	if list == nil {
		list = []agent.PendingApproval{}
	}
	return c.JSON(http.StatusOK, map[string]any{"approvals": list})
}

func (s *Server) getApproval(c echo.Context) error {
	a, err := s.dep.Inbox().Get(c.Request().Context(), c.Param("id"))
	if err != nil {
		return approvalError(err)
	}
	return c.JSON(http.StatusOK, a)
}

// answerApproval: POST /v1/approvals/{id} {"approved": true|false,
// "reason"?} answers a pending request and returns it, evidence and all.
func (s *Server) answerApproval(c echo.Context) error {
	var body struct {
		Approved *bool  `json:"approved"`
		Reason   string `json:"reason"`
	}
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if body.Approved == nil {
		return badRequest(`the answer needs "approved": true (run the call once) or false (deny it)`)
	}
	if len(body.Reason) > 2000 {
		return badRequest("reason: at most 2000 characters")
	}
	a, err := s.dep.Inbox().Answer(c.Request().Context(), c.Param("id"), *body.Approved, body.Reason)
	if err != nil {
		return approvalError(err)
	}
	return c.JSON(http.StatusOK, a)
}

func approvalError(err error) error {
	switch {
	case errors.Is(err, agent.ErrApprovalNotFound):
		return notFound("no such approval request (never issued, or expired)")
	case errors.Is(err, agent.ErrApprovalAnswered):
		return apiErr(http.StatusConflict, "approval_answered", err.Error())
	}
	return internal(err)
}
