package agent

import (
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
