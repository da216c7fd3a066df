package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/redisstore"
	"github.com/trawl-dev/trawl/loop/storetest"
	"github.com/trawl-dev/trawl/stream/redistest"
)

func TestResultStoreConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		storetest.RunResults(t, func(t *testing.T, max int64) loop.ResultStore {
			n++
			return redisstore.NewResultStore(c, redisstore.Options{Prefix: fmt.Sprintf("t%d:", n), MaxRecordBytes: max})
		})
	})
}

func TestDatasetStoreConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		storetest.RunDatasets(t, func(t *testing.T, max int64) loop.DatasetStore {
			n++
			if max > 0 {
				// Redis bounds one entry; its maxmemory bounds the total.
				t.Skip("the total bound is Redis's maxmemory, not the store's")
			}
			return redisstore.NewDatasetStore(c, redisstore.Options{Prefix: fmt.Sprintf("t%d:", n)})
		})
	})
}

// While Redis is down the stores fail with a clear error (never a miss
// that would send the caller to local state), and work again after.
func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	rs := redisstore.NewResultStore(c, redisstore.Options{})
	ds := redisstore.NewDatasetStore(c, redisstore.Options{})
	rec, err := loop.NewStoredResult("tool", []byte(`[1,2]`), "")
	if err != nil {
		t.Fatal(err)
	}
	d := &loop.Dataset{Items: [][]byte{[]byte(`1`)}, Complete: true}
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rs.Put(short, "k", rec, time.Now().Add(time.Hour)); err == nil {
		t.Error("Put with Redis down: no error")
	}
	if _, err := rs.Get(short, "k"); err == nil || errors.Is(err, loop.ErrResultNotFound) || errors.Is(err, loop.ErrResultExpired) {
		t.Errorf("Get with Redis down: %v, want a Redis error", err)
	}
	if _, _, _, err := ds.Get(short, "k"); err == nil || errors.Is(err, loop.ErrDatasetMiss) {
		t.Errorf("dataset Get with Redis down: %v, want a Redis error", err)
	}
	if err := ds.Put(short, "k", d, time.Now(), time.Now().Add(time.Hour)); err == nil {
		t.Error("dataset Put with Redis down: no error")
	}
	srv.Restart(t)
	if err := rs.Put(ctx, "k", rec, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := rs.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := ds.Put(ctx, "k", d, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ds.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
}
