package deploy

import (
	"fmt"
	"net"
)

// TelemetryConfig turns on OpenTelemetry traces (off unless an endpoint
// is set here or in OTEL_EXPORTER_OTLP_ENDPOINT /
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
type TelemetryConfig struct {
	// OTLPEndpoint is an OTLP/HTTP collector URL (http://host:4318).
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// ServiceName names this deployment in traces. Zero: "trawl" (or
	// OTEL_SERVICE_NAME).
	ServiceName string `yaml:"service_name"`
	// SampleRatio is the share of new traces recorded, 0 < r ≤ 1; a
	// caller's sampled traceparent is followed. Zero: 1.
	SampleRatio float64 `yaml:"sample_ratio"`
	// RecordContent puts prompts, answers and tool arguments and results
	// in spans. Zero: never.
	RecordContent bool `yaml:"record_content"`
	// NoPropagate are ids of MCP servers, toolkits or providers whose
	// requests must not carry the trace context (a provider can also say
	// propagate_trace: false).
	NoPropagate []string `yaml:"no_propagate"`
}

// MetricsConfig is where GET /metrics is served.
type MetricsConfig struct {
	// Enabled serves GET /metrics on the main listener, behind the admin
	// key. Zero: off (unless Listen is set).
	Enabled bool `yaml:"enabled"`
	// Listen, when set, serves /metrics without auth on this address
	// (for a scraper on a private network). Zero: /metrics on the main
	// listener, behind the admin key.
	Listen string `yaml:"listen"`
}

// checkObserve checks the log, telemetry and metrics settings: the key
// and message of the first fault, or "".
func (c *Config) checkObserve() (key, msg string) {
	if k, m := c.Log.check(); k != "" {
		return k, m
	}
	if r := c.Telemetry.SampleRatio; r < 0 || r > 1 {
		return "telemetry.sample_ratio", fmt.Sprintf("must be between 0 and 1, not %v", r)
	}
	if l := c.Metrics.Listen; l != "" {
		if _, _, err := net.SplitHostPort(l); err != nil {
			return "metrics.listen", fmt.Sprintf("must be host:port, not %q", l)
		}
	}
	return "", ""
}
