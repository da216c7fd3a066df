package deploy

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/redisstore"
)

// The Redis bucket and grants are the embedded ones' Redis halves.
var (
	_ Records = (*redisstore.Bucket)(nil)
	_ grants  = (*redisstore.Grants)(nil)
)

// testRecords is the Records conformance suite: newRecords returns a
// fresh, empty set of records of its own each call.
func testRecords(t *testing.T, newRecords func() Records) {
	ctx := context.Background()
	t.Run("RoundTrip", func(t *testing.T) {
		r := newRecords()
		for k, v := range map[string]string{"w1": `{"n":1}`, "bin": "\x00binary\xff", "empty": "", "é/ :*": "x"} {
			if err := r.Put(ctx, k, []byte(v)); err != nil {
				t.Fatal(err)
			}
			if got, ok, err := r.Get(ctx, k); err != nil || !ok || string(got) != v {
				t.Errorf("Get(%q) = %q %v %v, want %q", k, got, ok, err, v)
			}
		}
		if err := r.Put(ctx, "w1", []byte("replaced")); err != nil {
			t.Fatal(err)
		}
		if got, _, _ := r.Get(ctx, "w1"); string(got) != "replaced" {
			t.Errorf("after a replace: %q", got)
		}
		if _, ok, err := r.Get(ctx, "w2"); ok || err != nil {
			t.Errorf("a key never put: ok %v, %v", ok, err)
		}
	})
	t.Run("Delete", func(t *testing.T) {
		r := newRecords()
		if err := r.Put(ctx, "k", []byte("v")); err != nil {
			t.Fatal(err)
		}
		if found, err := r.Delete(ctx, "k"); !found || err != nil {
			t.Errorf("Delete: %v %v", found, err)
		}
		if found, err := r.Delete(ctx, "k"); found || err != nil {
			t.Errorf("Delete again: %v %v", found, err)
		}
		if _, ok, _ := r.Get(ctx, "k"); ok {
			t.Error("a deleted record is found")
		}
	})
	t.Run("ForEach", func(t *testing.T) {
		r := newRecords()
		var want []string
		for i := range 1200 { // more than one Redis HSCAN batch
			k := fmt.Sprintf("w%04d", (i*7919)%1200)
			if err := r.Put(ctx, k, []byte(k+"!")); err != nil {
				t.Fatal(err)
			}
			want = append(want, k)
		}
		slices.Sort(want)
		var keys []string
		err := r.ForEach(ctx, func(k string, v []byte) error {
			if string(v) != k+"!" {
				t.Errorf("ForEach: %q holds %q", k, v)
			}
			keys = append(keys, k)
			return nil
		})
		if err != nil || !slices.Equal(keys, want) {
			t.Fatalf("ForEach: %d keys in key order %v (%v); want all 1200", len(keys), slices.IsSorted(keys), err)
		}
		stop := errors.New("stop")
		n := 0
		if err := r.ForEach(ctx, func(string, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Errorf("ForEach's error: %v after %d calls", err, n)
		}
	})
	t.Run("Separate", func(t *testing.T) {
		a, b := newRecords(), newRecords()
		if err := a.Put(ctx, "k", []byte("a")); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := b.Get(ctx, "k"); ok || err != nil {
			t.Errorf("another set of records sees the record (%v)", err)
		}
		if err := b.ForEach(ctx, func(k string, _ []byte) error { return fmt.Errorf("lists %q", k) }); err != nil {
			t.Errorf("another set of records: %v", err)
		}
	})
	t.Run("ConcurrentPuts", func(t *testing.T) {
		r := newRecords()
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 25 {
					if err := r.Put(ctx, fmt.Sprintf("k%d-%d", w, i), []byte("v")); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		n := 0
		if err := r.ForEach(ctx, func(string, []byte) error { n++; return nil }); err != nil || n != 200 {
			t.Errorf("%d records after 200 concurrent puts (%v)", n, err)
		}
	})
}

func TestRecordsConform(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n := 0
		testRecords(t, func() Records {
			n++
			r, err := newBoltRecords(db, fmt.Sprint("records", n))
			if err != nil {
				t.Fatal(err)
			}
			return r
		})
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
			c := srv.Universal(t)
			n := 0
			testRecords(t, func() Records {
				n++
				return redisstore.NewBucket(c, fmt.Sprintf("p%d:", n), "records")
			})
		})
	})
}

