package web

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/agent/eval"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools/demo"
)

// Eval run statuses.
const (
	evalRunning = "running"
	evalDone    = "done"
	evalFailed  = "failed" // the run could not run (not: a check failed)
)

// evalRun is one POST /v1/evals run, as GET /v1/evals/{id} returns it.
type evalRun struct {
	ID       string       `json:"id"`
	Dataset  string       `json:"dataset"`
	Status   string       `json:"status"`
	Started  time.Time    `json:"started"`
	Baseline string       `json:"baseline,omitempty"` // the eval id compared with
	Done     int          `json:"done"`
	Total    int          `json:"total"`
	Error    string       `json:"error,omitempty"`
	Report   *eval.Report `json:"report,omitempty"`
}

// evalSummary is a run in GET /v1/evals.
type evalSummary struct {
	ID       string       `json:"id"`
	Dataset  string       `json:"dataset"`
	Status   string       `json:"status"`
	Started  time.Time    `json:"started"`
	Baseline string       `json:"baseline,omitempty"`
	Done     int          `json:"done"`
	Total    int          `json:"total"`
	Totals   *eval.Totals `json:"totals,omitempty"`
	ExitCode *int         `json:"exitCode,omitempty"`
}

// maxEvalRuns bounds the runs a server keeps (in memory: they are gone
// after a restart; `trawl eval --out` keeps reports on disk).
const maxEvalRuns = 50

// evalRuns are the server's eval runs, newest last.
type evalRuns struct {
	mu   sync.Mutex
	runs []*evalRun
}

func (e *evalRuns) add(r *evalRun) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runs = append(e.runs, r)
	if len(e.runs) > maxEvalRuns {
		e.runs = slices.Delete(e.runs, 0, len(e.runs)-maxEvalRuns)
	}
}

// get returns a copy of run id (nil when unknown).
func (e *evalRuns) get(id string) *evalRun {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.runs {
		if r.ID == id {
			cp := *r
			return &cp
		}
	}
	return nil
}

func (e *evalRuns) update(id string, f func(r *evalRun)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, r := range e.runs {
		if r.ID == id {
			f(r)
		}
	}
}

// evalRequest is POST /v1/evals's body: a dataset by name ("demo", the
// demo's own), or inline — JSONL text, or an array of cases — and the
// run's options.
type evalRequest struct {
	Dataset     string            `json:"dataset"`
	JSONL       string            `json:"jsonl"`
	Cases       []json.RawMessage `json:"cases"`
	Model       string            `json:"model"`
	Agent       string            `json:"agent"`
	Repeat      int               `json:"repeat"`
	Concurrency int               `json:"concurrency"`
	Baseline    string            `json:"baseline"`
	AllowWrites bool              `json:"allowWrites"`
}

// Names of the data parts an eval run streams.
const (
	evalProgressPart = "eval-progress" // {done, total, case, passed} after each case run
	evalReportPart   = "eval-report"   // the summary once the run ended
)

