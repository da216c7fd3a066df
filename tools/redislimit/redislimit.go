// Package redislimit is the shared tools.RateLimiter: every replica's
// requests paced by one state in Redis, so a provider's rate, its
// concurrency and what its answers taught hold for the deployment, not
// per replica.
//
// Each scope (a provider, or a provider and a runtime credential's
// fingerprint) is a hash "<prefix>rl:<provider>[:c:<fingerprint>]" with
// the same fields as the embedded limiter's state (GCRA's theoretical
// arrival time, the learned rate, quota, pause and concurrency bound) and
// a sorted set "…:p" of the permits in flight, scored by their lease's
// end, and the turns of the requests waiting for a concurrency slot
// ("…:w", in the order they came, and "…:wl", when each lapses unless
// its waiter asks again): a free slot goes to the waiter whose turn it
// is, whichever replica it waits on. The replica holding a permit renews
// its lease every third of it (DefaultPermitLease, 15 s) while the
// request runs, so a long request keeps its slot, and a replica that
// dies holding permits has them back within the lease. One Lua script
// makes the decision, so two replicas never both take the last slot.
//
// Round trips: an acquisition is one script call, which also carries the
// replica's releases since its previous call; a release no acquisition
// picks up within FlushDelay is sent alone. A sequential walk costs one
// round trip per request; BenchmarkRoundTrips measures it. Renewing the
// leases costs one more every third of the lease while permits are held
// (one per provider on a cluster), however many they are. Waiting for a
// rate slot costs nothing more (the script reserves the slot and says
// when it starts); a pause is asked again once it ends; a wait for a
// concurrency slot asks again on every release of this replica and every
// PollInterval for the others'.
//
// On a Redis Cluster a provider's keys (its scope's, its credentials')
// share the provider's hash tag, so each provider's state is in one slot
// and providers spread over the masters (tools/rediskey); a script call
// carries only the releases of its provider, and a flush sends one call
// per provider.
//
// Time is the replicas' clocks (passed to the script, so the limiter's
// clock can be injected): keep them in sync (NTP), as leases already need.
package redislimit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/rediskey"
)

// DefaultPermitLease is how long a permit counts after its replica last
// renewed it: how soon a dead replica's permits come back.
const DefaultPermitLease = 15 * time.Second

// minPermitLease bounds the lease from below: renewed every third of it,
// in microseconds in the script.
const minPermitLease = 30 * time.Millisecond

// Options configure a Limiter. The zero value is usable.
type Options struct {
	// Prefix begins every key. Zero: none.
	Prefix string
	// LimiterOptions.PermitLease: zero is DefaultPermitLease here; the
	// holder renews it every third of it.
	tools.LimiterOptions
	// FlushDelay is how long a release waits to ride along with the next
	// acquisition before it is sent alone. Zero: 2 ms.
	FlushDelay time.Duration
	// PollInterval is how often a request waiting for a concurrency slot
	// asks again (besides on each of this replica's releases). Zero:
	// 25 ms.
	PollInterval time.Duration
}

// Limiter is the Redis tools.RateLimiter. It is safe for concurrent use;
// Close sends the releases still pending.
type Limiter struct {
	c       redis.UniversalClient
	opt     Options
	k       rediskey.Keys
	replica string

	seq        atomic.Uint64
	roundTrips atomic.Int64

	mu      sync.Mutex
	pending []release
	armed   bool          // a flush is scheduled
	changed chan struct{} // closed and replaced on every local release
	status  map[string]tools.LimitStatus
	held    map[string]held // the permits granted and not yet released, by id
	renewal *renewal        // the renewing goroutine; nil: none runs
	stopped bool            // Close (or crash) was called: no more renewal
}

// held is a permit in flight, whose lease this replica renews until
// MaxPermitHold after it was granted.
type held struct {
	provider, credential string
	since                time.Time
}

// MaxPermitHold bounds the renewal of a permit's lease: no request
// lasts that long (a request's timeout is 30 s by default), so a permit
// held longer was never released (a bug), and comes back a lease
// later.
const MaxPermitHold = 10 * time.Minute

var (
	_ tools.RateLimiter   = (*Limiter)(nil)
	_ tools.LimitReporter = (*Limiter)(nil)
)

