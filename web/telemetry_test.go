package web

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes
// every export and keeps the spans and the raw bodies.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	raw   [][]byte
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected export", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		var ex collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &ex); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.raw = append(r.raw, b)
		for _, rs := range ex.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func pbAttrs(s *tracepb.Span) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		v := kv.Value
		switch {
		case v.GetStringValue() != "":
			m[kv.Key] = v.GetStringValue()
		case v.GetArrayValue() != nil:
			var parts []string
			for _, e := range v.GetArrayValue().Values {
				parts = append(parts, e.GetStringValue())
			}
			m[kv.Key] = strings.Join(parts, ",")
		default:
			m[kv.Key] = strconv.FormatInt(v.GetIntValue(), 10)
		}
	}
	return m
}

func scrape(t *testing.T, ts *testServer) map[string]*dto.MetricFamily {
	t.Helper()
	st, b := ts.do(t, "GET", "/metrics", "", nil)
	if st != 200 {
		t.Fatalf("metrics: %d %s", st, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, b)
	}
	return fams
}

// metricValue sums the samples of family name whose labels include
// want (a counter's or gauge's value; a histogram's sample count).
func metricValue(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	total := 0.0
next:
	for _, m := range f.Metric {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

func histogramSum(fams map[string]*dto.MetricFamily, name string) float64 {
	total := 0.0
	if f := fams[name]; f != nil {
		for _, m := range f.Metric {
			total += m.Histogram.GetSampleSum()
		}
	}
	return total
}

// TestTelemetryEndToEnd: one demo chat turn, traced into an in-process
// OTLP receiver, gives the caller's trace: the HTTP span → invoke_agent →
// step → chat (GenAI attributes) and execute_tool → tool_call (the
// verdict) → one client span per upstream page; the provider's token is
// in no span. /metrics then counts what happened, and a second turn
// asking the same is a cache hit.
func TestTelemetryEndToEnd(t *testing.T) {
	recv := newOTLPReceiver(t)
	ts := startDemo(t, func(c *Config) {
		c.Telemetry.OTLPEndpoint = recv.URL
		c.Telemetry.ServiceName = "trawl-test"
		c.Metrics.Enabled = true
	})
	token := ts.cfg.Providers[0].Auth.Token
	if !strings.HasPrefix(token, "demo_") {
		t.Fatalf("demo token %q", token)
	}
	// The caller's trace context is continued.
	callerTP := sdktrace.NewTracerProvider()
	cctx, callerSpan := callerTP.Tracer("caller").Start(context.Background(), "caller")
	h := http.Header{}
	propagation.TraceContext{}.Inject(cctx, propagation.HeaderCarrier(h))
	callerSpan.End()
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("c1", "u1", "How many open orders worth more than 100 do we have?"), "traceparent", h.Get("traceparent"))
	types := strings.Join(chunkTypes(readSSE(t, resp.Body)), " ")
	resp.Body.Close()
	if !strings.Contains(types, "tool-output-available") || !strings.Contains(types, "finish") {
		t.Fatalf("turn: %s", types)
	}
	waitFor(t, func() bool { return ts.runs.Count() == 0 })
	fams := scrape(t, ts)
	resp = ts.post(t, "/v1/agents/demo/chat", "", chatBody("c2", "u1", "How many open orders worth more than 100 do we have?"))
	readSSE(t, resp.Body)
	resp.Body.Close()
	waitFor(t, func() bool { return ts.runs.Count() == 0 })
	fams2 := scrape(t, ts)
	ts.Server.Close() // flushes the spans

	recv.mu.Lock()
	defer recv.mu.Unlock()
	traceID := callerSpan.SpanContext().TraceID()
	byID := map[string]*tracepb.Span{}
	for _, s := range recv.spans {
		byID[hex.EncodeToString(s.SpanId)] = s
	}
	parent := func(s *tracepb.Span) string {
		if p := byID[hex.EncodeToString(s.ParentSpanId)]; p != nil {
			return p.Name
		}
		return ""
	}
	var upstream, pagesSeen int
	var toolCall *tracepb.Span
	seen := map[string]bool{}
	for _, s := range recv.spans {
		if !bytes.Equal(s.TraceId, traceID[:]) {
			continue // the second turn's trace
		}
		seen[s.Name] = true
		a := pbAttrs(s)
		switch {
		case s.Name == "POST /v1/agents/:id/chat":
			if hex.EncodeToString(s.ParentSpanId) != callerSpan.SpanContext().SpanID().String() || a["http.route"] != "/v1/agents/:id/chat" {
				t.Errorf("http span: %v", a)
			}
		case s.Name == "invoke_agent demo":
			if parent(s) != "POST /v1/agents/:id/chat" || a["gen_ai.operation.name"] != "invoke_agent" {
				t.Errorf("turn span: parent %q %v", parent(s), a)
			}
		case strings.HasPrefix(s.Name, "chat "):
			if parent(s) != "step" || a["gen_ai.operation.name"] != "chat" || a["gen_ai.request.model"] == "" || a["gen_ai.response.finish_reasons"] == "" {
				t.Errorf("chat span: parent %q %v", parent(s), a)
			}
			if s.Attributes == nil || !hasKey(s, "gen_ai.usage.input_tokens") || !hasKey(s, "gen_ai.usage.output_tokens") {
				t.Errorf("chat span without usage: %v", a)
			}
		case s.Name == "step":
			if parent(s) != "invoke_agent demo" {
				t.Errorf("step parent %q", parent(s))
			}
		case strings.HasPrefix(s.Name, "execute_tool "):
			if parent(s) != "step" || a["gen_ai.tool.name"] == "" || a["gen_ai.tool.call.id"] == "" {
				t.Errorf("execute_tool span: parent %q %v", parent(s), a)
			}
		case strings.HasPrefix(s.Name, "tool_call "):
			toolCall = s
			if !strings.HasPrefix(parent(s), "execute_tool ") || a["trawl.loop.completion"] == "" || a["trawl.loop.stop_reason"] == "" {
				t.Errorf("tool_call span: parent %q %v", parent(s), a)
			}
		case strings.HasPrefix(s.Name, "GET /"):
			upstream++
			if !strings.HasPrefix(parent(s), "tool_call ") || a["url.template"] == "" || a["trawl.provider"] != "acme" || !hasKey(s, "http.response.status_code") {
				t.Errorf("upstream span: parent %q %v", parent(s), a)
			}
		}
	}
	for _, want := range []string{"POST /v1/agents/:id/chat", "invoke_agent demo", "step"} {
		if !seen[want] {
			t.Errorf("no %q span in %v", want, seen)
		}
	}
	if toolCall == nil || upstream == 0 {
		t.Fatalf("no tool call or upstream spans: %v", seen)
	}
	for _, kv := range toolCall.Attributes {
		if kv.Key == "trawl.loop.pages" {
			pagesSeen = int(kv.Value.GetIntValue())
		}
	}
	t.Logf("%d spans in the turn's trace, %d upstream requests, %d pages", len(seen), upstream, pagesSeen)
	if pagesSeen == 0 || pagesSeen > upstream {
		t.Errorf("tool call says %d pages; %d upstream spans", pagesSeen, upstream)
	}
	// The provider's token is in no span, attribute or event.
	for _, b := range recv.raw {
		if bytes.Contains(b, []byte(token)) {
			t.Fatalf("the provider token is in an exported span")
		}
	}
	// The first scrape counts the first turn.
	if v := metricValue(fams, "trawl_turns_total", map[string]string{"agent": "demo", "outcome": "ok"}); v != 1 {
		t.Errorf("turns = %v", v)
	}
	if v := metricValue(fams, "trawl_upstream_requests_total", map[string]string{"provider": "acme", "status_class": "2xx"}); v != float64(upstream) {
		t.Errorf("upstream requests = %v; %d upstream spans", v, upstream)
	}
	if v := histogramSum(fams, "trawl_walk_pages"); v != float64(pagesSeen) {
		t.Errorf("pages walked = %v, want %d", v, pagesSeen)
	}
	if v := metricValue(fams, "trawl_model_steps_total", nil); v < 2 {
		t.Errorf("model steps = %v", v)
	}
	if v := metricValue(fams, "trawl_cache_hits_total", nil); v != 0 {
		t.Errorf("cache hits after one turn = %v", v)
	}
	if v := metricValue(fams, "trawl_events_lag_seconds", nil); v < 1 {
		t.Errorf("event-log lag samples = %v", v)
	}
	if v := metricValue(fams, "trawl_results_held", nil); v < 1 {
		t.Errorf("stored results held = %v", v)
	}
	if v := metricValue(fams, "trawl_cache_size_bytes", nil); v <= 0 {
		t.Errorf("cache bytes = %v", v)
	}
	if v := metricValue(fams, "trawl_runs_active", nil); v != 0 {
		t.Errorf("active runs = %v", v)
	}
	if v := metricValue(fams, "trawl_turn_duration_seconds", nil); v != 1 {
		t.Errorf("turn duration samples = %v", v)
	}
	// The second turn asked the same: one cache hit, no new upstream
	// request.
	if v := metricValue(fams2, "trawl_cache_hits_total", nil); v != 1 {
		t.Errorf("cache hits after the second turn = %v", v)
	}
	if v := metricValue(fams2, "trawl_upstream_requests_total", nil); v != float64(upstream) {
		t.Errorf("upstream requests after the cache hit = %v, want %d", v, upstream)
	}
	if v := metricValue(fams2, "trawl_turns_total", map[string]string{"agent": "demo"}); v != 2 {
		t.Errorf("turns = %v", v)
	}
}

func hasKey(s *tracepb.Span, key string) bool {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return true
		}
	}
	return false
}

