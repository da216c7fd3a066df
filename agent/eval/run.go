package eval

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/prompts"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// Models a run can use.
const (
	// ModelReplay plays each case's transcript (or, for a case with
	// messages only, the configured replay model's recording).
	ModelReplay = "replay"
	// ModelLive is the configured model (an OpenAI-compatible one).
	ModelLive = "live"
)

// Target is what runs the cases: a deployment's agents and tools.
type Target interface {
	// Play runs p.Messages, one turn each, in a new thread of p.Agent
	// with p.Model, as an experiment run (no cache reads). The thread is
	// returned with what ran even when err is not nil.
	Play(ctx context.Context, p Play) (*agent.Thread, error)
	// Model is the configured model (nil: none is configured).
	Model() (agent.Model, error)
}

// Play is one conversation for a Target to run.
type Play struct {
	Agent    string   // "": the target's default agent
	Messages []string // the user messages, one turn each
	Model    agent.Model
	// Recorded says Model plays a recording (the replay model): answers
	// cannot be revised, so answer_check revise only warns.
	Recorded bool
	Emit     func(stream.Chunk) // may be nil
}

// Options configure a run.
type Options struct {
	// Model is ModelReplay or ModelLive. Zero: ModelReplay.
	Model string
	// Agent runs the cases that name none ("": the target's default).
	Agent string
	// Concurrency is how many cases run at once. Zero: 1.
	Concurrency int
	// Repeat runs each case that many times. Zero: 1.
	Repeat int
	// AllowWrites lets the cases' calls write; by default every write is
	// refused before it is sent.
	AllowWrites bool
	// Progress is called after each run of a case (may be nil; called
	// from one goroutine at a time).
	Progress func(done, total int, caseID string, passed bool)
	// Upstream names where the tools' responses came from, for the
	// report (live, record or replay). Zero: live.
	Upstream string
}

// CodeWriteRefused is the RefusedError code of of a write in an evaluation run.
const CodeWriteRefused = "write_refused_in_eval"

// Run runs every case of ds against t and reports. It fails only when
// the run cannot start (no live model, a case that cannot run on the
// model); a case that errors mid-way is a failed check "run".
func Run(ctx context.Context, t Target, ds *Dataset, opt Options) (*Report, error) {
	if opt.Model == "" {
		opt.Model = ModelReplay
	}
	if opt.Upstream == "" {
		opt.Upstream = "live"
	}
	opt.Concurrency = max(opt.Concurrency, 1)
	opt.Repeat = max(opt.Repeat, 1)
	configured, err := t.Model()
	if err != nil {
		return nil, err
	}
	models := make([]func() agent.Model, len(ds.Cases))
	for i, c := range ds.Cases {
		m, err := modelFor(c, opt.Model, configured)
		if err != nil {
			return nil, fmt.Errorf("case %q (line %d): %w", c.ID, c.Line, err)
		}
		models[i] = m
	}
	rep := &Report{Version: ReportVersion, Dataset: ds.Name, Model: opt.Model, Agent: opt.Agent, Repeat: opt.Repeat,
		Upstream: opt.Upstream, AllowWrites: opt.AllowWrites, Started: time.Now().UTC(), Cases: make([]*CaseResult, len(ds.Cases))}
	for i, c := range ds.Cases {
		rep.Cases[i] = &CaseResult{ID: c.ID, Tags: c.Tags, Agent: c.Agent, Samples: make([]*Sample, opt.Repeat)}
	}
	if !opt.AllowWrites {
		ctx = tools.WithWriteGate(ctx, refuseWrites)
	}
	var mu sync.Mutex
	done, total := 0, len(ds.Cases)*opt.Repeat
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opt.Concurrency)
	for r := range opt.Repeat {
		for i, c := range ds.Cases {
			g.Go(func() error {
				s := runCase(gctx, t, c, opt, models[i](), configured)
				mu.Lock()
				defer mu.Unlock()
				rep.Cases[i].Samples[r] = s
				done++
				if opt.Progress != nil {
					opt.Progress(done, total, c.ID, s.Passed)
				}
				return nil
			})
		}
	}
	_ = g.Wait() // runCase reports its errors in the sample
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep.Finished = time.Now().UTC()
	rep.total()
	return rep, nil
}

// refuseWrites is an evaluation's write gate: no write is sent.
func refuseWrites(context.Context) error {
	return &tools.RefusedError{Code: CodeWriteRefused, Msg: "the write was not sent: an evaluation run refuses writes (run it with --allow-writes, against a sandbox, to let them through)"}
}

// modelFor returns what makes the model of a case's run.
func modelFor(c *Case, mode string, configured agent.Model) (func() agent.Model, error) {
	switch mode {
	case ModelReplay:
		if c.Transcript != nil {
			tr := c.Transcript
			return func() agent.Model { return agent.NewReplay(tr, agent.ReplayOptions{}) }, nil
		}
		if rp, ok := configured.(*agent.Replay); ok {
			return func() agent.Model { return rp }, nil
		}
		return nil, errors.New("the replay model needs the case's transcript (or a configured replay model); give one, or run with --model live")
	case ModelLive:
		if configured == nil {
			return nil, errors.New("--model live: the config configures no model (model.provider openai)")
		}
		if _, ok := configured.(*agent.Replay); ok {
			return nil, errors.New("--model live: the configured model is the replay model; configure an OpenAI-compatible one")
		}
		return func() agent.Model { return configured }, nil
	}
	return nil, fmt.Errorf("--model: want replay or live, not %q", mode)
}

