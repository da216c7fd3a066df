package agent

import (
	"fmt"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// boundTool is a tool as one agent holds it.
type boundTool struct {
	tool    *tools.Tool
	binding Binding
	name    string // the function name the model sees (unique per agent)
}

// loopBinding is the engine's view of a binding.
func (b boundTool) loopBinding() loop.Binding {
	lb := loop.Binding{LoopResponses: b.binding.LoopResponses, Effect: b.binding.Effect,
		Bulk: b.binding.Bulk, BulkValues: b.binding.BulkValues}
	if h := b.binding.DatasetTTLHours; h > 0 {
		lb.DatasetTTL = time.Duration(h * float64(time.Hour))
	}
	if l := b.binding.Limits; l != nil {
		lb.Budget = l.Budget()
	}
	return lb
}

// resolveBindings expands an agent's entries into its tools, in entry
// order: a toolkit entry gives each of its tools; an entry for one tool
// overrides the toolkit's entry for that tool. Model-facing names are made
// unique per agent by prefixing the provider where two tools collide.
func resolveBindings(d Definition, cat *tools.Catalog) ([]boundTool, error) {
	single := map[string]Binding{}
	for _, b := range d.AgentTools {
		if b.ToolID != "" {
			single[b.ToolID] = b
		}
	}
	var out []boundTool
	seen := map[string]bool{}
	add := func(t *tools.Tool, b Binding) {
		if seen[t.ID] {
			return
		}
		seen[t.ID] = true
		out = append(out, boundTool{tool: t, binding: b, name: t.Name})
	}
	for _, b := range d.AgentTools {
		switch {
		case b.Toolkit != "":
			ts := cat.Provider(b.Toolkit)
			if _, waiting := cat.Waiting(b.Toolkit); len(ts) == 0 && waiting {
				continue // an MCP server not reached yet: its tools join when it answers
			}
			if len(ts) == 0 {
				return nil, fmt.Errorf("agent %s: unknown toolkit %q", d.ID, b.Toolkit)
			}
			for _, t := range ts {
				if own, ok := single[t.ID]; ok {
					add(t, own)
				} else {
					add(t, b)
				}
			}
		default:
			t, ok := cat.Get(b.ToolID)
			if _, waiting := cat.WaitingFor(b.ToolID); !ok && waiting {
				continue // its MCP server has not answered yet
			}
			if !ok {
				return nil, fmt.Errorf("agent %s: unknown tool %q", d.ID, b.ToolID)
			}
			add(t, b)
		}
	}
	counts := map[string]int{}
	for _, bt := range out {
		counts[bt.name]++
	}
	for i := range out {
		if counts[out[i].name] > 1 || reservedName(out[i].name) {
			out[i].name = uniqueName(out[i].tool.Provider + "__" + out[i].tool.Name)
		}
	}
	return out, nil
}

// reservedName reports names of trawl's own meta-tools.
func reservedName(n string) bool {
	switch n {
	case loop.QueryToolResult, loop.FetchToolResult:
		return true
	}
	_, meta := discovery.LookupMeta(n)
	return meta
}

// uniqueName keeps a prefixed name within the 64-character limit.
func uniqueName(n string) string {
	n = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, n)
	if len(n) > 64 {
		n = n[:55] + "_" + tools.Fingerprint(n)[:8]
	}
	return n
}

// ToolNames are the model-facing names of an agent's bound tools.
func ToolNames(d Definition, cat *tools.Catalog) ([]string, error) {
	bound, err := resolveBindings(d, cat)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(bound))
	for i, b := range bound {
		out[i] = b.name
	}
	return out, nil
}

// LoopBinding is the engine's binding of the tool toolID as agent d holds
// it: the tool's own entry, else its toolkit's. ok is false when d does
// not bind the tool. ("Try it as agent" calls a tool the way the agent
// would.)
func LoopBinding(d Definition, cat *tools.Catalog, toolID string) (b loop.Binding, ok bool, err error) {
	bts, err := resolveBindings(d, cat)
	if err != nil {
		return loop.Binding{}, false, err
	}
	for _, bt := range bts {
		if bt.tool.ID == toolID {
			return bt.loopBinding(), true, nil
		}
	}
	return loop.Binding{}, false, nil
}

// ProgressChunk is a looping call's progress report as the stream's
// data-tool-loop-progress chunk: the one conversion from loop to stream,
// for chat turns, workflow runs and streamed invokes alike.
func ProgressChunk(callID, toolName string, p loop.Progress, elapsed time.Duration) stream.Chunk {
	sp := stream.Progress{ToolCallID: callID, ToolName: toolName, Page: p.Page, PagesMax: p.PagesMax,
		Items: p.Items, Requests: p.Requests, RequestsMax: p.RequestsMax, Total: p.Total,
		ElapsedMs: elapsed.Milliseconds(), InFlight: p.InFlight}
	if w := p.Waiting; w != nil {
		sp.RateLimit = &stream.RateLimitWait{Provider: w.Provider, Cause: w.Cause, WaitMs: w.Wait.Milliseconds()}
	}
	if p.ForEach != nil {
		sp.ForEach = &stream.ForEachProgress{Key: p.ForEach.Key, Value: p.ForEach.Value, Index: p.ForEach.Index, Total: p.ForEach.Total}
	}
	if u := p.Upstream; u != nil {
		sp.Upstream = &stream.UpstreamProgress{Progress: u.Progress, Total: u.Total, Message: u.Message}
	}
	return sp.Chunk()
}
