package redisvectors_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/discovery/redisvectors"
	"github.com/trawl-dev/trawl/discovery/vectorcachetest"
	"github.com/trawl-dev/trawl/stream/redistest"
)

func TestCacheConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		vectorcachetest.Run(t, func(t *testing.T) discovery.VectorCache {
			n++
			return redisvectors.New(c, fmt.Sprintf("v%d:", n))
		})
	})
}

func TestRoundTripAndIsolation(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		ctx := context.Background()
		a, b := redisvectors.New(c, "a:"), redisvectors.New(c, "b:")
		if err := a.PutVectors(ctx, map[string][]float32{"k1": {1, -2.5, 3e-7}, "k2": {}}); err != nil {
			t.Fatal(err)
		}
		got, err := a.Vectors(ctx, []string{"k1", "k2", "missing"})
		if err != nil {
			t.Fatal(err)
		}
		if v := got["k1"]; len(v) != 3 || v[0] != 1 || v[1] != -2.5 || v[2] != 3e-7 {
			t.Fatalf("k1 = %v", v)
		}
		if _, ok := got["missing"]; ok {
			t.Fatal("a key never put came back")
		}
		if _, ok := got["k2"]; ok {
			t.Fatal("an empty vector came back as a vector (it would be embedded again, not used)")
		}
		other, err := b.Vectors(ctx, []string{"k1"})
		if err != nil || len(other) != 0 {
			t.Fatalf("another prefix sees %v (%v)", other, err)
		}
	})
}
