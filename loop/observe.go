package loop

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the engine's tracer and instruments; nil (the
// default) when Options name neither a TracerProvider nor a
// MeterProvider, so an engine without telemetry does no work for it.
type instrumentation struct {
	tracer   trace.Tracer
	calls    metric.Int64Counter
	stops    metric.Int64Counter
	duration metric.Float64Histogram
	pages    metric.Int64Histogram
}

// instrumentationName names the engine's tracer and meter.
const instrumentationName = "github.com/trawl-dev/trawl/loop"

func newInstrumentation(tp trace.TracerProvider, mp metric.MeterProvider) *instrumentation {
	if tp == nil && mp == nil {
		return nil
	}
	in := &instrumentation{}
	if tp != nil {
		in.tracer = tp.Tracer(instrumentationName)
	}
	if mp == nil {
		return in
	}
	m := mp.Meter(instrumentationName)
	// Instrument errors only come from invalid names, which these are not.
	in.calls, _ = m.Int64Counter("trawl.tool.calls", metric.WithDescription("Tool calls run by the engine, by tool and completion (error: the call failed)."))
	in.stops, _ = m.Int64Counter("trawl.walk.stops", metric.WithDescription("Walks ended, by stop reason."))
	in.duration, _ = m.Float64Histogram("trawl.walk.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a looping call that walked upstream took."),
		metric.WithExplicitBucketBoundaries(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
	in.pages, _ = m.Int64Histogram("trawl.walk.pages", metric.WithDescription("Pages received per walk."),
		metric.WithExplicitBucketBoundaries(1, 2, 3, 5, 10, 20, 50, 100, 200, 500))
	return in
}

// call starts the observation of one tool call; end records how it went.
func (in *instrumentation) call(ctx context.Context, tool *tools.Tool, looping bool) (context.Context, func(*Outcome, error)) {
	if in == nil {
		return ctx, func(*Outcome, error) {}
	}
	return in.start(ctx, tool, looping)
}

// start is call when observed; apart, so that the unobserved call moves
// nothing to the heap.
func (in *instrumentation) start(ctx context.Context, t *tools.Tool, looping bool) (context.Context, func(*Outcome, error)) {
	start := time.Now()
	span := trace.SpanFromContext(ctx)
	if in.tracer != nil {
		ctx, span = in.tracer.Start(ctx, "tool_call "+t.ID, trace.WithAttributes(
			attribute.String("trawl.tool.id", t.ID), attribute.String("trawl.tool.provider", t.Provider),
			attribute.Bool("trawl.loop.enabled", looping)))
	}
	return ctx, func(out *Outcome, err error) {
		completion := "error"
		var v *Verdict
		if err == nil && out != nil {
			v = out.Verdict
			completion = "plain"
			if v != nil {
				completion = string(v.Completion)
			}
		}
		if in.tracer != nil {
			in.endSpan(span, out, v, err)
		}
		if in.calls == nil {
			return
		}
		tool := attribute.String("tool", t.ID)
		in.calls.Add(ctx, 1, metric.WithAttributes(tool, attribute.String("completion", completion)))
		if v == nil || v.Cache != nil || v.Requests == 0 {
			return // no walk ran: a plain call, a failure, or the cache answered
		}
		in.stops.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", v.StopReason)))
		in.duration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(tool))
		in.pages.Record(ctx, int64(v.Pages), metric.WithAttributes(tool))
	}
}

// endSpan puts the verdict on the tool call's span: never a row, an
// argument or a cursor, only counts and the vocabulary's words.
func (in *instrumentation) endSpan(span trace.Span, out *Outcome, v *Verdict, err error) {
	defer span.End()
	if !span.IsRecording() {
		return
	}
	if err != nil {
		// A tool error's code and status, never its message: it can quote
		// the upstream's error body (tool content). Another error is not
		// described.
		var te *ToolError
		if errors.As(err, &te) {
			span.SetAttributes(attribute.String("error.type", "tool_error"), attribute.String("trawl.error.code", te.Code))
			if te.Status != 0 {
				span.SetAttributes(attribute.Int("http.response.status_code", te.Status))
			}
			span.SetStatus(codes.Error, te.Code)
		} else {
			span.SetAttributes(attribute.String("error.type", "engine_error"))
			span.SetStatus(codes.Error, "the call failed")
		}
		return
	}
	if out == nil {
		return
	}
	span.SetAttributes(attribute.Bool("trawl.view.truncated", out.Truncated))
	if out.Truncated {
		span.AddEvent("guard_stop", trace.WithAttributes(attribute.String("trawl.guard", "size")))
	}
	if v == nil {
		return
	}
	span.SetAttributes(
		attribute.String("trawl.loop.completion", string(v.Completion)),
		attribute.String("trawl.loop.stop_reason", v.StopReason),
		attribute.Bool("trawl.loop.likely_more", v.LikelyMore),
		attribute.Int("trawl.loop.pages", v.Pages),
		attribute.Int("trawl.loop.requests", v.Requests),
		attribute.Int("trawl.loop.retries", v.Retries),
		attribute.Int("trawl.loop.records", v.Records),
		attribute.Int("trawl.loop.rows", v.Rows),
		attribute.Bool("trawl.loop.cache_hit", v.Cache != nil),
	)
	if v.Probes > 0 || v.Shifted {
		span.SetAttributes(attribute.Int("trawl.loop.probes", v.Probes), attribute.Bool("trawl.loop.shifted", v.Shifted))
	}
	if v.Values > 0 {
		span.SetAttributes(attribute.Int("trawl.loop.for_each.values", v.Values),
			attribute.Int("trawl.loop.for_each.errors", len(v.ForEachErrors)),
			attribute.Int("trawl.loop.for_each.skipped", len(v.ForEachSkipped)),
			attribute.Int("trawl.loop.for_each.partial", len(v.ForEachPartial)))
	}
	if strings.HasPrefix(v.StopReason, "budget_") || v.StopReason == "rate_limited" || v.StopReason == "repeated_cursor" {
		span.AddEvent("guard_stop", trace.WithAttributes(attribute.String("trawl.guard", v.StopReason)))
	}
}

// holder is a store that can say what it holds (the memory stores).
type holder interface {
	Len() int
	Bytes() int64
}

// Held is how many stored results r's store holds and their bytes; ok is
// false for a store that cannot say.
func (r *Retrieval) Held() (n int, bytes int64, ok bool) {
	if h, is := r.store.(holder); is {
		return h.Len(), h.Bytes(), true
	}
	return 0, 0, false
}

// Held is how many datasets c's store holds and their bytes; ok is false
// for a store that cannot say.
func (c *DatasetCache) Held() (n int, bytes int64, ok bool) {
	if h, is := c.store.(holder); is {
		return h.Len(), h.Bytes(), true
	}
	return 0, 0, false
}
