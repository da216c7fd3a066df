package activitytest_test

import (
	"path/filepath"
	"testing"

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
		s, err := tools.NewBoltActivityStore(db, max)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
