package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/stream"
	webredis "github.com/trawl-dev/trawl/web/redisstore"
	"github.com/trawl-dev/trawl/web/runlease"
)

// workflowRun is what a run leaves: its state and, once ended, its result.
type workflowRun struct {
	ID       string           `json:"id"`
	Workflow string           `json:"workflow"`
	Status   string           `json:"status"` // running, done, failed, stopped
	Started  time.Time        `json:"started"`
	Ended    *time.Time       `json:"ended,omitempty"`
	Result   *workflow.Result `json:"result,omitempty"`
	// Error says why a run failed without a result (its replica died).
	Error string `json:"error,omitempty"`
}

func (s *Server) getWorkflowDef(ctx context.Context, id string) (*workflow.Definition, error) {
	v, ok, err := s.stores.workflows.Get(ctx, id)
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
	if err := s.stores.workflows.Put(c.Request().Context(), def.ID, b); err != nil {
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
	err := s.stores.workflows.ForEach(c.Request().Context(), func(_ string, v []byte) error {
		out = append(out, append(json.RawMessage(nil), v...))
		return nil
	})
	if err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"workflows": out})
}

func (s *Server) deleteWorkflow(c echo.Context) error {
	found, err := s.stores.workflows.Delete(c.Request().Context(), c.Param("id"))
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
	run, err := s.runs.claim(ctx, workflowRunKey(runID), runID)
	if err != nil {
		return internal(err)
	}
	rec := workflowRun{ID: runID, Workflow: def.ID, Status: "running", Started: s.now().UTC()}
	if err := s.saveWorkflowRun(ctx, rec); err != nil {
		s.runs.drop(run)
		return internal(err)
	}
	if err := s.events.Open(ctx, runID); err != nil {
		s.runs.drop(run)
		return internal(err)
	}
	s.runs.start(run, func(ctx context.Context) {
		ctx, observed := s.tel.workflowRun(ctx, def.ID)
		res, err := s.workflows.Run(ctx, def, workflow.RunInput{Org: s.cfg.Org, RunID: runID,
			Emit: func(ch stream.Chunk) error {
				_, err := s.events.Append(context.WithoutCancel(ctx), runID, ch)
				return err
			}})
		ended := s.now().UTC()
		rec.Ended, rec.Result, rec.Status = &ended, res, "done"
		switch {
		case ctx.Err() != nil:
			rec.Status = "stopped"
		case err != nil || (res != nil && res.Failed != ""):
			rec.Status = "failed"
		}
		observed(rec.Status)
		// Saved only while the run holds its claim (as a turn's thread
		// is): once it lapsed, a surviving replica has marked the run
		// failed, and a replica paused or cut off past its lease must
		// not write its "stopped" over that. A short store failure is
		// waited out.
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer scancel()
		err = retryStore(sctx, func() error { return s.saveHeldWorkflowRun(sctx, rec) })
		if errors.Is(err, errNotHolder) {
			s.log.Warn("not saving the workflow run: it lost its claim, and another replica has ended it", "run", runID)
		} else if err != nil {
			s.log.Error("saving workflow run", "run", runID, "err", err)
		}
	})
	c.Response().Header().Set("X-Trawl-Run-Id", runID)
	return s.runs.serveRun(c, workflowRunKey(runID), runID)
}

// workflowRunKey is a workflow run's key in the run registry.
func workflowRunKey(runID string) string { return "workflow-run:" + runID }

// endLapsedRun records a run whose replica died (its log was ended by
// the run host): a workflow run is marked failed with the reason. A
// chat's thread needs nothing: it was saved after every step.
func (s *Server) endLapsedRun(ctx context.Context, c runlease.Claim) {
	if c.Key != workflowRunKey(c.RunID) {
		return
	}
	v, ok, err := s.stores.workflowRuns.Get(ctx, c.RunID)
	if err != nil || !ok {
		return
	}
	var r workflowRun
	if json.Unmarshal(v, &r) != nil || r.Status != "running" {
		return
	}
	ended := s.now().UTC()
	r.Status, r.Ended, r.Error = "failed", &ended, lapsedRunText
	if err := s.saveWorkflowRun(ctx, r); err != nil {
		s.log.Warn("marking a dead replica's workflow run failed", "run", r.ID, "err", err)
	}
}

// fencedRecords is a store of records that writes one only while a
// fence key holds a value (web/redisstore: the run's claim).
type fencedRecords interface {
	PutFenced(ctx context.Context, k string, v []byte, fenceKey, fenceValue string) error
}

// saveHeldWorkflowRun saves r while its run holds its claim:
// errNotHolder when it does not. On Redis the check is in the write's
// own script; in one process, a look-up.
func (s *Server) saveHeldWorkflowRun(ctx context.Context, r workflowRun) error {
	var fenced func(string) error
	if fr, ok := s.stores.workflowRuns.(fencedRecords); ok {
		fenced = func(fenceKey string) error {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			return fr.PutFenced(ctx, r.ID, b, fenceKey, r.ID)
		}
	}
	return s.runs.saveHeld(ctx, workflowRunKey(r.ID), r.ID, fenced, webredis.ErrFenced, func() error { return s.saveWorkflowRun(ctx, r) })
}

func (s *Server) saveWorkflowRun(ctx context.Context, r workflowRun) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.stores.workflowRuns.Put(ctx, r.ID, b)
}

func (s *Server) loadWorkflowRun(ctx context.Context, id, workflowID string) (*workflowRun, error) {
	v, ok, err := s.stores.workflowRuns.Get(ctx, id)
	if err != nil || !ok {
		return nil, err
	}
	r := new(workflowRun)
	if err := json.Unmarshal(v, r); err != nil {
		return nil, err
	}
	if r.Workflow != workflowID {
		return nil, nil
	}
	return r, nil
}

// getWorkflowRun returns a run's state and, once it ended, its result.
func (s *Server) getWorkflowRun(c echo.Context) error {
	r, err := s.loadWorkflowRun(c.Request().Context(), c.Param("runId"), c.Param("id"))
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
	var out []workflowRun
	err := s.stores.workflowRuns.ForEach(c.Request().Context(), func(_ string, v []byte) error {
		var r workflowRun
		if err := json.Unmarshal(v, &r); err != nil {
			return err
		}
		if r.Workflow == c.Param("id") {
			r.Result = nil
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return internal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Started.After(out[j].Started) })
	if out == nil {
		out = []workflowRun{}
	}
	return c.JSON(http.StatusOK, map[string]any{"runs": out})
}

// resumeWorkflowRun streams an active run, wherever it runs (204 when it
// is not running).
func (s *Server) resumeWorkflowRun(c echo.Context) error {
	runID := c.Param("runId")
	r, err := s.loadWorkflowRun(c.Request().Context(), runID, c.Param("id"))
	if err != nil {
		return internal(err)
	}
	if r == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return s.runs.serve(c, workflowRunKey(runID))
}

// stopWorkflowRun ends a running run, wherever it runs.
func (s *Server) stopWorkflowRun(c echo.Context) error {
	ctx := c.Request().Context()
	r, err := s.loadWorkflowRun(ctx, c.Param("runId"), c.Param("id"))
	if err != nil {
		return internal(err)
	}
	if r == nil {
		return c.JSON(http.StatusOK, map[string]bool{"stopped": false})
	}
	stopped, ended, err := s.runs.stop(ctx, workflowRunKey(r.ID))
	if err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusOK, stopAnswer(stopped, ended))
}
