package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools"
)

// The resources and prompts of the upstream MCP servers an agent binds
// (a toolkit, or tools, of an mcp_servers entry) are passed through to
// its MCP clients: resources/list, resources/templates/list and
// resources/read; prompts/list and prompts/get. Only those servers' —
// an agent's clients reach nothing else of the deployment's — and each
// answer masked like a tool's. The lists are the servers' together, in
// the agent's order, read whole (trawl answers them in one page); a
// prompt whose name two servers share is offered as server__name.

// upstreams are the MCP servers agent def binds, in its order, that the
// deployment connected.
func (s *Server) upstreams(def agent.Definition) []*tools.MCPSource {
	var out []*tools.MCPSource
	add := func(id string) {
		if src := s.dep.MCP(id); src != nil && !slices.Contains(out, src) {
			out = append(out, src)
		}
	}
	for _, b := range def.AgentTools {
		switch {
		case b.Toolkit != "":
			add(b.Toolkit)
		case b.ToolID != "":
			if t, ok := s.dep.Catalog().Get(b.ToolID); ok && t.Kind == tools.KindMCP {
				add(t.Provider)
			}
		}
	}
	return out
}

// upstreamsOf is upstreams of the entry's agent as it is defined now.
func (s *Server) upstreamsOf(e *entry) []*tools.MCPSource {
	def, ok := s.agents.Get(e.agentID)
	if !ok {
		return nil
	}
	return s.upstreams(def)
}

// private is the cache hint of what is passed through: the agent's, so
// the caller's; never fresh for long (2026-07-28 clients require one).
var private = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}

// errNoUpstream answers a resource or prompt request for an agent that
// binds no MCP server offering them.
var errNoUpstream = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "this agent's tools come from no MCP server that offers resources or prompts"}

// upstreamMethod serves one of the passed-through methods; handled is
// false for any other method.
func (s *Server) upstreamMethod(ctx context.Context, e *entry, method string, req mcp.Request) (res mcp.Result, handled bool, err error) {
	switch method {
	case "resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get":
	default:
		return nil, false, nil
	}
	srcs := s.upstreamsOf(e)
	switch r := req.(type) {
	case *mcp.ListResourcesRequest:
		out := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}, Cacheable: private}
		err = eachOffering(srcs, true, func(src *tools.MCPSource) error {
			rs, err := src.Resources(ctx)
			out.Resources = append(out.Resources, rs...)
			return err
		})
		return out, true, listErr(err)
	case *mcp.ListResourceTemplatesRequest:
		out := &mcp.ListResourceTemplatesResult{ResourceTemplates: []*mcp.ResourceTemplate{}, Cacheable: private}
		err = eachOffering(srcs, true, func(src *tools.MCPSource) error {
			ts, err := src.ResourceTemplates(ctx)
			out.ResourceTemplates = append(out.ResourceTemplates, ts...)
			return err
		})
		return out, true, listErr(err)
	case *mcp.ReadResourceRequest:
		res, err := s.readResource(ctx, srcs, r.Params.URI)
		return res, true, err
	case *mcp.ListPromptsRequest:
		named, err := s.prompts(ctx, srcs)
		out := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{}, Cacheable: private}
		for _, p := range named {
			cp := *p.prompt
			cp.Name = p.name
			out.Prompts = append(out.Prompts, &cp)
		}
		return out, true, listErr(err)
	case *mcp.GetPromptRequest:
		named, err := s.prompts(ctx, srcs)
		if err != nil {
			return nil, true, err
		}
		for _, p := range named {
			if p.name == r.Params.Name {
				res, err := p.src.GetPrompt(ctx, p.prompt.Name, r.Params.Arguments)
				if err != nil {
					return nil, true, err
				}
				res, err = complete(res)
				return res, true, err
			}
		}
		return nil, true, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no prompt " + quote(r.Params.Name) + "; prompts/list names them"}
	}
	return nil, false, nil
}

// listErr is a list's error: none when no server offers the kind (the
// list is empty).
func listErr(err error) error {
	if errors.Is(err, errNoUpstream) {
		return nil
	}
	return err
}

// eachOffering runs f on each source that offers resources (or prompts):
// an error when none does, or when every one that does failed.
func eachOffering(srcs []*tools.MCPSource, resources bool, f func(*tools.MCPSource) error) error {
	offered, failed := 0, 0
	var last error
	for _, src := range srcs {
		r, p := src.Offers()
		if resources && !r || !resources && !p {
			continue
		}
		offered++
		if err := f(src); err != nil {
			failed++
			last = err
		}
	}
	switch {
	case offered == 0:
		return errNoUpstream
	case failed == offered:
		return last
	}
	return nil // a server that failed is left out; the others' answer stands
}

// readResource reads uri from the first server that has it; when none
// does, the last one's error (a server's not-found as it worded it).
func (s *Server) readResource(ctx context.Context, srcs []*tools.MCPSource, uri string) (*mcp.ReadResourceResult, error) {
	var found *mcp.ReadResourceResult
	err := eachOffering(srcs, true, func(src *tools.MCPSource) error {
		if found != nil {
			return nil
		}
		res, err := src.ReadResource(ctx, uri)
		if err == nil {
			found = res
		}
		return err
	})
	if found != nil {
		if found.CacheScope == "" {
			found.Cacheable = private
		}
		return complete(found)
	}
	return nil, err // every server that offers resources failed (or none offers any)
}

type namedPrompt struct {
	name   string // as trawl's clients see it
	src    *tools.MCPSource
	prompt *mcp.Prompt
}

// prompts are the servers' prompts, a name two share prefixed with the
// server id.
func (s *Server) prompts(ctx context.Context, srcs []*tools.MCPSource) ([]namedPrompt, error) {
	var out []namedPrompt
	err := eachOffering(srcs, false, func(src *tools.MCPSource) error {
		ps, err := src.Prompts(ctx)
		for _, p := range ps {
			out = append(out, namedPrompt{name: p.Name, src: src, prompt: p})
		}
		return err
	})
	count := map[string]int{}
	for _, p := range out {
		count[p.name]++
	}
	for i, p := range out {
		if count[p.name] > 1 {
			out[i].name = p.src.ID() + "__" + strings.TrimSpace(p.name)
		}
	}
	return out, err
}

// complete marks a passed-through result complete (resultType, which
// 2026-07-28 clients require and earlier ones ignore): the SDK sets it
// on what its own handlers return, and only through JSON on another.
func complete[T any](res *T) (*T, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	if b, err = json.Marshal(m); err != nil {
		return nil, err
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
