package deploy

import (
	"context"
	"fmt"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
)

// Replay plays a recorded conversation against the live tools as an
// experiment run (it never reads the dataset cache): each turn's user
// message is sent to agentID ("" means the only agent, or "demo") and the
// replay model plays the recorded steps while the tools run. emit receives
// every chunk (may be nil). It returns the resulting thread.
func (s *Deployment) Replay(ctx context.Context, t *agent.Transcript, agentID string, emit func(stream.Chunk)) (*agent.Thread, error) {
	if agentID == "" {
		switch defs := s.agents.List(); {
		case len(defs) == 1:
			agentID = defs[0].ID
		default:
			if _, ok := s.agents.Get("demo"); !ok {
				return nil, fmt.Errorf("several agents: name one with --agent")
			}
			agentID = "demo"
		}
	}
	def, ok := s.agents.Get(agentID)
	if !ok {
		return nil, fmt.Errorf("no agent %q", agentID)
	}
	names, err := s.toolNames(def)
	if err != nil {
		return nil, err
	}
	if err := t.Validate(names); err != nil {
		return nil, err
	}
	// The deployment's runner options (discovery budget, telemetry), with
	// the transcript as the model.
	opts, err := s.runnerOptions(agent.NewReplay(t, agent.ReplayOptions{}), false)
	if err != nil {
		return nil, err
	}
	runner := agent.NewRunner(opts)
	now := s.now().UTC()
	chat := "replay-" + RandomHex(6)
	thread := &agent.Thread{Key: agent.ThreadKey("", agentID, chat), ChatID: chat, AgentID: agentID, Created: now}
	for i, turn := range t.Turns {
		thread.Msgs = append(thread.Msgs, agent.UIMessage{ID: fmt.Sprintf("user_%d", i), Role: agent.RoleUser,
			Parts: []agent.Part{{Type: "text", Text: turn.User}}})
		err := runner.Run(ctx, &agent.Turn{
			Agent:  func() (agent.Definition, bool) { return replayAgent(s.agents.Get(agentID)) },
			Thread: thread, Org: s.cfg.Org, Experiment: true,
			Emit: func(c stream.Chunk) error {
				if emit != nil {
					emit(c)
				}
				return nil
			},
		})
		if err != nil {
			return thread, fmt.Errorf("turn %d: %w", i, err)
		}
	}
	thread.Updated = s.now().UTC()
	if s.threads == nil { // a replay of its own (trawl replay): nothing to keep it in
		return thread, nil
	}
	return thread, s.threads.PutThread(ctx, thread)
}

// replayAgent is def as a replay runs it: a recording cannot write a
// correction, so answer_check revise only warns (the driver checks the
// answers itself: agent.CheckAnswer).
func replayAgent(def agent.Definition, ok bool) (agent.Definition, bool) {
	if def.AnswerCheck == agent.AnswerCheckRevise {
		def.AnswerCheck = agent.AnswerCheckWarn
	}
	return def, ok
}

// toolNames are the function names the agent offers a model, meta-tools
// included.
func (s *Deployment) toolNames(def agent.Definition) ([]string, error) {
	names, err := agent.ToolNames(def, s.catalog)
	if err != nil {
		return nil, err
	}
	for _, rt := range s.results.Tools() {
		names = append(names, rt.Name)
	}
	return names, nil
}
