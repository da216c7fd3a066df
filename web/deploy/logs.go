package deploy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// LogConfig is how trawl writes its operational logs.
type LogConfig struct {
	// Format is "text" (key=value, the default) or "json".
	Format string `yaml:"format"`
	// Level is debug, info (the default), warn or error.
	Level string `yaml:"level"`
}

func (lc LogConfig) level() (slog.Level, error) {
	switch strings.ToLower(lc.Level) {
	case "", "info":
		return slog.LevelInfo, nil
	case "debug":
		return slog.LevelDebug, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("must be debug, info, warn or error, not %q", lc.Level)
}

func (lc LogConfig) check() (key, msg string) {
	switch lc.Format {
	case "", "text", "json":
	default:
		return "log.format", fmt.Sprintf("must be json or text, not %q", lc.Format)
	}
	if _, err := lc.level(); err != nil {
		return "log.level", err.Error()
	}
	return "", ""
}

// NewLogger is the logger lc describes, writing to w. Every line logged
// with a request's context carries its request_id and, when the request
// is traced, its trace_id and span_id.
func NewLogger(w io.Writer, lc LogConfig) *slog.Logger {
	lvl, err := lc.level()
	if err != nil {
		lvl = slog.LevelInfo
	}
	opt := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if lc.Format == "json" {
		h = slog.NewJSONHandler(w, opt)
	} else {
		h = slog.NewTextHandler(w, opt)
	}
	return slog.New(contextHandler{h})
}

// withContextIDs makes log's lines carry the ids their context holds
// (a no-op for a logger that already does).
func withContextIDs(log *slog.Logger) *slog.Logger {
	if _, ok := log.Handler().(contextHandler); ok {
		return log
	}
	return slog.New(contextHandler{log.Handler()})
}

// contextHandler adds the request id and the trace context of a record's
// context to the record.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

type requestIDKey struct{}

// RequestID is the id of the request ctx belongs to ("" outside one).
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WithRequestID is ctx carrying the request id id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// carryRequest is base (which outlives the request) carrying the request
// id and trace context of the request context req, for work a request
// starts that goes on after it.
func carryRequest(base, req context.Context) context.Context {
	if id := RequestID(req); id != "" {
		base = WithRequestID(base, id)
	}
	if sp := trace.SpanFromContext(req); sp.SpanContext().IsValid() {
		base = trace.ContextWithSpan(base, sp)
	}
	return base
}
