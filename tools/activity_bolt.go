package tools

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketActivity       = []byte("activity")
	bucketActivityThread = []byte("activity_by_thread")
)

// BoltActivityStore keeps the activity log in the embedded bbolt file,
// the newest Max records, pruning older ones as new ones arrive.
//
// Records are written in batches: AppendActivity queues a record and
// returns, and one transaction (one fsync) writes what is queued at most
// FlushDelay later, or at once when MaxBatch records wait. ListActivity
// and Close write what is queued first, so a listing always holds every
// record appended before it. A crash (the process killed, the machine
// lost) loses the records queued since the last write: at most the last
// FlushDelay's, never one already written.
type BoltActivityStore struct {
	db  *bolt.DB
	opt BoltActivityOptions

	write sync.Mutex // one batch written at a time, in order

	mu      sync.Mutex
	pending []Activity
	armed   bool // a write is scheduled
	closed  bool
}

// BoltActivityOptions configure a BoltActivityStore. The zero value is
// usable.
type BoltActivityOptions struct {
	// Max is how many records are kept. Zero: 100,000.
	Max int
	// FlushDelay bounds how long a record waits to be written. Zero:
	// 250 ms.
	FlushDelay time.Duration
	// MaxBatch writes the queue at once when it holds this many records.
	// Zero: 256.
	MaxBatch int
}

// NewBoltActivityStore returns a store on db, creating its buckets. Close
// it before db, to write what is queued.
func NewBoltActivityStore(db *bolt.DB, opt BoltActivityOptions) (*BoltActivityStore, error) {
	if opt.Max <= 0 {
		opt.Max = 100_000
	}
	if opt.FlushDelay <= 0 {
		opt.FlushDelay = 250 * time.Millisecond
	}
	if opt.MaxBatch <= 0 {
		opt.MaxBatch = 256
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketActivity, bucketActivityThread} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("activity store: %w", err)
	}
	return &BoltActivityStore{db: db, opt: opt}, nil
}

func seqKey(n uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, n)
	return k
}

// AppendActivity implements ActivityStore: it queues a, to be written
// within FlushDelay (after Close, it writes it at once).
func (s *BoltActivityStore) AppendActivity(_ context.Context, a Activity) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return s.writeBatch([]Activity{a})
	}
	s.pending = append(s.pending, a)
	full := len(s.pending) >= s.opt.MaxBatch
	if !full && !s.armed {
		s.armed = true
		time.AfterFunc(s.opt.FlushDelay, func() { _ = s.flush() })
	}
	s.mu.Unlock()
	if full {
		return s.flush()
	}
	return nil
}

// flush writes what is queued.
func (s *BoltActivityStore) flush() error {
	s.write.Lock()
	defer s.write.Unlock()
	s.mu.Lock()
	batch := s.pending
	s.pending, s.armed = nil, false
	s.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	return s.writeLocked(batch)
}

func (s *BoltActivityStore) writeBatch(batch []Activity) error {
	s.write.Lock()
	defer s.write.Unlock()
	return s.writeLocked(batch)
}

// writeLocked writes batch in one transaction (s.write held).
func (s *BoltActivityStore) writeLocked(batch []Activity) error {
	vals := make([][]byte, len(batch))
	for i := range batch {
		v, err := json.Marshal(batch[i])
		if err != nil {
			return err
		}
		vals[i] = v
	}
	max := uint64(s.opt.Max)
	err := s.db.Update(func(tx *bolt.Tx) error {
		all, threads := tx.Bucket(bucketActivity), tx.Bucket(bucketActivityThread)
		prune := uint64(0)
		for i, a := range batch {
			seq, err := all.NextSequence()
			if err != nil {
				return err
			}
			key := seqKey(seq)
			if err := all.Put(key, vals[i]); err != nil {
				return err
			}
			if a.ThreadID != "" {
				tb, err := threads.CreateBucketIfNotExists([]byte(a.ThreadID))
				if err != nil {
					return err
				}
				if err := tb.Put(key, nil); err != nil {
					return err
				}
			}
			if seq > max && seq%1024 == 0 {
				prune = seq
			}
		}
		if prune > 0 {
			return prunePrefix(all, seqKey(prune-max))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("activity store: %w", err)
	}
	return nil
}

// Close writes what is queued; later appends are written one by one.
func (s *BoltActivityStore) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.flush()
}

// prunePrefix deletes every key of b below limit.
func prunePrefix(b *bolt.Bucket, limit []byte) error {
	c := b.Cursor()
	for k, _ := c.First(); k != nil && string(k) < string(limit); k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return err
		}
	}
	return nil
}

// ListActivity implements ActivityStore, after writing what is queued.
func (s *BoltActivityStore) ListActivity(_ context.Context, threadID string, limit int) ([]Activity, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
	var out []Activity
	err := s.db.View(func(tx *bolt.Tx) error {
		all := tx.Bucket(bucketActivity)
		src := all
		if threadID != "" {
			src = tx.Bucket(bucketActivityThread).Bucket([]byte(threadID))
			if src == nil {
				return nil
			}
		}
		c := src.Cursor()
		for k, _ := c.Last(); k != nil && len(out) < limit; k, _ = c.Prev() {
			v := all.Get(k)
			if v == nil {
				continue // pruned
			}
			var a Activity
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("activity record %x: %w", k, err)
			}
			out = append(out, a)
		}
		return nil
	})
	return out, err
}
