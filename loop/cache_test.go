package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/loop/paginate"
)

// decodeArgs decodes model arguments the way the engine does.
func modelArgs(t *testing.T, s string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestDatasetKey(t *testing.T) {
	org := Scope{Org: "acme", Thread: "t1", User: "alice"}
	base := CacheRequest{ToolID: "acme.list_orders", Args: modelArgs(t, `{"status":"open","filter":{"b":1,"a":[1,2]},"_all_pages":true}`), Scope: org}
	key := func(mod func(*CacheRequest)) string {
		t.Helper()
		r := base
		mod(&r)
		k, err := DatasetKey(r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	same := map[string]func(*CacheRequest){
		"argument order": func(r *CacheRequest) {
			r.Args = modelArgs(t, `{"_all_pages":true,"filter":{"a":[1,2],"b":1},"status":"open"}`)
		},
		"_fields, _filter, _aggregate, _refresh": func(r *CacheRequest) {
			r.Args = modelArgs(t, `{"status":"open","filter":{"b":1.0,"a":[1,2e0]},"_all_pages":true,"_fields":["id"],"_filter":[{"field":"x","op":"eq","value":1}],"_refresh":true,"_aggregate":{"group_by":["status"]}}`)
		},
		"another thread and user (org credentials)": func(r *CacheRequest) { r.Scope = Scope{Org: "acme", Thread: "t9", User: "bob"} },
		"float64 numbers": func(r *CacheRequest) {
			r.Args = map[string]any{"status": "open", "filter": map[string]any{"a": []any{1.0, 2.0}, "b": 1.0}, "_all_pages": true}
		},
	}
	for name, mod := range same {
		if got := key(mod); got != key(func(*CacheRequest) {}) {
			t.Errorf("%s changed the key", name)
		}
	}
	differ := map[string]func(*CacheRequest){
		"argument value": func(r *CacheRequest) {
			r.Args = modelArgs(t, `{"status":"paid","filter":{"b":1,"a":[1,2]},"_all_pages":true}`)
		},
		"array order": func(r *CacheRequest) {
			r.Args = modelArgs(t, `{"status":"open","filter":{"b":1,"a":[2,1]},"_all_pages":true}`)
		},
		"without _all_pages":  func(r *CacheRequest) { r.Args = modelArgs(t, `{"status":"open","filter":{"b":1,"a":[1,2]}}`) },
		"tool":                func(r *CacheRequest) { r.ToolID = "acme.list_invoices" },
		"organization":        func(r *CacheRequest) { r.Scope.Org = "globex" },
		"runtime credentials": func(r *CacheRequest) { r.Runtime = true },
		"fan-out":             func(r *CacheRequest) { r.ForEachKey, r.ForEachValues = "property_id", []any{"p1"} },
	}
	seen := map[string]string{key(func(*CacheRequest) {}): "base"}
	for name, mod := range differ {
		k := key(mod)
		if prev, dup := seen[k]; dup {
			t.Errorf("%s gives the same key as %s", name, prev)
		}
		seen[k] = name
	}
	// Fan-out values: order and duplicates do not matter; values do.
	fan := func(vals ...any) string {
		return key(func(r *CacheRequest) { r.ForEachKey, r.ForEachValues = "property_id", vals })
	}
	if fan("p1", "p2", json.Number("3")) != fan(3.0, "p2", "p1", "p1") {
		t.Error("fan-out order or duplicates changed the key")
	}
	if fan("p1", "p2") == fan("p1", "p3") {
		t.Error("different fan-out values share a key")
	}
	// Runtime credentials: per user, or per asserted cache scope.
	rt := func(s Scope) string {
		return key(func(r *CacheRequest) { r.Scope, r.Runtime = s, true })
	}
	if rt(Scope{Org: "acme", User: "alice"}) == rt(Scope{Org: "acme", User: "bob"}) {
		t.Error("runtime credentials of two users share a key")
	}
	if rt(Scope{Org: "acme", User: "alice", CacheScope: "tenant-7"}) != rt(Scope{Org: "acme", User: "bob", CacheScope: "tenant-7"}) {
		t.Error("one tenant cache scope gives two keys")
	}
	if rt(Scope{Org: "acme", User: "tenant-7"}) == rt(Scope{Org: "acme", User: "x", CacheScope: "tenant-7"}) {
		t.Error("a user named like a cache scope shares its entries")
	}
	if !strings.HasPrefix(key(func(*CacheRequest) {}), "o=acme/") {
		t.Errorf("key %q does not begin with its scope", key(func(*CacheRequest) {}))
	}
	if _, err := DatasetKey(CacheRequest{ToolID: "x", Scope: Scope{Org: "acme"}, Runtime: true}); !errors.Is(err, ErrNoCacheScope) {
		t.Errorf("runtime credentials without a user: %v", err)
	}
}

// fakeWalk is a fake walk that counts its runs.
type fakeWalk struct {
	runs     atomic.Int64
	complete bool
	data     string
	block    chan struct{} // when set, each run waits for it (or its context)
	started  chan struct{} // when set, receives once per run
}

func (u *fakeWalk) walk(ctx context.Context) (*Dataset, error) {
	n := u.runs.Add(1)
	if u.started != nil {
		u.started <- struct{}{}
	}
	if u.block != nil {
		select {
		case <-u.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &Dataset{
		Envelope: []byte(`{"data":[]}`), ItemsPath: "data", HasItems: true,
		Items: [][]byte{fmt.Appendf(nil, `{"run":%d,"data":%q}`, n, u.data)}, Complete: u.complete,
		Stats: json.RawMessage(`{"requests":3}`),
	}, nil
}

func newCache(t *testing.T, mode CacheMode, clock *paginate.FakeClock) *DatasetCache {
	t.Helper()
	c, err := NewDatasetCache(CacheOptions{Mode: mode, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func walkOnce(t *testing.T, c *DatasetCache, req CacheRequest, u *fakeWalk) (*Dataset, *CacheHit) {
	t.Helper()
	d, hit, err := c.Walk(context.Background(), req, u.walk)
	if err != nil {
		t.Fatal(err)
	}
	return d, hit
}

func TestCacheServesCompleteWalks(t *testing.T) {
	clock := paginate.NewFakeClock(epoch)
	c := newCache(t, "", clock)
	u := &fakeWalk{complete: true}
	req := CacheRequest{ToolID: "acme.list_orders", Args: modelArgs(t, `{"status":"open","_fields":["id"]}`), Scope: alice}
	first, hit := walkOnce(t, c, req, u)
	if hit != nil {
		t.Fatal("first call was a hit")
	}
	// A different projection and filter are still a hit.
	req2 := req
	req2.Args = modelArgs(t, `{"status":"open","_fields":["total"],"_filter":[{"field":"total","op":"gt","value":1}]}`)
	clock.Advance(time.Hour)
	d, hit := walkOnce(t, c, req2, u)
	if hit == nil || d != first || u.runs.Load() != 1 {
		t.Fatalf("second call: hit %v, runs %d", hit, u.runs.Load())
	}
	if diff := cmp.Diff(&CacheHit{CachedAt: epoch, ExpiresAt: epoch.Add(24 * time.Hour)}, hit); diff != "" {
		t.Errorf("hit (-want +got):\n%s", diff)
	}
	if got := string(hit.JSON()); got != `{"hit":true,"cachedAt":"2025-03-01T09:00:00Z","expiresAt":"2025-03-02T09:00:00Z"}` {
		t.Errorf("_cache %s", got)
	}
	if note := hit.Note(); !strings.Contains(note, "_refresh: true") || !strings.Contains(note, "very latest") {
		t.Errorf("note %q", note)
	}
	// Expiry by the injected clock.
	clock.Advance(23 * time.Hour)
	if _, hit := walkOnce(t, c, req, u); hit != nil || u.runs.Load() != 2 {
		t.Errorf("after 24 h: hit %v, runs %d", hit, u.runs.Load())
	}
	st := c.Stats()
	if st.Hits != 1 || st.Misses != 2 || st.Stores != 2 || st.Walks != 2 {
		t.Errorf("stats %+v", st)
	}
}

func TestCacheTTLs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		runtime bool
		ttl     time.Duration
		want    time.Duration
	}{
		{"organization credentials", false, 0, 24 * time.Hour},
		{"runtime credentials", true, 0, time.Hour},
		{"binding override", true, 2 * time.Hour, 2 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := paginate.NewFakeClock(epoch)
			c := newCache(t, CacheOn, clock)
			u := &fakeWalk{complete: true}
			req := CacheRequest{ToolID: "x", Scope: alice, Runtime: tc.runtime, TTL: tc.ttl}
			walkOnce(t, c, req, u)
			clock.Advance(tc.want - time.Second)
			if _, hit := walkOnce(t, c, req, u); hit == nil || !hit.ExpiresAt.Equal(epoch.Add(tc.want)) {
				t.Fatalf("just before expiry: %+v", hit)
			}
			clock.Advance(time.Second)
			if _, hit := walkOnce(t, c, req, u); hit != nil {
				t.Fatal("served at expiry")
			}
		})
	}
}

func TestCacheScopes(t *testing.T) {
	clock := paginate.NewFakeClock(epoch)
	c := newCache(t, CacheOn, clock)
	u := &fakeWalk{complete: true}
	do := func(s Scope, runtime bool) bool {
		_, hit := walkOnce(t, c, CacheRequest{ToolID: "x", Args: map[string]any{"q": "a"}, Scope: s, Runtime: runtime}, u)
		return hit != nil
	}
	steps := []struct {
		name    string
		scope   Scope
		runtime bool
		hit     bool
	}{
		{"org credentials, alice", Scope{Org: "acme", Thread: "t1", User: "alice"}, false, false},
		{"org credentials, bob in another thread", Scope{Org: "acme", Thread: "t2", User: "bob"}, false, true},
		{"another organization", Scope{Org: "globex", User: "alice"}, false, false},
		{"runtime credentials, alice", Scope{Org: "acme", User: "alice"}, true, false},
		{"runtime credentials, alice again", Scope{Org: "acme", Thread: "t3", User: "alice"}, true, true},
		{"runtime credentials, bob", Scope{Org: "acme", User: "bob"}, true, false},
		{"tenant scope, carol", Scope{Org: "acme", User: "carol", CacheScope: "tenant-7"}, true, false},
		{"tenant scope, dave", Scope{Org: "acme", User: "dave", CacheScope: "tenant-7"}, true, true},
		{"other tenant, erin", Scope{Org: "acme", User: "erin", CacheScope: "tenant-8"}, true, false},
		{"runtime credentials without a user", Scope{Org: "acme"}, true, false},
		{"…never cached", Scope{Org: "acme"}, true, false},
	}
	for _, s := range steps {
		if got := do(s.scope, s.runtime); got != s.hit {
			t.Errorf("%s: hit %v, want %v", s.name, got, s.hit)
		}
	}
}

func TestCacheNeverKeepsPartialWalks(t *testing.T) {
	c := newCache(t, CacheOn, paginate.NewFakeClock(epoch))
	u := &fakeWalk{complete: false}
	req := CacheRequest{ToolID: "x", Scope: alice}
	for range 3 {
		if _, hit := walkOnce(t, c, req, u); hit != nil {
			t.Fatal("a partial walk was served")
		}
	}
	if u.runs.Load() != 3 || c.Stats().Stores != 0 || c.Stats().Partial != 3 {
		t.Errorf("runs %d, stats %+v", u.runs.Load(), c.Stats())
	}
	// Errors are not kept either.
	_, _, err := c.Walk(context.Background(), req, func(context.Context) (*Dataset, error) { return nil, errors.New("502") })
	if err == nil || c.Stats().Stores != 0 {
		t.Errorf("error walk: %v, %+v", err, c.Stats())
	}
}

func TestCacheShadowModeNeverServes(t *testing.T) {
	c := newCache(t, CacheShadow, paginate.NewFakeClock(epoch))
	u := &fakeWalk{complete: true}
	req := CacheRequest{ToolID: "x", Scope: alice}
	for range 3 {
		if _, hit := walkOnce(t, c, req, u); hit != nil {
			t.Fatal("shadow mode served a hit")
		}
	}
	st := c.Stats()
	if u.runs.Load() != 3 || st.ShadowHits != 2 || st.ShadowMisses != 1 || st.Stores != 3 || st.Hits != 0 {
		t.Errorf("runs %d, stats %+v", u.runs.Load(), st)
	}
}

func TestCacheOffNeitherRecordsNorServes(t *testing.T) {
	c := newCache(t, CacheOff, paginate.NewFakeClock(epoch))
	u := &fakeWalk{complete: true}
	for range 2 {
		if _, hit := walkOnce(t, c, CacheRequest{ToolID: "x", Scope: alice}, u); hit != nil {
			t.Fatal("served")
		}
	}
	if u.runs.Load() != 2 || c.Stats() != (CacheStats{}) {
		t.Errorf("runs %d, stats %+v", u.runs.Load(), c.Stats())
	}
	if _, err := NewDatasetCache(CacheOptions{Mode: "sometimes"}); err == nil {
		t.Error("unknown mode accepted")
	}
}

func TestCacheExperimentsNeverRead(t *testing.T) {
	c := newCache(t, CacheOn, paginate.NewFakeClock(epoch))
	u := &fakeWalk{complete: true}
	req := CacheRequest{ToolID: "x", Scope: alice}
	walkOnce(t, c, req, u)
	exp := req
	exp.Experiment = true
	if d, hit := walkOnce(t, c, exp, u); hit != nil || !bytes.Contains(d.Items[0], []byte(`"run":2`)) {
		t.Fatalf("experiment read the cache: %v", hit)
	}
	// Its complete walk is kept for ordinary calls.
	if d, hit := walkOnce(t, c, req, u); hit == nil || !bytes.Contains(d.Items[0], []byte(`"run":2`)) {
		t.Errorf("ordinary call after the experiment: hit %v", hit)
	}
	if st := c.Stats(); st.Experiments != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestCacheRefreshReplaces(t *testing.T) {
	clock := paginate.NewFakeClock(epoch)
	c := newCache(t, CacheOn, clock)
	u := &fakeWalk{complete: true}
	req := CacheRequest{ToolID: "x", Args: map[string]any{"q": "a"}, Scope: alice}
	walkOnce(t, c, req, u)
	clock.Advance(time.Hour)
	ref := req
	ref.Args = map[string]any{"q": "a", "_refresh": true}
	ref.Refresh = true
	if d, hit := walkOnce(t, c, ref, u); hit != nil || !bytes.Contains(d.Items[0], []byte(`"run":2`)) {
		t.Fatalf("refresh served the cache: %v", hit)
	}
	d, hit := walkOnce(t, c, req, u)
	if hit == nil || !bytes.Contains(d.Items[0], []byte(`"run":2`)) || !hit.CachedAt.Equal(epoch.Add(time.Hour)) {
		t.Errorf("after refresh: hit %+v, %s", hit, d.Items[0])
	}
}

func TestCacheCollapsesConcurrentWalks(t *testing.T) {
	c := newCache(t, CacheOn, paginate.NewFakeClock(epoch))
	u := &fakeWalk{complete: true, block: make(chan struct{}), started: make(chan struct{}, 10)}
	req := CacheRequest{ToolID: "x", Scope: alice}
	const n = 8
	results := make([]*Dataset, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			d, _, err := c.Walk(context.Background(), req, u.walk)
			if err != nil {
				t.Error(err)
			}
			results[i] = d
		})
	}
	<-u.started
	for c.Stats().Collapsed < n-1 {
		runtime.Gosched() // wait until every caller has joined the walk
	}
	close(u.block)
	wg.Wait()
	if u.runs.Load() != 1 {
		t.Fatalf("%d fakeWalk walks for %d identical calls", u.runs.Load(), n)
	}
	for i, d := range results {
		if d != results[0] {
			t.Errorf("caller %d got another dataset", i)
		}
	}
	// Other arguments are another walk.
	other := req
	other.Args = map[string]any{"q": "b"}
	u.block, u.started = nil, nil
	walkOnce(t, c, other, u)
	if u.runs.Load() != 2 {
		t.Errorf("different arguments collapsed")
	}
}

func TestCacheCancelledWaiterDoesNotCancelTheSharedWalk(t *testing.T) {
	c := newCache(t, CacheOn, paginate.NewFakeClock(epoch))
	u := &fakeWalk{complete: true, block: make(chan struct{}), started: make(chan struct{}, 2)}
	req := CacheRequest{ToolID: "x", Scope: alice}
	leaderCtx, cancelLeader := context.WithCancel(context.Background())
	leaderErr := make(chan error, 1)
	go func() {
		_, _, err := c.Walk(leaderCtx, req, u.walk)
		leaderErr <- err
	}()
	<-u.started
	type res struct {
		d   *Dataset
		err error
	}
	follower := make(chan res, 1)
	go func() {
		d, _, err := c.Walk(context.Background(), req, u.walk)
		follower <- res{d, err}
	}()
	for c.Stats().Collapsed < 1 {
		runtime.Gosched()
	}
	cancelLeader()
	if err := <-leaderErr; !errors.Is(err, context.Canceled) {
		t.Fatalf("leader: %v", err)
	}
	close(u.block)
	got := <-follower
	if got.err != nil || got.d == nil || u.runs.Load() != 1 {
		t.Fatalf("follower: %v (runs %d)", got.err, u.runs.Load())
	}
	if c.Stats().Stores != 1 {
		t.Errorf("the shared walk was not recorded: %+v", c.Stats())
	}
}

func TestCacheWalkCancelledWhenEveryWaiterLeaves(t *testing.T) {
	c := newCache(t, CacheOn, paginate.NewFakeClock(epoch))
	walkDone := make(chan error, 1)
	started := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go c.Walk(ctx, CacheRequest{ToolID: "x", Scope: alice}, func(wctx context.Context) (*Dataset, error) {
		close(started)
		<-wctx.Done()
		walkDone <- wctx.Err()
		return nil, wctx.Err()
	})
	<-started
	cancel()
	if err := <-walkDone; !errors.Is(err, context.Canceled) {
		t.Errorf("walk context: %v", err)
	}
	// A newcomer starts a fresh walk rather than joining the cancelled one.
	u := &fakeWalk{complete: true}
	if _, _, err := c.Walk(context.Background(), CacheRequest{ToolID: "x", Scope: alice}, u.walk); err != nil || u.runs.Load() != 1 {
		t.Errorf("newcomer: %v, runs %d", err, u.runs.Load())
	}
}

func TestMemoryDatasetStoreBound(t *testing.T) {
	ctx := context.Background()
	clock := paginate.NewFakeClock(epoch)
	d := &Dataset{Items: [][]byte{bytes.Repeat([]byte("x"), 1000)}, Complete: true}
	s := NewMemoryDatasetStore(MemoryStoreOptions{Now: clock.Now, MaxBytes: 2*d.Size() + 10})
	for i := range 3 {
		s.Put(ctx, fmt.Sprint(i), d, epoch, epoch.Add(time.Hour))
	}
	if _, _, _, err := s.Get(ctx, "0"); !errors.Is(err, ErrDatasetMiss) {
		t.Errorf("oldest not evicted: %v", err)
	}
	if got, cachedAt, expires, err := s.Get(ctx, "2"); err != nil || got != d || !cachedAt.Equal(epoch) || !expires.Equal(epoch.Add(time.Hour)) {
		t.Errorf("newest: %v %v %v", err, cachedAt, expires)
	}
	if s.Bytes() > 2*d.Size()+10 {
		t.Errorf("%d bytes held", s.Bytes())
	}
}

// _refresh asks for fresh data instead of a cached walk: it is offered
// only where the dataset cache serves walks again, not with the cache
// off, in shadow mode (which records but never serves) or without one.
func TestRefreshOfferedOnlyWhenTheCacheServes(t *testing.T) {
	tool := ordersTool("http://orders.example")
	for _, tc := range []struct {
		mode CacheMode
		want bool
	}{{"", false}, {CacheOn, true}, {CacheOff, false}, {CacheShadow, false}} {
		opts := Options{}
		if tc.mode != "" {
			cache, err := NewDatasetCache(CacheOptions{Mode: tc.mode})
			if err != nil {
				t.Fatal(err)
			}
			opts.Cache = cache
		}
		e := newTestEngine(t, opts)
		props := e.Schema(tool, Binding{LoopResponses: true})["properties"].(map[string]any)
		if _, ok := props[ArgRefresh]; ok != tc.want {
			t.Errorf("cache %q: _refresh offered %v, want %v", tc.mode, ok, tc.want)
		}
		if _, ok := props[ArgAllPages]; !ok {
			t.Errorf("cache %q: _all_pages not offered: %v", tc.mode, props)
		}
	}
}
