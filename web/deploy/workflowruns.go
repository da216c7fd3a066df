package deploy

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/web/runlease"
)

// WorkflowRun is what a run leaves: its state and, once ended, its result.
type WorkflowRun struct {
	ID       string           `json:"id"`
	Workflow string           `json:"workflow"`
	Status   string           `json:"status"` // running, done, failed, stopped
	Started  time.Time        `json:"started"`
	Ended    *time.Time       `json:"ended,omitempty"`
	Result   *workflow.Result `json:"result,omitempty"`
	// Error says why a run failed without a result (its replica died).
	Error string `json:"error,omitempty"`
}

// WorkflowRunKey is a workflow run's key in the run registry.
func WorkflowRunKey(runID string) string { return "workflow-run:" + runID }

// endLapsedRun records a run whose replica died (its log was ended by
// the run host): a workflow run is marked failed with the reason. A
// chat's thread needs nothing: it was saved after every step.
func (s *Deployment) endLapsedRun(ctx context.Context, c runlease.Claim) {
	if c.Key != WorkflowRunKey(c.RunID) {
		return
	}
	v, ok, err := s.stores.workflowRuns.Get(ctx, c.RunID)
	if err != nil || !ok {
		return
	}
	var r WorkflowRun
	if json.Unmarshal(v, &r) != nil || r.Status != "running" {
		return
	}
	ended := s.now().UTC()
	r.Status, r.Ended, r.Error = "failed", &ended, lapsedRunText
	if err := s.SaveWorkflowRun(ctx, r); err != nil {
		s.log.Warn("marking a dead replica's workflow run failed", "run", r.ID, "err", err)
	}
}

// fencedRecords is a store of records that writes one only while a
// fence key holds a value (web/redisstore: the run's claim).
type fencedRecords interface {
	PutFenced(ctx context.Context, k string, v []byte, fenceKey, fenceValue string) (written bool, err error)
}

// SaveHeldWorkflowRun saves r while its run holds its claim:
// runlease.ErrFenced when it does not. On Redis the check is in the write's
// own script; in one process, a look-up.
func (s *Deployment) SaveHeldWorkflowRun(ctx context.Context, r WorkflowRun) error {
	var fenced func(string) (bool, error)
	if fr, ok := s.stores.workflowRuns.(fencedRecords); ok {
		fenced = func(fenceKey string) (bool, error) {
			b, err := json.Marshal(r)
			if err != nil {
				return false, err
			}
			return fr.PutFenced(ctx, r.ID, b, fenceKey, r.ID)
		}
	}
	return s.runs.SaveHeld(ctx, WorkflowRunKey(r.ID), r.ID, fenced, func() error { return s.SaveWorkflowRun(ctx, r) })
}

// SaveWorkflowRun stores r.
func (s *Deployment) SaveWorkflowRun(ctx context.Context, r WorkflowRun) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.stores.workflowRuns.Put(ctx, r.ID, b)
}

// LoadWorkflowRun is run id of workflowID, nil when it has none.
func (s *Deployment) LoadWorkflowRun(ctx context.Context, id, workflowID string) (*WorkflowRun, error) {
	v, ok, err := s.stores.workflowRuns.Get(ctx, id)
	if err != nil || !ok {
		return nil, err
	}
	r := new(WorkflowRun)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, err
	}
	if r.Workflow != workflowID {
		return nil, nil
	}
	return r, nil
}

// WorkflowRuns lists workflowID's runs, newest first, without results.
func (s *Deployment) WorkflowRuns(ctx context.Context, workflowID string) ([]WorkflowRun, error) {
	var out []WorkflowRun
	err := s.stores.workflowRuns.ForEach(ctx, func(_ string, v []byte) error {
		var r WorkflowRun
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if r.Workflow == workflowID {
			r.Result = nil
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.After(out[j].Started) })
	if out == nil {
		out = []WorkflowRun{}
	}
	return out, nil
}

// lapsedText is the error a dead replica's run of key ends with: a
// workflow run's, or a chat turn's.
func lapsedText(key string) string {
	if strings.HasPrefix(key, WorkflowRunKey("")) {
		return lapsedRunText
	}
	return lapsedTurnText
}