// New returns the limiter of client.
func New(client redis.UniversalClient, opt Options) *Limiter {
	opt.LimiterOptions = withDefaults(opt.LimiterOptions)
	if opt.FlushDelay <= 0 {
		opt.FlushDelay = 2 * time.Millisecond
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = 25 * time.Millisecond
	}
	var id [6]byte
	_, _ = rand.Read(id[:])
	return &Limiter{c: client, opt: opt, k: rediskey.New(client, opt.Prefix), replica: hex.EncodeToString(id[:]),
		changed: make(chan struct{}), status: map[string]tools.LimitStatus{}, held: map[string]held{}}
}

func withDefaults(o tools.LimiterOptions) tools.LimiterOptions {
	if o.Clock == nil {
		o.Clock = tools.SystemClock()
	}
	if o.PermitLease <= 0 {
		o.PermitLease = DefaultPermitLease
	}
	o.PermitLease = max(o.PermitLease, minPermitLease)
	return o
}

// ended is the error of an Acquire whose ctx is done: a deadline that
// passed while the request waited its turn for a concurrency slot (even
// if it passed during a round trip asking again) is the rate limit's
// wait not fitting the time budget.
func (l *Limiter) ended(ctx context.Context, s tools.LimitScope, queued bool) error {
	if queued && ctx.Err() == context.DeadlineExceeded {
		return &tools.RateLimitError{Provider: s.Provider, Cause: "concurrency"}
	}
	return ctx.Err()
}

// maxPendingLeaves bounds the releases waiting to be sent past which a
// waiter's leave is not kept (its turn lapses after the grace instead).
const maxPendingLeaves = 1024

// waitGrace is how long a waiter for a concurrency slot keeps its turn
// without asking again: it asks at least every PollInterval.
func (l *Limiter) waitGrace() time.Duration { return max(time.Second, 40*l.opt.PollInterval) }

// leave gives up the turn of a waiter, id, that will not ask again; it
// rides along with the next script call, as a release does.
func (l *Limiter) leave(id string, s tools.LimitScope) {
	l.mu.Lock()
	if len(l.pending) >= maxPendingLeaves { // Redis has not taken the last ones
		l.mu.Unlock()
		return
	}
	l.pending = append(l.pending, release{id: id, provider: s.Provider, credential: s.Credential, conf: s.Limit.Concurrency})
	l.armFlush()
	l.mu.Unlock()
}

// RoundTrips counts the script calls made so far (for benchmarks).
func (l *Limiter) RoundTrips() int64 { return l.roundTrips.Load() }

// release is one permit's end, waiting to be sent.
type release struct {
	id, provider, credential string
	epochs                   [2]int64
	conf                     int
	status                   int
	learned                  tools.Learned
}

// args are r's fields for the script, its scope's keys added to keys.
func (r *release) args(keys *scopeKeys) []any {
	has, tm, ok := 0, 0, 0
	if r.status != 0 {
		has = 1
	}
	if r.learned.TooMany {
		tm = 1
	}
	if r.learned.OK {
		ok = 1
	}
	var pause, reset int64
	if !r.learned.PauseUntil.IsZero() {
		pause = r.learned.PauseUntil.UnixMicro()
	}
	if !r.learned.Reset.IsZero() {
		reset = r.learned.Reset.UnixMicro()
	}
	p, c := keys.add(r.provider, r.credential)
	return []any{r.id, p, c, r.epochs[0], r.epochs[1], r.conf, has, tm, ok, pause,
		r.learned.Remaining, reset, strconv.FormatFloat(r.learned.Rate, 'g', 17, 64), r.learned.Burst}
}

// scopeKeys are the KEYS of one script call: each scope's state key
// followed by its permits key, its waiters' turns and their expiries,
// each once.
type scopeKeys struct {
	k    rediskey.Keys
	keys []string
	at   map[string]int // state key → its index in KEYS (1-based)
}

func newScopeKeys(k rediskey.Keys) *scopeKeys { return &scopeKeys{k: k, at: map[string]int{}} }

// add names the keys of a provider's scope and of its credential's ("":
// none), returning their indexes in KEYS (0: none).
func (k *scopeKeys) add(provider, credential string) (p, c int) {
	key := k.k.In(provider, "rl:"+provider)
	p = k.index(key)
	if credential != "" {
		c = k.index(key + ":c:" + credential)
	}
	return p, c
}

