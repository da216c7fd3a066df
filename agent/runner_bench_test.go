package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// BenchmarkRunnerStep measures the runner's own cost per step, model and
// upstream time excluded: the model answers instantly with one tool call
// and the caller returns a 50-item page from memory. Each op is one turn
// of two steps (the call, then the answer).
func BenchmarkRunnerStep(b *testing.B) {
	var items []string
	for i := range 50 {
		items = append(items, fmt.Sprintf(`{"id":%d,"status":"open","total":%d}`, i, i*3))
	}
	page := []byte(`{"data":[` + strings.Join(items, ",") + `],"total":50}`)
	caller := paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		return &tools.Response{Status: 200, Body: page}, nil
	})
	cat := tools.NewCatalog()
	intS := &tools.Schema{Type: "integer"}
	cat.Add(&tools.Tool{ID: "p.list_items", Provider: "p", Name: "list_items", Method: "GET", Path: "/items", Origin: "http://127.0.0.1:1",
		Params:   []tools.Param{{Name: "page", In: tools.InQuery, Schema: intS}, {Name: "per_page", In: tools.InQuery, Schema: intS}},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{"data": {Type: "array"}, "total": {Type: "integer"}}}})
	results := loop.NewRetrieval(loop.RetrievalOptions{})
	eng := loop.New(loop.Options{Caller: caller, Results: results, Clock: paginate.NewFakeClock(time.Now())})
	def := Definition{ID: "a", System: "s", AgentTools: []Binding{{ToolID: "p.list_items", LoopResponses: true}}}
	log := stream.NewMemoryLog(stream.MemoryLogOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m := &scriptModel{steps: []func(ModelRequest) []ModelEvent{
			func(ModelRequest) []ModelEvent {
				return call("c1", "list_items", `{"_all_pages":true,"_fields":["id"]}`)
			},
		}}
		r := NewRunner(RunnerOptions{Model: m, Engine: eng, Retrieval: results, Catalog: cat})
		run := fmt.Sprintf("run%d", i)
		log.Open(ctx, run)
		th := &Thread{Key: "k", Msgs: []UIMessage{{ID: "u", Role: RoleUser, Parts: []Part{{Type: "text", Text: "q"}}}}}
		err := r.Run(ctx, &Turn{Agent: func() (Definition, bool) { return def, true }, Thread: th, Org: "o",
			Emit: func(c stream.Chunk) error { _, err := log.Append(ctx, run, c); return err }})
		if err != nil {
			b.Fatal(err)
		}
		log.Close(ctx, run)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/2, "µs/step")
}
