package deploy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is a deployment's traces and metrics. Its providers are nil
// when off (the default): the packages then skip their instrumentation
// entirely. Metrics use the OpenTelemetry API, like traces, so each
// package has one instrumentation API and no global state; the
// OpenTelemetry Prometheus exporter renders them on /metrics from a
// registry of the server's own.
type Telemetry struct {
	tp      trace.TracerProvider // nil: traces off
	mp      metric.MeterProvider // nil: metrics off
	content bool
	prop    propagation.TextMapPropagator
	tracer  trace.Tracer
	reg     *prometheus.Registry

	upRequests, upRetries, upRateLimited metric.Int64Counter
	upDuration                           metric.Float64Histogram
	workflowRuns                         metric.Int64Counter
	streamClients                        atomic.Int64
}

const webInstrumentation = "github.com/trawl-dev/trawl/web"

// traceEnv are the environment variables that turn on OTLP traces
// without a telemetry.otlp_endpoint.
var traceEnv = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// setupTelemetry builds the providers cfg asks for; closers shut them
// down (flushing the spans still buffered).
func (s *Deployment) setupTelemetry(ctx context.Context, lookup func(string) (string, bool)) error {
	tc := s.cfg.Telemetry
	t := &Telemetry{content: tc.RecordContent, prop: propagation.TraceContext{}}
	s.tel = t
	endpoint := tc.OTLPEndpoint
	fromEnv := false
	for _, k := range traceEnv {
		if v, ok := lookup(k); ok && v != "" {
			fromEnv = true
		}
	}
	if endpoint != "" || fromEnv {
		var opts []otlptracehttp.Option
		if endpoint != "" {
			if u, err := url.Parse(endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return s.cfg.errAt("telemetry.otlp_endpoint", fmt.Sprintf("must be an http(s) URL, not %q", endpoint))
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimRight(endpoint, "/")+"/v1/traces"))
		}
		exp, err := otlptracehttp.New(ctx, opts...)
		if err != nil {
			return fmt.Errorf("telemetry: %w", err)
		}
		name := tc.ServiceName
		if name == "" {
			name, _ = lookup("OTEL_SERVICE_NAME")
		}
		if name == "" {
			name = "trawl"
		}
		ratio := tc.SampleRatio
		if ratio == 0 {
			ratio = 1
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))))
		s.closers = append(s.closers, func() error {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return tp.Shutdown(sctx)
		})
		t.useTracer(tp)
	}
	if s.cfg.Metrics.Enabled || s.cfg.Metrics.Listen != "" {
		t.reg = prometheus.NewRegistry()
		t.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(t.reg), otelprom.WithoutScopeInfo(), otelprom.WithoutTargetInfo())
		if err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
		s.closers = append(s.closers, func() error { return mp.Shutdown(context.Background()) })
		t.mp = mp
		if err := t.instruments(s); err != nil {
			return err
		}
	}
	return nil
}

// useTracer turns traces on with tp.
func (t *Telemetry) useTracer(tp trace.TracerProvider) {
	t.tp = tp
	t.tracer = tp.Tracer(webInstrumentation)
}

