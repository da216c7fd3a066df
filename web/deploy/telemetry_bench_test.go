package deploy

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// BenchmarkWalkPageTelemetry is the walker's cost per page, upstream time
// excluded (20 pages of 50 items from memory), with telemetry off and on
// (every span sampled into a batch processor that drops them; metrics
// read by a reader): the engine's tool call span and walk metrics, and
// the upstream span and metrics of each page (observedCaller).
func BenchmarkWalkPageTelemetry(b *testing.B) {
	const pages, per = 20, 50
	bodies := make([][]byte, pages+1)
	for p := 1; p <= pages; p++ {
		var items []string
		for i := range per {
			items = append(items, fmt.Sprintf(`{"id":%d,"status":"open"}`, (p-1)*per+i))
		}
		bodies[p] = []byte(`{"data":[` + strings.Join(items, ",") + fmt.Sprintf(`],"total":%d}`, pages*per))
	}
	raw := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		p, _ := strconv.Atoi(fmt.Sprint(req.Args["page"]))
		if p < 1 || p > pages {
			p = 1
		}
		return &tools.Response{Status: 200, Body: bodies[p]}, nil
	})
	intS := &tools.Schema{Type: "integer"}
	tool := &tools.Tool{ID: "p.list_items", Provider: "p", Name: "list_items", Method: "GET", Path: "/items", Origin: "http://127.0.0.1:1",
		Params:   []tools.Param{{Name: "page", In: tools.InQuery, Schema: intS}, {Name: "per_page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer", Maximum: ptr(float64(per))}}},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{"data": {Type: "array"}, "total": {Type: "integer"}}}}
	run := func(b *testing.B, on bool) {
		opt := loop.Options{Caller: raw, Clock: paginate.NewFakeClock(time.Now())}
		if on {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discardSpans{}))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			defer tp.Shutdown(context.Background())
			defer mp.Shutdown(context.Background())
			s := &Deployment{cfg: &Config{}, tel: &Telemetry{prop: propagation.TraceContext{}, mp: mp}}
			s.tel.useTracer(tp)
			if err := s.tel.instruments(s); err != nil {
				b.Fatal(err)
			}
			opt.Caller, opt.TracerProvider, opt.MeterProvider = s.observeCaller(raw), tp, mp
		}
		e := loop.New(opt)
		ctx := context.Background()
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			out, err := e.Call(ctx, loop.Call{Tool: tool, Binding: loop.Binding{LoopResponses: true}, Args: map[string]any{"_all_pages": true}})
			if err != nil || out.Verdict.Pages != pages {
				b.Fatalf("walk: %v %+v", err, out.Verdict)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/pages, "µs/page")
	}
	b.Run("off", func(b *testing.B) { run(b, false) })
	b.Run("on", func(b *testing.B) { run(b, true) })
}

func ptr[T any](v T) *T { return &v }
