package tools

import (
	"context"
	"fmt"
	"log/slog"
)

// ScrubHandler returns a handler that masks secrets in every record
// before next sees it: the message and the text of every attribute (an
// error, or any other value, is replaced by its masked text when that
// text holds a secret; numbers, times and booleans pass as they are).
// scrub is called for each record, so a logger made before the
// deployment knew all its secrets masks them from when they are known; it
// may return nil (nothing to mask yet). Attributes given to WithAttrs are
// masked with the scrubber of that moment.
func ScrubHandler(next slog.Handler, scrub func() *Scrubber) slog.Handler {
	return scrubHandler{next: next, scrub: scrub}
}

type scrubHandler struct {
	next  slog.Handler
	scrub func() *Scrubber
}

func (h scrubHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	s := h.scrub()
	if s.Empty() {
		return h.next.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, s.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(scrubAttr(s, a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h scrubHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if s := h.scrub(); !s.Empty() {
		clean := make([]slog.Attr, len(attrs))
		for i, a := range attrs {
			clean[i] = scrubAttr(s, a)
		}
		attrs = clean
	}
	return scrubHandler{next: h.next.WithAttrs(attrs), scrub: h.scrub}
}

func (h scrubHandler) WithGroup(name string) slog.Handler {
	return scrubHandler{next: h.next.WithGroup(name), scrub: h.scrub}
}

// scrubAttr is a with its text masked.
func scrubAttr(s *Scrubber, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, s.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, x := range g {
			out[i] = scrubAttr(s, x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		var text string
		if err, ok := v.Any().(error); ok {
			text = err.Error()
		} else {
			text = fmt.Sprint(v.Any())
		}
		if clean := s.String(text); clean != text {
			return slog.String(a.Key, clean)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