// grantTTL is the short expiry the grants suite waits out (Redis's TTLs
// follow real time).
const grantTTL = 300 * time.Millisecond

// testGrants is the grants conformance suite: newGrants returns a fresh,
// empty store of its own bounded at max live grants.
func testGrants(t *testing.T, newGrants func(max int) grants) {
	ctx := context.Background()
	put := func(t *testing.T, g grants, k string, ttl time.Duration) bool {
		t.Helper()
		stored, err := g.PutGrant(ctx, k, []byte("v:"+k), ttl)
		if err != nil {
			t.Fatal(err)
		}
		return stored
	}
	t.Run("TakeAndSpend", func(t *testing.T) {
		g := newGrants(10)
		if !put(t, g, "code:1", time.Minute) {
			t.Fatal("not stored")
		}
		for i, spend := range []bool{false, false, true} {
			if v, ok, err := g.TakeGrant(ctx, "code:1", spend); err != nil || !ok || string(v) != "v:code:1" {
				t.Fatalf("take %d (spend %v): %q %v %v", i, spend, v, ok, err)
			}
		}
		if _, ok, err := g.TakeGrant(ctx, "code:1", true); ok || err != nil {
			t.Errorf("a spent grant is taken again (%v)", err)
		}
		if _, ok, err := g.TakeGrant(ctx, "code:2", false); ok || err != nil {
			t.Errorf("a grant never put is found (%v)", err)
		}
	})
	t.Run("OneSpendWins", func(t *testing.T) {
		g := newGrants(10)
		put(t, g, "attempt:1", time.Minute)
		var got atomic.Int64
		var wg sync.WaitGroup
		for range 10 {
			wg.Go(func() {
				if _, ok, err := g.TakeGrant(ctx, "attempt:1", true); err != nil {
					t.Error(err)
				} else if ok {
					got.Add(1)
				}
			})
		}
		wg.Wait()
		if n := got.Load(); n != 1 {
			t.Errorf("%d of 10 concurrent spends got the grant, want 1", n)
		}
	})
	t.Run("Bound", func(t *testing.T) {
		g := newGrants(3)
		for i := range 3 {
			if !put(t, g, fmt.Sprint("code:", i), time.Minute) {
				t.Fatalf("grant %d refused below the bound", i)
			}
		}
		if put(t, g, "code:3", time.Minute) {
			t.Fatal("a grant beyond the bound is stored")
		}
		if _, ok, _ := g.TakeGrant(ctx, "code:3", false); ok {
			t.Fatal("the refused grant is found")
		}
		if !put(t, g, "code:0", time.Minute) {
			t.Error("replacing a live grant at the bound is refused")
		}
		if _, ok, _ := g.TakeGrant(ctx, "code:1", true); !ok {
			t.Fatal("spend: not found")
		}
		if !put(t, g, "code:3", time.Minute) {
			t.Error("a spent grant still counts against the bound")
		}
	})
	t.Run("Expiry", func(t *testing.T) {
		g := newGrants(1)
		put(t, g, "code:short", grantTTL)
		if _, ok, _ := g.TakeGrant(ctx, "code:short", false); !ok {
			t.Fatal("within its TTL: not found")
		}
		if put(t, g, "code:other", time.Minute) {
			t.Fatal("a second grant is stored at a bound of one")
		}
		time.Sleep(grantTTL + 300*time.Millisecond)
		if _, ok, _ := g.TakeGrant(ctx, "code:short", false); ok {
			t.Error("past its TTL: found")
		}
		if !put(t, g, "code:other", time.Minute) {
			t.Error("an expired grant still counts against the bound")
		}
		if !put(t, g, "code:dead", 0) {
			t.Error("a grant with no time to live is refused")
		}
		if _, ok, _ := g.TakeGrant(ctx, "code:dead", false); ok {
			t.Error("a grant with no time to live is found")
		}
	})
}

func TestGrantsConform(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		testGrants(t, func(max int) grants { return newMemGrants(time.Now, max) })
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
			c := srv.Universal(t)
			n := 0
			testGrants(t, func(max int) grants {
				n++
				return redisstore.NewGrants(c, fmt.Sprintf("p%d:", n), max)
			})
		})
	})
}
