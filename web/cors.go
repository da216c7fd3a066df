package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

// What a cross-origin page may use (config cors.allowed_origins): the
// methods of the API, the headers a useChat transport sends (a session
// token in Authorization, JSON bodies, Last-Event-ID on resume), and the
// response headers it may read.
const (
	corsMethods = "GET, POST, PUT, PATCH, DELETE"
	corsHeaders = "Authorization, Content-Type, Last-Event-ID"
	corsExpose  = "X-Vercel-AI-UI-Message-Stream, X-Trawl-Run-Id, Retry-After, WWW-Authenticate"
	corsMaxAge  = "600"
)

var corsAllowedHeaders = map[string]bool{"authorization": true, "content-type": true, "last-event-id": true}

// The MCP route's own: the headers the MCP clients send beside those
// (the revision, the 2025-11-25 session, the 2026-07-28 method and name,
// and parameters a tool declares as headers, Mcp-Param-*) and the ones
// they read (the session id a 2025-11-25 client sends back).
const (
	corsMCPHeaders = corsHeaders + ", Mcp-Protocol-Version, Mcp-Session-Id, Mcp-Method, Mcp-Name"
	corsMCPExpose  = corsExpose + ", Mcp-Session-Id, Mcp-Protocol-Version"
)

var corsMCPAllowedHeaders = map[string]bool{"mcp-protocol-version": true, "mcp-session-id": true, "mcp-method": true, "mcp-name": true}

// mcpPath reports whether path is an agent's MCP endpoint.
func mcpPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v1/agents/")
	id, ok2 := strings.CutSuffix(rest, "/mcp")
	return ok && ok2 && id != "" && !strings.Contains(id, "/")
}

// corsHeaderAllowed reports whether a page may send the request header
// name (lower case) to path.
func corsHeaderAllowed(path, name string) bool {
	if corsAllowedHeaders[name] {
		return true
	}
	return mcpPath(path) && (corsMCPAllowedHeaders[name] || strings.HasPrefix(name, "mcp-param-") && len(name) > len("mcp-param-"))
}

// corsPath reports whether path is open to cross-origin pages: the API,
// not the connect page or the Studio console.
func corsPath(path string) bool {
	return strings.HasPrefix(path, "/v1/") || path == "/healthz" || path == "/readyz"
}

// cors answers preflights and marks responses readable by the allowed
// origins. It runs before routing, so a preflight needs no route of its
// own and no credential (browsers send none with it). Credentials travel
// as a bearer token, never as cookies, so no Allow-Credentials is sent.
func (s *Server) cors(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		origin := r.Header.Get("Origin")
		if origin == "" || !corsPath(r.URL.Path) {
			return next(c)
		}
		h := c.Response().Header()
		h.Add("Vary", "Origin")
		allowed := s.origins[strings.ToLower(origin)]
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !allowed {
				return apiErr(http.StatusForbidden, "forbidden", "this origin may not call the API (cors.allowed_origins)")
			}
			allow := corsHeaders
			if mcpPath(r.URL.Path) {
				allow = corsMCPHeaders
			}
			var params []string // the Mcp-Param-* asked for, named back
			for _, name := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
				if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !corsHeaderAllowed(r.URL.Path, name) {
					return apiErr(http.StatusForbidden, "forbidden", "request header "+name+" is not allowed cross-origin (allowed: "+allow+")")
				}
				if strings.HasPrefix(name, "mcp-param-") {
					params = append(params, name)
				}
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", strings.Join(append([]string{allow}, params...), ", "))
			h.Set("Access-Control-Max-Age", corsMaxAge)
			return c.NoContent(http.StatusNoContent)
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			expose := corsExpose
			if mcpPath(r.URL.Path) {
				expose = corsMCPExpose
			}
			h.Set("Access-Control-Expose-Headers", expose)
		}
		return next(c)
	}
}
