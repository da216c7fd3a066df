package deploy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/agent/redisstore"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/stream/redistest"
	webredis "github.com/trawl-dev/trawl/web/redisstore"
)

// oldRuns are workflow runs as deployments before the typed run store
// kept them: whole records, result inside, by run id.
var oldRuns = map[string]string{
	"wfr_a": `{"id":"wfr_a","workflow":"w","status":"done","started":"2026-03-01T12:00:00Z","ended":"2026-03-01T12:00:05Z","result":{"steps":{"fetch":{"items":[1],"_loop":{"complete":true}}},"order":["fetch"]}}`,
	"wfr_b": `{"id":"wfr_b","workflow":"w","status":"failed","started":"2026-03-01T13:00:00Z","ended":"2026-03-01T13:00:01Z","error":"the server running this run stopped before it finished; start the run again"}`,
	"junk":  `not a run`,
}

// checkMigrated: every old run is in the store as it was, the workflow
// lists them newest first, and what is not a run stays where it was.
func checkMigrated(t *testing.T, runs workflow.RunStore, left func() []string) {
	t.Helper()
	ctx := context.Background()
	a, err := runs.GetRun(ctx, "wfr_a")
	if err != nil {
		t.Fatal(err)
	}
	ended := time.Date(2026, 3, 1, 12, 0, 5, 0, time.UTC)
	want := &workflow.Run{ID: "wfr_a", Workflow: "w", Status: workflow.StatusDone, Started: ended.Add(-5 * time.Second), Ended: &ended,
		Result: &workflow.Result{Steps: map[string]json.RawMessage{"fetch": json.RawMessage(`{"items":[1],"_loop":{"complete":true}}`)}, Order: []string{"fetch"}}}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("a migrated run (-want +got):\n%s", diff)
	}
	list, err := runs.ListRuns(ctx, "w", 0)
	if err != nil || len(list) != 2 || list[0].ID != "wfr_b" || list[0].Status != workflow.StatusFailed || list[1].ID != "wfr_a" {
		t.Errorf("the migrated runs listed: %v %v", list, err)
	}
	if got := left(); !slices.Equal(got, []string{"junk"}) {
		t.Errorf("left in the old records: %v, want [junk]", got)
	}
}

func TestMigrateWorkflowRunsEmbedded(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "trawl.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	old, err := newBoltRecords(db, oldWorkflowRuns)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for k, v := range oldRuns {
		if err := old.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := workflow.NewBoltRunStore(db, workflow.RunRetention{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // a second start finds nothing more to move
		if err := migrateBoltWorkflowRuns(db, runs); err != nil {
			t.Fatal(err)
		}
	}
	checkMigrated(t, runs, func() []string { return recordKeys(t, old) })
	if _, err := old.Delete(ctx, "junk"); err != nil {
		t.Fatal(err)
	}
	if err := migrateBoltWorkflowRuns(db, runs); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(oldWorkflowRuns)) != nil {
			t.Error("the emptied old bucket is kept")
		}
		return nil
	})
}

func TestMigrateWorkflowRunsRedis(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	old := webredis.NewBucket(c, "trawl:", oldWorkflowRuns)
	for k, v := range oldRuns {
		if err := old.Put(ctx, k, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	runs := redisstore.NewRuns(c, "trawl:", workflow.RunRetention{})
	if err := migrateWorkflowRuns(ctx, old, runs); err != nil {
		t.Fatal(err)
	}
	checkMigrated(t, runs, func() []string { return recordKeys(t, old) })
}

func recordKeys(t *testing.T, r Records) []string {
	t.Helper()
	var keys []string
	if err := r.ForEach(context.Background(), func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
		t.Fatal(err)
	}
	return keys
}