// startEval runs a dataset as a detached run, streamed like a workflow
// run (resume at /v1/evals/{id}/stream, read the report at
// /v1/evals/{id}).
func (s *Server) startEval(c echo.Context) error {
	var req evalRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	var data []byte
	name := req.Dataset
	switch inline := req.JSONL != "" || len(req.Cases) > 0; {
	case req.Dataset != "" && inline:
		return badRequest("give dataset (a name) or the cases inline (jsonl or cases), not both")
	case req.Dataset == "demo":
		if !s.cfg.IsDemo() {
			return notFound("the dataset demo is the built-in demo's; this deployment serves no demo")
		}
		data = demo.EvalDataset()
	case req.Dataset != "":
		return notFound("no dataset " + strconv.Quote(req.Dataset) + " (known: demo, when the demo is served; or send the cases inline)")
	case req.JSONL != "":
		data, name = []byte(req.JSONL), "inline"
	case len(req.Cases) > 0:
		var b bytes.Buffer
		for _, raw := range req.Cases {
			if err := json.Compact(&b, raw); err != nil {
				return badRequest("cases: " + err.Error())
			}
			b.WriteByte('\n')
		}
		data, name = b.Bytes(), "inline"
	default:
		return badRequest("name a dataset (dataset: \"demo\") or send the cases inline (jsonl, or cases: [...])")
	}
	ds, err := eval.ParseDataset(data, "", false)
	if err != nil {
		return apiErr(http.StatusBadRequest, "invalid_dataset", "line "+err.Error())
	}
	ds.Name = name
	var base *eval.Report
	if req.Baseline != "" {
		b := s.evals.get(req.Baseline)
		if b == nil || b.Report == nil {
			return notFound("no finished eval run " + strconv.Quote(req.Baseline) + " to compare with")
		}
		base = b.Report
	}
	if req.Repeat < 0 || req.Repeat > 100 || req.Concurrency < 0 || req.Concurrency > 16 {
		return badRequest("repeat must be 1 to 100 and concurrency 1 to 16")
	}
	opt := eval.Options{Model: req.Model, Agent: req.Agent, Repeat: req.Repeat, Concurrency: req.Concurrency, AllowWrites: req.AllowWrites}
	if opt.Model != "" && opt.Model != eval.ModelReplay && opt.Model != eval.ModelLive {
		return badRequest("model must be replay or live, not " + strconv.Quote(opt.Model))
	}
	id := "eval_" + randomHex(12)
	key := "eval-run:" + id
	ctx := c.Request().Context()
	run, err := s.runs.Claim(ctx, key, id)
	if err != nil {
		return internal(err)
	}
	if err := s.events.Open(ctx, id); err != nil {
		s.runs.Drop(run)
		return internal(err)
	}
	rec := &evalRun{ID: id, Dataset: name, Status: evalRunning, Started: s.now().UTC(), Baseline: req.Baseline, Total: len(ds.Cases) * max(req.Repeat, 1)}
	s.evals.add(rec)
	target := s.dep.EvalTarget()
	s.runs.Start(run, func(ctx context.Context) {
		emit := func(ch stream.Chunk) { _ = s.runs.Emit(context.WithoutCancel(ctx), run, ch) }
		emit(stream.Start{MessageID: id})
		opt.Progress = func(done, total int, caseID string, passed bool) {
			s.evals.update(id, func(r *evalRun) { r.Done = done })
			emit(stream.Data{Name: evalProgressPart, Data: map[string]any{"done": done, "total": total, "case": caseID, "passed": passed}})
		}
		rep, err := eval.Run(ctx, target, ds, opt)
		if err == nil && base != nil {
			rep.Compare(base, req.Baseline)
		}
		s.evals.update(id, func(r *evalRun) {
			if err != nil {
				r.Status, r.Error = evalFailed, err.Error()
				return
			}
			r.Status, r.Report = evalDone, rep
		})
		if err != nil {
			emit(stream.Error{ErrorText: err.Error()})
		} else {
			emit(stream.Data{Name: evalReportPart, Data: map[string]any{"id": id, "totals": rep.Totals, "exitCode": rep.ExitCode(), "comparison": rep.Comparison}})
		}
		emit(stream.Finish{})
	})
	c.Response().Header().Set("X-Trawl-Run-Id", id)
	return s.serveRun(c, key, id)
}

// listEvals lists the server's eval runs, newest first, without reports.
func (s *Server) listEvals(c echo.Context) error {
	s.evals.mu.Lock()
	out := make([]evalSummary, 0, len(s.evals.runs))
	for i := len(s.evals.runs) - 1; i >= 0; i-- {
		r := s.evals.runs[i]
		sum := evalSummary{ID: r.ID, Dataset: r.Dataset, Status: r.Status, Started: r.Started, Baseline: r.Baseline, Done: r.Done, Total: r.Total}
		if r.Report != nil {
			t, code := r.Report.Totals, r.Report.ExitCode()
			sum.Totals, sum.ExitCode = &t, &code
		}
		out = append(out, sum)
	}
	s.evals.mu.Unlock()
	return c.JSON(http.StatusOK, map[string]any{"evals": out})
}

// getEval returns a run with its report once it ended.
func (s *Server) getEval(c echo.Context) error {
	r := s.evals.get(c.Param("id"))
	if r == nil {
		return notFound("no eval run " + strconv.Quote(c.Param("id")))
	}
	return c.JSON(http.StatusOK, r)
}

// resumeEval streams a running eval run (204 once it ended).
func (s *Server) resumeEval(c echo.Context) error {
	if s.evals.get(c.Param("id")) == nil {
		return c.NoContent(http.StatusNoContent)
	}
	return s.serveActive(c, "eval-run:"+c.Param("id"))
}
