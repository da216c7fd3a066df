package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawl-dev/trawl/loop/query"
)

// CacheMode is the deployment's dataset cache mode.
type CacheMode string

const (
	CacheOn     CacheMode = "on"     // serve complete walks again within their TTL
	CacheOff    CacheMode = "off"    // neither record nor serve
	CacheShadow CacheMode = "shadow" // record complete walks, never serve them; count would-be hits
)

// Default dataset TTLs by the kind of credential that fetched the walk.
const (
	DefaultOrgDatasetTTL     = 24 * time.Hour
	DefaultRuntimeDatasetTTL = time.Hour
)

// ErrDatasetMiss is a DatasetStore's answer for a key it does not hold
// (never stored, expired or evicted).
var ErrDatasetMiss = errors.New("dataset not cached")

// Dataset is the raw merged data of one walk: what the cache keeps of a
// complete walk so that a hit can be projected and filtered anew. It is
// never modified once built: the cache and every caller that receives
// it share it.
type Dataset struct {
	// Envelope is the first page's body (the envelope that holds the
	// primary array).
	Envelope []byte
	// ItemsPath is the dot path of the primary array in Envelope ("" for
	// a bare array); HasItems says whether there is one.
	ItemsPath string
	HasItems  bool
	// Items are every merged row, unprojected and unfiltered.
	Items [][]byte
	// Stats are the walk's statistics and verdict, serialised by the
	// engine (the cache does not read them).
	Stats json.RawMessage
	// Complete reports that every page of every value was fetched and the
	// server said it was done. Only complete datasets are cached.
	Complete bool
}

// Size is what the dataset holds in memory, in bytes, as the stores count
// it against their bounds.
func (d *Dataset) Size() int64 {
	n := len(d.Envelope) + len(d.ItemsPath) + len(d.Stats) + 24*len(d.Items) + 128
	for _, it := range d.Items {
		n += len(it)
	}
	return int64(n)
}

// DatasetStore keeps cached datasets. Keys are opaque to the store (they
// begin with the credential scope and carry no credential). Datasets are
// handed over whole and never modified; a store outside the process
// serialises them (every field is plain data).
//
// Implementations are safe for concurrent use.
type DatasetStore interface {
	// Get returns the dataset under key with the times it was cached and
	// expires, or ErrDatasetMiss.
	Get(ctx context.Context, key string) (d *Dataset, cachedAt, expires time.Time, err error)
	// Put keeps d under key, replacing what was there, until expires. It
	// may evict older entries to stay within its bounds.
	Put(ctx context.Context, key string, d *Dataset, cachedAt, expires time.Time) error
}

// MemoryDatasetStore is the embedded DatasetStore: datasets live in
// process memory, bounded in total bytes (oldest evicted first), until
// their expiry by the injected clock.
type MemoryDatasetStore struct {
	m *memory[cachedDataset]
}

type cachedDataset struct {
	d        *Dataset
	cachedAt time.Time
}

// NewMemoryDatasetStore returns an empty in-memory dataset store.
func NewMemoryDatasetStore(opts MemoryStoreOptions) *MemoryDatasetStore {
	return &MemoryDatasetStore{m: newMemory[cachedDataset](opts, 0)}
}

// Get implements DatasetStore.
func (s *MemoryDatasetStore) Get(_ context.Context, key string) (*Dataset, time.Time, time.Time, error) {
	e, expires, st := s.m.get(key)
	if st != memFound {
		return nil, time.Time{}, time.Time{}, ErrDatasetMiss
	}
	return e.d, e.cachedAt, expires, nil
}

// Put implements DatasetStore. A dataset larger than the store's bound
// is not kept (and is no error: the cache is an optimisation).
func (s *MemoryDatasetStore) Put(_ context.Context, key string, d *Dataset, cachedAt, expires time.Time) error {
	s.m.put(key, cachedDataset{d, cachedAt}, d.Size(), expires)
	return nil
}

// Bytes is the total size of the datasets held.
func (s *MemoryDatasetStore) Bytes() int64 { return s.m.size() }