func (k *scopeKeys) index(key string) int {
	if i, ok := k.at[key]; ok {
		return i
	}
	k.keys = append(k.keys, key, key+":p", key+":w", key+":wl")
	k.at[key] = len(k.keys) - 3
	return len(k.keys) - 3
}

// ErrRedis is (wrapped) the error of an Acquire that Redis did not
// answer (or answered with less than the script returns): nothing was
// decided, and the request was not sent. Its text goes before go-redis's
// own ("redis: connection pool timeout"), which names Redis already.
var ErrRedis = errors.New("the shared rate limiter's Redis failed")

// Acquire implements tools.RateLimiter.
func (l *Limiter) Acquire(ctx context.Context, s tools.LimitScope) (tools.Permit, error) {
	clock := l.opt.Clock
	start := clock.Now()
	ctx, cancel := tools.LimitWaitContext(ctx)
	defer cancel()
	id := l.replica + "." + strconv.FormatUint(l.seq.Add(1), 36)
	// A request that waited its turn for a concurrency slot and gives
	// up leaves it, so the waiters after it need not wait out its GRACE.
	queued, granted := false, false
	defer func() {
		if queued && !granted {
			l.leave(id, s)
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, l.ended(ctx, s, queued)
		}
		maxWait := tools.LimitWaitLeft(ctx)
		l.mu.Lock()
		rel := l.takePending(s.Provider)
		changed := l.changed
		l.mu.Unlock()
		keys := newScopeKeys(l.k)
		p, c := keys.add(s.Provider, s.Credential)
		args := []any{l.waitGrace().Microseconds(), clock.Now().UnixMicro(), l.opt.PermitLease.Microseconds(), learnTTL, growDivisor, concCeiling, "a",
			maxWait.Microseconds(), id, p, c,
			strconv.FormatFloat(s.Limit.RequestsPerSecond, 'g', 17, 64), s.Limit.BurstOrDefault(), s.Limit.Concurrency, len(rel)}
		for i := range rel {
			args = append(args, rel[i].args(keys)...)
		}
		l.roundTrips.Add(1)
		res, err := script.Run(ctx, l.c, keys.keys, args...).StringSlice()
		if err != nil {
			l.requeue(rel)
			// The script may have run all the same, and queued or even
			// granted it: it leaves (a grant it never heard of would
			// hold a slot for the whole lease). While Redis is down the
			// leaves waiting are capped (leave); a turn not left lapses
			// after the grace, a permit after its lease.
			queued = true
			if ctx.Err() != nil {
				return nil, l.ended(ctx, s, queued)
			}
			return nil, fmt.Errorf("%w: %w", ErrRedis, err)
		}
		if len(res) < 7 {
			return nil, fmt.Errorf("%w: its script answered %d values, not 7", ErrRedis, len(res))
		}
		code := res[0]
		wait := time.Duration(atoi(res[1])) * time.Microsecond
		l.noteStatus(s.Provider, int(atoi(res[5])), int(atoi(res[6])))
		switch code {
		case "1":
			granted = true // the script took it off the waiters; a release of it leaves all
			p := &permit{l: l, s: s, id: id, epochs: [2]int64{atoi(res[3]), atoi(res[4])}}
			l.hold(id, s, wait)
			if wait > 0 {
				end := tools.LimitWaitStarted(ctx, tools.LimitWait{Provider: s.Provider, Cause: "rate", Wait: wait})
				err := clock.Sleep(ctx, wait)
				end()
				if err != nil {
					p.Release(tools.Outcome{})
					return nil, err
				}
			}
			p.waited = clock.Now().Sub(start)
			return p, nil
		case "2":
			queued = true
			t := time.NewTimer(l.opt.PollInterval)
			end := tools.LimitWaitStarted(ctx, tools.LimitWait{Provider: s.Provider, Cause: "concurrency"})
			select {
			case <-changed:
			case <-t.C:
			case <-ctx.Done():
				end()
				t.Stop()
				if ctx.Err() == context.DeadlineExceeded {
					return nil, &tools.RateLimitError{Provider: s.Provider, Cause: "concurrency"}
				}
				return nil, ctx.Err()
			}
			end()
			t.Stop()
		case "3":
			return nil, &tools.RateLimitError{Provider: s.Provider, Wait: wait, Cause: res[2]}
		default: // paused
			if wait > maxWait {
				return nil, &tools.RateLimitError{Provider: s.Provider, Wait: wait, Cause: res[2]}
			}
			end := tools.LimitWaitStarted(ctx, tools.LimitWait{Provider: s.Provider, Cause: res[2], Wait: wait})
			err := clock.Sleep(ctx, wait)
			end()
			if err != nil {
				return nil, err
			}
		}
	}
}

