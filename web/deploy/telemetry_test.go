package deploy

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/trawl-dev/trawl/tools"
)

// TestTelemetrySetup: OTEL_EXPORTER_OTLP_ENDPOINT alone turns traces on; a
// bad endpoint or ratio is refused with its key.
func TestTelemetrySetup(t *testing.T) {
	s := &Deployment{cfg: &Config{}}
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}
	if err := s.setupTelemetry(context.Background(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil || s.tel.tp == nil {
		t.Errorf("env endpoint: %v, traces on %v", err, s.tel.tp != nil)
	}
	for _, c := range s.closers {
		c()
	}
	s = &Deployment{cfg: &Config{Telemetry: TelemetryConfig{OTLPEndpoint: "127.0.0.1:4318"}}}
	if err := s.setupTelemetry(context.Background(), func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "telemetry.otlp_endpoint") {
		t.Errorf("bad endpoint: %v", err)
	}
	bad := DemoConfig()
	bad.Telemetry.SampleRatio = 1.5
	if err := bad.validate(); err == nil || !strings.Contains(err.Error(), "telemetry.sample_ratio") {
		t.Errorf("bad ratio: %v", err)
	}
}

// TestPropagation: a traced upstream request carries traceparent, except
// for a provider that opted out.
func TestPropagation(t *testing.T) {
	var got []string
	var mu sync.Mutex
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		mu.Unlock()
	}))
	defer up.Close()
	tel := &Telemetry{prop: propagation.TraceContext{}}
	tel.useTracer(sdktrace.NewTracerProvider())
	client := tel.httpClient(false)
	ctx, span := tel.tracer.Start(context.Background(), "x")
	defer span.End()
	for _, c := range []context.Context{ctx, context.WithValue(ctx, noPropagateKey{}, true), context.Background()} {
		req, _ := http.NewRequestWithContext(c, "GET", up.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if len(got) != 3 || got[0] != want || got[1] != "" || got[2] != "" {
		t.Errorf("traceparent sent: %q, want %q then none", got, want)
	}
	if (&Telemetry{}).httpClient(false) != nil {
		t.Errorf("a client without traces")
	}
}

// TestInvokerPropagates: through the real invoker, an upstream request
// made under the observed caller carries the upstream span's
// traceparent, and none for a provider with propagate_trace: false.
func TestInvokerPropagates(t *testing.T) {
	var mu sync.Mutex
	got := map[string]string{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Get("traceparent")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	off := false
	s := &Deployment{cfg: &Config{Providers: []ProviderConfig{{ID: "quiet", PropagateTrace: &off}}}, tel: &Telemetry{prop: propagation.TraceContext{}}}
	rec := tracetest.NewSpanRecorder()
	s.tel.useTracer(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	inv := tools.NewInvoker(tools.InvokerOptions{Client: s.tel.httpClient(false)})
	caller := s.observeCaller(inv)
	for _, p := range []string{"loud", "quiet"} {
		tool := &tools.Tool{ID: p + ".get", Provider: p, Name: "get", Kind: tools.KindAPI, Method: "GET", Path: "/" + p, Origin: up.URL}
		resp, err := caller.Call(context.Background(), tools.Request{Tool: tool, Args: map[string]any{}})
		if err != nil || resp.Status != 200 {
			t.Fatalf("%s: %v %+v", p, err, resp)
		}
	}
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	want := "00-" + spans[0].SpanContext().TraceID().String() + "-" + spans[0].SpanContext().SpanID().String() + "-01"
	if got["/loud"] != want || got["/quiet"] != "" {
		t.Errorf("traceparent: %v, want /loud %s and /quiet none", got, want)
	}
	if spans[0].Name() != "GET /loud" {
		t.Errorf("span name %q", spans[0].Name())
	}
}
