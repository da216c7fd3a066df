package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
)

// BoundCall is how agent d holds one tool, for a door other than chat
// (invoke with agent_id, `trawl call --agent`, the MCP server): the
// engine's binding, the tool's effect under it, and whether the agent's
// approval policy makes a call wait for a human's yes — the same policy
// chat applies (Definition.Requires).
type BoundCall struct {
	Binding       loop.Binding
	Effect        tools.Effect
	NeedsApproval bool
}

// Bind is how agent d holds tool toolID (its own entry, else its
// toolkit's); ok is false when d does not bind it.
func Bind(d Definition, cat *tools.Catalog, eng *loop.Engine, toolID string) (bc BoundCall, ok bool, err error) {
	bts, err := resolveBindings(d, cat)
	if err != nil {
		return BoundCall{}, false, err
	}
	for _, bt := range bts {
		if bt.tool.ID == toolID {
			lb := bt.loopBinding()
			effect := eng.Effect(bt.tool, lb)
			return BoundCall{Binding: lb, Effect: effect, NeedsApproval: d.Requires(bt.binding, effect)}, true, nil
		}
	}
	return BoundCall{}, false, nil
}

// ErrNotBound: the agent does not bind the tool a door was asked to call.
var ErrNotBound = errors.New("the agent does not bind this tool")

// ApprovalWait is the error of a call that waits for a human's answer:
// its request, now in the inbox. Again says the call came back with the
// request's id before it was answered.
type ApprovalWait struct {
	Approval PendingApproval
	Again    bool
}

func (e *ApprovalWait) Error() string {
	if e.Again {
		return fmt.Sprintf("approval %s has not been answered yet", e.Approval.ID)
	}
	return fmt.Sprintf("%s needs a human's approval before it runs: it waits in the approvals inbox as %s", e.Approval.ToolID, e.Approval.ID)
}

// ApprovalDenial is the error of a call a human denied; it matches
// ErrApprovalDenied.
type ApprovalDenial struct{ Approval PendingApproval }

func (e *ApprovalDenial) Error() string {
	msg := fmt.Sprintf("approval %s was denied: %s was not run", e.Approval.ID, e.Approval.ToolID)
	if e.Approval.Reason != "" {
		msg += " (" + e.Approval.Reason + ")"
	}
	return msg
}

func (e *ApprovalDenial) Unwrap() error { return ErrApprovalDenied }

// Gate is the approval gate of every door but chat (invoke with agent_id,
// `trawl call --agent`, the MCP server): it applies an agent's approval
// policy to one call, with the approvals inbox standing in for the
// chat's approval parts.
type Gate struct {
	Inbox   *Inbox
	Engine  *loop.Engine
	Catalog *tools.Catalog
	// Source names the door in the requests it puts in the inbox
	// ("invoke", "cli", "mcp").
	Source string
	// Reads are the verdicts of the reads made before the call (a
	// conversation's), shown with a new request as its evidence.
	Reads []string
}

// Admit says whether call, by agent def, may run now: nil when it needs
// no approval, or approvalID is an approval of it, now taken (once, for
// this agent, tool and arguments). Otherwise the error says why not:
// ErrNotBound; the call's own *loop.ToolError when it can never run
// (checked before anyone is asked: Engine.Check); *ApprovalWait when it
// waits — with no approvalID its request is put in the inbox;
// *ApprovalDenial once denied; an ErrApproval when approvalID does not
// fit the call (another call, changed arguments, used, unknown, expired,
// or no approval needed). The request is returned whenever one is
// involved.
func (g Gate) Admit(ctx context.Context, def Definition, call loop.Call, approvalID string) (*PendingApproval, error) {
	t := call.Tool
	bc, bound, err := Bind(def, g.Catalog, g.Engine, t.ID)
	switch {
	case err != nil:
		return nil, err
	case !bound:
		return nil, fmt.Errorf("%w: agent %q does not bind %s", ErrNotBound, def.ID, t.ID)
	case !bc.NeedsApproval:
		if approvalID != "" {
			return nil, fmt.Errorf("%w: approval %q was given, but agent %q runs %s without approval", ErrApproval, approvalID, def.ID, t.ID)
		}
		return nil, nil
	}
	if err := g.Engine.Check(call); err != nil {
		return nil, err
	}
	args := call.Args
	if args == nil {
		args = map[string]any{}
	}
	input, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("the arguments are not JSON: %w", err)
	}
	if approvalID == "" {
		action := "call " + t.ID
		if t.Method != "" {
			action = t.Method + " " + t.Path
		}
		a, err := g.Inbox.Request(ctx, ApprovalRequest{Source: g.Source, AgentID: def.ID, ToolID: t.ID,
			ToolName: t.Name, Effect: string(bc.Effect), Input: input, Action: action, Reads: g.Reads})
		if err != nil {
			return nil, err
		}
		return &a, &ApprovalWait{Approval: a}
	}
	a, err := g.Inbox.Take(ctx, approvalID, def.ID, t.ID, input)
	switch {
	case errors.Is(err, ErrApprovalPending):
		return &a, &ApprovalWait{Approval: a, Again: true}
	case errors.Is(err, ErrApprovalDenied):
		return &a, &ApprovalDenial{Approval: a}
	case err != nil:
		return nil, err
	}
	return &a, nil
}
