package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// CompareApprovals orders requests oldest first (then by id, for a stable
// order), as ListApprovals returns them.
func CompareApprovals(a, b PendingApproval) int {
	if c := a.Created.Compare(b.Created); c != 0 {
		return c
	}
	return bytes.Compare([]byte(a.ID), []byte(b.ID))
}

// MemoryApprovals is an ApprovalStore in memory, for a process that keeps
// nothing (`trawl call --agent`). Expired requests are dropped as they
// are met.
type MemoryApprovals struct {
	mu sync.Mutex
	m  map[string]PendingApproval
}

// NewMemoryApprovals returns an empty in-memory store.
func NewMemoryApprovals() *MemoryApprovals {
	return &MemoryApprovals{m: map[string]PendingApproval{}}
}

// AddApproval implements ApprovalStore.
func (s *MemoryApprovals) AddApproval(_ context.Context, a PendingApproval) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[a.ID]; ok {
		return fmt.Errorf("approval %q exists", a.ID)
	}
	s.m[a.ID] = a
	return nil
}

// GetApproval implements ApprovalStore.
func (s *MemoryApprovals) GetApproval(_ context.Context, id string, now time.Time) (PendingApproval, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if ok && !now.Before(a.Expires) {
		delete(s.m, id)
		return PendingApproval{}, false, nil
	}
	return a, ok, nil
}

// ListApprovals implements ApprovalStore.
func (s *MemoryApprovals) ListApprovals(_ context.Context, now time.Time) ([]PendingApproval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]PendingApproval, 0, len(s.m))
	for id, a := range s.m {
		if !now.Before(a.Expires) {
			delete(s.m, id)
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, CompareApprovals)
	return out, nil
}

// SwapApproval implements ApprovalStore.
func (s *MemoryApprovals) SwapApproval(_ context.Context, from ApprovalStatus, a PendingApproval, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.m[a.ID]
	if !ok || !now.Before(cur.Expires) || cur.Status != from {
		return false, nil
	}
	s.m[a.ID] = a
	return true, nil
}

// Buckets of the embedded approvals store: the requests by id, and an
// index by expiry (8 bytes of unix nanoseconds, then the id) to prune.
var (
	bucketApprovals       = []byte("approvals")
	bucketApprovalExpires = []byte("approvals_by_expiry")
)

// BoltApprovals is the ApprovalStore of the embedded bbolt file: requests
// survive a restart until they expire. Each call is one transaction, so a
// swap is atomic; expired requests are pruned by every write.
type BoltApprovals struct {
	db *bolt.DB
}

// NewBoltApprovals returns the store on db, creating its buckets.
func NewBoltApprovals(db *bolt.DB) (*BoltApprovals, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketApprovals, bucketApprovalExpires} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("approvals store: %w", err)
	}
	return &BoltApprovals{db: db}, nil
}

func expiryKey(t time.Time, id string) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(max(t.UnixNano(), 0)))
	return append(k, id...)
}

// put writes a, replacing its expiry index entry (old: the one it had).
func (s *BoltApprovals) put(tx *bolt.Tx, a PendingApproval, old *PendingApproval) error {
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	ix := tx.Bucket(bucketApprovalExpires)
	if old != nil {
		if err := ix.Delete(expiryKey(old.Expires, old.ID)); err != nil {
			return err
		}
	}
	if err := ix.Put(expiryKey(a.Expires, a.ID), nil); err != nil {
		return err
	}
	return tx.Bucket(bucketApprovals).Put([]byte(a.ID), v)
}

// prune deletes the requests expired at now.
func (s *BoltApprovals) prune(tx *bolt.Tx, now time.Time) error {
	ix, recs := tx.Bucket(bucketApprovalExpires), tx.Bucket(bucketApprovals)
	limit := uint64(max(now.UnixNano(), 0))
	var gone [][]byte
	c := ix.Cursor()
	for k, _ := c.First(); len(k) >= 8 && binary.BigEndian.Uint64(k[:8]) <= limit; k, _ = c.Next() {
		gone = append(gone, slices.Clone(k))
	}
	for _, k := range gone {
		if err := ix.Delete(k); err != nil {
			return err
		}
		if err := recs.Delete(k[8:]); err != nil {
			return err
		}
	}
	return nil
}

func getApproval(tx *bolt.Tx, id string, now time.Time) (PendingApproval, bool, error) {
	var a PendingApproval
	v := tx.Bucket(bucketApprovals).Get([]byte(id))
	if v == nil {
		return a, false, nil
	}
	if err := json.Unmarshal(v, &a); err != nil {
		return a, false, fmt.Errorf("approvals store: request %q: %w", id, err)
	}
	if !now.Before(a.Expires) {
		return PendingApproval{}, false, nil
	}
	return a, true, nil
}

// AddApproval implements ApprovalStore.
func (s *BoltApprovals) AddApproval(_ context.Context, a PendingApproval) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if err := s.prune(tx, a.Created); err != nil {
			return err
		}
		if tx.Bucket(bucketApprovals).Get([]byte(a.ID)) != nil {
			return fmt.Errorf("approval %q exists", a.ID)
		}
		return s.put(tx, a, nil)
	})
}

// GetApproval implements ApprovalStore.
func (s *BoltApprovals) GetApproval(_ context.Context, id string, now time.Time) (a PendingApproval, ok bool, err error) {
	err = s.db.View(func(tx *bolt.Tx) error {
		a, ok, err = getApproval(tx, id, now)
		return err
	})
	return a, ok, err
}

// ListApprovals implements ApprovalStore.
func (s *BoltApprovals) ListApprovals(_ context.Context, now time.Time) ([]PendingApproval, error) {
	var out []PendingApproval
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketApprovals).ForEach(func(k, v []byte) error {
			var a PendingApproval
			if err := json.Unmarshal(v, &a); err != nil {
				return fmt.Errorf("approvals store: request %q: %w", k, err)
			}
			if now.Before(a.Expires) {
				out = append(out, a)
			}
			return nil
		})
	})
	slices.SortFunc(out, CompareApprovals)
	return out, err
}

// SwapApproval implements ApprovalStore.
func (s *BoltApprovals) SwapApproval(_ context.Context, from ApprovalStatus, a PendingApproval, now time.Time) (swapped bool, err error) {
	err = s.db.Update(func(tx *bolt.Tx) error {
		cur, ok, err := getApproval(tx, a.ID, now)
		if err != nil || !ok || cur.Status != from {
			return err
		}
		swapped = true
		return s.put(tx, a, &cur)
	})
	return swapped, err
}
