// Package redisstore holds the Redis backends of the loop package: the
// result store, the dataset cache's store, and the lock that collapses
// identical walks across replicas (two replicas asked for the same walk
// at once make it once).
//
// Keys, under the prefix: "res:<key>" (a serialised loop.StoredResult,
// expiring at its time) and "res-gone:<key>" (a marker that outlives it by
// a day, so an expired or evicted result answers ErrResultExpired rather
// than ErrResultNotFound); "ds:<key>" (a serialised loop.Dataset with its
// times); "walk:<key>" (the lock of a walk in flight). TTLs are Redis's
// own (PEXPIREAT), so every replica sees an entry expire at once. On a
// Redis Cluster a result and its marker are in the slot of its key
// (written in one transaction); every other key stands alone, so entries
// spread over the masters (tools/rediskey). Redis errors are returned
// as errors, never taken for a miss.
package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools/rediskey"
)

// Options configure the stores. The zero value means every default.
type Options struct {
	// Prefix begins every key, e.g. "trawl:".
	Prefix string
	// MaxRecordBytes bounds one stored result or dataset (Size as the
	// memory stores count it). Zero: 64 MiB. The total is bounded by
	// Redis's maxmemory (with an eviction policy such as volatile-lru).
	MaxRecordBytes int64
}

func (o Options) max() int64 {
	if o.MaxRecordBytes <= 0 {
		return 64 << 20
	}
	return o.MaxRecordBytes
}

// goneFor is how long past its expiry a result answers ErrResultExpired.
const goneFor = 24 * time.Hour

// ResultStore is the Redis loop.ResultStore.
type ResultStore struct {
	c   redis.UniversalClient
	opt Options
	k   rediskey.Keys
}

var _ loop.ResultStore = (*ResultStore)(nil)

// NewResultStore returns the result store of client.
func NewResultStore(client redis.UniversalClient, opts Options) *ResultStore {
	return &ResultStore{c: client, opt: opts, k: rediskey.New(client, opts.Prefix)}
}

// Put implements loop.ResultStore.
func (s *ResultStore) Put(ctx context.Context, key string, rec *loop.StoredResult, expires time.Time) error {
	if rec.Size() > s.opt.max() {
		return loop.ErrResultTooLarge
	}
	b, err := rec.MarshalBinary()
	if err != nil {
		return err
	}
	res, gone := s.keys(key)
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if time.Until(expires) > 0 {
			p.Set(ctx, res, b, 0)
			p.PExpireAt(ctx, res, expires)
		} else {
			p.Del(ctx, res)
		}
		p.Set(ctx, gone, "1", 0)
		p.PExpireAt(ctx, gone, expires.Add(goneFor))
		return nil
	})
	if err != nil {
		return fmt.Errorf("result store: redis: %w", err)
	}
	return nil
}

// Get implements loop.ResultStore.
func (s *ResultStore) Get(ctx context.Context, key string) (*loop.StoredResult, error) {
	var val *redis.StringCmd
	var gone *redis.IntCmd
	rk, gk := s.keys(key)
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		val = p.Get(ctx, rk)
		gone = p.Exists(ctx, gk)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("result store: redis: %w", err)
	}
	b, err := val.Bytes()
	if errors.Is(err, redis.Nil) {
		if gone.Val() > 0 {
			return nil, loop.ErrResultExpired
		}
		return nil, loop.ErrResultNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("result store: redis: %w", err)
	}
	rec := new(loop.StoredResult)
	if err := rec.UnmarshalBinary(b); err != nil {
		return nil, err
	}
	return rec, nil
}

// keys are the result's key and its marker's, in one slot.
func (s *ResultStore) keys(key string) (res, gone string) {
	return s.k.In(key, "res:"+key), s.k.In(key, "res-gone:"+key)
}

// DatasetStore is the Redis loop.DatasetStore.
type DatasetStore struct {
	c   redis.UniversalClient
	opt Options
}

var _ loop.DatasetStore = (*DatasetStore)(nil)

// NewDatasetStore returns the dataset store of client.
func NewDatasetStore(client redis.UniversalClient, opts Options) *DatasetStore {
	return &DatasetStore{c: client, opt: opts}
}

// Get implements loop.DatasetStore.
func (s *DatasetStore) Get(ctx context.Context, key string) (*loop.Dataset, time.Time, time.Time, error) {
	b, err := s.c.Get(ctx, s.opt.Prefix+"ds:"+key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, time.Time{}, time.Time{}, loop.ErrDatasetMiss
	}
	if err != nil {
		return nil, time.Time{}, time.Time{}, fmt.Errorf("dataset store: redis: %w", err)
	}
	if len(b) < 16 {
		return nil, time.Time{}, time.Time{}, errors.New("dataset store: corrupt entry")
	}
	cachedAt := time.Unix(0, int64(binary.BigEndian.Uint64(b[0:8])))
	expires := time.Unix(0, int64(binary.BigEndian.Uint64(b[8:16])))
	var d loop.Dataset
	if err := d.UnmarshalBinary(b[16:]); err != nil {
		return nil, time.Time{}, time.Time{}, err
	}
	return &d, cachedAt, expires, nil
}

// Put implements loop.DatasetStore. A dataset over MaxRecordBytes is not
// kept (no error: the cache is an optimisation).
func (s *DatasetStore) Put(ctx context.Context, key string, d *loop.Dataset, cachedAt, expires time.Time) error {
	if d.Size() > s.opt.max() {
		return nil
	}
	body, err := d.MarshalBinary()
	if err != nil {
		return err
	}
	v := make([]byte, 16, 16+len(body))
	binary.BigEndian.PutUint64(v[0:8], uint64(cachedAt.UnixNano()))
	binary.BigEndian.PutUint64(v[8:16], uint64(expires.UnixNano()))
	v = append(v, body...)
	k := s.opt.Prefix + "ds:" + key
	if time.Until(expires) <= 0 {
		err = s.c.Del(ctx, k).Err()
	} else {
		_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, k, v, 0)
			p.PExpireAt(ctx, k, expires)
			return nil
		})
	}
	if err != nil {
		return fmt.Errorf("dataset store: redis: %w", err)
	}
	return nil
}
