package web

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/web/deploy"
	"github.com/trawl-dev/trawl/web/runlease/redislease"
)

// A workflow run that lost its claim — its replica was paused or cut off
// past the lease, and a surviving replica marked it failed — does not
// write its own end ("stopped") over that record when it wakes.
func TestWorkflowRunWithoutItsClaimDoesNotSave(t *testing.T) {
	r := startReplicas(t, "")
	def := `{"steps": [{"id": "items", "type": "tool", "tool": "up.list_items", "loop": {"all_pages": true, "fields": ["id"]}}]}`
	req, _ := http.NewRequest("PUT", r.a.URL+"/v1/workflows/all", strings.NewReader(def))
	req.Header.Set("Authorization", "Bearer "+scaleAdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
		t.Fatalf("put the workflow: %d %s", resp.StatusCode, b)
	}
	resp.Body.Close()
	release := r.up.holdPages(2)
	defer release()
	onA := newSSEStream(t, r.a.post(t, "/v1/workflows/all/runs", "", nil))
	runID := onA.resp.Header.Get("X-Trawl-Run-Id")
	onA.until(t, "data-tool-loop-progress") // the walk is held at page 2

	// As if A had been paused past its lease: the claim is gone (another
	// holder's now) and the survivor has marked the run failed.
	ctx := context.Background()
	// The claim's key as the registry names it (in the run's slot on a
	// cluster).
	c := r.backend.Universal(t)
	claim := redislease.New(c, r.a.cfg.RedisPrefix, 0).FenceKey(deploy.WorkflowRunKey(runID))
	if err := c.Set(ctx, claim, "another_run", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	rec, err := r.b.dep.WorkflowRuns().GetRun(ctx, runID)
	if err != nil || rec == nil {
		t.Fatalf("the run's record: %v %v", rec, err)
	}
	ended := time.Now().UTC()
	rec.Status, rec.Ended, rec.Error = "failed", &ended, "the server running this run stopped before it finished"
	if err := r.b.dep.WorkflowRuns().PutRun(ctx, rec); err != nil {
		t.Fatal(err)
	}
	release() // A's run goes on (its renewal finds the claim lost), then ends
	onA.rest()
	for deadline := time.Now().Add(15 * time.Second); r.a.runs.Count() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A's run never ended")
		}
	}
	if st, b := r.b.do(t, "GET", "/v1/workflows/all/runs/"+runID, "", nil); st != 200 || !strings.Contains(string(b), `"status":"failed"`) {
		t.Errorf("the run without its claim wrote over the record the survivor wrote: %d %.300s", st, b)
	}
}