// instruments makes the web's own instruments: upstream requests, and
// gauges read from the server's state when scraped.
func (t *Telemetry) instruments(s *Deployment) error {
	m := t.mp.Meter(webInstrumentation)
	t.upRequests, _ = m.Int64Counter("trawl.upstream.requests", metric.WithDescription("Upstream requests, by provider and status class (1xx…5xx, error)."))
	t.upRetries, _ = m.Int64Counter("trawl.upstream.retries", metric.WithDescription("Upstream requests that re-sent a page, by provider."))
	t.upRateLimited, _ = m.Int64Counter("trawl.upstream.rate_limited", metric.WithDescription("Upstream 429 answers, each waited out or ending its walk, by provider."))
	t.upDuration, _ = m.Float64Histogram("trawl.upstream.duration", metric.WithUnit("s"), metric.WithDescription("Upstream request latency, by provider."),
		metric.WithExplicitBucketBoundaries(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
	t.workflowRuns, _ = m.Int64Counter("trawl.workflow.runs", metric.WithDescription("Workflow runs ended, by outcome."))
	active, _ := m.Int64ObservableGauge("trawl.runs.active", metric.WithDescription("Turns and workflow runs running now."))
	clients, _ := m.Int64ObservableGauge("trawl.stream.clients", metric.WithDescription("Clients connected to a run's stream now."))
	hits, _ := m.Int64ObservableCounter("trawl.cache.hits", metric.WithDescription("Dataset cache hits."))
	misses, _ := m.Int64ObservableCounter("trawl.cache.misses", metric.WithDescription("Dataset cache misses."))
	stores, _ := m.Int64ObservableCounter("trawl.cache.stores", metric.WithDescription("Complete walks the dataset cache kept."))
	cacheN, _ := m.Int64ObservableGauge("trawl.cache.datasets", metric.WithDescription("Datasets the cache holds now."))
	cacheB, _ := m.Int64ObservableGauge("trawl.cache.size", metric.WithUnit("By"), metric.WithDescription("Bytes the dataset cache holds now."))
	resN, _ := m.Int64ObservableGauge("trawl.results.held", metric.WithDescription("Stored results (for queryToolResult/fetchToolResult) held now."))
	resB, _ := m.Int64ObservableGauge("trawl.results.size", metric.WithUnit("By"), metric.WithDescription("Bytes of the stored results held now."))
	_, err := m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		o.ObserveInt64(active, int64(s.runs.Count()))
		o.ObserveInt64(clients, t.streamClients.Load())
		if s.cache != nil {
			st := s.cache.Stats()
			o.ObserveInt64(hits, st.Hits)
			o.ObserveInt64(misses, st.Misses)
			o.ObserveInt64(stores, st.Stores)
			if n, b, ok := s.cache.Held(); ok {
				o.ObserveInt64(cacheN, int64(n))
				o.ObserveInt64(cacheB, b)
			}
		}
		if s.results != nil {
			if n, b, ok := s.results.Held(); ok {
				o.ObserveInt64(resN, int64(n))
				o.ObserveInt64(resB, b)
			}
		}
		return nil
	}, active, clients, hits, misses, stores, cacheN, cacheB, resN, resB)
	return err
}

// tracerProvider and meterProvider are what the packages get: nil when
// off.
func (t *Telemetry) tracerProvider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.tp
}

func (t *Telemetry) meterProvider() metric.MeterProvider {
	if t == nil {
		return nil
	}
	return t.mp
}

// TracerProvider and MeterProvider are the deployment's providers for a
// surface that instruments itself (the MCP server); nil when off.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tracerProvider() }

func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meterProvider() }

// Tracing reports whether traces are on.
func (t *Telemetry) Tracing() bool { return t != nil && t.tracer != nil }

