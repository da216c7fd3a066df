package redisstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/boltstore"
	"github.com/trawl-dev/trawl/loop/redisstore"
	"github.com/trawl-dev/trawl/stream/redistest"
)

func items(n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, `{"id":%d,"name":"customer %d","email":"c%d@example.com","note":"%s"}`, i, i, i, strings.Repeat("n", 120))
	}
	return out
}

// BenchmarkResultRoundTrip: Put then Get of a stored result of 250 items
// (about 45 KB), in memory and on Redis over loopback.
func BenchmarkResultRoundTrip(b *testing.B) {
	c := redistest.Start(b).Client(b)
	rec, err := loop.NewStoredResultFromItems("acme.list", []byte(`{"data":[]}`), "data", items(250))
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range []struct {
		name  string
		store loop.ResultStore
	}{
		{"memory", loop.NewMemoryResultStore(loop.MemoryStoreOptions{})},
		{"redis", redisstore.NewResultStore(c, redisstore.Options{Prefix: "bench:"})},
	} {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			b.SetBytes(int64(len(rec.Text())))
			for i := 0; b.Loop(); i++ {
				k := fmt.Sprint("o/t/r", i%64)
				if err := s.store.Put(ctx, k, rec, time.Now().Add(time.Hour)); err != nil {
					b.Fatal(err)
				}
				if _, err := s.store.Get(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDatasetRoundTrip: Put then Get of a cached walk of 5,000 items
// (about 900 KB), in memory, in the bbolt file and on Redis.
func BenchmarkDatasetRoundTrip(b *testing.B) {
	c := redistest.Start(b).Client(b)
	db, err := bolt.Open(filepath.Join(b.TempDir(), "b.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	bs, err := boltstore.New(db, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	d := &loop.Dataset{Envelope: []byte(`{"data":[]}`), ItemsPath: "data", HasItems: true, Items: items(5000), Complete: true}
	for _, s := range []struct {
		name  string
		store loop.DatasetStore
	}{
		{"memory", loop.NewMemoryDatasetStore(loop.MemoryStoreOptions{})},
		{"bolt", bs},
		{"redis", redisstore.NewDatasetStore(c, redisstore.Options{Prefix: "bench:"})},
	} {
		b.Run(s.name, func(b *testing.B) {
			ctx := context.Background()
			b.SetBytes(d.Size())
			for i := 0; b.Loop(); i++ {
				k := fmt.Sprint("o/k", i%16)
				if err := s.store.Put(ctx, k, d, time.Now(), time.Now().Add(time.Hour)); err != nil {
					b.Fatal(err)
				}
				if _, _, _, err := s.store.Get(ctx, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
