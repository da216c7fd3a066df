package agent

import (
	"context"
	"errors"
	"iter"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/discovery"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// instrumentation is the runner's tracer and instruments, following the
// OpenTelemetry GenAI conventions: a turn is an invoke_agent span, each
// step a span holding the model call (a chat span) and the step's tool
// calls (execute_tool spans). Nil (the default) when RunnerOptions name
// neither provider: a runner without telemetry does no work for it.
type instrumentation struct {
	tracer  trace.Tracer
	content bool // prompts, answers, tool arguments and results go in spans

	turns, steps, tokens, discovery metric.Int64Counter
	turnDur, firstChunk             metric.Float64Histogram
}

const instrumentationName = "github.com/trawl-dev/trawl/agent"

// Seconds buckets of the turn histograms.
var turnBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300}

func newInstrumentation(tp trace.TracerProvider, mp metric.MeterProvider, content bool) *instrumentation {
	if tp == nil && mp == nil {
		return nil
	}
	in := &instrumentation{content: content}
	if tp != nil {
		in.tracer = tp.Tracer(instrumentationName)
	}
	if mp == nil {
		return in
	}
	m := mp.Meter(instrumentationName)
	in.turns, _ = m.Int64Counter("trawl.turns", metric.WithDescription("Chat turns ended, by agent and outcome (ok, error, aborted)."))
	in.steps, _ = m.Int64Counter("trawl.model.steps", metric.WithDescription("Model calls, by model and finish reason."))
	in.tokens, _ = m.Int64Counter("trawl.model.tokens", metric.WithDescription("Tokens the model server reported, by model and type (input, output)."))
	in.discovery, _ = m.Int64Counter("trawl.discovery.calls", metric.WithDescription("Tool discovery calls the model made, by operation (search, load) and whether they failed."))
	in.turnDur, _ = m.Float64Histogram("trawl.turn.duration", metric.WithUnit("s"), metric.WithDescription("How long a turn took."),
		metric.WithExplicitBucketBoundaries(turnBuckets...))
	in.firstChunk, _ = m.Float64Histogram("trawl.turn.time_to_first_chunk", metric.WithUnit("s"),
		metric.WithDescription("From a turn's start to the model's first streamed event."), metric.WithExplicitBucketBoundaries(turnBuckets...))
	return in
}

// turnObs is one turn's observation, carried in its context.
type turnObs struct {
	agent string
	start time.Time
	first bool // the first model event was seen
}

type turnObsKey struct{}

// turn starts the observation of a turn; end records its outcome.
func (in *instrumentation) turn(ctx context.Context, t *Turn) (context.Context, func(error)) {
	if in == nil {
		return ctx, func(error) {}
	}
	agentID := ""
	if def, ok := t.Agent(); ok {
		agentID = def.ID
	}
	to := &turnObs{agent: agentID, start: time.Now()}
	ctx = context.WithValue(ctx, turnObsKey{}, to)
	span := trace.SpanFromContext(ctx)
	if in.tracer != nil {
		ctx, span = in.tracer.Start(ctx, "invoke_agent "+agentID, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_agent"), attribute.String("gen_ai.agent.id", agentID)))
	}
	return ctx, func(err error) {
		outcome := "ok"
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
			outcome = "aborted"
		default:
			outcome = "error"
		}
		if in.tracer != nil {
			span.SetAttributes(attribute.String("trawl.turn.outcome", outcome))
			if outcome == "error" {
				span.SetStatus(codes.Error, publicError(err))
			}
			span.End()
		}
		if in.turns != nil {
			a := attribute.String("agent", agentID)
			in.turns.Add(ctx, 1, metric.WithAttributes(a, attribute.String("outcome", outcome)))
			in.turnDur.Record(ctx, time.Since(to.start).Seconds(), metric.WithAttributes(a))
		}
	}
}

// step starts a step's span; end records how many tool calls it made.
func (in *instrumentation) step(ctx context.Context, n int) (context.Context, func([]ToolCall, error)) {
	if in == nil || in.tracer == nil {
		return ctx, func([]ToolCall, error) {}
	}
	ctx, span := in.tracer.Start(ctx, "step", trace.WithAttributes(attribute.Int("trawl.step", n)))
	return ctx, func(calls []ToolCall, err error) {
		span.SetAttributes(attribute.Int("trawl.step.tool_calls", len(calls)))
		if err != nil && ctx.Err() == nil {
			span.SetStatus(codes.Error, publicError(err))
		}
		span.End()
	}
}