// StartHTTP starts a request's server span, continuing the caller's
// traceparent (traces must be on). Only the route template is recorded,
// never the path (a session token can be in it) or the query.
func (t *Telemetry) StartHTTP(req *http.Request) (context.Context, trace.Span) {
	ctx := t.prop.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	return t.tracer.Start(ctx, req.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", req.Method)))
}

// EndHTTP names and ends a request's server span.
func EndHTTP(span trace.Span, method, route string, status int) {
	span.SetName(method + " " + route)
	span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// MetricsHandler renders the registry in the Prometheus text format; nil
// when metrics are off.
func (t *Telemetry) MetricsHandler() http.Handler {
	if t == nil || t.reg == nil {
		return nil
	}
	return promhttp.HandlerFor(t.reg, promhttp.HandlerOpts{})
}

// CountStream counts a client connected to a run's stream until done is
// called (nothing when metrics are off).
func (t *Telemetry) CountStream() (done func()) {
	if t == nil || t.mp == nil {
		return func() {}
	}
	t.streamClients.Add(1)
	return func() { t.streamClients.Add(-1) }
}

// noPropagateKey marks a context whose upstream requests must not carry
// the trace context (propagate_trace: false).
type noPropagateKey struct{}

// observedCaller is the engine's Caller with a client span and the
// upstream metrics per request.
type observedCaller struct {
	next        paginate.Caller
	t           *Telemetry
	noPropagate map[string]bool // provider ids
}

func (s *Deployment) observeCaller(next paginate.Caller) paginate.Caller {
	if s.tel.tp == nil && s.tel.mp == nil {
		return next
	}
	np := map[string]bool{}
	for _, p := range s.cfg.Providers {
		if p.PropagateTrace != nil && !*p.PropagateTrace {
			np[p.ID] = true
		}
	}
	for _, id := range s.cfg.Telemetry.NoPropagate {
		np[id] = true
	}
	return observedCaller{next: next, t: s.tel, noPropagate: np}
}

func (oc observedCaller) Call(ctx context.Context, req tools.Request) (*tools.Response, error) {
	tool := req.Tool
	provider := tool.Provider
	if oc.noPropagate[provider] {
		ctx = context.WithValue(ctx, noPropagateKey{}, true)
	}
	span := trace.SpanFromContext(ctx)
	if oc.t.tracer != nil {
		method := tool.Method
		if method == "" {
			method = "CALL" // an MCP tool
		}
		name := method + " " + tool.Path
		if tool.Path == "" {
			name = method + " " + tool.Name
		}
		ctx, span = oc.t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
			attribute.String("http.request.method", method), attribute.String("url.template", tool.Path),
			attribute.String("trawl.provider", provider), attribute.String("trawl.tool.id", tool.ID),
			attribute.Int("trawl.page", req.Page), attribute.Int("http.request.resend_count", req.Retry)))
		if host := originHost(tool.Origin); host != "" {
			span.SetAttributes(attribute.String("server.address", host))
		}
		if req.Retry > 0 {
			span.AddEvent("retry", trace.WithAttributes(attribute.Int("trawl.attempt", req.Retry)))
		}
	}
	start := time.Now()
	resp, err := oc.next.Call(ctx, req)
	class := "error"
	// A call given up by its caller (a client gone, a walk ended) is not
	// the upstream's failure.
	canceled := err != nil && errors.Is(err, context.Canceled) && errors.Is(ctx.Err(), context.Canceled)
	switch {
	case err == nil && resp != nil:
		class = strconv.Itoa(resp.Status/100) + "xx"
	case canceled:
		class = "canceled"
	}
	if oc.t.tracer != nil {
		if err == nil && resp != nil {
			span.SetAttributes(attribute.Int("http.response.status_code", resp.Status), attribute.Int("http.response.body.size", len(resp.Body)))
			if resp.Status == http.StatusTooManyRequests {
				span.AddEvent("rate_limited", trace.WithAttributes(attribute.String("http.response.header.retry-after", resp.Header.Get("Retry-After"))))
			}
			if resp.Status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(resp.Status))
			}
		} else {
			// The error may quote a URL: only its kind is recorded.
			if canceled {
				span.SetAttributes(attribute.String("trawl.canceled", "by the caller"))
			} else {
				span.SetAttributes(attribute.String("error.type", errorKind(ctx, err)))
				span.SetStatus(codes.Error, "the request failed")
			}
		}
		span.End()
	}
	if oc.t.upRequests != nil {
		p := attribute.String("provider", provider)
		oc.t.upRequests.Add(ctx, 1, metric.WithAttributes(p, attribute.String("status_class", class)))
		oc.t.upDuration.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(p))
		if req.Retry > 0 {
			oc.t.upRetries.Add(ctx, 1, metric.WithAttributes(p))
		}
		if err == nil && resp != nil && resp.Status == http.StatusTooManyRequests {
			oc.t.upRateLimited.Add(ctx, 1, metric.WithAttributes(p))
		}
	}
	return resp, err
}

func errorKind(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "no_response"
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	}
	var ae *tools.ArgError
	if errors.As(err, &ae) {
		return "refused"
	}
	return "transport"
}

func originHost(origin string) string {
	u, err := url.Parse(origin)
	if err != nil {
		return ""
	}
	return u.Hostname()
}

// propagatingTransport adds the W3C trace context of a request's span to
// its headers, unless the context says not to.
type propagatingTransport struct {
	next http.RoundTripper
	prop propagation.TextMapPropagator
}

func (pt propagatingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if ctx.Value(noPropagateKey{}) != nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return pt.next.RoundTrip(req)
	}
	req = req.Clone(ctx) // a RoundTripper must not modify the caller's request
	pt.prop.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return pt.next.RoundTrip(req)
}

