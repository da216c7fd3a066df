// Package redisvectors is the discovery.VectorCache replicas share on
// Redis: one hash "<prefix>vectors" of tool-text hashes to vectors
// (little-endian float32s), so a deployment embeds each tool text once
// per model however many replicas build indexes. Redis's maxmemory bounds
// it; the cache is only an optimisation (a missing vector is embedded
// again).
package redisvectors

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/discovery"
)

// Cache is the Redis VectorCache.
type Cache struct {
	c   redis.UniversalClient
	key string
}

var _ discovery.VectorCache = (*Cache)(nil)

// New returns the cache of client; its key begins with prefix.
func New(client redis.UniversalClient, prefix string) *Cache {
	return &Cache{c: client, key: prefix + "vectors"}
}

// Vectors implements discovery.VectorCache.
func (c *Cache) Vectors(ctx context.Context, keys []string) (map[string][]float32, error) {
	out := map[string][]float32{}
	if len(keys) == 0 {
		return out, nil
	}
	vals, err := c.c.HMGet(ctx, c.key, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("vector cache: redis: %w", err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok || len(s) == 0 || len(s)%4 != 0 {
			continue // absent, or not a vector: embedded again
		}
		vec := make([]float32, len(s)/4)
		for j := range vec {
			vec[j] = math.Float32frombits(binary.LittleEndian.Uint32([]byte(s[4*j : 4*j+4])))
		}
		out[keys[i]] = vec
	}
	return out, nil
}

// PutVectors implements discovery.VectorCache.
func (c *Cache) PutVectors(ctx context.Context, vectors map[string][]float32) error {
	if len(vectors) == 0 {
		return nil
	}
	args := make([]any, 0, 2*len(vectors))
	for k, vec := range vectors {
		b := make([]byte, 4*len(vec))
		for i, x := range vec {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
		}
		args = append(args, k, b)
	}
	if err := c.c.HSet(ctx, c.key, args...).Err(); err != nil {
		return fmt.Errorf("vector cache: redis: %w", err)
	}
	return nil
}
