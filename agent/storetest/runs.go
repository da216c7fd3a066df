package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/agent/workflow"
)

// NewRuns returns a fresh, empty workflow run store with ret, for t
// alone.
type NewRuns func(t *testing.T, ret workflow.RunRetention) workflow.RunStore

// RunRuns runs the workflow.RunStore suite (with its RunRetention
// contract).
func RunRuns(t *testing.T, newStore NewRuns) {
	t.Run("RoundTrip", func(t *testing.T) { runRoundTrip(t, newStore) })
	t.Run("List", func(t *testing.T) { runList(t, newStore) })
	t.Run("PerWorkflow", func(t *testing.T) { runsPerWorkflow(t, newStore) })
	t.Run("MaxAge", func(t *testing.T) { runMaxAge(t, newStore) })
	t.Run("ConcurrentPuts", func(t *testing.T) { runConcurrentPuts(t, newStore) })
}

var runBase = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func putRun(t *testing.T, s workflow.RunStore, r *workflow.Run) {
	t.Helper()
	if err := s.PutRun(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func endedRun(id, wf string, started time.Duration) *workflow.Run {
	at := runBase.Add(started)
	end := at.Add(time.Second)
	return &workflow.Run{ID: id, Workflow: wf, Status: workflow.StatusDone, Started: at, Ended: &end}
}

// runIDs is the ids of the runs workflowID keeps, as ListRuns lists them.
func runIDs(t *testing.T, s workflow.RunStore, workflowID string) []string {
	t.Helper()
	runs, err := s.ListRuns(context.Background(), workflowID, 0)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, r := range runs {
		if r.Result != nil {
			t.Errorf("ListRuns returned run %s with its result", r.ID)
		}
		ids = append(ids, r.ID)
	}
	return ids
}

// runRoundTrip: a run comes back as it was put, its summary without the
// result; a later put replaces it whole (a nil result removes the old
// one); an unknown id is ErrRunNotFound.
func runRoundTrip(t *testing.T, newStore NewRuns) {
	s := newStore(t, workflow.RunRetention{})
	ctx := context.Background()
	running := &workflow.Run{ID: "wfr_1", Workflow: "w", Status: workflow.StatusRunning, Started: runBase}
	putRun(t, s, running)
	got, err := s.GetRun(ctx, "wfr_1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(running, got); diff != "" {
		t.Errorf("a running run (-put +got):\n%s", diff)
	}
	end := runBase.Add(time.Minute)
	done := &workflow.Run{ID: "wfr_1", Workflow: "w", Status: workflow.StatusFailed, Started: runBase, Ended: &end,
		Result: &workflow.Result{Steps: map[string]json.RawMessage{"a": json.RawMessage(`{"items":[1,2],"_loop":{"complete":true}}`)},
			Order: []string{"a", "b"}, Failed: "b", Error: "the tool call failed"}}
	putRun(t, s, done)
	if got, err = s.GetRun(ctx, "wfr_1"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(done, got); diff != "" {
		t.Errorf("an ended run (-put +got):\n%s", diff)
	}
	sum, err := s.GetSummary(ctx, "wfr_1")
	if err != nil {
		t.Fatal(err)
	}
	want := *done
	want.Result = nil
	if diff := cmp.Diff(&want, sum); diff != "" {
		t.Errorf("the summary (-want +got):\n%s", diff)
	}
	lapsed := &workflow.Run{ID: "wfr_1", Workflow: "w", Status: workflow.StatusFailed, Started: runBase, Ended: &end, Error: "its replica died"}
	putRun(t, s, lapsed)
	if got, _ = s.GetRun(ctx, "wfr_1"); got == nil || got.Result != nil || got.Error != lapsed.Error {
		t.Errorf("a put without a result keeps the old one: %+v", got)
	}
	for _, id := range []string{"wfr_2", "wfr_", "WFR_1", ""} {
		if _, err := s.GetRun(ctx, id); !errors.Is(err, workflow.ErrRunNotFound) {
			t.Errorf("GetRun(%q) = %v, want ErrRunNotFound", id, err)
		}
		if _, err := s.GetSummary(ctx, id); !errors.Is(err, workflow.ErrRunNotFound) {
			t.Errorf("GetSummary(%q) = %v, want ErrRunNotFound", id, err)
		}
	}
}

// runList: a workflow's runs, newest started first, at most limit,
// without results; never another workflow's, even one whose id extends
// it.
func runList(t *testing.T, newStore NewRuns) {
	s := newStore(t, workflow.RunRetention{})
	ctx := context.Background()
	for i, wf := range []string{"w", "w0", "w-x", "w_x", "x"} {
		r := endedRun(fmt.Sprintf("%s-only", wf), wf, time.Duration(i)*time.Hour)
		putRun(t, s, r)
	}
	for _, m := range []int{3, 1, 2} {
		r := endedRun(fmt.Sprintf("r%d", m), "w", time.Duration(m)*time.Minute)
		r.Result = &workflow.Result{Steps: map[string]json.RawMessage{}, Order: []string{}}
		putRun(t, s, r)
	}
	if got, want := runIDs(t, s, "w"), []string{"r3", "r2", "r1", "w-only"}; !slices.Equal(got, want) {
		t.Errorf("ListRuns(w) = %v, want %v", got, want)
	}
	two, err := s.ListRuns(ctx, "w", 2)
	if err != nil || len(two) != 2 || two[0].ID != "r3" || two[1].ID != "r2" {
		t.Errorf("ListRuns(w, 2) = %v, %v", two, err)
	}
	if got := runIDs(t, s, "w0"); !slices.Equal(got, []string{"w0-only"}) {
		t.Errorf("ListRuns(w0) = %v", got)
	}
	if got := runIDs(t, s, "none"); len(got) != 0 {
		t.Errorf("a workflow without runs lists %v", got)
	}
}

// runsPerWorkflow: a workflow's new run beyond the bound deletes its
// runs started longest ago — never a running one, never another
// workflow's — and replacing a run deletes nothing.
func runsPerWorkflow(t *testing.T, newStore NewRuns) {
	s := newStore(t, workflow.RunRetention{MaxPerWorkflow: 3})
	ctx := context.Background()
	oldest := &workflow.Run{ID: "running", Workflow: "w", Status: workflow.StatusRunning, Started: runBase}
	putRun(t, s, oldest)
	for i := 1; i <= 2; i++ {
		putRun(t, s, endedRun(fmt.Sprintf("r%d", i), "w", time.Duration(i)*time.Minute))
	}
	for i := 1; i <= 4; i++ {
		putRun(t, s, endedRun(fmt.Sprintf("o%d", i), "other", time.Duration(i)*time.Minute))
	}
	// Replacing r1 (its end) prunes nothing.
	putRun(t, s, endedRun("r1", "w", time.Minute))
	if got := runIDs(t, s, "w"); !slices.Equal(got, []string{"r2", "r1", "running"}) {
		t.Errorf("before the bound: %v", got)
	}
	putRun(t, s, endedRun("r3", "w", 3*time.Minute))
	putRun(t, s, endedRun("r4", "w", 4*time.Minute))
	if got, want := runIDs(t, s, "w"), []string{"r4", "r3", "running"}; !slices.Equal(got, want) {
		t.Errorf("w keeps %v; want %v (the running one is kept)", got, want)
	}
	for _, id := range []string{"r1", "r2"} {
		if _, err := s.GetRun(ctx, id); !errors.Is(err, workflow.ErrRunNotFound) {
			t.Errorf("pruned run %s: %v, want ErrRunNotFound", id, err)
		}
	}
	if got, want := runIDs(t, s, "other"), []string{"o4", "o3", "o2"}; !slices.Equal(got, want) {
		t.Errorf("other keeps %v; want %v", got, want)
	}
}

// runMaxAge: Prune deletes the runs started before MaxAge, running or
// not, by the injected clock; a pruned run no longer counts against its
// workflow's bound.
func runMaxAge(t *testing.T, newStore NewRuns) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s := newStore(t, workflow.RunRetention{MaxAge: 30 * 24 * time.Hour, MaxPerWorkflow: 3, Now: func() time.Time { return now }})
	ctx := context.Background()
	for id, age := range map[string]time.Duration{"old": 31 * 24 * time.Hour, "older": 300 * 24 * time.Hour, "fresh": 29 * 24 * time.Hour} {
		putRun(t, s, &workflow.Run{ID: id, Workflow: "w", Status: workflow.StatusDone, Started: now.Add(-age)})
	}
	putRun(t, s, &workflow.Run{ID: "stale", Workflow: "v", Status: workflow.StatusRunning, Started: now.Add(-40 * 24 * time.Hour)})
	n, err := s.Prune(ctx)
	if err != nil || n != 3 {
		t.Errorf("Prune = %d, %v; want 3", n, err)
	}
	if got := runIDs(t, s, "w"); !slices.Equal(got, []string{"fresh"}) {
		t.Errorf("kept %v; want [fresh]", got)
	}
	if got := runIDs(t, s, "v"); len(got) != 0 {
		t.Errorf("a run still running 40 days on is kept: %v", got)
	}
	if n, _ := s.Prune(ctx); n != 0 {
		t.Errorf("a second Prune deleted %d", n)
	}
	putRun(t, s, &workflow.Run{ID: "a", Workflow: "w", Status: workflow.StatusDone, Started: now})
	putRun(t, s, &workflow.Run{ID: "b", Workflow: "w", Status: workflow.StatusDone, Started: now.Add(time.Second)})
	if got := runIDs(t, s, "w"); len(got) != 3 {
		t.Errorf("kept %v after two new runs; pruned ones still count", got)
	}
}

// runConcurrentPuts: concurrent new runs of one workflow keep its bound
// exactly.
func runConcurrentPuts(t *testing.T, newStore NewRuns) {
	s := newStore(t, workflow.RunRetention{MaxPerWorkflow: 10})
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 15 {
				r := endedRun(fmt.Sprintf("r%d-%d", w, i), "w", time.Duration(w*100+i)*time.Second)
				if err := s.PutRun(ctx, r); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if got := runIDs(t, s, "w"); len(got) != 10 {
		t.Errorf("concurrent new runs: %d kept, want exactly the bound, 10", len(got))
	}
}
