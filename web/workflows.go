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
	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/stream"
)

var (
	bucketWorkflows    = []byte("workflows")
	bucketWorkflowRuns = []byte("workflow_runs")
)

// workflowRun is what a run leaves: its state and, once ended, its result.
type workflowRun struct {
	ID       string           `json:"id"`
	Workflow string           `json:"workflow"`
	Status   string           `json:"status"` // running, done, failed, stopped
	Started  time.Time        `json:"started"`
	Ended    *time.Time       `json:"ended,omitempty"`
	Result   *workflow.Result `json:"result,omitempty"`
}

func (s *Server) initWorkflows() error {
	s.workflows = workflow.NewRunner(workflow.RunnerOptions{Engine: s.engine, Catalog: s.catalog, Logger: s.log})
	return s.db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketWorkflows, bucketWorkflowRuns} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func (s *Server) getWorkflowDef(id string) (*workflow.Definition, error) {
	var def *workflow.Definition
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketWorkflows).Get([]byte(id))
		if v == nil {
			return nil
		}
		var err error
		def, err = workflow.Parse(v)
		return err
	})
	return def, err
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
	if err := s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketWorkflows).Put([]byte(def.ID), b) }); err != nil {
		return internal(err)
	}
	return c.JSONBlob(http.StatusOK, b)
}

func (s *Server) getWorkflow(c echo.Context) error {
	def, err := s.getWorkflowDef(c.Param("id"))
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
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWorkflows).ForEach(func(_, v []byte) error {
			out = append(out, append(json.RawMessage(nil), v...))
			return nil
		})
	})
	if err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusOK, map[string]any{"workflows": out})
}

func (s *Server) deleteWorkflow(c echo.Context) error {
	var found bool
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketWorkflows)
		found = b.Get([]byte(c.Param("id"))) != nil
		return b.Delete([]byte(c.Param("id")))
	})
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
	def, err := s.getWorkflowDef(c.Param("id"))
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
	ctx, cancel := context.WithTimeout(carryRequest(s.baseCtx, c.Request().Context()), runDeadline) // ends at the shutdown grace
	run := &activeRun{id: runID, done: make(chan struct{}), cancel: cancel}
	key := "workflow-run:" + runID
	if !s.runs.claim(key, run) {
		cancel()
		return internal(errors.New("run id collision"))
	}
	rec := workflowRun{ID: runID, Workflow: def.ID, Status: "running", Started: time.Now().UTC()}
	if err := s.saveWorkflowRun(c.Request().Context(), rec); err != nil {
		cancel()
		s.runs.release(key)
		return internal(err)
	}
	if err := s.events.Open(c.Request().Context(), runID); err != nil {
		cancel()
		s.runs.release(key)
		return internal(err)
	}
	go func() {
		defer close(run.done)
		defer s.runs.release(key)
		defer cancel()
		ctx, observed := s.tel.workflowRun(ctx, def.ID)
		res, err := s.workflows.Run(ctx, def, workflow.RunInput{Org: s.cfg.Org, RunID: runID,
			Emit: func(ch stream.Chunk) error {
				_, err := s.events.Append(context.WithoutCancel(ctx), runID, ch)
				return err
			}})
		ended := time.Now().UTC()
		rec.Ended, rec.Result, rec.Status = &ended, res, "done"
		switch {
		case ctx.Err() != nil:
			rec.Status = "stopped"
		case err != nil || (res != nil && res.Failed != ""):
			rec.Status = "failed"
		}
		observed(rec.Status)
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer scancel()
		if err := s.saveWorkflowRun(sctx, rec); err != nil {
			s.log.Error("saving workflow run", "run", runID, "err", err)
		}
		if err := s.events.Close(sctx, runID); err != nil {
			s.log.Error("closing run log", "run", runID, "err", err)
		}
	}()
	c.Response().Header().Set("X-Trawl-Run-Id", runID)
	if err := stream.Serve(c.Response(), c.Request(), s.events, runID, stream.ServeOptions{}); err != nil && !c.Response().Committed {
		return internal(err)
	}
	return nil
}

func (s *Server) saveWorkflowRun(_ context.Context, r workflowRun) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketWorkflowRuns).Put([]byte(r.ID), b) })
}

func (s *Server) loadWorkflowRun(id, workflowID string) (*workflowRun, error) {
	var r *workflowRun
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketWorkflowRuns).Get([]byte(id))
		if v == nil {
			return nil
		}
		r = new(workflowRun)
		return json.Unmarshal(v, r)
	})
	if r != nil && r.Workflow != workflowID {
		r = nil
	}
	return r, err
}

// getWorkflowRun returns a run's state and, once it ended, its result.
func (s *Server) getWorkflowRun(c echo.Context) error {
	r, err := s.loadWorkflowRun(c.Param("runId"), c.Param("id"))
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
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketWorkflowRuns).ForEach(func(_, v []byte) error {
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

// resumeWorkflowRun streams an active run (204 when it is not running).
func (s *Server) resumeWorkflowRun(c echo.Context) error {
	runID := c.Param("runId")
	if r, _ := s.loadWorkflowRun(runID, c.Param("id")); r == nil || s.runs.get("workflow-run:"+runID) == nil {
		return c.NoContent(http.StatusNoContent)
	}
	err := stream.Serve(c.Response(), c.Request(), s.events, runID, stream.ServeOptions{})
	switch {
	case errors.Is(err, stream.ErrRunNotFound):
		return c.NoContent(http.StatusNoContent)
	case errors.Is(err, stream.ErrUnknownEventID):
		return badRequest("Last-Event-ID is not an event of this run")
	}
	return nil
}

// stopWorkflowRun ends a running run.
func (s *Server) stopWorkflowRun(c echo.Context) error {
	run := s.runs.get("workflow-run:" + c.Param("runId"))
	if r, _ := s.loadWorkflowRun(c.Param("runId"), c.Param("id")); r == nil || run == nil {
		return c.JSON(http.StatusOK, map[string]bool{"stopped": false})
	}
	run.cancel()
	select {
	case <-run.done:
	case <-time.After(10 * time.Second):
	}
	return c.JSON(http.StatusOK, map[string]bool{"stopped": true})
}
