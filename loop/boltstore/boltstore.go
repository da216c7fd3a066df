// Package boltstore is the embedded loop.DatasetStore that survives a
// restart: the dataset cache (and what shadow mode records) kept in the
// deployment's bbolt file, bounded in bytes, expired entries removed.
package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/loop"
)

var (
	// bucketDatasets: key → header (expires, cachedAt, seq, size: 4 × 8
	// bytes, big-endian: Unix nanoseconds, insertion number, the size
	// counted against the bound) then the dataset.
	bucketDatasets = []byte("datasets")
	// bucketOrder: seq → key, oldest first, for eviction.
	bucketOrder = []byte("datasets_order")
)

const header = 32

// Options configure a DatasetStore.
type Options struct {
	// MaxBytes bounds what the store holds, counted as the memory store
	// counts it (loop.Dataset.Size); the oldest are evicted first. Zero:
	// 256 MiB.
	MaxBytes int64
	// Now decides expiry. Nil: time.Now.
	Now func() time.Time
}

// DatasetStore is the bbolt loop.DatasetStore.
type DatasetStore struct {
	db  *bolt.DB
	max int64
	now func() time.Time

	mu    sync.Mutex // serialises the bookkeeping of bytes with Puts
	bytes int64
}

var _ loop.DatasetStore = (*DatasetStore)(nil)

// New returns the store on db, creating its buckets and removing the
// entries that expired while the process was down.
func New(db *bolt.DB, opts Options) (*DatasetStore, error) {
	s := &DatasetStore{db: db, max: opts.MaxBytes, now: opts.Now}
	if s.max <= 0 {
		s.max = 256 << 20
	}
	if s.now == nil {
		s.now = time.Now
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketDatasets, bucketOrder} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dataset store: %w", err)
	}
	if _, err := s.Prune(context.Background()); err != nil {
		return nil, err
	}
	return s, nil
}

func u64(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) }

func put64(b []byte, v int64) { binary.BigEndian.PutUint64(b, uint64(v)) }

// Get implements loop.DatasetStore.
func (s *DatasetStore) Get(_ context.Context, key string) (*loop.Dataset, time.Time, time.Time, error) {
	var d loop.Dataset
	var cachedAt, expires time.Time
	var expired bool
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDatasets).Get([]byte(key))
		if len(v) < header {
			return loop.ErrDatasetMiss
		}
		expires, cachedAt = time.Unix(0, u64(v[0:8])), time.Unix(0, u64(v[8:16]))
		if !s.now().Before(expires) {
			expired = true
			return loop.ErrDatasetMiss
		}
		// bbolt's memory is valid only within the transaction.
		return d.UnmarshalBinary(bytes.Clone(v[header:]))
	})
	if expired {
		_ = s.delete(key)
	}
	if err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	return &d, cachedAt, expires, nil
}

// Put implements loop.DatasetStore. A dataset larger than the bound is
// not kept (no error: the cache is an optimisation).
func (s *DatasetStore) Put(_ context.Context, key string, d *loop.Dataset, cachedAt, expires time.Time) error {
	body, err := d.MarshalBinary()
	if err != nil {
		return err
	}
	n := d.Size() + int64(len(key))
	if n > s.max {
		return nil
	}
	v := make([]byte, header, header+len(body))
	put64(v[0:8], expires.UnixNano())
	put64(v[8:16], cachedAt.UnixNano())
	put64(v[24:32], n)
	v = append(v, body...)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Update(func(tx *bolt.Tx) error {
		data, order := tx.Bucket(bucketDatasets), tx.Bucket(bucketOrder)
		freed, err := s.remove(tx, []byte(key))
		if err != nil {
			return err
		}
		total := s.bytes - freed
		seq, err := order.NextSequence()
		if err != nil {
			return err
		}
		put64(v[16:24], int64(seq))
		var sk [8]byte
		put64(sk[:], int64(seq))
		if err := order.Put(sk[:], []byte(key)); err != nil {
			return err
		}
		if err := data.Put([]byte(key), v); err != nil {
			return err
		}
		total += n
		// Evict the oldest until it fits.
		c := order.Cursor()
		for k, old := c.First(); k != nil && total > s.max; k, old = c.First() {
			if bytes.Equal(old, []byte(key)) {
				break
			}
			f, err := s.remove(tx, bytes.Clone(old))
			if err != nil {
				return err
			}
			total -= f
		}
		s.bytes = total
		return nil
	})
}

// remove deletes key and its order entry and reports the bytes freed.
func (s *DatasetStore) remove(tx *bolt.Tx, key []byte) (int64, error) {
	data, order := tx.Bucket(bucketDatasets), tx.Bucket(bucketOrder)
	v := data.Get(key)
	if len(v) < header {
		return 0, nil
	}
	n := u64(v[24:32])
	if err := order.Delete(bytes.Clone(v[16:24])); err != nil {
		return 0, err
	}
	return n, data.Delete(key)
}

func (s *DatasetStore) delete(key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.db.Update(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketDatasets).Get([]byte(key))
		if len(v) < header || s.now().Before(time.Unix(0, u64(v[0:8]))) {
			return nil // put again meanwhile
		}
		f, err := s.remove(tx, []byte(key))
		s.bytes -= f
		return err
	})
}

// Prune removes the expired entries, recounts the bytes held and reports
// how many entries it removed. New runs it; a server runs it hourly.
func (s *DatasetStore) Prune(_ context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	removed := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		now := s.now().UnixNano()
		var old [][]byte
		var total int64
		err := tx.Bucket(bucketDatasets).ForEach(func(k, v []byte) error {
			if len(v) < header || u64(v[0:8]) <= now {
				old = append(old, bytes.Clone(k))
				return nil
			}
			total += u64(v[24:32])
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if _, err := s.remove(tx, k); err != nil {
				return err
			}
			if err := tx.Bucket(bucketDatasets).Delete(k); err != nil { // a short (corrupt) value remove skips
				return err
			}
		}
		removed, s.bytes = len(old), total
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("dataset store: %w", err)
	}
	return removed, nil
}

// Bytes is what the store holds, as counted against MaxBytes.
func (s *DatasetStore) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}
