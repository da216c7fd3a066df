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
			for _, name := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
				if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !corsAllowedHeaders[name] {
					return apiErr(http.StatusForbidden, "forbidden", "request header "+name+" is not allowed cross-origin (allowed: "+corsHeaders+")")
				}
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", corsMethods)
			h.Set("Access-Control-Allow-Headers", corsHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			return c.NoContent(http.StatusNoContent)
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", corsExpose)
		}
		return next(c)
	}
}
