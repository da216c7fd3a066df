package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop/paginate"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func spanAttrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestCallSpansAndMetrics: a walk of 3 pages and a cache hit give two
// tool call spans with their verdicts, and the counters say so.
func TestCallSpansAndMetrics(t *testing.T) {
	up := newUpstream(t, 250)
	clock := paginate.NewFakeClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cache, err := NewDatasetCache(CacheOptions{Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	e := newTestEngine(t, Options{Cache: cache, Clock: clock, TracerProvider: tp, MeterProvider: mp})
	for range 2 {
		if _, err := e.Call(context.Background(), Call{Tool: ordersTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
			Args: map[string]any{"_all_pages": true}}); err != nil {
			t.Fatal(err)
		}
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	walk, hit := spanAttrs(spans[0]), spanAttrs(spans[1])
	if spans[0].Name() != "tool_call acme.list_orders" || walk["trawl.loop.completion"].AsString() != "complete" ||
		walk["trawl.loop.pages"].AsInt64() != 3 || walk["trawl.loop.records"].AsInt64() != 250 || walk["trawl.loop.cache_hit"].AsBool() {
		t.Errorf("walk span %s: %v", spans[0].Name(), walk)
	}
	if !hit["trawl.loop.cache_hit"].AsBool() {
		t.Errorf("hit span: %v", hit)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += p.Value
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					got[m.Name+".count"] += int64(p.Count)
					got[m.Name+".sum"] += p.Sum
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name+".count"] += int64(p.Count)
				}
			}
		}
	}
	want := map[string]int64{"trawl.tool.calls": 2, "trawl.walk.stops": 1, "trawl.walk.pages.count": 1, "trawl.walk.pages.sum": 3, "trawl.walk.duration.count": 1}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %d, want %d (all: %v)", k, got[k], w, got)
		}
	}
}

// TestNoTelemetryNoInstrumentation: an engine without providers keeps
// none.
func TestNoTelemetryNoInstrumentation(t *testing.T) {
	if e := New(Options{}); e.obs != nil {
		t.Errorf("instrumentation without providers")
	}
}

// TestToolErrorSpanHoldsNoContent: a failed call's span has the error's
// code and status, not the upstream's error body.
func TestToolErrorSpanHoldsNoContent(t *testing.T) {
	up := newUpstream(t, 10)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	e := newTestEngine(t, Options{TracerProvider: tp})
	_, err := e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"property_id": "p_bad"}})
	if err == nil {
		t.Fatal("no error for a 404")
	}
	spans := rec.Ended()
	if len(spans) != 1 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	a := spanAttrs(s)
	if a["error.type"].AsString() != "tool_error" || a["http.response.status_code"].AsInt64() != 404 {
		t.Errorf("error span: %v", a)
	}
	for _, kv := range s.Attributes() {
		if strings.Contains(kv.Value.String(), "no such property") {
			t.Errorf("upstream body in %s", kv.Key)
		}
	}
	if strings.Contains(s.Status().Description, "no such property") {
		t.Errorf("upstream body in the status: %q", s.Status().Description)
	}
}
