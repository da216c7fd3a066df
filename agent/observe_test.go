package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestTurnSpansFollowGenAI: a turn of two steps (a tool call, then the
// answer) gives invoke_agent → step → chat and execute_tool → tool_call,
// with the GenAI attributes; no content is recorded by default; the turn
// metrics count it.
func TestTurnSpansFollowGenAI(t *testing.T) {
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent {
			evs := call("c1", "list_items", `{"_all_pages":true}`)
			evs[len(evs)-1].Usage = Usage{PromptTokens: 120, CompletionTokens: 7}
			return evs
		},
	}}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	up := upstream(t)
	cat := testCatalog(t, up.URL)
	results := loop.NewRetrieval(loop.RetrievalOptions{})
	eng := loop.New(loop.Options{Caller: tools.NewInvoker(tools.InvokerOptions{}), Results: results,
		Clock: paginate.NewFakeClock(time.Now()), TracerProvider: tp})
	r := NewRunner(RunnerOptions{Model: m, Engine: eng, Retrieval: results, Catalog: cat, ModelName: "gpt-test",
		TracerProvider: tp, MeterProvider: mp})
	def := Definition{ID: "helper", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	if err := r.Run(context.Background(), turn(def, &recorder{})); err != nil {
		t.Fatal(err)
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	var names []string
	for _, s := range rec.Ended() {
		byID[s.SpanContext().SpanID().String()] = s
	}
	parentName := func(s sdktrace.ReadOnlySpan) string {
		if p, ok := byID[s.Parent().SpanID().String()]; ok {
			return p.Name()
		}
		return ""
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			a[kv.Key] = kv.Value
		}
		return a
	}
	var chats int
	for _, s := range rec.Ended() {
		names = append(names, parentName(s)+">"+s.Name())
		a := attrs(s)
		for k, v := range a {
			if strings.Contains(v.String(), "_all_pages") || strings.Contains(v.String(), "how many items") {
				t.Errorf("content in span %s: %s=%s", s.Name(), k, v.String())
			}
		}
		switch s.Name() {
		case "chat gpt-test":
			if parentName(s) != "step" || a["gen_ai.operation.name"].AsString() != "chat" || a["gen_ai.request.model"].AsString() != "gpt-test" {
				t.Errorf("chat span: parent %q %v", parentName(s), a)
			}
			if chats == 0 && (a["gen_ai.usage.input_tokens"].AsInt64() != 120 || a["gen_ai.usage.output_tokens"].AsInt64() != 7 ||
				strings.Join(a["gen_ai.response.finish_reasons"].AsStringSlice(), ",") != "tool_calls") {
				t.Errorf("first chat span: %v", a)
			}
			chats++
		case "execute_tool list_items":
			if parentName(s) != "step" || a["gen_ai.tool.name"].AsString() != "list_items" || a["gen_ai.tool.call.id"].AsString() != "c1" {
				t.Errorf("tool span: parent %q %v", parentName(s), a)
			}
		case "tool_call p.list_items":
			if parentName(s) != "execute_tool list_items" || a["trawl.loop.completion"].AsString() != "complete" {
				t.Errorf("engine span: parent %q %v", parentName(s), a)
			}
		case "step":
			if parentName(s) != "invoke_agent helper" {
				t.Errorf("step parent %q", parentName(s))
			}
		}
	}
	if chats != 2 || len(rec.Ended()) != 7 {
		t.Errorf("spans: %v", names)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch d := mt.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					typ, _ := p.Attributes.Value("type")
					got[mt.Name+typ.AsString()] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[mt.Name] += int64(p.Count)
				}
			}
		}
	}
	for k, w := range map[string]int64{"trawl.turns": 1, "trawl.model.steps": 2, "trawl.model.tokensinput": 120, "trawl.model.tokensoutput": 7,
		"trawl.turn.duration": 1, "trawl.turn.time_to_first_chunk": 1} {
		if got[k] != w {
			t.Errorf("%s = %d, want %d (%v)", k, got[k], w, got)
		}
	}
}

// TestRecordContent: with RecordContent, the prompt and the tool's
// arguments are in the spans.
func TestRecordContent(t *testing.T) {
	m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
		func(ModelRequest) []ModelEvent { return call("c1", "list_items", `{"_all_pages":true}`) },
	}}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r, _ := newTestRunner(t, m, nil)
	r = NewRunner(RunnerOptions{Model: m, Engine: r.opt.Engine, Retrieval: r.opt.Retrieval, Catalog: r.opt.Catalog, TracerProvider: tp, RecordContent: true})
	def := Definition{ID: "helper", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	if err := r.Run(context.Background(), turn(def, &recorder{})); err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			all.WriteString(kv.Value.String())
		}
	}
	if !strings.Contains(all.String(), "how many items") || !strings.Contains(all.String(), "_all_pages") {
		t.Errorf("content not recorded: %s", all.String())
	}
}
