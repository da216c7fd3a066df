package storetest_test

import (
	"testing"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/storetest"
)

func TestMemoryResultStoreConforms(t *testing.T) {
	storetest.RunResults(t, func(t *testing.T, max int64) loop.ResultStore {
		return loop.NewMemoryResultStore(loop.MemoryStoreOptions{MaxBytes: max})
	})
}

func TestMemoryDatasetStoreConforms(t *testing.T) {
	storetest.RunDatasets(t, func(t *testing.T, max int64) loop.DatasetStore {
		return loop.NewMemoryDatasetStore(loop.MemoryStoreOptions{MaxBytes: max})
	})
}

func TestLocalWalksConform(t *testing.T) {
	storetest.RunWalks(t, func(t *testing.T) storetest.WalksSetup {
		return storetest.WalksSetup{Store: loop.NewMemoryDatasetStore(loop.MemoryStoreOptions{}),
			Replicas: []storetest.Walks{&loop.LocalWalks{}}, SharesUnrecorded: true}
	})
}