// stream is m's stream of req observed: a chat span with the request
// model, the finish reason and the token usage, and the step's metrics.
func (in *instrumentation) stream(ctx context.Context, m Model, req ModelRequest) iter.Seq2[ModelEvent, error] {
	if in == nil {
		return m.Stream(ctx, req)
	}
	return func(yield func(ModelEvent, error) bool) {
		span := trace.SpanFromContext(ctx)
		sctx := ctx
		if in.tracer != nil {
			sctx, span = in.tracer.Start(ctx, strings.TrimSpace("chat "+req.Model), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
				attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.request.model", req.Model),
				attribute.Int("trawl.model.messages", len(req.Messages)), attribute.Int("trawl.model.tools", len(req.Tools))))
			if in.content && span.IsRecording() {
				span.SetAttributes(attribute.String("gen_ai.input.messages", messagesText(req.Messages)))
			}
		}
		to, _ := ctx.Value(turnObsKey{}).(*turnObs)
		var usage Usage
		finish := ""
		var text strings.Builder
		var failed error
		defer func() {
			if in.tracer != nil {
				if span.IsRecording() {
					span.SetAttributes(attribute.Int("gen_ai.usage.input_tokens", usage.PromptTokens),
						attribute.Int("gen_ai.usage.output_tokens", usage.CompletionTokens))
					if finish != "" {
						span.SetAttributes(attribute.StringSlice("gen_ai.response.finish_reasons", []string{finish}))
					}
					if in.content {
						span.SetAttributes(attribute.String("gen_ai.output.messages", text.String()))
					}
					if failed != nil {
						span.SetStatus(codes.Error, "the model call failed")
					}
				}
				span.End()
			}
			if in.steps != nil {
				model := attribute.String("model", req.Model)
				reason := finish
				if failed != nil {
					reason = "error"
				}
				in.steps.Add(ctx, 1, metric.WithAttributes(model, attribute.String("finish_reason", reason)))
				in.tokens.Add(ctx, int64(usage.PromptTokens), metric.WithAttributes(model, attribute.String("type", "input")))
				in.tokens.Add(ctx, int64(usage.CompletionTokens), metric.WithAttributes(model, attribute.String("type", "output")))
			}
		}()
		for ev, err := range m.Stream(sctx, req) {
			if to != nil && !to.first {
				to.first = true
				if in.firstChunk != nil {
					in.firstChunk.Record(ctx, time.Since(to.start).Seconds(), metric.WithAttributes(attribute.String("agent", to.agent)))
				}
			}
			if err != nil {
				failed = err
			} else if ev.Kind == EventFinish {
				usage, finish = ev.Usage, ev.FinishReason
			} else if ev.Kind == EventTextDelta && in.content {
				text.WriteString(ev.Text)
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

// tool starts an execute_tool span for c; end records the part it
// produced.
func (in *instrumentation) tool(ctx context.Context, c ToolCall) (context.Context, func(Part)) {
	if in == nil {
		return ctx, func(Part) {}
	}
	return in.startTool(ctx, c)
}

// startTool is tool when observed; apart, so that the unobserved call
// moves nothing to the heap.
func (in *instrumentation) startTool(ctx context.Context, c ToolCall) (context.Context, func(Part)) {
	if in.tracer == nil {
		return ctx, func(p Part) { in.countDiscovery(ctx, c, p) }
	}
	ctx, span := in.tracer.Start(ctx, "execute_tool "+c.Name, trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "execute_tool"), attribute.String("gen_ai.tool.name", c.Name),
		attribute.String("gen_ai.tool.call.id", c.ID), attribute.String("gen_ai.tool.type", "function")))
	return ctx, func(p Part) {
		if span.IsRecording() {
			if in.content {
				span.SetAttributes(attribute.String("gen_ai.tool.call.arguments", c.Arguments),
					attribute.String("gen_ai.tool.call.result", string(p.Output)))
			}
			if p.State == "output-error" {
				span.SetAttributes(attribute.String("error.type", "tool_error"))
				span.SetStatus(codes.Error, "the tool call failed")
			}
		}
		span.End()
		in.countDiscovery(ctx, c, p)
	}
}

// countDiscovery counts a call of a discovery meta tool (the only tool
// names counted here: the model may name anything).
func (in *instrumentation) countDiscovery(ctx context.Context, c ToolCall, p Part) {
	if in.discovery == nil {
		return
	}
	op := ""
	switch c.Name {
	case discovery.MetaSearchTools:
		op = "search"
	case discovery.MetaLoadTool:
		op = "load"
	default:
		return
	}
	in.discovery.Add(ctx, 1, metric.WithAttributes(attribute.String("operation", op), attribute.Bool("failed", p.State == "output-error")))
}

// messagesText is the messages in plain words (record_content only).
func messagesText(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(string(m.Role))
		b.WriteString(": ")
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	return b.String()
}
