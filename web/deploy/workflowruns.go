package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/web/runlease"
)

// WorkflowRunKey is a workflow run's key in the run registry.
func WorkflowRunKey(runID string) string { return workflow.ClaimKey(runID) }

// WorkflowRuns is the store of the deployment's workflow runs (nil unless
// PartsServe).
func (d *Deployment) WorkflowRuns() workflow.RunStore { return d.stores.workflowRuns }

// endLapsedRun records a run whose replica died (its log was ended by
// the run host): a workflow run is marked failed with the reason. A
// chat's thread needs nothing: it was saved after every step. A claim
// with no key is a log a restart left open (its run may be a workflow
// run's).
func (d *Deployment) endLapsedRun(ctx context.Context, c runlease.Claim) {
	if c.Key != WorkflowRunKey(c.RunID) && c.Key != "" {
		return
	}
	r, err := d.stores.workflowRuns.GetSummary(ctx, c.RunID)
	if err != nil || r.Status != workflow.StatusRunning {
		return
	}
	ended := d.now().UTC()
	r.Status, r.Ended, r.Error = workflow.StatusFailed, &ended, lapsedRunText
	if err := d.stores.workflowRuns.PutRun(ctx, r); err != nil {
		d.log.Warn("marking a dead replica's workflow run failed", "run", r.ID, "err", err)
	}
}

// fencedRuns is a run store that writes a run only while a fence key
// holds a value (agent/redisstore: the run's claim).
type fencedRuns interface {
	PutRunFenced(ctx context.Context, r *workflow.Run, fenceKey, fenceValue string) (written bool, err error)
}

// SaveHeldWorkflowRun saves r while its run holds its claim:
// runlease.ErrFenced when it does not. On Redis the check is in the write's
// own script; in one process, a look-up.
func (d *Deployment) SaveHeldWorkflowRun(ctx context.Context, r *workflow.Run) error {
	var fenced func(string, string) (bool, error)
	if fr, ok := d.stores.workflowRuns.(fencedRuns); ok {
		fenced = func(fenceKey, fenceValue string) (bool, error) { return fr.PutRunFenced(ctx, r, fenceKey, fenceValue) }
	}
	return d.runs.SaveHeld(ctx, WorkflowRunKey(r.ID), r.ID, fenced, func() error { return d.stores.workflowRuns.PutRun(ctx, r) })
}

// lapsedText is the error a dead replica's run of key ends with: a
// workflow run's, or a chat turn's.
func lapsedText(key string) string {
	if strings.HasPrefix(key, WorkflowRunKey("")) {
		return lapsedRunText
	}
	return lapsedTurnText
}

// oldWorkflowRuns names the records that held workflow runs, whole,
// before the typed run store: a bbolt bucket, or a Redis hash
// (redisstore.Bucket).
const oldWorkflowRuns = "workflow_runs"

// migrateWorkflowRuns moves the runs of old (nil: none) into to, each
// deleted from old once stored, so a deployment keeps its runs across
// the upgrade and a migration cut short resumes at the next start. It
// reads the keys first and then one run at a time: a bbolt bucket cannot
// be written to while it is read, and old runs hold whole results.
func migrateWorkflowRuns(ctx context.Context, old Records, to workflow.RunStore) error {
	if old == nil {
		return nil
	}
	var keys []string
	if err := old.ForEach(ctx, func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
		return fmt.Errorf("moving the workflow runs to their store: %w", err)
	}
	for _, k := range keys {
		v, ok, err := old.Get(ctx, k)
		if err != nil {
			return fmt.Errorf("moving the workflow runs to their store: %w", err)
		}
		r := new(workflow.Run)
		if !ok || json.Unmarshal(v, r) != nil || r.ID != k {
			continue // not a run: left where it is
		}
		if err := to.PutRun(ctx, r); err != nil {
			return fmt.Errorf("moving workflow run %s to its store: %w", k, err)
		}
		if _, err := old.Delete(ctx, k); err != nil {
			return fmt.Errorf("moving workflow run %s to its store: %w", k, err)
		}
	}
	return nil
}

// migrateBoltWorkflowRuns moves the runs of the embedded store's old
// bucket, if it has one, and drops the bucket once empty.
func migrateBoltWorkflowRuns(db *bolt.DB, to workflow.RunStore) error {
	name := []byte(oldWorkflowRuns)
	found := false
	_ = db.View(func(tx *bolt.Tx) error { found = tx.Bucket(name) != nil; return nil })
	if !found {
		return nil
	}
	if err := migrateWorkflowRuns(context.Background(), &boltRecords{db: db, name: name}, to); err != nil {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(name).Cursor().First(); k != nil {
			return nil // records that are not runs: kept
		}
		return tx.DeleteBucket(name)
	})
}
