package activitytest_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/activitytest"
)

func TestBoltActivityStoreConforms(t *testing.T) {
	activitytest.Run(t, func(t *testing.T, max int) tools.ActivityStore {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, &bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := tools.NewBoltActivityStore(db, tools.BoltActivityOptions{Max: max})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// written counts the records in the bbolt file itself, not in the queue.
func written(t *testing.T, db *bolt.DB) int {
	t.Helper()
	n := 0
	if err := db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket([]byte("activity")).Stats().KeyN
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// Records are written in batches: MaxBatch of them at once, the rest at
// the latest FlushDelay later, on a listing, or on Close; what was never
// written (the queue when the process dies) is all that can be lost.
func TestBoltActivityStoreBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := tools.NewBoltActivityStore(db, tools.BoltActivityOptions{FlushDelay: time.Hour, MaxBatch: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	add := func(i int) {
		if err := s.AppendActivity(ctx, tools.Activity{Tool: fmt.Sprint(i), ThreadID: "th"}); err != nil {
			t.Fatal(err)
		}
	}
	add(1)
	add(2)
	if n := written(t, db); n != 0 {
		t.Fatalf("%d records written before the batch filled", n)
	}
	add(3)
	if n := written(t, db); n != 3 {
		t.Fatalf("%d records written once the batch filled, want 3", n)
	}
	add(4)
	if got, err := s.ListActivity(ctx, "th", 10); err != nil || len(got) != 4 || got[0].Tool != "4" {
		t.Fatalf("a listing sees the queued record: %+v %v", got, err)
	}
	add(5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := written(t, db); n != 5 {
		t.Errorf("after Close the file holds %d records, want 5", n)
	}
}

func TestBoltActivityStoreFlushesWithinTheDelay(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := tools.NewBoltActivityStore(db, tools.BoltActivityOptions{FlushDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.AppendActivity(context.Background(), tools.Activity{Tool: "x"}); err != nil {
		t.Fatal(err)
	}
	// The write comes on its own, without a listing or Close.
	for deadline := time.Now().Add(10 * time.Second); written(t, db) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the queued record was never written")
		}
	}
}
