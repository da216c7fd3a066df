package tools

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketActivity       = []byte("activity")
	bucketActivityThread = []byte("activity_by_thread")
)

// BoltActivityStore keeps the activity log in the embedded bbolt file. It
// keeps the newest Max records (zero means 100,000) and prunes older ones
// as new ones arrive.
type BoltActivityStore struct {
	db  *bolt.DB
	max uint64
}

// NewBoltActivityStore returns a store on db, creating its buckets.
func NewBoltActivityStore(db *bolt.DB, max int) (*BoltActivityStore, error) {
	if max <= 0 {
		max = 100_000
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
	return &BoltActivityStore{db: db, max: uint64(max)}, nil
}

func seqKey(n uint64) []byte {
	k := make([]byte, 8)
	binary.BigEndian.PutUint64(k, n)
	return k
}

// AppendActivity implements ActivityStore.
func (s *BoltActivityStore) AppendActivity(_ context.Context, a Activity) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		all := tx.Bucket(bucketActivity)
		seq, err := all.NextSequence()
		if err != nil {
			return err
		}
		key := seqKey(seq)
		if err := all.Put(key, v); err != nil {
			return err
		}
		if a.ThreadID != "" {
			tb, err := tx.Bucket(bucketActivityThread).CreateBucketIfNotExists([]byte(a.ThreadID))
			if err != nil {
				return err
			}
			if err := tb.Put(key, nil); err != nil {
				return err
			}
		}
		if seq > s.max && seq%1024 == 0 {
			return prunePrefix(all, seqKey(seq-s.max))
		}
		return nil
	})
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

// ListActivity implements ActivityStore.
func (s *BoltActivityStore) ListActivity(_ context.Context, threadID string, limit int) ([]Activity, error) {
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
