package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/redisstore"
	"github.com/trawl-dev/trawl/loop/storetest"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// replica is one process's dataset cache on the shared Redis.
func replica(t *testing.T, c redis.UniversalClient, lease time.Duration) (*loop.DatasetCache, *redisstore.Walks) {
	t.Helper()
	store := redisstore.NewDatasetStore(c, redisstore.Options{Prefix: "x:"})
	walks := redisstore.NewWalks(c, store, redisstore.WalksOptions{Prefix: "x:", Lease: lease, Poll: 10 * time.Millisecond})
	cache, err := loop.NewDatasetCache(loop.CacheOptions{Store: store, Shared: walks})
	if err != nil {
		t.Fatal(err)
	}
	return cache, walks
}

// Walks conform on two replicas of one Redis.
func TestWalksConform(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		storetest.RunWalks(t, func(t *testing.T) storetest.WalksSetup {
			n++
			opt := redisstore.Options{Prefix: fmt.Sprintf("w%d:", n)}
			store := redisstore.NewDatasetStore(c, opt)
			replica := func() storetest.Walks {
				return redisstore.NewWalks(c, store, redisstore.WalksOptions{Prefix: opt.Prefix, Poll: 5 * time.Millisecond})
			}
			return storetest.WalksSetup{Store: store, Replicas: []storetest.Walks{replica(), replica()}}
		})
	})
}

var req = loop.CacheRequest{ToolID: "acme.list", Args: map[string]any{"q": "x"}, Scope: loop.Scope{Org: "acme"}}

func TestWalksCollapseAcrossReplicas(t *testing.T) {
	c := redistest.Start(t).Client(t)
	a, wa := replica(t, c, time.Second)
	b, wb := replica(t, c, time.Second)
	var walks atomic.Int64
	walk := func(context.Context) (*loop.Dataset, error) {
		walks.Add(1)
		time.Sleep(300 * time.Millisecond)
		return &loop.Dataset{Items: [][]byte{[]byte(`{"id":1}`)}, HasItems: true, Complete: true}, nil
	}
	var wg sync.WaitGroup
	for _, cache := range []*loop.DatasetCache{a, b, a, b} {
		wg.Go(func() {
			d, _, err := cache.Walk(context.Background(), req, walk)
			if err != nil || len(d.Items) != 1 {
				t.Errorf("walk: %v, %v", d, err)
			}
		})
	}
	wg.Wait()
	if n := walks.Load(); n != 1 {
		t.Fatalf("%d upstream walks for four concurrent calls on two replicas, want 1", n)
	}
	if wa.Joined()+wb.Joined() != 1 {
		t.Errorf("joined across replicas: %d + %d, want 1 (the other joins were in-process)", wa.Joined(), wb.Joined())
	}
	// And a later call on either is a hit.
	if _, hit, err := b.Walk(context.Background(), req, walk); err != nil || hit == nil {
		t.Errorf("later call: hit %v, %v", hit, err)
	}
}

// A partial walk records nothing: the waiter walks in turn rather than
// return nothing.
func TestWalksWaiterWalksWhenNothingRecorded(t *testing.T) {
	c := redistest.Start(t).Client(t)
	a, _ := replica(t, c, time.Second)
	b, _ := replica(t, c, time.Second)
	var walks atomic.Int64
	walk := func(context.Context) (*loop.Dataset, error) {
		walks.Add(1)
		time.Sleep(200 * time.Millisecond)
		return &loop.Dataset{Items: [][]byte{[]byte(`1`)}, Complete: false}, nil
	}
	var wg sync.WaitGroup
	for _, cache := range []*loop.DatasetCache{a, b} {
		wg.Go(func() {
			if d, _, err := cache.Walk(context.Background(), req, walk); err != nil || len(d.Items) != 1 {
				t.Errorf("walk: %v, %v", d, err)
			}
		})
	}
	wg.Wait()
	if n := walks.Load(); n != 2 {
		t.Fatalf("%d walks, want 2 (a partial walk is not shared)", n)
	}
}

// A replica that died holding the lock frees it within the lease.
func TestWalksDeadHolderFreesWithinLease(t *testing.T) {
	c := redistest.Start(t).Client(t)
	a, _ := replica(t, c, 300*time.Millisecond)
	key, err := loop.DatasetKey(req)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Set(context.Background(), "x:walk:"+key, "dead-replica", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, _, err := a.Walk(context.Background(), req, func(context.Context) (*loop.Dataset, error) {
		return &loop.Dataset{Items: [][]byte{[]byte(`1`)}, Complete: true}, nil
	})
	if err != nil || len(d.Items) != 1 {
		t.Fatalf("walk: %v, %v", d, err)
	}
	if el := time.Since(start); el < 200*time.Millisecond || el > 5*time.Second {
		t.Errorf("walk started after %v; want after the dead holder's lease (300 ms)", el)
	}
}

func TestWalksRedisDownIsAnError(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	store := redisstore.NewDatasetStore(c, redisstore.Options{})
	walks := redisstore.NewWalks(c, store, redisstore.WalksOptions{})
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	called := false
	_, err := walks.Do(ctx, "k", func(context.Context) (*loop.Dataset, error) { called = true; return nil, nil })
	if err == nil || called {
		t.Fatalf("Do with Redis down: %v (walk called: %v), want an error and no local walk", err, called)
	}
	if errors.Is(err, loop.ErrDatasetMiss) {
		t.Fatalf("Do with Redis down answered a miss: %v", err)
	}
}
