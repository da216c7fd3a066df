// Package storetest is the conformance suite of loop.ResultStore,
// loop.DatasetStore and loop.SharedWalks (RunWalks): the embedded stores
// (and the in-process LocalWalks) and the Redis ones run it, so they
// behave the same.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop"
)

// Stores is what one test asks of an implementation: fresh, empty stores
// bounded at maxBytes (zero: the default bound). Expiry follows real
// time, so the suite uses short TTLs.
type Stores struct {
	Results  func(t *testing.T, maxBytes int64) loop.ResultStore
	Datasets func(t *testing.T, maxBytes int64) loop.DatasetStore
}

// ttl is the short expiry the suite waits out.
const ttl = 300 * time.Millisecond

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// RunResults runs the ResultStore suite.
func RunResults(t *testing.T, newStore func(t *testing.T, maxBytes int64) loop.ResultStore) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		rec := record(t, `{"data":[{"id":1},{"id":2,"name":"é"}],"next":null}`)
		if err := s.Put(ctx, "org/thread/r1", rec, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "org/thread/r1")
		if err != nil {
			t.Fatal(err)
		}
		if string(got.Text()) != string(rec.Text()) || got.Tool != rec.Tool || got.NumItems() != 2 ||
			string(got.Item(1)) != `{"id":2,"name":"é"}` || got.Len() != rec.Len() || !got.Created.Equal(rec.Created) {
			t.Fatalf("round trip changed the record: %q items %d", got.Text(), got.NumItems())
		}
	})
	t.Run("ScopeIsolation", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		if err := s.Put(ctx, "org1/thread1/r", record(t, `[1]`), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"org1/thread2/r", "org2/thread1/r", "org1/thread1/r2", "org1/thread1/", "org1/thread1/r "} {
			if _, err := s.Get(ctx, k); !errors.Is(err, loop.ErrResultNotFound) {
				t.Errorf("Get %q: %v, want ErrResultNotFound", k, err)
			}
		}
	})
	t.Run("TTLExpiry", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		if err := s.Put(ctx, "k", record(t, `[1]`), time.Now().Add(ttl)); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "long", record(t, `[2]`), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "k"); err != nil {
			t.Fatalf("within its TTL: %v", err)
		}
		time.Sleep(ttl + 200*time.Millisecond)
		if _, err := s.Get(ctx, "k"); !errors.Is(err, loop.ErrResultExpired) {
			t.Errorf("past its TTL: %v, want ErrResultExpired", err)
		}
		if _, err := s.Get(ctx, "long"); err != nil {
			t.Errorf("a longer-lived record: %v", err)
		}
		if err := s.Put(ctx, "past", record(t, `[3]`), time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "past"); !errors.Is(err, loop.ErrResultExpired) {
			t.Errorf("put already expired: %v, want ErrResultExpired", err)
		}
	})
	t.Run("TooLarge", func(t *testing.T) {
		s := newStore(t, 4096)
		ctx := ctxT(t)
		big := record(t, `["`+strings.Repeat("x", 8192)+`"]`)
		if err := s.Put(ctx, "big", big, time.Now().Add(time.Hour)); !errors.Is(err, loop.ErrResultTooLarge) {
			t.Errorf("Put of a record over the bound: %v, want ErrResultTooLarge", err)
		}
		if _, err := s.Get(ctx, "big"); !errors.Is(err, loop.ErrResultNotFound) {
			t.Errorf("Get of a record never kept: %v, want ErrResultNotFound", err)
		}
	})
	t.Run("ConcurrentPuts", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 20 {
					k := fmt.Sprintf("t%d/r%d", w, i)
					if err := s.Put(ctx, k, record(t, fmt.Sprintf(`[%d,%d]`, w, i)), time.Now().Add(time.Hour)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		for w := range 8 {
			for i := range 20 {
				got, err := s.Get(ctx, fmt.Sprintf("t%d/r%d", w, i))
				if err != nil || string(got.Text()) != fmt.Sprintf(`[%d,%d]`, w, i) {
					t.Fatalf("t%d/r%d: %v", w, i, err)
				}
			}
		}
	})
}

func record(t *testing.T, doc string) *loop.StoredResult {
	t.Helper()
	r, err := loop.NewStoredResult("tool", []byte(doc), "")
	if err != nil {
		t.Fatal(err)
	}
	r.Created = time.Unix(1_700_000_000, 0)
	return r
}