// Len is how many datasets are held.
func (s *MemoryDatasetStore) Len() int { return s.m.len() }

// CacheOptions configure a DatasetCache. The zero value is ready to use.
type CacheOptions struct {
	// Mode is the deployment's mode. Zero means CacheOn.
	Mode CacheMode
	// Store keeps the datasets. Nil means a new MemoryDatasetStore with
	// default bounds and the clock below.
	Store DatasetStore
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
	// OrgTTL and RuntimeTTL are the TTLs of walks fetched with the
	// organization's credentials and with a user's runtime credentials,
	// when the binding sets none. Zero means 24 h and 1 h.
	OrgTTL     time.Duration
	RuntimeTTL time.Duration
	// Shared collapses identical walks across processes that share Store
	// (the Redis deployment's lock), beneath the cache's own LocalWalks.
	// Nil: walks collapse within this process only.
	Shared SharedWalks
}

// SharedWalks collapses concurrent identical walks: of concurrent calls
// with one key, one runs walk (which records a complete result in the
// dataset store) and the others wait for it and get the dataset it
// recorded. Within one process (LocalWalks) they get whatever it
// returned; across the processes that share one DatasetStore
// (loop/redisstore's Walks) they read what it recorded, and when it
// recorded nothing (a partial walk, an error) one of them walks in turn.
// A waiter whose context ends returns its error; a store failure is an
// error, never a silent walk of one's own. A call after a walk ended
// walks again: serving what a walk recorded is the DatasetCache's.
// Implementations are safe for concurrent use.
type SharedWalks interface {
	Do(ctx context.Context, key string, walk func(context.Context) (*Dataset, error)) (*Dataset, error)
}

// CacheRequest is one looping call as the cache sees it.
type CacheRequest struct {
	// ToolID is the tool's id.
	ToolID string
	// Args are the call's arguments as the model sent them. _fields,
	// _filter, _aggregate, _refresh and _for_each are left out of the key
	// (a stored set is unprojected, unfiltered and not aggregated; the
	// fan-out is keyed by
	// ForEachKey and ForEachValues); _all_pages stays in it.
	Args map[string]any
	// ForEachKey and ForEachValues are the fan-out, values coerced and
	// de-duplicated; their order does not matter.
	ForEachKey    string
	ForEachValues []any
	// Scope and Runtime say whose credential fetches the walk: the
	// organization's (Runtime false) or the user's runtime credential.
	Scope   Scope
	Runtime bool
	// TTL overrides the default TTL for this binding (dataset_ttl_hours,
	// or a workflow step's ttl_minutes). Zero: OrgTTL or RuntimeTTL. It
	// bounds both how long a walk this call makes is kept and how old a
	// cached walk it is served may be.
	TTL time.Duration
	// Refresh bypasses a cached entry and replaces it with the new walk.
	Refresh bool
	// Experiment marks an evaluation run: it never reads the cache (nor
	// joins a walk in flight); a complete walk it makes is still kept.
	Experiment bool
}

