package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/deploy"
)

func (s *Server) getWorkflowDef(ctx context.Context, id string) (*workflow.Definition, error) {
	v, ok, err := s.workflowDefs.Get(ctx, id)
	if err != nil || !ok {
		return nil, err
	}
	return workflow.Parse(v)
}

// putWorkflow creates or replaces a workflow definition.
func (s *Server) putWorkflow(c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return badRequest("reading the body: " + err.Error())
	}
	def, err := workflow.Parse(body)
	if err != nil {
		return apiErr(http.StatusBadRequest, "invalid_workflow", err.Error())
	}
	if def.ID == "" {
		def.ID = c.Param("id")
	}
	if def.ID != c.Param("id") {
		return badRequest("id in the body differs from the id in the path")
	}
	if err := def.Validate(s.catalog.Get); err != nil {
		return apiErr(http.StatusBadRequest, "invalid_workflow", err.Error())
	}
	b, err := json.Marshal(def)
	if err != nil {
		return internal(err)
	}
	if err := s.workflowDefs.Put(c.Request().Context(), def.ID, b); err != nil {
		return internal(err)
	}
	return c.JSONBlob(http.StatusOK, b)
}

func (s *Server) getWorkflow(c echo.Context) error {
	def, err := s.getWorkflowDef(c.Request().Context(), c.Param("id"))
	if err != nil {
		return internal(err)
	}
	if def == nil {
		return notFound("no workflow " + strconv.Quote(c.Param("id")))
	}
	return c.JSON(http.StatusOK, def)
}

func (s *Server) listWorkflows(c echo.Context) error {
	out := []json.RawMessage{}
	err := s.workflowDefs.ForEach(c.Request().Context(), func(_ string, v []byte) error {
		out = append(out, append(json.RawMessage(nil), v...))
		return nil
	})
	if err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"workflows": out})
}

func (s *Server) deleteWorkflow(c echo.Context) error {
	found, err := s.workflowDefs.Delete(c.Request().Context(), c.Param("id"))
	if err != nil {
		return internal(err)
	}
	if !found {
		return notFound("no workflow " + strconv.Quote(c.Param("id")))
	}
	return c.NoContent(http.StatusNoContent)
}

// startWorkflowRun runs a workflow and streams the run as a chat turn
// streams. Like a turn, the run is detached from the request: resume it
// at …/runs/{runId}/stream, read its result at …/runs/{runId}.
func (s *Server) startWorkflowRun(c echo.Context) error {
	def, err := s.getWorkflowDef(c.Request().Context(), c.Param("id"))
	if err != nil {
		return internal(err)
	}
	if def == nil {
		return notFound("no workflow " + strconv.Quote(c.Param("id")))
	}
	if err := def.Validate(s.catalog.Get); err != nil {
		// A tool it names is gone since it was stored.
		return apiErr(http.StatusConflict, "invalid_workflow", err.Error())
	}
	runID := "wfr_" + randomHex(12)
	ctx := c.Request().Context()
	run, err := s.runs.Claim(ctx, deploy.WorkflowRunKey(runID), runID)
	if err != nil {
		return internal(err)
	}
	rec := &workflow.Run{ID: runID, Workflow: def.ID, Status: workflow.StatusRunning, Started: s.now().UTC()}
	if err := s.workflowRuns.PutRun(ctx, rec); err != nil {
		s.runs.Drop(run)
		return internal(err)
	}
	if err := s.events.Open(ctx, runID); err != nil {
		s.runs.Drop(run)
		return internal(err)
	}
	// From here the run outlives this process: another replica, or this
	// one after a restart, continues it from its last completed step.
	if err := s.runs.Record(ctx, run, deploy.KindWorkflow, workflowSpec{Definition: def}); err != nil {
		s.runs.Drop(run)
		return internal(err)
	}
	s.runs.Start(run, func(ctx context.Context) { s.runWorkflow(ctx, run, def, rec, nil) })
	c.Response().Header().Set("X-Trawl-Run-Id", runID)
	return s.serveRun(c, deploy.WorkflowRunKey(runID), runID)
}

// workflowSpec is what a workflow run's record keeps to continue it
// elsewhere: the definition as it was when the run started.
type workflowSpec struct {
	Definition *workflow.Definition `json:"definition"`
}

