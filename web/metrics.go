package web

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// countStreams counts the clients connected to a run's stream.
func (s *Server) countStreams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().Method == http.MethodPost && !strings.HasSuffix(c.Path(), "/chat") ||
			c.Request().Method == http.MethodGet && !strings.HasSuffix(c.Path(), "/stream") {
			return next(c)
		}
		defer s.tel.CountStream()()
		return next(c)
	}
}

// serveMetrics is GET /metrics on the main listener (admin key).
func (s *Server) serveMetrics(c echo.Context) error {
	h := s.tel.MetricsHandler()
	if h == nil {
		return notFound("metrics are off; set metrics.enabled (or metrics.listen) in the config")
	}
	h.ServeHTTP(c.Response(), c.Request())
	return nil
}

// listenMetrics serves /metrics without auth on metrics.listen until ctx
// ends.
func (s *Server) listenMetrics(ctx context.Context) error {
	if s.cfg.Metrics.Listen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", s.cfg.Metrics.Listen)
	if err != nil {
		return fmt.Errorf("metrics.listen %s: %w", s.cfg.Metrics.Listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.tel.MetricsHandler())
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics listener", "err", err)
		}
	}()
	fmt.Fprintf(s.out, "metrics: http://%s/metrics\n", ln.Addr())
	return nil
}