// runCase runs one sample of c.
func runCase(ctx context.Context, t Target, c *Case, opt Options, model agent.Model, judgeModel agent.Model) *Sample {
	agentID := c.Agent
	if agentID == "" {
		agentID = opt.Agent
	}
	counted := &countingModel{m: model}
	start := time.Now()
	_, recorded := model.(*agent.Replay)
	thread, err := t.Play(ctx, Play{Agent: agentID, Messages: c.Questions(), Model: counted, Recorded: recorded})
	s := &Sample{LatencyMs: time.Since(start).Milliseconds(), Tokens: counted.tokens()}
	if thread != nil {
		s.Thread = thread.Msgs
		s.Agent = thread.AgentID
	}
	s.ToolCalls = toolCalls(s.Thread)
	for _, tc := range s.ToolCalls {
		s.UpstreamRequests += tc.Requests
	}
	for i := len(s.Thread) - 1; i >= 0; i-- {
		if s.Thread[i].Role == agent.RoleAssistant {
			s.Answer = s.Thread[i].Answer()
			break
		}
	}
	view := sampleView{c: c, msgs: s.Thread, calls: s.ToolCalls, answer: s.Answer, tokens: s.Tokens.Total, reqs: s.UpstreamRequests}
	if err != nil {
		s.Error = err.Error()
		s.Checks = append(s.Checks, Check{Name: CheckRun, Status: Fail, Detail: err.Error()})
	}
	s.Checks = append(s.Checks, honesty(view)...)
	s.Checks = append(s.Checks, expectations(view)...)
	if c.Expect != nil && c.Expect.Rubric != "" {
		s.Checks = append(s.Checks, judge(ctx, model, judgeModel, c, view))
	}
	s.Passed = true
	for _, ch := range s.Checks {
		if ch.Status == Fail {
			s.Passed = false
		}
	}
	return s
}

// judge scores the answer by the case's rubric with the configured model
// (skipped on the replay model: a recording cannot judge).
func judge(ctx context.Context, used, configured agent.Model, c *Case, v sampleView) Check {
	ch := Check{Name: "rubric"}
	_, replayUsed := used.(*agent.Replay)
	_, replayConf := configured.(*agent.Replay)
	if replayUsed || configured == nil || replayConf {
		ch.Status, ch.Detail = Skip, "skipped: the replay model cannot judge a rubric; run with --model live (a configured OpenAI-compatible model) to score it"
		return ch
	}
	var b strings.Builder
	for _, q := range c.Questions() {
		b.WriteString("User: " + q + "\n")
	}
	b.WriteString("\nTool calls:\n")
	for _, tc := range v.calls {
		fmt.Fprintf(&b, "- %s %s: %s\n", tc.Name, tc.Arguments, orNone([]string{string(tc.Verdict)}))
	}
	b.WriteString("\nFinal answer:\n" + v.answer + "\n\nRubric:\n" + c.Expect.Rubric + "\n")
	var out strings.Builder
	for ev, err := range configured.Stream(ctx, agent.ModelRequest{Messages: []agent.Message{
		{Role: agent.RoleSystem, Content: prompts.Text("rubric")},
		{Role: agent.RoleUser, Content: b.String()},
	}}) {
		if err != nil {
			ch.Status, ch.Detail = Fail, "the judge failed: "+err.Error()
			return ch
		}
		if ev.Kind == agent.EventTextDelta {
			out.WriteString(ev.Text)
		}
	}
	verdict := strings.TrimSpace(out.String())
	upper := strings.ToUpper(verdict)
	reason := strings.TrimSpace(strings.TrimLeft(verdict[min(4, len(verdict)):], ": -"))
	switch {
	case strings.HasPrefix(upper, "PASS"):
		ch.Status, ch.Detail = Pass, reason
	case strings.HasPrefix(upper, "FAIL"):
		ch.Status, ch.Detail = Fail, reason
	default:
		ch.Status, ch.Detail = Fail, "the judge's reply is neither PASS nor FAIL: "+quoteShort(verdict)
	}
	return ch
}

// countingModel adds up the usage a model reports.
type countingModel struct {
	m                  agent.Model
	prompt, completion atomic.Int64
}

func (c *countingModel) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	return func(yield func(agent.ModelEvent, error) bool) {
		for ev, err := range c.m.Stream(ctx, req) {
			if err == nil && ev.Kind == agent.EventFinish {
				c.prompt.Add(int64(ev.Usage.PromptTokens))
				c.completion.Add(int64(ev.Usage.CompletionTokens))
			}
			if !yield(ev, err) {
				return
			}
		}
	}
}

func (c *countingModel) tokens() Tokens {
	p, q := int(c.prompt.Load()), int(c.completion.Load())
	return Tokens{Prompt: p, Completion: q, Total: p + q}
}