// httpClient is the client for upstream APIs and MCP servers: nil (each
// keeps its own default) unless traces are on, when it propagates the
// trace context.
func (t *Telemetry) httpClient(noPropagate bool) *http.Client {
	if t.tp == nil || noPropagate {
		return nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	return &http.Client{Transport: propagatingTransport{next: tr, prop: t.prop}}
}

// mcpClient is the HTTP client of MCP server id (see httpClient).
func (t *Telemetry) mcpClient(tc TelemetryConfig, id string) *http.Client {
	for _, n := range tc.NoPropagate {
		if n == id {
			return nil
		}
	}
	return t.httpClient(false)
}

// WorkflowRun starts a workflow run's span; end records its status
// (done, failed, stopped).
func (t *Telemetry) WorkflowRun(ctx context.Context, workflowID string) (context.Context, func(status string)) {
	span := trace.SpanFromContext(ctx)
	if t.tracer != nil {
		ctx, span = t.tracer.Start(ctx, "invoke_workflow "+workflowID, trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "invoke_workflow"), attribute.String("trawl.workflow.id", workflowID)))
	}
	return ctx, func(status string) {
		if t.tracer != nil {
			span.SetAttributes(attribute.String("trawl.workflow.status", status))
			if status == "failed" {
				span.SetStatus(codes.Error, "the workflow run failed")
			}
			span.End()
		}
		if t.workflowRuns != nil {
			t.workflowRuns.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", status)))
		}
	}
}

// wrapLimiter is the rate limiter l, recording each request's wait
// (trawl_upstream_wait_seconds{provider}) and reporting each provider's
// learned concurrency and permits in flight when metrics are on.
func (t *Telemetry) wrapLimiter(l tools.RateLimiter) tools.RateLimiter {
	if t == nil || t.mp == nil {
		return l
	}
	m := t.mp.Meter(webInstrumentation)
	wait, _ := m.Float64Histogram("trawl.upstream.wait", metric.WithUnit("s"),
		metric.WithDescription("How long upstream requests waited for their provider's rate limit, by provider."),
		metric.WithExplicitBucketBoundaries(0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	if r, ok := l.(tools.LimitReporter); ok {
		conc, _ := m.Int64ObservableGauge("trawl.upstream.concurrency", metric.WithDescription("The concurrency bound learned for a provider after a 429 (0: none, the configured one applies), by provider."))
		inflight, _ := m.Int64ObservableGauge("trawl.upstream.in_flight", metric.WithDescription("Upstream requests holding a rate-limit permit, by provider (on Redis: as this replica last saw them)."))
		_, _ = m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
			for _, st := range r.LimitStatus() {
				attrs := metric.WithAttributes(attribute.String("provider", st.Provider))
				o.ObserveInt64(conc, int64(st.Concurrency), attrs)
				o.ObserveInt64(inflight, int64(st.InFlight), attrs)
			}
			return nil
		}, conc, inflight)
	}
	refused, _ := m.Int64Counter("trawl.upstream.wait_refused", metric.WithDescription(
		"Upstream requests the rate limiter did not send because their provider's limit would have made them wait past the call's time budget, by provider and cause (rate, paused, concurrency)."))
	return observedLimiter{RateLimiter: l, wait: wait, refused: refused}
}

type observedLimiter struct {
	tools.RateLimiter
	wait    metric.Float64Histogram
	refused metric.Int64Counter
}

func (o observedLimiter) Acquire(ctx context.Context, s tools.LimitScope) (tools.Permit, error) {
	p, err := o.RateLimiter.Acquire(ctx, s)
	var rle *tools.RateLimitError
	switch {
	case err == nil:
		o.wait.Record(ctx, p.Waited().Seconds(), metric.WithAttributes(attribute.String("provider", s.Provider)))
	case errors.As(err, &rle):
		o.refused.Add(ctx, 1, metric.WithAttributes(attribute.String("provider", s.Provider), attribute.String("cause", rle.Cause)))
	}
	return p, err
}

// wrapEvents is the event log l, measuring its lag when metrics are on.
func (t *Telemetry) wrapEvents(l stream.EventLog) stream.EventLog {
	if t == nil || t.mp == nil {
		return l
	}
	return newLaggedLog(l, t.mp.Meter(webInstrumentation))
}
