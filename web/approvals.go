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
// API and `trawl call --agent`. The inbox (agent.Inbox) and the gate
// (agent.Gate) know nothing of HTTP: the MCP server uses them the same
// way, with its own source.

// newInbox is the deployment's approvals inbox on its store: the
// embedded file, Redis, or memory for a process that keeps nothing.
func (d *Deployment) newInbox(st *stores) *agent.Inbox {
	store := st.approvals
	if store == nil {
		store = agent.NewMemoryApprovals()
	}
	return agent.NewInbox(agent.InboxOptions{Store: store, Now: func() time.Time { return d.now() }})
}

// Inbox is the deployment's approvals inbox.
func (d *Deployment) Inbox() *agent.Inbox { return d.inbox }

// gate is the approval gate of the deployment's doors other than chat.
func (d *Deployment) gate(source string) agent.Gate {
	return agent.Gate{Inbox: d.inbox, Engine: d.engine, Catalog: d.catalog, Source: source}
}

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
	_, err := s.gate("invoke").Admit(ctx, def, call, req.ApprovalID)
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
	list, err := s.inbox.List(c.Request().Context(), statuses...)
	if err != nil {
		return internal(err)
	}
	if list == nil {
		list = []agent.PendingApproval{}
	}
	return c.JSON(http.StatusOK, map[string]any{"approvals": list})
}

func (s *Server) getApproval(c echo.Context) error {
	a, err := s.inbox.Get(c.Request().Context(), c.Param("id"))
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
	a, err := s.inbox.Answer(c.Request().Context(), c.Param("id"), *body.Approved, body.Reason)
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

// Asker puts an approval request to a human where the caller is (the
// terminal of `trawl call --agent`) and returns the answer.
type Asker func(ctx context.Context, a agent.PendingApproval) (approved bool, reason string, err error)

// CallAs runs one tool call as agent agentID holds the tool, with no
// model: the agent's binding (looping, bulk, effect) and its approval
// policy. A call that needs approval waits in the inbox, is put to ask,
// and runs only when approved there, under that approval (taken once, for
// these arguments). toolID is a tool id or the agent's name for it.
func (d *Deployment) CallAs(ctx context.Context, agentID, toolID string, args map[string]any, progress func(loop.Progress), ask Asker) (*loop.Outcome, error) {
	if d.agents == nil {
		return nil, errors.New("this deployment was opened without its agents")
	}
	def, ok := d.agents.Get(agentID)
	if !ok {
		return nil, fmt.Errorf("no agent %q (see GET /v1/agents)", agentID)
	}
	t, ok := d.catalog.Get(toolID)
	if !ok {
		if t = d.toolByName(toolID); t == nil {
			return nil, fmt.Errorf("no tool %q (see GET /v1/tools)", toolID)
		}
	}
	bc, bound, err := agent.Bind(def, d.catalog, d.engine, t.ID)
	if err != nil {
		return nil, err
	}
	if !bound {
		return nil, fmt.Errorf("agent %q does not bind %s", agentID, t.ID)
	}
	call := loop.Call{Tool: t, Args: args, Scope: loop.Scope{Org: d.cfg.Org, Thread: "cli"}, Binding: bc.Binding, Progress: progress}
	gate := d.gate("cli")
	_, err = gate.Admit(ctx, def, call, "")
	var wait *agent.ApprovalWait
	if errors.As(err, &wait) {
		approved, reason, aerr := ask(ctx, wait.Approval)
		if aerr != nil {
			return nil, aerr
		}
		if _, aerr := d.inbox.Answer(ctx, wait.Approval.ID, approved, reason); aerr != nil {
			return nil, aerr
		}
		_, err = gate.Admit(ctx, def, call, wait.Approval.ID)
	}
	if err != nil {
		return nil, withCode(err)
	}
	return d.engine.Call(ctx, call)
}

// withCode puts an approval refusal's code before its message, as a
// tool error reads on one line of stderr.
func withCode(err error) error {
	var denial *agent.ApprovalDenial
	switch {
	case errors.As(err, &denial):
		return fmt.Errorf("%s: %w", agent.CodeApprovalDenied, err)
	case errors.Is(err, agent.ErrApproval):
		return fmt.Errorf("%s: %w", agent.CodeApprovalRefused, err)
	}
	return err
}
