package deploy

import (
	"context"
	"fmt"
	"iter"
	"sync"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/eval"
	"github.com/trawl-dev/trawl/stream"
)

// EvalTarget is the deployment as an evaluation runs it (agent/eval):
// each case a new thread of the agent, played as an experiment run (no
// cache reads) with the case's model, and not kept.
func (d *Deployment) EvalTarget() eval.Target { return evalTarget{d} }

type evalTarget struct{ d *Deployment }

// Model is the configured model: the one the server runs (PartsServe),
// else the config's, built once.
func (t evalTarget) Model() (agent.Model, error) {
	d := t.d
	if d.model != nil {
		return d.model, nil
	}
	d.evalOnce.Do(func() { d.evalModel, d.evalErr = d.newModel() })
	return d.evalModel, d.evalErr
}

func (t evalTarget) Play(ctx context.Context, p eval.Play) (*agent.Thread, error) {
	return t.d.play(ctx, p)
}

// evalState is what the deployment keeps for evaluations: the configured
// model (PartsReplay builds none of its own) and one runner whose model
// is each run's own (modelOf).
type evalState struct {
	evalOnce   sync.Once
	evalModel  agent.Model
	evalErr    error
	playOnce   sync.Once
	playRunner *agent.Runner
	playErr    error
}

type playModelKey struct{}

// ctxModel is the model a play's context carries: one runner serves
// every case of every run, each with its own model.
type ctxModel struct{}

func (ctxModel) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	m, _ := ctx.Value(playModelKey{}).(agent.Model)
	if m == nil {
		return func(yield func(agent.ModelEvent, error) bool) {
			yield(agent.ModelEvent{}, fmt.Errorf("no model for this play"))
		}
	}
	return m.Stream(ctx, req)
}

// resolveAgent is agentID, or for "" the only agent (else "demo").
func (d *Deployment) resolveAgent(agentID string) (agent.Definition, error) {
	if agentID == "" {
		switch defs := d.agents.List(); {
		case len(defs) == 1:
			agentID = defs[0].ID
		default:
			if _, ok := d.agents.Get("demo"); !ok {
				return agent.Definition{}, fmt.Errorf("several agents: name one with --agent")
			}
			agentID = "demo"
		}
	}
	def, ok := d.agents.Get(agentID)
	if !ok {
		return agent.Definition{}, fmt.Errorf("no agent %q", agentID)
	}
	return def, nil
}

// play runs p's messages as the turns of a new thread (see eval.Target).
func (d *Deployment) play(ctx context.Context, p eval.Play) (*agent.Thread, error) {
	def, err := d.resolveAgent(p.Agent)
	if err != nil {
		return nil, err
	}
	agentID := def.ID
	d.playOnce.Do(func() {
		var opts agent.RunnerOptions
		if opts, d.playErr = d.runnerOptions(ctxModel{}, false); d.playErr == nil {
			d.playRunner = agent.NewRunner(opts)
		}
	})
	if d.playErr != nil {
		return nil, d.playErr
	}
	ctx = context.WithValue(ctx, playModelKey{}, p.Model)
	now := d.now().UTC()
	chat := "eval-" + RandomHex(6)
	thread := &agent.Thread{Key: agent.ThreadKey("", agentID, chat), ChatID: chat, AgentID: agentID, Created: now}
	get := func() (agent.Definition, bool) { return d.agents.Get(agentID) }
	if p.Recorded {
		get = func() (agent.Definition, bool) { return replayAgent(d.agents.Get(agentID)) }
	}
	for i, msg := range p.Messages {
		thread.Msgs = append(thread.Msgs, agent.UIMessage{ID: fmt.Sprintf("user_%d", i), Role: agent.RoleUser,
			Parts: []agent.Part{{Type: "text", Text: msg}}})
		err := d.playRunner.Run(ctx, &agent.Turn{
			Agent: get, Thread: thread, Org: d.cfg.Org, Experiment: true,
			Emit: func(c stream.Chunk) error {
				if p.Emit != nil {
					p.Emit(c)
				}
				return nil
			},
		})
		if err != nil {
			return thread, fmt.Errorf("turn %d: %w", i+1, err)
		}
	}
	thread.Updated = d.now().UTC()
	return thread, nil
}
