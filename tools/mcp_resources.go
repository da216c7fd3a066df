package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What an MCP server offers besides its tools — resources, resource
// templates and prompts — read on behalf of trawl's own MCP server, which
// passes them on to its clients. Each answer passes through the
// deployment's scrubber, like a tool's; a protocol error the server
// answered with (an unknown URI, a missing argument) is returned as that
// *jsonrpc.Error, for the client to read.

// Offers reports whether the current session's server declared resources
// and prompts (false, false while none serves calls).
func (s *MCPSource) Offers() (resources, prompts bool) {
	session, err := s.current()
	if err != nil || session == nil {
		return false, false
	}
	init := session.InitializeResult()
	if init == nil || init.Capabilities == nil {
		return false, false
	}
	return init.Capabilities.Resources != nil, init.Capabilities.Prompts != nil
}

// Resources lists every page of the server's resources.
func (s *MCPSource) Resources(ctx context.Context) ([]*mcp.Resource, error) {
	return mcpPages(ctx, s, "listing resources", func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*mcp.Resource, string, error) {
		res, err := cs.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Resources, res.NextCursor, nil
	})
}

// ResourceTemplates lists every page of the server's resource templates.
func (s *MCPSource) ResourceTemplates(ctx context.Context) ([]*mcp.ResourceTemplate, error) {
	return mcpPages(ctx, s, "listing resource templates", func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*mcp.ResourceTemplate, string, error) {
		res, err := cs.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.ResourceTemplates, res.NextCursor, nil
	})
}

// Prompts lists every page of the server's prompts.
func (s *MCPSource) Prompts(ctx context.Context) ([]*mcp.Prompt, error) {
	return mcpPages(ctx, s, "listing prompts", func(ctx context.Context, cs *mcp.ClientSession, cursor string) ([]*mcp.Prompt, string, error) {
		res, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return res.Prompts, res.NextCursor, nil
	})
}

// ReadResource reads one resource by its URI.
func (s *MCPSource) ReadResource(ctx context.Context, uri string) (*mcp.ReadResourceResult, error) {
	return mcpAsk(ctx, s, "reading a resource", func(ctx context.Context, cs *mcp.ClientSession) (*mcp.ReadResourceResult, error) {
		return cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
	})
}

// GetPrompt renders one prompt with its arguments.
func (s *MCPSource) GetPrompt(ctx context.Context, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	return mcpAsk(ctx, s, "getting prompt "+name, func(ctx context.Context, cs *mcp.ClientSession) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: args})
	})
}

// mcpAsk sends one request on the current session within the call
// timeout and masks the answer.
func mcpAsk[T any](ctx context.Context, s *MCPSource, op string, ask func(context.Context, *mcp.ClientSession) (*T, error)) (*T, error) {
	session, err := s.current()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout)
	defer cancel()
	res, err := ask(ctx, session)
	var wire *jsonrpc.Error
	switch {
	case errors.As(err, &wire) && ctx.Err() == nil:
		msg := wire.Message
		if s.scrub != nil {
			msg = s.scrub().String(msg)
		}
		return nil, &jsonrpc.Error{Code: wire.Code, Message: msg}
	case err != nil:
		return nil, s.fail(op, err)
	}
	return masked(s, op, res)
}

// mcpPages reads every page of a list, bounded like the tool list.
func mcpPages[T any](ctx context.Context, s *MCPSource, op string, page func(context.Context, *mcp.ClientSession, string) ([]T, string, error)) ([]T, error) {
	type list struct{ Items []T }
	all, err := mcpAsk(ctx, s, op, func(ctx context.Context, cs *mcp.ClientSession) (*list, error) {
		var out list
		seen := map[string]bool{}
		cursor := ""
		for n := 1; ; n++ {
			items, next, err := page(ctx, cs, cursor)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, items...)
			switch {
			case next == "":
				return &out, nil
			case seen[next]:
				return nil, fmt.Errorf("page %d repeats an earlier cursor", n)
			case n >= maxMCPListPages:
				return nil, fmt.Errorf("more than %d pages", maxMCPListPages)
			}
			seen[next], cursor = true, next
		}
	})
	if err != nil {
		return nil, err
	}
	return all.Items, nil
}

// masked is v with the deployment's secrets masked (v itself when it
// holds none): a server may write its URL key into a resource or prompt.
func masked[T any](s *MCPSource, op string, v *T) (*T, error) {
	if s.scrub == nil || v == nil {
		return v, nil
	}
	scrub := s.scrub()
	if scrub.Empty() {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, s.fail(op, err)
	}
	c := scrub.Bytes(b)
	if string(c) == string(b) {
		return v, nil
	}
	var out T
	if err := json.Unmarshal(c, &out); err != nil {
		return nil, s.fail(op, errors.New("the answer holds a secret and does not read once masked"))
	}
	return &out, nil
}