// CacheHit labels a dataset served from the cache.
type CacheHit struct {
	CachedAt  time.Time `json:"cachedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// JSON is the value of the view's _cache key.
func (h CacheHit) JSON() json.RawMessage {
	b, _ := json.Marshal(struct {
		Hit       bool      `json:"hit"`
		CachedAt  time.Time `json:"cachedAt"`
		ExpiresAt time.Time `json:"expiresAt"`
	}{true, h.CachedAt.UTC(), h.ExpiresAt.UTC()})
	return b
}

// Note is the sentence the view's _note carries on a hit.
func (h CacheHit) Note() string {
	return fmt.Sprintf("These rows come from a complete walk cached at %s; if the user needs the very latest data, call the tool again with _refresh: true.",
		h.CachedAt.UTC().Format(time.RFC3339))
}

// CacheStats counts what a DatasetCache did since it was made.
type CacheStats struct {
	Hits         int64 // served from the cache (mode on)
	Misses       int64 // looked up, not found (mode on)
	ShadowHits   int64 // would have been served (mode shadow)
	ShadowMisses int64 // would have missed (mode shadow)
	Stores       int64 // complete walks recorded
	Partial      int64 // walks not recorded because they were partial
	Refreshes    int64 // lookups skipped by _refresh
	Experiments  int64 // lookups skipped by experiment runs
	Collapsed    int64 // calls that joined an identical walk in flight
	Walks        int64 // upstream walks started through the cache
	Errors       int64 // store failures (the call went on uncached)
}

// DatasetCache serves complete walks again within their TTL, per
// credential scope, and collapses concurrent identical walks into one
// upstream walk. Its methods are safe for concurrent use.
type DatasetCache struct {
	mode       CacheMode
	store      DatasetStore
	now        func() time.Time
	orgTTL     time.Duration
	runtimeTTL time.Duration
	shared     SharedWalks

	local LocalWalks // collapses walks in this process; shared, when set, beneath it across processes

	hits, misses, shadowHits, shadowMisses, stores, partial atomic.Int64
	refreshes, experiments, walks, errs                     atomic.Int64
}

// NewDatasetCache returns a DatasetCache.
func NewDatasetCache(opts CacheOptions) (*DatasetCache, error) {
	c := &DatasetCache{mode: opts.Mode, store: opts.Store, now: opts.Now, orgTTL: opts.OrgTTL, runtimeTTL: opts.RuntimeTTL, shared: opts.Shared}
	switch c.mode {
	case "":
		c.mode = CacheOn
	case CacheOn, CacheOff, CacheShadow:
	default:
		return nil, fmt.Errorf("cache mode must be on, off or shadow, not %q", opts.Mode)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.store == nil {
		c.store = NewMemoryDatasetStore(MemoryStoreOptions{Now: c.now})
	}
	if c.orgTTL <= 0 {
		c.orgTTL = DefaultOrgDatasetTTL
	}
	if c.runtimeTTL <= 0 {
		c.runtimeTTL = DefaultRuntimeDatasetTTL
	}
	return c, nil
}

// Mode is the cache's mode.
func (c *DatasetCache) Mode() CacheMode { return c.mode }

// Serves reports whether c serves complete walks again (mode on): only
// then does _refresh, which skips it, mean anything. A nil cache serves
// nothing.
func (c *DatasetCache) Serves() bool { return c != nil && c.mode == CacheOn }

// Stats returns the counters.
func (c *DatasetCache) Stats() CacheStats {
	return CacheStats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), ShadowHits: c.shadowHits.Load(), ShadowMisses: c.shadowMisses.Load(),
		Stores: c.stores.Load(), Partial: c.partial.Load(), Refreshes: c.refreshes.Load(), Experiments: c.experiments.Load(),
		Collapsed: c.local.Joined(), Walks: c.walks.Load(), Errors: c.errs.Load(),
	}
}

// Walk returns the dataset of req: from the cache when a live entry
// exists and the mode serves it (hit is then non-nil), else from walk,
// recording the result when it is complete. In mode on, concurrent calls
// with the same key share one run of walk (a call that joined a run which
// did not end complete — cut short by its starter's budget, or failed —
// then runs walk itself); it runs on a context detached
// from any single caller and is cancelled only when every caller waiting
// for it has gone, so one caller giving up never fails the others. walk
// must bound its own duration (the walk budgets do).
//
// A call whose scope cannot be cached (runtime credentials without a user
// or cache scope) just runs walk.
func (c *DatasetCache) Walk(ctx context.Context, req CacheRequest, walk func(context.Context) (*Dataset, error)) (*Dataset, *CacheHit, error) {
	if c.mode == CacheOff {
		d, err := walk(ctx)
		return d, nil, err
	}
	key, err := DatasetKey(req)
	if errors.Is(err, ErrNoCacheScope) {
		d, err := walk(ctx)
		return d, nil, err
	}
	if err != nil {
		return nil, nil, err
	}
	ttl := req.TTL
	if ttl <= 0 {
		ttl = c.orgTTL
		if req.Runtime {
			ttl = c.runtimeTTL
		}
	}
	switch {
	case req.Experiment:
		c.experiments.Add(1)
	case req.Refresh:
		c.refreshes.Add(1)
	default:
		d, cachedAt, expires, err := c.store.Get(ctx, key)
		// An entry lives for the TTL of the call that made it, and is
		// served only to a call whose own TTL admits its age: a workflow
		// step asking for at most 5 minutes is not served a chat's day-old
		// walk.
		expires = minTime(expires, cachedAt.Add(ttl))
		live := err == nil && c.now().Before(expires)
		switch {
		case err != nil && !errors.Is(err, ErrDatasetMiss):
			c.errs.Add(1)
		case c.mode == CacheShadow && live:
			c.shadowHits.Add(1)
		case c.mode == CacheShadow:
			c.shadowMisses.Add(1)
		case live:
			c.hits.Add(1)
			return d, &CacheHit{CachedAt: cachedAt, ExpiresAt: expires}, nil
		default:
			c.misses.Add(1)
		}
	}
	record := func(ctx context.Context) (*Dataset, error) {
		c.walks.Add(1)
		d, err := walk(ctx)
		if err != nil || d == nil {
			return d, err
		}
		if !d.Complete {
			c.partial.Add(1)
			return d, nil
		}
		now := c.now()
		if perr := c.store.Put(context.WithoutCancel(ctx), key, d, now, now.Add(ttl)); perr != nil {
			c.errs.Add(1)
		} else {
			c.stores.Add(1)
		}
		return d, nil
	}
	if c.mode != CacheOn || req.Experiment {
		d, err := record(ctx)
		return d, nil, err
	}
	run := record
	if c.shared != nil {
		run = func(ctx context.Context) (*Dataset, error) { return c.shared.Do(ctx, key, record) }
	}
	d, joined, err := c.local.do(ctx, key, run)
	if joined && ctx.Err() == nil && (err != nil || d == nil || !d.Complete) {
		// The walk this call joined ran under its own caller's budget and
		// deadline: a partial set or an error of that call is not this
		// one's answer, so it walks itself (as across replicas).
		d, err = run(ctx)
	}
	return d, nil, err
}

// LocalWalks is the SharedWalks of one process: concurrent callers with
// one key share one run of walk and what it returns, complete or not. The
// run is detached from any single caller and cancelled only when every
// caller waiting for it has gone, so one caller giving up never fails the
// others. The zero value is ready to use; every DatasetCache holds one.
type LocalWalks struct {
	joined  atomic.Int64 // callers that joined a run in flight
	waiting atomic.Int64 // callers now waiting for a run they joined

	mu sync.Mutex
	m  map[string]*flight
}

var _ SharedWalks = (*LocalWalks)(nil)

type flight struct {
	done    chan struct{}
	d       *Dataset
	err     error
	waiters int // guarded by LocalWalks.mu
	cancel  context.CancelFunc
}

// Joined counts the callers that joined a walk in flight.
func (g *LocalWalks) Joined() int64 { return g.joined.Load() }

// Waiting is how many callers are waiting now for a walk they joined.
func (g *LocalWalks) Waiting() int64 { return g.waiting.Load() }

// Do implements SharedWalks: fn runs once for every concurrent caller
// with key.
func (g *LocalWalks) Do(ctx context.Context, key string, fn func(context.Context) (*Dataset, error)) (*Dataset, error) {
	d, _, err := g.do(ctx, key, fn)
	return d, err
}

// do is Do; joined reports that this caller shared a run another caller
// started.
func (g *LocalWalks) do(ctx context.Context, key string, fn func(context.Context) (*Dataset, error)) (d *Dataset, joined bool, err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]*flight{}
	}
	f, shared := g.m[key]
	if shared {
		g.joined.Add(1)
		g.waiting.Add(1)
		defer g.waiting.Add(-1)
	} else {
		// Values (trace ids, progress sinks) carry over; cancellation
		// does not: the run ends when its last waiter leaves.
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		f = &flight{done: make(chan struct{}), cancel: cancel}
		g.m[key] = f
		go func() {
			defer func() {
				if r := recover(); r != nil {
					f.d, f.err = nil, fmt.Errorf("walk panicked: %v", r)
				}
				g.mu.Lock()
				if g.m[key] == f {
					delete(g.m, key)
				}
				g.mu.Unlock()
				cancel()
				close(f.done)
			}()
			f.d, f.err = fn(fctx)
		}()
	}
	f.waiters++
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.d, shared, f.err
	case <-ctx.Done():
		g.mu.Lock()
		f.waiters--
		last := f.waiters == 0
		if last {
			f.cancel()
			if g.m[key] == f {
				delete(g.m, key) // a newcomer starts afresh rather than join a cancelled run
			}
		}
		g.mu.Unlock()
		if !last {
			return nil, shared, ctx.Err() // the others' walk goes on
		}
		// The walk ends at once (no further request is sent); what it
		// fetched is the cancelled call's partial result.
		<-f.done
		return f.d, shared, f.err
	}
}

// DatasetKey is the cache key of req: its credential scope, then a
// SHA-256 of the tool id, the canonical arguments (object keys sorted,
// numbers in one spelling, without _fields, _filter, _aggregate,
// _refresh, _max_chars and _for_each, and without a false _all_pages), the fan-out key and its
// sorted values, and the scope again. No credential is part of it.
func DatasetKey(req CacheRequest) (string, error) {
	scope, err := req.Scope.DatasetScope(req.Runtime)
	if err != nil {
		return "", err
	}
	args := make(map[string]any, len(req.Args))
	for k, v := range req.Args {
		switch k {
		case ArgFields, ArgFilter, ArgAggregate, ArgRefresh, ArgForEach, ArgMaxChars:
			continue
		case "_all_pages":
			if b, ok := v.(bool); ok && !b {
				continue
			}
		}
		args[k] = v
	}
	var material []byte
	material = query.AppendString(material, req.ToolID)
	material = append(material, '\n')
	if material, err = appendCanonical(material, args, 0); err != nil {
		return "", fmt.Errorf("cache key: %w", err)
	}
	material = append(material, '\n')
	if req.ForEachKey != "" || len(req.ForEachValues) > 0 {
		material = query.AppendString(material, req.ForEachKey)
		vals := make([]string, 0, len(req.ForEachValues))
		seen := map[string]bool{}
		for _, v := range req.ForEachValues {
			b, err := appendCanonical(nil, v, 0)
			if err != nil {
				return "", fmt.Errorf("cache key: _for_each value: %w", err)
			}
			if !seen[string(b)] {
				seen[string(b)] = true
				vals = append(vals, string(b))
			}
		}
		sort.Strings(vals)
		for _, v := range vals {
			material = append(material, ',')
			material = append(material, v...)
		}
	}
	material = append(material, '\n')
	material = append(material, scope...)
	sum := sha256.Sum256(material)
	return scope + "/" + hex.EncodeToString(sum[:]), nil
}

// appendCanonical appends v as canonical JSON: object keys sorted, no
// white space, strings escaped one way, numbers in their shortest form
// (1, 1.0 and 1e0 agree).
func appendCanonical(dst []byte, v any, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, errors.New("arguments nested too deeply")
	}
	var err error
	switch t := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, t), nil
	case string:
		return query.AppendString(dst, t), nil
	case json.Number:
		if i, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			return strconv.AppendInt(dst, i, 10), nil
		}
		f, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			return append(dst, t...), nil // out of float range: its own text
		}
		return appendFloat(dst, f), nil
	case float64:
		return appendFloat(dst, t), nil
	case float32:
		return appendFloat(dst, float64(t)), nil
	case int:
		return strconv.AppendInt(dst, int64(t), 10), nil
	case int64:
		return strconv.AppendInt(dst, t, 10), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range t {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, err = appendCanonical(dst, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = query.AppendString(dst, k)
			dst = append(dst, ':')
			if dst, err = appendCanonical(dst, t[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	}
	// Any other Go value: through its JSON form.
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var back any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&back); err != nil {
		return nil, err
	}
	return appendCanonical(dst, back, depth+1)
}

// appendFloat appends f in its shortest form, integers without exponent
// or fraction.
func appendFloat(dst []byte, f float64) []byte {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.AppendFloat(dst, f, 'f', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'g', -1, 64)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
