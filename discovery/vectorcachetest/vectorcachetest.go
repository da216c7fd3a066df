// Package vectorcachetest is the conformance suite of
// discovery.VectorCache: the embedded bbolt cache and the Redis one run
// it, so they behave the same.
package vectorcachetest

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/discovery"
)

// New returns a fresh, empty cache, for t alone.
type New func(t *testing.T) discovery.VectorCache

// Run runs the suite.
func Run(t *testing.T, newCache New) {
	t.Run("RoundTrip", func(t *testing.T) { roundTrip(t, newCache(t)) })
	t.Run("NotVectors", func(t *testing.T) { notVectors(t, newCache(t)) })
	t.Run("Replace", func(t *testing.T) { replace(t, newCache(t)) })
	t.Run("Separate", func(t *testing.T) { separate(t, newCache) })
	t.Run("ConcurrentPuts", func(t *testing.T) { concurrentPuts(t, newCache(t)) })
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// roundTrip: every float32 comes back bit for bit (signs, zeros,
// subnormals, extremes, a long vector), keys in any text; a key never put
// is absent; no keys asks nothing.
func roundTrip(t *testing.T, c discovery.VectorCache) {
	ctx := ctxT(t)
	long := make([]float32, 3072)
	for i := range long {
		long[i] = float32(i) / 7
	}
	put := map[string][]float32{
		"sha256:0f1e":            {1, -2.5, 3e-7},
		"extremes":               {math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 0},
		"long":                   long,
		"text-embedding-3 é/ :*": {0.5},
	}
	if err := c.PutVectors(ctx, put); err != nil {
		t.Fatal(err)
	}
	keys := []string{"missing"}
	for k := range put {
		keys = append(keys, k)
	}
	got, err := c.Vectors(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(put, got, cmp.Comparer(sameBits)); diff != "" {
		t.Errorf("Vectors (-put +got):\n%s", diff)
	}
	if got, err := c.Vectors(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("Vectors of no keys: %v, %v", got, err)
	}
	if err := c.PutVectors(ctx, nil); err != nil {
		t.Errorf("PutVectors of none: %v", err)
	}
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// notVectors: an empty vector reads as absent, even over a vector put
// before (an empty one would be used, not embedded again).
func notVectors(t *testing.T, c discovery.VectorCache) {
	ctx := ctxT(t)
	if err := c.PutVectors(ctx, map[string][]float32{"empty": {2}}); err != nil {
		t.Fatal(err)
	}
	if err := c.PutVectors(ctx, map[string][]float32{"empty": {}, "nil": nil, "one": {1}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Vectors(ctx, []string{"empty", "nil", "one"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]float32{"one": {1}}, got); diff != "" {
		t.Errorf("Vectors (-want +got):\n%s", diff)
	}
}

// replace: a key put again holds the new vector, of any length.
func replace(t *testing.T, c discovery.VectorCache) {
	ctx := ctxT(t)
	for _, v := range [][]float32{{1, 2, 3}, {4}, {5, 6, 7, 8}} {
		if err := c.PutVectors(ctx, map[string][]float32{"k": v}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Vectors(ctx, []string{"k"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(v, got["k"]); diff != "" {
			t.Errorf("after putting %v (-want +got):\n%s", v, diff)
		}
	}
}

// separate: two caches share nothing.
func separate(t *testing.T, newCache New) {
	ctx := ctxT(t)
	a, b := newCache(t), newCache(t)
	if err := a.PutVectors(ctx, map[string][]float32{"k": {1}}); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Vectors(ctx, []string{"k"}); err != nil || len(got) != 0 {
		t.Errorf("another cache sees %v (%v)", got, err)
	}
}

// concurrentPuts: concurrent puts of distinct and shared keys all land,
// each key holding one of the vectors put under it.
func concurrentPuts(t *testing.T, c discovery.VectorCache) {
	ctx := ctxT(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 20 {
				err := c.PutVectors(ctx, map[string][]float32{fmt.Sprintf("own-%d-%d", w, i): {float32(w), float32(i)}, "shared": {float32(w)}})
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	keys := []string{"shared"}
	for w := range 8 {
		for i := range 20 {
			keys = append(keys, fmt.Sprintf("own-%d-%d", w, i))
		}
	}
	got, err := c.Vectors(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Errorf("%d of %d keys came back", len(got), len(keys))
	}
	if v := got["shared"]; len(v) != 1 || v[0] < 0 || v[0] > 7 {
		t.Errorf("shared = %v, want one of the vectors put", v)
	}
}
