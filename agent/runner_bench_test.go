package agent

import (
	"context"
	"fmt"
	"iter"
	"slices"
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

// echoModel calls list_items when the last message is the user's and
// answers otherwise, instantly.
type echoModel struct{}

func (echoModel) Stream(ctx context.Context, req ModelRequest) iter.Seq2[ModelEvent, error] {
	return func(yield func(ModelEvent, error) bool) {
		evs := []ModelEvent{{Kind: EventTextDelta, Text: "done"}, {Kind: EventFinish, FinishReason: "stop"}}
		if req.Messages[len(req.Messages)-1].Role == RoleUser {
			evs = call("c1", "list_items", `{"_all_pages":true,"_fields":["id","status","total"]}`)
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// BenchmarkRunnerStepLongThread measures the runner's cost per step on a
// thread of 10 messages and on one of 1,000 (500 earlier turns, each a
// looping walk's result and an answer) or 10,000, interleaved in one run
// so that their ratio is steady. The earlier results are sent as verdicts, and
// fitting the 1,000 messages to the budget must not make a step cost
// more than twice the short thread's. Model and upstream are instant, as
// in BenchmarkRunnerStep.
func BenchmarkRunnerStepLongThread(b *testing.B) {
	var items []string
	for i := range 50 {
		items = append(items, fmt.Sprintf(`{"id":%d,"status":"open","total":%d,"customer":{"name":"Customer %d"}}`, i, i*3, i))
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
	r := NewRunner(RunnerOptions{Model: echoModel{}, ModelName: "gpt-4o-mini", Engine: eng, Retrieval: results, Catalog: cat})
	ctx := context.Background()
	log := stream.NewMemoryLog(stream.MemoryLogOptions{})
	runs := 0
	var lastReport stream.ContextReport
	run := func(th *Thread) {
		runs++
		id := fmt.Sprintf("run%d", runs)
		log.Open(ctx, id)
		err := r.Run(ctx, &Turn{Agent: func() (Definition, bool) { return def, true }, Thread: th, Org: "o",
			Emit: func(c stream.Chunk) error {
				if d, ok := c.(stream.Data); ok && d.Name == stream.ContextName {
					lastReport = d.Data.(stream.ContextReport)
				}
				_, err := log.Append(ctx, id, c)
				return err
			}})
		if err != nil {
			b.Fatal(err)
		}
		log.Close(ctx, id)
	}
	// One real turn gives the assistant message every earlier turn
	// repeats, with its own call id.
	user := func(i int) UIMessage {
		return UIMessage{ID: fmt.Sprint("u", i), Role: RoleUser, Parts: []Part{{Type: "text", Text: fmt.Sprintf("Question %d: how many open items are there, and which are the largest?", i)}}}
	}
	seed := &Thread{Key: "seed", Msgs: []UIMessage{user(0)}}
	run(seed)
	answer := seed.Msgs[1]
	thread := func(key string, n int) *Thread {
		th := &Thread{Key: key}
		for i := 0; len(th.Msgs) < n-1; i++ {
			a := answer
			a.Parts = append([]Part(nil), answer.Parts...)
			for j := range a.Parts {
				if a.Parts[j].IsTool() {
					a.Parts[j].ToolCallID = fmt.Sprintf("call_%d", i)
				}
			}
			th.Msgs = append(th.Msgs, user(i), a)
		}
		th.Msgs = append(th.Msgs, user(n))
		return th
	}
	// Each turn starts from the same thread; like a thread decoded from
	// the store, its slice has room for the turn's answer.
	fresh := func(th *Thread) *Thread {
		return &Thread{Key: th.Key, Msgs: th.Msgs[: len(th.Msgs) : len(th.Msgs)+1]}
	}
	short := thread("short", 10)
	short.Msgs = slices.Grow(short.Msgs, 1)
	// 10,000 messages too: past the budget, a step costs what it sends,
	// not what the thread holds.
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			long := thread(fmt.Sprint("long", n), n)
			long.Msgs = slices.Grow(long.Msgs, 1)
			run(fresh(long)) // the verdicts are read once, as a server's first turn on the thread does
			if lastReport.Compacted == 0 {
				b.Fatalf("the long thread's results are not compacted: %+v", lastReport)
			}
			b.Logf("%d messages, last step: %d characters in %d messages, %d results compacted, %d turns left out",
				n, lastReport.Chars, lastReport.Messages, lastReport.Compacted, lastReport.DroppedTurns)
			var tShort, tLong, cShort, cLong time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start, cStart := time.Now(), processCPU()
				run(fresh(short))
				mid, cMid := time.Now(), processCPU()
				run(fresh(long))
				tShort, tLong = tShort+mid.Sub(start), tLong+time.Since(mid)
				cShort, cLong = cShort+cMid-cStart, cLong+processCPU()-cMid
			}
			steps := float64(2 * b.N) // each turn: the call, then the answer
			b.ReportMetric(float64(tShort.Microseconds())/steps, "µs/step-10msgs")
			b.ReportMetric(float64(tLong.Microseconds())/steps, "µs/step-long")
			b.ReportMetric(float64(tLong)/float64(tShort), "ratio")
			b.ReportMetric(float64(cShort.Microseconds())/steps, "cpu-µs/step-10msgs")
			b.ReportMetric(float64(cLong.Microseconds())/steps, "cpu-µs/step-long")
			b.ReportMetric(float64(cLong)/float64(cShort), "cpu-ratio")
		})
	}
}
