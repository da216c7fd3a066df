package boltstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/boltstore"
	"github.com/trawl-dev/trawl/loop/storetest"
)

func openDB(t *testing.T, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestDatasetStoreConforms(t *testing.T) {
	storetest.RunDatasets(t, func(t *testing.T, max int64) loop.DatasetStore {
		s, err := boltstore.New(openDB(t, filepath.Join(t.TempDir(), "t.db")), boltstore.Options{MaxBytes: max})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The cache survives a restart: entries stay until they expire, and those
// that expired while the process was down are removed at open.
func TestDatasetStoreSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "t.db")
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := boltstore.New(db, boltstore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	d := &loop.Dataset{Envelope: []byte(`[]`), HasItems: true, Items: [][]byte{[]byte(`{"id":1}`)}, Complete: true}
	if err := s.Put(ctx, "org/long", d, now, now.Add(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "org/short", d, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	held := s.Bytes()
	db.Close()

	now = now.Add(2 * time.Hour)
	s2, err := boltstore.New(openDB(t, path), boltstore.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	got, cachedAt, _, err := s2.Get(ctx, "org/long")
	if err != nil || string(got.Items[0]) != `{"id":1}` || !cachedAt.Equal(now.Add(-2*time.Hour)) {
		t.Fatalf("after restart: %+v %v %v", got, cachedAt, err)
	}
	if _, _, _, err := s2.Get(ctx, "org/short"); !errors.Is(err, loop.ErrDatasetMiss) {
		t.Errorf("expired during the restart: %v, want a miss", err)
	}
	if s2.Bytes() <= 0 || s2.Bytes() >= held {
		t.Errorf("bytes after restart %d, before %d: the expired entry should be gone", s2.Bytes(), held)
	}
}