func atoi(s string) int64 {
	f, _ := strconv.ParseFloat(s, 64)
	return int64(f)
}

func (l *Limiter) noteStatus(provider string, learned, inflight int) {
	l.mu.Lock()
	l.status[provider] = tools.LimitStatus{Provider: provider, Concurrency: learned, InFlight: inflight}
	l.mu.Unlock()
}

// LimitStatus implements tools.LimitReporter: each provider as of this
// replica's last request to it.
func (l *Limiter) LimitStatus() []tools.LimitStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]tools.LimitStatus, 0, len(l.status))
	for _, s := range l.status {
		out = append(out, s)
	}
	return out
}

func (l *Limiter) requeue(rel []release) {
	if len(rel) == 0 {
		return
	}
	l.mu.Lock()
	l.pending = append(rel, l.pending...)
	l.armFlush()
	l.mu.Unlock()
}

// armFlush schedules sending the pending releases alone (l.mu held).
func (l *Limiter) armFlush() {
	if l.armed {
		return
	}
	l.armed = true
	time.AfterFunc(l.opt.FlushDelay, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.flush(ctx)
	})
}

// takePending takes the pending releases a script call for provider
// may carry: every one on one Redis, provider's own on a cluster (the
// others are in other slots, and wait for a flush). l.mu is held.
func (l *Limiter) takePending(provider string) []release {
	if !l.k.Cluster() {
		rel := l.pending
		l.pending = nil
		return rel
	}
	var rel, rest []release
	for _, r := range l.pending {
		if r.provider == provider {
			rel = append(rel, r)
		} else {
			rest = append(rest, r)
		}
	}
	l.pending = rest
	return rel
}

// flush sends the pending releases now: one script call (one per
// provider on a cluster).
func (l *Limiter) flush(ctx context.Context) error {
	for {
		l.mu.Lock()
		var rel []release
		if len(l.pending) > 0 {
			rel = l.takePending(l.pending[0].provider)
		}
		l.armed = false
		l.mu.Unlock()
		if len(rel) == 0 {
			return nil
		}
		keys := newScopeKeys(l.k)
		args := []any{"", l.opt.Clock.Now().UnixMicro(), l.opt.PermitLease.Microseconds(), learnTTL, growDivisor, concCeiling, "r", len(rel)}
		for i := range rel {
			args = append(args, rel[i].args(keys)...)
		}
		l.roundTrips.Add(1)
		if err := script.Run(ctx, l.c, keys.keys, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
			l.mu.Lock()
			l.pending = append(rel, l.pending...)
			l.mu.Unlock()
			return fmt.Errorf("%w: %w", ErrRedis, err)
		}
	}
}

// Probe runs the limiter's script once, deciding nothing (a renewal of
// no permit): an error (ErrRedis) says this Redis cannot pace requests —
// it does not answer, or does not run the script (scripting disabled, a
// proxy without EVAL).
func (l *Limiter) Probe(ctx context.Context) error {
	args := []any{"", l.opt.Clock.Now().UnixMicro(), l.opt.PermitLease.Microseconds(), learnTTL, growDivisor, concCeiling, "k", 0}
	l.roundTrips.Add(1)
	if err := script.Run(ctx, l.c, []string{l.k.In("", "rl:probe")}, args...).Err(); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("%w: %w", ErrRedis, err)
	}
	return nil
}

// Close stops renewing leases and sends the releases still pending
// (their permits would otherwise count until their lease ends).
func (l *Limiter) Close() error {
	l.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return l.flush(ctx)
}

// stop ends the renewal of leases for good, and waits for a round in
// flight to end (cancelled).
func (l *Limiter) stop() {
	l.mu.Lock()
	l.stopped = true
	r := l.renewal
	l.renewal = nil
	l.mu.Unlock()
	if r != nil {
		r.cancel()
		<-r.done
	}
}

