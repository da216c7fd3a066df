package agent

import (
	"context"
	"iter"
	"maps"
	"slices"

	"github.com/trawl-dev/trawl/tools"
)

// turnScrubber is the scrubber of a turn: the deployment's, with the
// caller's runtime credentials.
func (r *Runner) turnScrubber(t *Turn) *tools.Scrubber {
	if r.opt.Scrub == nil {
		return nil
	}
	creds := slices.Sorted(maps.Values(t.Credentials))
	return r.opt.Scrub(creds...)
}

// scrubbedModel is a model whose every event and error has passed through
// a scrubber: text, reasoning and each call's arguments with a bounded
// hold-back (so a secret split across deltas is masked too), what is held
// back flushed before the finish or the error.
type scrubbedModel struct {
	model Model
	scrub *tools.Scrubber
}

func (m scrubbedModel) Stream(ctx context.Context, req ModelRequest) iter.Seq2[ModelEvent, error] {
	if m.scrub.Empty() {
		return m.model.Stream(ctx, req)
	}
	return func(yield func(ModelEvent, error) bool) {
		text, reasoning := m.scrub.Text(), m.scrub.Text()
		args := map[int]*tools.TextScrubber{}
		var calls []int // indices, in the order the calls started
		// flush yields what is held back, in the order the parts began.
		flush := func() bool {
			if s := reasoning.Flush(); s != "" && !yield(ModelEvent{Kind: EventReasoningDelta, Text: s}, nil) {
				return false
			}
			if s := text.Flush(); s != "" && !yield(ModelEvent{Kind: EventTextDelta, Text: s}, nil) {
				return false
			}
			for _, i := range calls {
				if s := args[i].Flush(); s != "" && !yield(ModelEvent{Kind: EventToolCallDelta, Index: i, ArgsDelta: s}, nil) {
					return false
				}
			}
			return true
		}
		for ev, err := range m.model.Stream(ctx, req) {
			if err != nil {
				if flush() {
					yield(ModelEvent{}, m.scrub.Error(err))
				}
				return
			}
			switch ev.Kind {
			case EventTextDelta:
				if ev.Text = text.Next(ev.Text); ev.Text == "" {
					continue
				}
			case EventReasoningDelta:
				if ev.Text = reasoning.Next(ev.Text); ev.Text == "" {
					continue
				}
			case EventToolCallStart:
				ev.ToolCallID, ev.ToolName = m.scrub.String(ev.ToolCallID), m.scrub.String(ev.ToolName)
				if args[ev.Index] == nil {
					calls = append(calls, ev.Index)
				}
				args[ev.Index] = m.scrub.Text()
			case EventToolCallDelta:
				a := args[ev.Index]
				if a == nil {
					ev.ArgsDelta = m.scrub.String(ev.ArgsDelta) // a call never started: the runner drops it
					break
				}
				if ev.ArgsDelta = a.Next(ev.ArgsDelta); ev.ArgsDelta == "" {
					continue
				}
			case EventFinish:
				if !flush() {
					return
				}
			}
			if !yield(ev, nil) {
				return
			}
		}
		flush() // a model that ended without its finish
	}
}
