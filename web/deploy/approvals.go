package deploy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
)

// The deployment's part of approvals, apart from any HTTP: its inbox on
// its store, the gate of the doors other than chat, and one call as an
// agent holds the tool (`trawl call --agent`).

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

// Gate is the approval gate of the deployment's doors other than chat.
func (d *Deployment) Gate(source string) agent.Gate {
	return agent.Gate{Inbox: d.inbox, Engine: d.engine, Catalog: d.catalog, Source: source}
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
	t, err := d.findTool(toolID)
	if err != nil {
		return nil, err
	}
	bc, bound, err := agent.Bind(def, d.catalog, d.engine, t.ID)
	if err != nil {
		return nil, err
	}
	if !bound {
		return nil, fmt.Errorf("agent %q does not bind %s", agentID, t.ID)
	}
	call := loop.Call{Tool: t, Args: args, Scope: loop.Scope{Org: d.cfg.Org, Thread: "cli"}, Binding: bc.Binding, Progress: progress}
	gate := d.Gate("cli")
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