// TestMetricsOffAndAuth: /metrics is off by default (404) and needs the
// admin key when on.
func TestMetricsOffAndAuth(t *testing.T) {
	ts := startDemo(t, nil)
	if st, _ := ts.do(t, "GET", "/metrics", "", nil); st != 404 {
		t.Errorf("metrics off: %d", st)
	}
	if ts.tel.Tracing() || ts.tel.MetricsHandler() != nil {
		t.Errorf("telemetry on by default")
	}
	on := startDemo(t, func(c *Config) { c.Metrics.Enabled = true })
	if st, _ := on.do(t, "GET", "/metrics", "-", nil); st != 401 {
		t.Errorf("metrics without the key: %d", st)
	}
}

// TestMetricsListenAndEnv: metrics.listen serves /metrics without auth on
// its own address (deploy's TestTelemetrySetup: the environment and bad
// settings).
func TestMetricsListenAndEnv(t *testing.T) {
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Metrics.Listen = "127.0.0.1:0"
	out := &syncBuffer{}
	srv, err := New(context.Background(), cfg, Options{Stdout: out, Logger: NewLogger(io.Discard, LogConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() { cancel(); <-done; srv.Close() }()
	var addr string
	waitFor(t, func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if rest, ok := strings.CutPrefix(line, "metrics: http://"); ok {
				addr = strings.TrimSuffix(rest, "/metrics")
			}
		}
		return addr != ""
	})
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "trawl_runs_active") {
		t.Errorf("metrics listener: %d %.300s", resp.StatusCode, b)
	}

}
