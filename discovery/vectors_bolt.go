package discovery

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	bolt "go.etcd.io/bbolt"
)

var (
	bucketVectors    = []byte("discovery_vectors")     // key → sequence (8 bytes) + float32s
	bucketVectorsSeq = []byte("discovery_vectors_seq") // sequence → key, oldest first
)

// BoltVectors is the VectorCache in the embedded bbolt file. It keeps the
// newest Max vectors (zero: 20,000, about 120 MB at 1,536 dimensions) and
// drops the oldest past that, so tools that left the deployment do not
// stay for ever; a dropped vector that is still needed is embedded again.
type BoltVectors struct {
	db  *bolt.DB
	max uint64
}

// NewBoltVectors returns the cache on db, creating its buckets.
func NewBoltVectors(db *bolt.DB, max int) (*BoltVectors, error) {
	if max <= 0 {
		max = 20_000
	}
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVectors, bucketVectorsSeq} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vector cache: %w", err)
	}
	return &BoltVectors{db: db, max: uint64(max)}, nil
}

// Vectors implements VectorCache.
func (c *BoltVectors) Vectors(_ context.Context, keys []string) (map[string][]float32, error) {
	out := map[string][]float32{}
	err := c.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVectors)
		for _, k := range keys {
			v := b.Get([]byte(k))
			if len(v) < 8+4 || (len(v)-8)%4 != 0 {
				continue // absent, empty or not a vector: embedded again
			}
			vec := make([]float32, (len(v)-8)/4)
			for i := range vec {
				vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(v[8+4*i:]))
			}
			out[k] = vec
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("vector cache: %w", err)
	}
	return out, nil
}

// PutVectors implements VectorCache.
func (c *BoltVectors) PutVectors(_ context.Context, vectors map[string][]float32) error {
	err := c.db.Update(func(tx *bolt.Tx) error {
		b, seqs := tx.Bucket(bucketVectors), tx.Bucket(bucketVectorsSeq)
		for k, vec := range vectors {
			if old := b.Get([]byte(k)); len(old) >= 8 {
				if err := seqs.Delete(old[:8]); err != nil {
					return err
				}
			}
			n, err := seqs.NextSequence()
			if err != nil {
				return err
			}
			v := make([]byte, 8+4*len(vec))
			binary.BigEndian.PutUint64(v, n)
			for i, x := range vec {
				binary.LittleEndian.PutUint32(v[8+4*i:], math.Float32bits(x))
			}
			if err := b.Put([]byte(k), v); err != nil {
				return err
			}
			if err := seqs.Put(v[:8], []byte(k)); err != nil {
				return err
			}
		}
		// Drop the oldest past max. Counting walks the keys: puts are
		// rare (new tool texts), and a walk sees this transaction's own.
		var n uint64
		cur := seqs.Cursor()
		for k, _ := cur.First(); k != nil; k, _ = cur.Next() {
			n++
		}
		for ; n > c.max; n-- {
			cur := seqs.Cursor()
			sk, key := cur.First()
			if sk == nil {
				break
			}
			if err := b.Delete(key); err != nil {
				return err
			}
			if err := cur.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("vector cache: %w", err)
	}
	return nil
}