// renewal is the goroutine renewing the leases of the permits held.
type renewal struct {
	ctx    context.Context
	cancel context.CancelFunc // stop: ends it, and its round in flight
	done   chan struct{}      // closed when it has ended
}

// hold notes a permit granted, its slot starting after wait, and starts
// renewing leases if nothing does.
func (l *Limiter) hold(id string, s tools.LimitScope, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.held[id] = held{provider: s.Provider, credential: s.Credential, since: time.Now().Add(wait)}
	if l.renewal == nil && !l.stopped {
		ctx, cancel := context.WithCancel(context.Background())
		l.renewal = &renewal{ctx: ctx, cancel: cancel, done: make(chan struct{})}
		go l.renew(l.renewal)
	}
}

// renew renews the leases of the permits held, every third of the
// lease, until none is held (it ends then, and hold starts another) or
// it is stopped. On a cluster each provider's call goes at once, so a
// master that does not answer delays no other's renewal.
func (l *Limiter) renew(r *renewal) {
	defer close(r.done)
	defer r.cancel()
	t := time.NewTicker(l.opt.PermitLease / 3)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
		}
		l.mu.Lock()
		if l.renewal != r {
			l.mu.Unlock()
			return
		}
		if len(l.held) == 0 {
			l.renewal = nil
			l.mu.Unlock()
			return
		}
		groups := map[string]map[string]held{} // by provider on a cluster; one group on one Redis
		for id, h := range l.held {
			if time.Since(h.since) > MaxPermitHold {
				delete(l.held, id) // never released: left to its lease
				continue
			}
			group := ""
			if l.k.Cluster() {
				group = h.provider
			}
			if groups[group] == nil {
				groups[group] = map[string]held{}
			}
			groups[group][id] = h
		}
		l.mu.Unlock()
		var wg sync.WaitGroup
		for _, hs := range groups {
			wg.Go(func() { l.renewGroup(r.ctx, hs) })
		}
		wg.Wait()
	}
}

// renewGroup renews the leases of hs, permits whose keys share a slot,
// in one script call. One Redis does not take is tried again at the
// next tick: the lease outlasts two of them.
func (l *Limiter) renewGroup(ctx context.Context, hs map[string]held) {
	ctx, cancel := context.WithTimeout(ctx, l.opt.PermitLease/3)
	defer cancel()
	keys := newScopeKeys(l.k)
	args := []any{"", l.opt.Clock.Now().UnixMicro(), l.opt.PermitLease.Microseconds(), learnTTL, growDivisor, concCeiling, "k", len(hs)}
	for id, h := range hs {
		p, c := keys.add(h.provider, h.credential)
		args = append(args, id, p, c)
	}
	l.roundTrips.Add(1)
	_ = script.Run(ctx, l.c, keys.keys, args...).Err()
}

type permit struct {
	l      *Limiter
	s      tools.LimitScope
	id     string
	epochs [2]int64
	waited time.Duration
	once   sync.Once
}

func (p *permit) Waited() time.Duration { return p.waited }

// Release implements tools.Permit. A release that other replicas must
// see at once — a 429, a pause, an exhausted quota — is sent before it
// returns (one round trip, bounded by 5 s); any other rides along with
// this replica's next acquisition, or goes alone after FlushDelay.
func (p *permit) Release(o tools.Outcome) {
	p.once.Do(func() {
		l := p.l
		r := release{id: p.id, provider: p.s.Provider, credential: p.s.Credential, epochs: p.epochs, conf: p.s.Limit.Concurrency,
			status: o.Status, learned: tools.Learn(o, l.opt.Clock.Now())}
		urgent := r.learned.TooMany || !r.learned.PauseUntil.IsZero() || r.learned.Remaining == 0
		l.mu.Lock()
		delete(l.held, p.id)
		l.pending = append(l.pending, r)
		if !urgent {
			l.armFlush()
		}
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
		if urgent {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := l.flush(ctx); err != nil {
				l.mu.Lock()
				l.armFlush() // what failed was requeued by nobody: try again later
				l.mu.Unlock()
			}
		}
	})
}

// The tuning the script shares with the embedded limiter, in the units
// it takes.
var (
	learnTTL    = tools.LearnedLimitTTL.Microseconds()
	growDivisor = tools.ConcurrencyGrowth
	concCeiling = tools.ConcurrencyCeiling
)
