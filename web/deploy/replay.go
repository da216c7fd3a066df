package deploy

import (
	"context"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/eval"
	"github.com/trawl-dev/trawl/stream"
)

// Replay plays a recorded conversation against the live tools as an
// experiment run (it never reads the dataset cache): each turn's user
// message is sent to agentID ("" means the only agent, or "demo") and the
// replay model plays the recorded steps while the tools run. emit receives
// every chunk (may be nil). It returns the resulting thread.
func (s *Deployment) Replay(ctx context.Context, t *agent.Transcript, agentID string, emit func(stream.Chunk)) (*agent.Thread, error) {
	def, err := s.resolveAgent(agentID)
	if err != nil {
		return nil, err
	}
	names, err := s.toolNames(def)
	if err != nil {
		return nil, err
	}
	if err := t.Validate(names); err != nil {
		return nil, err
	}
	questions := make([]string, len(t.Turns))
	for i, turn := range t.Turns {
		questions[i] = turn.User
	}
	thread, err := s.play(ctx, eval.Play{Agent: def.ID, Messages: questions, Model: agent.NewReplay(t, agent.ReplayOptions{}), Recorded: true, Emit: emit})
	if err != nil || s.threads == nil { // a replay of its own (trawl replay): nothing to keep it in
		return thread, err
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
