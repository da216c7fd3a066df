package deploy

import (
	"context"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestEventLag: every event read is measured from its append, readers
// of a closed run are not, and a closed run keeps no times.
func TestEventLag(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	l := newLaggedLog(stream.NewMemoryLog(stream.MemoryLogOptions{}), mp.Meter("t"))
	ctx := context.Background()
	if err := l.Open(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Append(ctx, "r", stream.TextDelta{ID: "t", Delta: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	rctx, cancel := context.WithCancel(ctx)
	n := 0
	for _, err := range l.Read(rctx, "r", 0) {
		if err != nil {
			break
		}
		if n++; n == 3 {
			cancel()
		}
	}
	cancel()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	var count uint64
	var minLag float64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == "trawl.events.lag" {
				for _, p := range h.DataPoints {
					count += p.Count
					if v, ok := p.Min.Value(); ok {
						minLag = v
					}
				}
			}
		}
	}
	if count != 3 || minLag < 0.02 {
		t.Errorf("lag samples %d, min %v s; want 3, ≥ 0.02", count, minLag)
	}
	if err := l.Close(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if len(l.at) != 0 {
		t.Errorf("times kept after close: %v", l.at)
	}
}
