// Package redisstore holds the Redis backends of a deployment's own state
// (package web/deploy): sessions (Sessions, a deploy.SessionStore for the
// deployment's Session type) and the plain keyed records the embedded
// store keeps in bbolt buckets — workflow definitions, sealed connection
// tokens (Bucket). It imports nothing of web or
// web/deploy, so the deployment can use it.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// Bucket is a named set of records by key, like a bbolt bucket: one Redis
// hash "<prefix>bucket:<name>". Values are opaque bytes (sealed
// connection tokens stay sealed: the key that opens them never reaches
// Redis).
type Bucket struct {
	c   redis.UniversalClient
	key string
}

// NewBucket returns the bucket name of client under prefix.
func NewBucket(client redis.UniversalClient, prefix, name string) *Bucket {
	return &Bucket{c: client, key: prefix + "bucket:" + name}
}

// Put stores v under k, replacing what was there.
func (b *Bucket) Put(ctx context.Context, k string, v []byte) error {
	if err := b.c.HSet(ctx, b.key, k, v).Err(); err != nil {
		return fmt.Errorf("%s: redis: %w", b.key, err)
	}
	return nil
}

// Get returns the value under k; ok is false when there is none.
func (b *Bucket) Get(ctx context.Context, k string) (v []byte, ok bool, err error) {
	v, err = b.c.HGet(ctx, b.key, k).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("%s: redis: %w", b.key, err)
	}
	return v, true, nil
}

// Delete removes k and reports whether it was there.
func (b *Bucket) Delete(ctx context.Context, k string) (bool, error) {
	n, err := b.c.HDel(ctx, b.key, k).Result()
	if err != nil {
		return false, fmt.Errorf("%s: redis: %w", b.key, err)
	}
	return n > 0, nil
}

// ForEach calls fn for every record in key order (as bbolt does), stopping
// at fn's first error. It reads the hash in batches (HSCAN), so a large
// bucket never arrives in one reply.
func (b *Bucket) ForEach(ctx context.Context, fn func(k string, v []byte) error) error {
	all := map[string]string{}
	var cursor uint64
	for {
		kv, next, err := b.c.HScan(ctx, b.key, cursor, "", 500).Result()
		if err != nil {
			return fmt.Errorf("%s: redis: %w", b.key, err)
		}
		for i := 0; i+1 < len(kv); i += 2 {
			all[kv[i]] = kv[i+1]
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	keys := make([]string, 0, len(all))
	for k := range all {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := fn(k, []byte(all[k])); err != nil {
			return err
		}
	}
	return nil
}

// Sessions keeps sessions of type T (web's session record) by token
// hash: the key "<prefix>session:<hash>" holds T's JSON and expires when
// the session does, so an expired session is simply gone on every
// replica. Sessions[T] has web.SessionStore's methods.
type Sessions[T any] struct {
	c       redis.UniversalClient
	prefix  string
	expires func(T) time.Time
}

// NewSessions returns the session store of client; expires reads a
// session's expiry.
func NewSessions[T any](client redis.UniversalClient, prefix string, expires func(T) time.Time) *Sessions[T] {
	return &Sessions[T]{c: client, prefix: prefix + "session:", expires: expires}
}

// PutSession stores s under hash until it expires.
func (s *Sessions[T]) PutSession(ctx context.Context, hash string, sess T) error {
	v, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	exp := s.expires(sess)
	if time.Until(exp) <= 0 {
		return s.DeleteSession(ctx, hash)
	}
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.prefix+hash, v, 0)
		p.PExpireAt(ctx, s.prefix+hash, exp)
		return nil
	})
	if err != nil {
		return fmt.Errorf("session store: redis: %w", err)
	}
	return nil
}

// GetSession returns the session under hash; found is false when there is
// none (never stored, expired or deleted).
func (s *Sessions[T]) GetSession(ctx context.Context, hash string) (sess T, found bool, err error) {
	v, err := s.c.Get(ctx, s.prefix+hash).Bytes()
	if errors.Is(err, redis.Nil) {
		return sess, false, nil
	}
	if err != nil {
		return sess, false, fmt.Errorf("session store: redis: %w", err)
	}
	if err := json.Unmarshal(v, &sess); err != nil {
		return sess, false, fmt.Errorf("session store: %w", err)
	}
	return sess, true, nil
}

// DeleteSession removes the session under hash.
func (s *Sessions[T]) DeleteSession(ctx context.Context, hash string) error {
	if err := s.c.Del(ctx, s.prefix+hash).Err(); err != nil {
		return fmt.Errorf("session store: redis: %w", err)
	}
	return nil
}

// Grants keeps short-lived records by key until they expire (connect
// codes and attempts), at most a bound of them live across every replica:
// "<prefix>grant:<key>" with the record's TTL, so a link minted on one
// replica opens on any, and "<prefix>grants", the live keys by expiry, to
// count them. A put first admits the key in the index (one script on the
// index: the bound is exact across replicas), then sets the record; a
// spend is GETDEL, then the index forgets the key: of two concurrent
// spends only one gets the record. On a Redis Cluster each record is in
// a slot of its own.
type Grants struct {
	c     redis.UniversalClient
	key   string // the records' key prefix
	index string
	max   int
	now   func() time.Time
}

// NewGrants returns the grant store of client under prefix, holding at
// most max live grants (zero or less: no bound).
func NewGrants(client redis.UniversalClient, prefix string, max int) *Grants {
	return &Grants{c: client, key: prefix + "grant:", index: prefix + "grants", max: max, now: time.Now}
}

// admitGrantScript: KEYS index; ARGV key, ttl ms, now ms, max. 0 when
// the bound is reached (and k is not live already); else k is in the
// index until its expiry.
var admitGrantScript = redis.NewScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[3])
local max = tonumber(ARGV[4])
if max > 0 and not redis.call('ZSCORE', KEYS[1], ARGV[1]) and redis.call('ZCARD', KEYS[1]) >= max then return 0 end
redis.call('ZADD', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[2]), ARGV[1])
return 1`)

// PutGrant stores v under k for ttl; stored is false, and nothing is
// stored, when the bound of live grants is reached. A ttl under a
// millisecond stores nothing.
func (g *Grants) PutGrant(ctx context.Context, k string, v []byte, ttl time.Duration) (stored bool, err error) {
	if ttl < time.Millisecond {
		return true, nil
	}
	n, err := admitGrantScript.Run(ctx, g.c, []string{g.index}, k, ttl.Milliseconds(), g.now().UnixMilli(), g.max).Int()
	if err == nil && n == 1 {
		err = g.c.Set(ctx, g.key+k, v, ttl).Err()
	}
	if err != nil {
		return false, fmt.Errorf("grants: redis: %w", err)
	}
	return n == 1, nil
}

// TakeGrant returns the live value under k; spend removes it.
func (g *Grants) TakeGrant(ctx context.Context, k string, spend bool) ([]byte, bool, error) {
	var v string
	var err error
	if spend {
		if v, err = g.c.GetDel(ctx, g.key+k).Result(); err == nil {
			// The record is spent whatever this answers: an entry left
			// behind counts toward the bound until its expiry only.
			_ = g.c.ZRem(ctx, g.index, k).Err()
		}
	} else {
		v, err = g.c.Get(ctx, g.key+k).Result()
	}
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("grants: redis: %w", err)
	}
	return []byte(v), true, nil
}
