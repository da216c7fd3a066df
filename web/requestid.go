package web

import (
	"log/slog"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/trawl-dev/trawl/web/deploy"
)

// RequestIDHeader carries a request's id: a caller's well-formed one is
// kept, else the server makes one; the response always has it.
const RequestIDHeader = "X-Request-Id"

// validRequestID admits 1–128 characters of letters, digits and - _ . :
// so a caller's id cannot inject anything into a log line or header.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// requestID gives each request its id (in the context and the response
// header) and logs one line per request when it ends.
func (s *Server) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(RequestIDHeader)
		if !validRequestID(id) {
			id = "req_" + randomHex(12)
		}
		ctx := deploy.WithRequestID(req.Context(), id)
		var span trace.Span
		if s.tel.Tracing() {
			req = req.WithContext(ctx)
			ctx, span = s.tel.StartHTTP(req)
			defer func() { deploy.EndHTTP(span, req.Method, routeOf(c), c.Response().Status) }()
		}
		c.SetRequest(req.WithContext(ctx))
		c.Response().Header().Set(RequestIDHeader, id)
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := routeOf(c)
		level := slog.LevelInfo
		if probeRoutes[route] && c.Response().Status < 400 {
			level = slog.LevelDebug // probes and scrapes would drown the log
		}
		s.log.LogAttrs(ctx, level, "request", slog.String("method", req.Method), slog.String("route", route),
			slog.Int("status", c.Response().Status), slog.Int64("bytes", c.Response().Size),
			slog.Duration("duration", time.Since(start)))
		return nil
	}
}

// probeRoutes are logged at debug level when they succeed.
var probeRoutes = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// routeOf is the request's route template.
func routeOf(c echo.Context) string {
	if r := c.Path(); r != "" {
		return r
	}
	return "unmatched"
}

// randomHex is n random bytes, hex-encoded: the ids and tokens the server
// makes.
var randomHex = deploy.RandomHex
