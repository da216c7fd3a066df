package vectorcachetest_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/discovery/vectorcachetest"
)

func TestBoltVectorsConform(t *testing.T) {
	vectorcachetest.Run(t, func(t *testing.T) discovery.VectorCache {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		c, err := discovery.NewBoltVectors(db, 0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}
