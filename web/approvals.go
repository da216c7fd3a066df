package web

import (
	"context"
	"encoding/json"
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
// API. The inbox itself (agent.Inbox) knows nothing of HTTP: `trawl call
// --agent` and the MCP server use it the same way.

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

// invokeApproval applies the agent's approval policy to an invoke with
// agent_id, as chat does: nil when the call may run now. A call that
// needs approval and can never run is refused first (engine.Check);
// without approval_id its request is put in the inbox and the answer is
// 409 approval_required carrying it; with one, the approval is taken —
// once, for this agent, tool and arguments — or refused.
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
	_, err := s.Deployment.gateApproval(ctx, def, call, "invoke", req.ApprovalID)
	return err
}

// gateApproval is the approval gate of every door but chat: nil when
// call, by agent def, may run — it needs no approval, or approvalID is
// an approval of it now taken. Otherwise the error says why, as an
// *APIError: the call can never run (its tool error), it waits (409
// approval_required, the request put in the inbox when approvalID is
// empty), it was denied (403), or the approval does not fit it (400).
// The request is returned when one is involved.
func (d *Deployment) gateApproval(ctx context.Context, def agent.Definition, call loop.Call, source, approvalID string) (*agent.PendingApproval, error) {
	t := call.Tool
	bc, bound, err := agent.Bind(def, d.catalog, d.engine, t.ID)
	switch {
	case err != nil:
		return nil, internal(err)
	case !bound:
		return nil, apiErr(http.StatusBadRequest, "not_bound", "agent "+strconv.Quote(def.ID)+" does not bind "+strconv.Quote(t.ID))
	case !bc.NeedsApproval:
		if approvalID != "" {
			return nil, apiErr(http.StatusBadRequest, agent.CodeApprovalRefused, fmt.Sprintf(
				"approval %q was given, but agent %q runs %s without approval", approvalID, def.ID, t.ID))
		}
		return nil, nil
	}
	// Nobody is asked to approve a call that can never run.
	if err := d.engine.Check(call); err != nil {
		return nil, toolError(err)
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	input, err := json.Marshal(args)
	if err != nil {
		return nil, badRequest("the arguments are not JSON: " + err.Error())
	}
	if approvalID == "" {
		a, err := d.inbox.Request(ctx, agent.ApprovalRequest{Source: source, AgentID: def.ID, ToolID: t.ID,
			ToolName: t.Name, Effect: string(bc.Effect), Input: input, Action: actionText(call)})
		if errors.Is(err, agent.ErrInboxFull) {
			return nil, apiErr(http.StatusTooManyRequests, "inbox_full", err.Error())
		}
		if err != nil {
			return nil, internal(err)
		}
		return &a, approvalRequired(a, false)
	}
	a, err := d.inbox.Take(ctx, approvalID, def.ID, t.ID, input)
	switch {
	case err == nil:
		return &a, nil
	case errors.Is(err, agent.ErrApprovalPending):
		return &a, approvalRequired(a, true)
	case errors.Is(err, agent.ErrApprovalDenied):
		msg := fmt.Sprintf("approval %s was denied: %s was not run", a.ID, t.ID)
		if a.Reason != "" {
			msg += " (" + a.Reason + ")"
		}
		return &a, &APIError{Status: toolStatus(agent.CodeApprovalDenied), Code: agent.CodeApprovalDenied, Message: msg,
			With: map[string]any{"approval": a}}
	case errors.Is(err, agent.ErrApproval):
		return nil, apiErr(toolStatus(agent.CodeApprovalRefused), agent.CodeApprovalRefused, err.Error())
	}
	return nil, internal(err)
}

// approvalRequired is the 409 of a call that waits: the request rides
// beside the error.
func approvalRequired(a agent.PendingApproval, again bool) *APIError {
	msg := fmt.Sprintf("%s needs a human's approval before it runs: it waits in the approvals inbox as %s until %s; "+
		"approve it (POST /v1/approvals/%s, or the Studio's Approvals page), then send the same call again with \"approval_id\": %q",
		a.ToolID, a.ID, a.Expires.UTC().Format(time.RFC3339), a.ID, a.ID)
	if again {
		msg = fmt.Sprintf("approval %s has not been answered yet: %s", a.ID, msg)
	}
	return &APIError{Status: toolStatus(agent.CodeApprovalRequired), Code: agent.CodeApprovalRequired, Message: msg,
		With: map[string]any{"approval": a}}
}

// actionText says what a call would do, for the evidence: method and
// path of an HTTP tool, the tool of an MCP one.
func actionText(call loop.Call) string {
	t := call.Tool
	if t.Method != "" {
		return t.Method + " " + t.Path
	}
	return "call " + t.ID
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
	a, err := d.gateApproval(ctx, def, call, "cli", "")
	if err != nil {
		var ae *APIError
		if a == nil || !errors.As(err, &ae) || ae.Code != agent.CodeApprovalRequired {
			return nil, cliError(err)
		}
		approved, reason, aerr := ask(ctx, *a)
		if aerr != nil {
			return nil, aerr
		}
		if _, err := d.inbox.Answer(ctx, a.ID, approved, reason); err != nil {
			return nil, err
		}
		if _, err := d.gateApproval(ctx, def, call, "cli", a.ID); err != nil {
			return nil, cliError(err)
		}
	}
	return d.engine.Call(ctx, call)
}

// cliError words an API error for one line of stderr: its code first,
// as a tool error reads.
func cliError(err error) error {
	var ae *APIError
	if errors.As(err, &ae) && ae.Status < 500 {
		return fmt.Errorf("%s: %s", ae.Code, ae.Message)
	}
	return err
}
