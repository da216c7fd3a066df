package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
)

// readyTimeout bounds each check of /readyz.
const readyTimeout = 2 * time.Second

// readyz answers with the deployment's readiness (deploy.Readiness):
// 503 while a store does not answer or the server drains.
func (s *Server) readyz(c echo.Context) error {
	if s.draining.Load() {
		return apiErr(http.StatusServiceUnavailable, "shutting_down", "the server is shutting down")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	r := s.dep.Ready(ctx)
	st := http.StatusOK
	if r.Status == "unavailable" {
		st = http.StatusServiceUnavailable
	}
	return c.JSON(st, r)
}
