package deploy

import (
	"context"

	"github.com/trawl-dev/trawl/agent"
)

// fencedThreads is a thread store that writes a thread only while a
// fence key holds a value (agent/redisstore: the run's claim).
type fencedThreads interface {
	PutThreadFenced(ctx context.Context, t *agent.Thread, fenceKey, fenceValue string) (written bool, err error)
}

// SaveHeldThread stores t, stamped with the time, while run runID holds
// the chat's claim key: runlease.ErrFenced when it does not (a replica
// cut off or paused past its lease must not write its stale thread over
// a turn another replica ran meanwhile). On Redis the check is in the
// write's own script; in one process, a look-up. The write has a context
// of its own, so a cancelled turn is still saved.
func (d *Deployment) SaveHeldThread(ctx context.Context, key, runID string, t *agent.Thread) error {
	var fenced func(string, string) (bool, error)
	if ft, ok := d.threads.(fencedThreads); ok {
		fenced = func(fenceKey, fenceValue string) (bool, error) {
			t.Updated = d.now().UTC()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.runs.t.StoreWait)
			defer cancel()
			return ft.PutThreadFenced(sctx, t, fenceKey, fenceValue)
		}
	}
	return d.runs.SaveHeld(ctx, key, runID, fenced, func() error { return d.saveThread(ctx, t) })
}

// saveThread stores t stamped with the time, on a context of its own: a
// cancelled turn is still saved.
func (d *Deployment) saveThread(ctx context.Context, t *agent.Thread) error {
	t.Updated = d.now().UTC()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.runs.t.StoreWait)
	defer cancel()
	return d.threads.PutThread(sctx, t)
}