// RunDatasets runs the DatasetStore suite.
func RunDatasets(t *testing.T, newStore func(t *testing.T, maxBytes int64) loop.DatasetStore) {
	t.Run("RoundTrip", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		d := dataset(3)
		at := time.Now().Truncate(time.Millisecond)
		exp := at.Add(time.Hour)
		if err := s.Put(ctx, "org:x/k", d, at, exp); err != nil {
			t.Fatal(err)
		}
		got, gotAt, gotExp, err := s.Get(ctx, "org:x/k")
		if err != nil {
			t.Fatal(err)
		}
		if !sameDataset(got, d) {
			t.Fatalf("round trip changed the dataset: %+v", got)
		}
		if !gotAt.Equal(at) || !gotExp.Equal(exp) {
			t.Errorf("times %v %v, want %v %v", gotAt, gotExp, at, exp)
		}
		// Replacing.
		d2 := dataset(1)
		if err := s.Put(ctx, "org:x/k", d2, at, exp); err != nil {
			t.Fatal(err)
		}
		if got, _, _, err := s.Get(ctx, "org:x/k"); err != nil || !sameDataset(got, d2) {
			t.Errorf("after replacing: %+v, %v", got, err)
		}
	})
	t.Run("ScopeIsolation", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		if err := s.Put(ctx, "org:a/k", dataset(1), time.Now(), time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"org:b/k", "user:a/k", "org:a/k2", "org:a/"} {
			if _, _, _, err := s.Get(ctx, k); !errors.Is(err, loop.ErrDatasetMiss) {
				t.Errorf("Get %q: %v, want ErrDatasetMiss", k, err)
			}
		}
	})
	t.Run("TTLExpiry", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		now := time.Now()
		if err := s.Put(ctx, "short", dataset(1), now, now.Add(ttl)); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, "long", dataset(1), now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := s.Get(ctx, "short"); err != nil {
			t.Fatalf("within its TTL: %v", err)
		}
		time.Sleep(ttl + 200*time.Millisecond)
		if _, _, _, err := s.Get(ctx, "short"); !errors.Is(err, loop.ErrDatasetMiss) {
			t.Errorf("past its TTL: %v, want ErrDatasetMiss", err)
		}
		if _, _, _, err := s.Get(ctx, "long"); err != nil {
			t.Errorf("a longer-lived entry: %v", err)
		}
	})
	t.Run("Bound", func(t *testing.T) {
		one := dataset(20)
		s := newStore(t, 3*one.Size()+one.Size()/2)
		ctx := ctxT(t)
		for i := range 6 {
			if err := s.Put(ctx, fmt.Sprint(i), dataset(20), time.Now(), time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		held := 0
		for i := range 6 {
			if _, _, _, err := s.Get(ctx, fmt.Sprint(i)); err == nil {
				held++
			}
		}
		if held > 3 {
			t.Errorf("holds %d datasets, the bound fits 3", held)
		}
		if _, _, _, err := s.Get(ctx, "5"); err != nil {
			t.Errorf("the newest entry was evicted: %v", err)
		}
		// An entry larger than the whole bound is simply not kept.
		huge := dataset(200)
		if err := s.Put(ctx, "huge", huge, time.Now(), time.Now().Add(time.Hour)); err != nil {
			t.Errorf("Put over the bound: %v, want no error (the cache is an optimisation)", err)
		}
	})
	t.Run("ConcurrentPuts", func(t *testing.T) {
		s := newStore(t, 0)
		ctx := ctxT(t)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 10 {
					if err := s.Put(ctx, fmt.Sprintf("%d/%d", w, i), dataset(i), time.Now(), time.Now().Add(time.Hour)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		for w := range 8 {
			for i := range 10 {
				if got, _, _, err := s.Get(ctx, fmt.Sprintf("%d/%d", w, i)); err != nil || !sameDataset(got, dataset(i)) {
					t.Fatalf("%d/%d: %v", w, i, err)
				}
			}
		}
	})
}

func dataset(n int) *loop.Dataset {
	d := &loop.Dataset{Envelope: []byte(`{"data":[],"has_more":false}`), ItemsPath: "data", HasItems: true,
		Stats: []byte(`{"pages":1}`), Complete: true}
	for i := range n {
		d.Items = append(d.Items, fmt.Appendf(nil, `{"id":%d,"pad":"%s"}`, i, strings.Repeat("p", 40)))
	}
	return d
}

func sameDataset(a, b *loop.Dataset) bool {
	if string(a.Envelope) != string(b.Envelope) || a.ItemsPath != b.ItemsPath || a.HasItems != b.HasItems ||
		string(a.Stats) != string(b.Stats) || a.Complete != b.Complete || len(a.Items) != len(b.Items) {
		return false
	}
	for i := range a.Items {
		if string(a.Items[i]) != string(b.Items[i]) {
			return false
		}
	}
	return true
}
