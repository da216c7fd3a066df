package web

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/web/mcpserver"
)

// mcpConnections are a caller's connected apps, as in chat.
func (s *Server) mcpConnections(c mcpserver.Caller) agent.Connections {
	return userConnections{s: s, user: c.UserID, session: c.Credentials, sessionHash: c.Session}
}

// serveMCP serves an agent's tools over MCP's Streamable HTTP transport
// (package mcpserver) to the admin key or a session token (requireUser:
// the failed-authentication limit applies, and the session's user,
// runtime credentials and cache scope are the caller's, as in chat). A
// request from a browser page must come from an origin of
// cors.allowed_origins: the DNS-rebinding protection a local server needs.
func (s *Server) serveMCP(c echo.Context) error {
	agentID := c.Param("id")
	if _, ok := s.agents.Get(agentID); !ok {
		return notFound("no agent " + strconv.Quote(agentID))
	}
	r := c.Request()
	if origin := r.Header.Get("Origin"); origin != "" && !s.origins[strings.ToLower(origin)] {
		return apiErr(http.StatusForbidden, "forbidden", "this origin may not call the MCP server (cors.allowed_origins)")
	}
	p := principalOf(c)
	caller := mcpserver.Caller{UserID: p.UserID, CacheScope: p.CacheScope, Credentials: p.Credentials, Session: p.Session,
		Expires: p.Expires}
	s.mcp.ServeHTTP(c.Response(), r.WithContext(mcpserver.WithRequest(r.Context(), agentID, caller)))
	return nil
}
