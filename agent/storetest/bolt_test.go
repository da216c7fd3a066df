package storetest_test

import (
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/storetest"
	"github.com/trawl-dev/trawl/agent/workflow"
)

func TestBoltStoreConforms(t *testing.T) {
	storetest.Run(t, func(t *testing.T, ret agent.Retention) storetest.Store {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := agent.NewBoltStore(db, ret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestBoltApprovalsConform(t *testing.T) {
	storetest.RunApprovals(t, func(t *testing.T) agent.ApprovalStore {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := agent.NewBoltApprovals(db)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemoryApprovalsConform(t *testing.T) {
	storetest.RunApprovals(t, func(t *testing.T) agent.ApprovalStore { return agent.NewMemoryApprovals() })
}

func TestBoltRunStoreConforms(t *testing.T) {
	storetest.RunRuns(t, func(t *testing.T, ret workflow.RunRetention) workflow.RunStore {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		s, err := workflow.NewBoltRunStore(db, ret)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}
