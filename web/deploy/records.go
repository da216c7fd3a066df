package deploy

import (
	"context"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Records is a named set of opaque records by key — workflow definitions,
// sealed connection tokens: a bucket of the embedded store
// (boltRecords) or a Redis hash (redisstore.Bucket). stores.go picks.
type Records interface {
	Put(ctx context.Context, k string, v []byte) error
	// Get returns the value under k; ok is false when there is none.
	Get(ctx context.Context, k string) (v []byte, ok bool, err error)
	// Delete removes k and reports whether it was there.
	Delete(ctx context.Context, k string) (bool, error)
	// ForEach calls fn for every record in key order, stopping at fn's
	// first error.
	ForEach(ctx context.Context, fn func(k string, v []byte) error) error
}

// fencedRecords is a store of records that writes one only while a
// fence key holds a value (web/redisstore: the run's claim).
type fencedRecords interface {
	PutFenced(ctx context.Context, k string, v []byte, fenceKey, fenceValue string) (written bool, err error)
}

// boltRecords is a bucket of the embedded store.
type boltRecords struct {
	db   *bolt.DB
	name []byte
}

func newBoltRecords(db *bolt.DB, name string) (*boltRecords, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(name))
		return err
	})
	return &boltRecords{db: db, name: []byte(name)}, err
}

// Put writes in a batch (bbolt's Batch): the checkpoints of the turns
// running at once share one transaction, one fsync, and the event log's
// commits wait behind fewer of them. It returns once the batch is
// committed, so a checkpoint is as durable as before.
func (b *boltRecords) Put(_ context.Context, k string, v []byte) error {
	return b.db.Batch(func(tx *bolt.Tx) error { return tx.Bucket(b.name).Put([]byte(k), v) })
}

func (b *boltRecords) Get(_ context.Context, k string) (v []byte, ok bool, err error) {
	err = b.db.View(func(tx *bolt.Tx) error {
		if got := tx.Bucket(b.name).Get([]byte(k)); got != nil {
			v, ok = append([]byte(nil), got...), true
		}
		return nil
	})
	return v, ok, err
}

func (b *boltRecords) Delete(_ context.Context, k string) (found bool, err error) {
	err = b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(b.name)
		found = bk.Get([]byte(k)) != nil
		return bk.Delete([]byte(k))
	})
	return found, err
}

func (b *boltRecords) ForEach(_ context.Context, fn func(k string, v []byte) error) error {
	return b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(b.name).ForEach(func(k, v []byte) error { return fn(string(k), v) })
	})
}

// grants keeps short-lived secrets' records (connect codes and attempts)
// by key until they expire, at most a bound of them live: in memory on
// the embedded default, in Redis when replicas share a deployment (a link
// minted on one replica opens on any, and the bound counts every
// replica's).
type grants interface {
	// PutGrant stores v under k for ttl (under a millisecond: nothing
	// is kept); stored is false, and nothing is stored, when the store
	// holds its bound of live grants.
	PutGrant(ctx context.Context, k string, v []byte, ttl time.Duration) (stored bool, err error)
	// TakeGrant returns the live value under k; spend removes it, so of
	// two concurrent spends only one gets it.
	TakeGrant(ctx context.Context, k string, spend bool) (v []byte, ok bool, err error)
}

// memGrants is the in-process grants, bounded by max live entries.
type memGrants struct {
	now func() time.Time
	max int

	mu sync.Mutex
	m  map[string]memGrant
}

type memGrant struct {
	v       []byte
	expires time.Time
}

func newMemGrants(now func() time.Time, max int) *memGrants {
	return &memGrants{now: now, max: max, m: map[string]memGrant{}}
}

func (g *memGrants) PutGrant(_ context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	if ttl < time.Millisecond {
		return true, nil // born expired: nothing to keep
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for key, e := range g.m {
		if now.After(e.expires) {
			delete(g.m, key)
		}
	}
	if _, live := g.m[k]; !live && g.max > 0 && len(g.m) >= g.max {
		return false, nil
	}
	g.m[k] = memGrant{v: v, expires: now.Add(ttl)}
	return true, nil
}

func (g *memGrants) TakeGrant(_ context.Context, k string, spend bool) ([]byte, bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.m[k]
	if !ok || g.now().After(e.expires) {
		return nil, false, nil
	}
	if spend {
		delete(g.m, k)
	}
	return e.v, true, nil
}