// continueWorkflow continues a workflow run from its record
// (deploy.Continuer): from its last completed step.
func (s *Server) continueWorkflow(ctx context.Context, run *deploy.Run, rec deploy.RunRecord, how deploy.Continuation) (func(context.Context), error) {
	var spec workflowSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil || spec.Definition == nil {
		return nil, fmt.Errorf("workflow run record: %v", err)
	}
	wr, err := s.workflowRuns.GetSummary(ctx, rec.RunID)
	if err != nil {
		return nil, fmt.Errorf("workflow run record: the run: %w", err)
	}
	resume := &workflow.Resume{Tail: how.Tail, By: how.By, Reason: how.Reason, Count: how.Count}
	if len(rec.State) > 0 {
		if err := json.Unmarshal(rec.State, &resume.Checkpoint); err != nil {
			return nil, fmt.Errorf("workflow run record: %w", err)
		}
	}
	return func(ctx context.Context) { s.runWorkflow(ctx, run, spec.Definition, wr, resume) }, nil
}

// runWorkflow runs (or, with resume, continues) a workflow run and saves
// how it ended.
func (s *Server) runWorkflow(ctx context.Context, run *deploy.Run, def *workflow.Definition, rec *workflow.Run, resume *workflow.Resume) {
	runID := rec.ID
	{
		ctx, observed := s.tel.WorkflowRun(ctx, def.ID)
		res, err := s.workflows.Run(ctx, def, workflow.RunInput{Org: s.cfg.Org, RunID: runID,
			Emit: func(ch stream.Chunk) error {
				return s.runs.Emit(context.WithoutCancel(ctx), run, ch)
			},
			Checkpoint: func(ctx context.Context, cp workflow.Checkpoint) error {
				return s.runs.Checkpoint(ctx, run, cp, cp.Sent == "")
			},
			Resume: resume})
		if errors.Is(err, agent.ErrHandOff) {
			return // handed off at a checkpoint: another process continues it
		}
		ended := s.now().UTC()
		rec.Ended, rec.Result, rec.Status = &ended, res, workflow.StatusDone
		switch {
		case ctx.Err() != nil:
			rec.Status = workflow.StatusStopped
		case err != nil || (res != nil && res.Failed != ""):
			rec.Status = workflow.StatusFailed
		}
		observed(string(rec.Status))
		// Saved only while the run holds its claim (as a turn's thread
		// is): once it lapsed, a surviving replica has marked the run
		// failed, and a replica paused or cut off past its lease must
		// not write its "stopped" over that. A short store failure is
		// waited out.
		s.runs.EndRun(ctx, deploy.WorkflowRunKey(runID), runID, "workflow run", nil,
			func(ctx context.Context) error { return s.dep.SaveHeldWorkflowRun(ctx, rec) })
	}
}

// workflowRun is run runId of workflow id as get reads it (GetRun, or
// GetSummary without its result): nil when the workflow has no such run.
func workflowRun(c echo.Context, get func(context.Context, string) (*workflow.Run, error)) (*workflow.Run, error) {
	r, err := get(c.Request().Context(), c.Param("runId"))
	switch {
	case errors.Is(err, workflow.ErrRunNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case r.Workflow != c.Param("id"):
		return nil, nil
	}
	return r, nil
}

// getWorkflowRun returns a run's state and, once it ended, its result.
func (s *Server) getWorkflowRun(c echo.Context) error {
	r, err := workflowRun(c, s.workflowRuns.GetRun)
	if err != nil {
		return internal(err)
	}
	if r == nil {
		return notFound("no such run")
	}
	return c.JSON(http.StatusOK, r)
}

// listWorkflowRuns lists a workflow's runs, newest first, without results.
func (s *Server) listWorkflowRuns(c echo.Context) error {
	out, err := s.workflowRuns.ListRuns(c.Request().Context(), c.Param("id"), 0)
	if err != nil {
		return internal(err)
	}
	if out == nil {
		out = []*workflow.Run{}
	}
	return c.JSON(http.StatusOK, map[string]any{"runs": out})
}

// resumeWorkflowRun streams an active run, wherever it runs (204 when it
// is not running).
func (s *Server) resumeWorkflowRun(c echo.Context) error {
	r, err := workflowRun(c, s.workflowRuns.GetSummary)
	if err != nil {
		return internal(err)
	}
	if r == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return s.serveActive(c, deploy.WorkflowRunKey(r.ID))
}

// stopWorkflowRun ends a running run, wherever it runs.
func (s *Server) stopWorkflowRun(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := workflowRun(c, s.workflowRuns.GetSummary)
	if err != nil {
		return internal(err)
	}
	if r == nil {
		return c.JSON(http.StatusOK, map[string]bool{"stopped": false})
	}
	stopped, ended, err := s.runs.Stop(ctx, deploy.WorkflowRunKey(r.ID))
	if err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusOK, stopAnswer(stopped, ended))
}
