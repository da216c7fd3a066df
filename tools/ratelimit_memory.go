package tools

import (
	"context"
	"math"
	"sync"
	"time"
)

// Clock is a limiter's source of time: rates, pauses, quotas and leases
// read Now, and waits for a rate slot or a pause call Sleep. It is
// injected so that tests never sleep (loop/paginate's clocks satisfy it).
// Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
	// Sleep waits for d or until ctx is done, returning ctx's error then.
	Sleep(ctx context.Context, d time.Duration) error
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SystemClock is the real clock.
func SystemClock() Clock { return systemClock{} }

// LimiterOptions configure a limiter. The zero value is usable.
type LimiterOptions struct {
	// Clock reads time and sleeps. Nil: the system clock.
	Clock Clock
	// PermitLease is how long an unreleased permit counts against
	// concurrency after it was granted (the Redis limiter: after its
	// replica last renewed it). Zero: DefaultPermitLease (the Redis
	// limiter: redislimit.DefaultPermitLease).
	PermitLease time.Duration
}

func (o LimiterOptions) withDefaults() LimiterOptions {
	if o.Clock == nil {
		o.Clock = systemClock{}
	}
	if o.PermitLease <= 0 {
		o.PermitLease = DefaultPermitLease
	}
	return o
}

// LimitStatus is one provider's limiter as a replica sees it now.
type LimitStatus struct {
	Provider string
	// Concurrency is the learned bound (after a 429); 0 when none, the
	// configured one then applying alone. InFlight counts the permits
	// held (for a shared limiter, as of this replica's last request).
	Concurrency, InFlight int
}

// LimitReporter is implemented by limiters that can say what they hold
// (for the metrics).
type LimitReporter interface {
	LimitStatus() []LimitStatus
}

// MemoryLimiter is the embedded RateLimiter: one process's requests, its
// state in memory (lost on restart, which forgets only learned limits).
// Credential scopes with nothing learned and nothing in flight are
// dropped as their last permit returns, so its size follows the scopes in
// use.
type MemoryLimiter struct {
	opt LimiterOptions

	mu      sync.Mutex
	scopes  map[scopeID]*limitState
	changed chan struct{} // closed and replaced on every release
	seq     uint64
}

var (
	_ RateLimiter   = (*MemoryLimiter)(nil)
	_ LimitReporter = (*MemoryLimiter)(nil)
)

// NewMemoryLimiter returns an embedded limiter.
func NewMemoryLimiter(opt LimiterOptions) *MemoryLimiter {
	return &MemoryLimiter{opt: opt.withDefaults(), scopes: map[scopeID]*limitState{}, changed: make(chan struct{})}
}

type scopeID struct{ provider, credential string }

// scopesOf are the scopes a request counts against: the provider's, then
// its credential's. The configured limits are the provider's.
func scopesOf(s LimitScope) []scopeID {
	ids := []scopeID{{provider: s.Provider}}
	if s.Credential != "" {
		ids = append(ids, scopeID{s.Provider, s.Credential})
	}
	return ids
}

// limitState is one scope's limiter state. Times are microseconds since
// the Unix epoch; the Redis limiter's script keeps the same fields.
type limitState struct {
	tat      int64   // GCRA's theoretical arrival time
	lrate    float64 // learned rate per second (RateLimit-Policy); 0 none
	lburst   int64
	lrateExp int64
	rem      int64 // quota left until reset; -1 unknown
	reset    int64
	pause    int64   // no request starts before
	cwnd     float64 // learned concurrency bound; 0 none
	cwndExp  int64
	epoch    int64           // counts the bound's cuts
	permits  map[int64]int64 // permit → lease expiry
}

func newLimitState() *limitState {
	return &limitState{rem: -1, permits: map[int64]int64{}}
}

func micros(t time.Time) int64 { return t.UnixMicro() }

// expire drops what has lapsed at now.
func (st *limitState) expire(now int64) {
	for id, exp := range st.permits {
		if exp <= now {
			delete(st.permits, id)
		}
	}
	if st.cwnd > 0 && st.cwndExp <= now {
		st.cwnd = 0
	}
	if st.lrate > 0 && st.lrateExp <= now {
		st.lrate = 0
	}
	if st.rem >= 0 && st.reset <= now {
		st.rem, st.reset = -1, 0
	}
}

// idle reports a state that holds nothing worth keeping at now.
func (st *limitState) idle(now int64) bool {
	return len(st.permits) == 0 && st.cwnd == 0 && st.lrate == 0 && st.rem < 0 && st.pause <= now && st.tat <= now
}

// concLimit is the concurrency bound in force: the configured one (cfg,
// the provider scope's only) and the learned one, the lower.
func (st *limitState) concLimit(cfg int) int {
	limit := cfg
	if st.cwnd > 0 {
		if c := int(math.Floor(st.cwnd)); limit == 0 || c < limit {
			limit = c
		}
	}
	return limit
}

// rate is the rate in force and its burst: of the configured one and the
// learned one, the lower rate and the lower burst (both must hold: a
// learned policy's lower rate must not bring its larger quota as a burst
// past the configured one).
func (st *limitState) rate(cfg RateLimit, configured bool) (float64, int64) {
	r, b := 0.0, int64(0)
	if configured && cfg.RequestsPerSecond > 0 {
		r, b = cfg.RequestsPerSecond, int64(cfg.BurstOrDefault())
	}
	if st.lrate > 0 {
		lb := max(st.lburst, 1)
		if r == 0 {
			r, b = st.lrate, lb
		} else {
			r, b = min(r, st.lrate), min(b, lb)
		}
	}
	return r, b
}

// grant is Acquire's decision.
type grant struct {
	ok     bool
	wait   int64 // µs: until the slot (ok) or the pause's end (!ok)
	cause  string
	full   bool // !ok: every concurrency slot is taken
	id     int64
	epochs []int64
}

// decide runs one acquisition over states (the provider's first) at now,
// reserving the slot when it is granted within maxWait.
func decide(states []*limitState, cfg RateLimit, now, maxWait, lease int64, id int64) grant {
	for _, st := range states {
		st.expire(now)
	}
	var g grant
	for _, st := range states {
		if st.pause > now && st.pause-now > g.wait {
			g.wait, g.cause = st.pause-now, "paused"
		}
		if st.rem == 0 && st.reset > now && st.reset-now > g.wait {
			g.wait, g.cause = st.reset-now, "paused"
		}
	}
	if g.wait > 0 {
		return g
	}
	for i, st := range states {
		conf := 0
		if i == 0 {
			conf = cfg.Concurrency
		}
		if l := st.concLimit(conf); l > 0 && len(st.permits) >= l {
			return grant{full: true, cause: "concurrency"}
		}
	}
	var delay int64
	for i, st := range states {
		r, b := st.rate(cfg, i == 0)
		if r <= 0 {
			continue
		}
		t := int64(math.Ceil(1e6 / r))
		if d := st.tat - (b-1)*t - now; d > delay {
			delay = d
		}
	}
	if delay > maxWait {
		return grant{wait: delay, cause: "rate"}
	}
	g = grant{ok: true, wait: delay, id: id}
	for i, st := range states {
		if r, _ := st.rate(cfg, i == 0); r > 0 {
			st.tat = max(st.tat, now) + int64(math.Ceil(1e6/r))
		}
		if st.rem > 0 {
			st.rem--
		}
		st.permits[id] = now + delay + lease
		g.epochs = append(g.epochs, st.epoch)
	}
	return g
}

// sameWindow (µs) is how far apart two answers' resets may be and still
// name one quota window: a reset in whole seconds from now moves by up to
// a second between answers of the same window.
const sameWindow = int64(time.Second / time.Microsecond)

// learnInto applies what an answer taught to st (the scope it was
// reported for), whose permit id was sent at bound epoch; conf is the
// scope's configured concurrency.
func learnInto(st *limitState, l Learned, now, id, epoch int64, conf int) {
	inflight := len(st.permits)
	if _, ok := st.permits[id]; !ok {
		inflight++ // its lease lapsed: it was in flight all the same
	}
	switch {
	case l.TooMany:
		if epoch == st.epoch {
			base := float64(inflight)
			if st.cwnd > 0 && st.cwnd < base {
				base = st.cwnd
			}
			st.cwnd = max(1, base/2)
			st.cwndExp = now + LearnedLimitTTL.Microseconds()
			st.epoch++
		}
	case l.OK && st.cwnd > 0:
		st.cwnd += 1 / (ConcurrencyGrowth * st.cwnd)
		ceiling := float64(ConcurrencyCeiling)
		if conf > 0 {
			ceiling = float64(conf)
		}
		if st.cwnd >= ceiling {
			st.cwnd = 0
		}
	}
	if p := micros(l.PauseUntil); !l.PauseUntil.IsZero() && p > st.pause {
		st.pause = p
	}
	if l.Remaining >= 0 && !l.Reset.IsZero() && micros(l.Reset) > now {
		rem, reset := max(0, l.Remaining-int64(inflight-1)), micros(l.Reset)
		if st.rem >= 0 && reset-st.reset <= sameWindow && st.reset-reset <= sameWindow {
			// The same window: answers are read in any order, so an older
			// one (more left) must not undo what a newer one counted.
			rem, reset = min(rem, st.rem), max(reset, st.reset)
		}
		st.rem, st.reset = rem, reset
	}
	if l.Rate > 0 {
		st.lrate, st.lburst = l.Rate, int64(max(l.Burst, 1))
		st.lrateExp = now + LearnedLimitTTL.Microseconds()
	}
}

// Acquire implements RateLimiter.
func (m *MemoryLimiter) Acquire(ctx context.Context, s LimitScope) (Permit, error) {
	ids := scopesOf(s)
	start := m.opt.Clock.Now()
	ctx, cancel := LimitWaitContext(ctx)
	defer cancel()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		maxWait := LimitWaitLeft(ctx)
		now := m.opt.Clock.Now()
		m.mu.Lock()
		states := make([]*limitState, len(ids))
		for i, id := range ids {
			st := m.scopes[id]
			if st == nil {
				st = newLimitState()
				m.scopes[id] = st
			}
			states[i] = st
		}
		m.seq++
		g := decide(states, s.Limit, micros(now), maxWait.Microseconds(), m.opt.PermitLease.Microseconds(), int64(m.seq))
		changed := m.changed
		m.mu.Unlock()
		switch {
		case g.ok:
			p := &memoryPermit{m: m, s: s, ids: ids, id: g.id, epochs: g.epochs}
			if g.wait > 0 {
				d := time.Duration(g.wait) * time.Microsecond
				end := LimitWaitStarted(ctx, LimitWait{Provider: s.Provider, Cause: "rate", Wait: d})
				err := m.opt.Clock.Sleep(ctx, d)
				end()
				if err != nil {
					p.Release(Outcome{})
					return nil, err
				}
			}
			p.waited = m.opt.Clock.Now().Sub(start)
			return p, nil
		case g.full:
			end := LimitWaitStarted(ctx, LimitWait{Provider: s.Provider, Cause: "concurrency"})
			select {
			case <-changed:
				end()
			case <-ctx.Done():
				end()
				if ctx.Err() == context.DeadlineExceeded {
					return nil, &RateLimitError{Provider: s.Provider, Cause: "concurrency"}
				}
				return nil, ctx.Err()
			}
		default:
			d := time.Duration(g.wait) * time.Microsecond
			if d > maxWait {
				return nil, &RateLimitError{Provider: s.Provider, Wait: d, Cause: g.cause}
			}
			end := LimitWaitStarted(ctx, LimitWait{Provider: s.Provider, Cause: g.cause, Wait: d})
			err := m.opt.Clock.Sleep(ctx, d)
			end()
			if err != nil {
				return nil, err
			}
		}
	}
}

// LimitStatus implements LimitReporter.
func (m *MemoryLimiter) LimitStatus() []LimitStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []LimitStatus
	for id, st := range m.scopes {
		if id.credential != "" {
			continue
		}
		out = append(out, LimitStatus{Provider: id.provider, Concurrency: st.concLimit(0), InFlight: len(st.permits)})
	}
	return out
}

type memoryPermit struct {
	m      *MemoryLimiter
	s      LimitScope
	ids    []scopeID
	id     int64
	epochs []int64
	waited time.Duration
	once   sync.Once
}

func (p *memoryPermit) Waited() time.Duration { return p.waited }

func (p *memoryPermit) Release(o Outcome) {
	p.once.Do(func() {
		m := p.m
		now := m.opt.Clock.Now()
		l := Learn(o, now)
		m.mu.Lock()
		defer m.mu.Unlock()
		target := len(p.ids) - 1 // the credential's scope when there is one
		for i, id := range p.ids {
			st := m.scopes[id]
			if st == nil {
				continue
			}
			st.expire(micros(now))
			if i == target && o.Status != 0 {
				conf := 0
				if i == 0 {
					conf = p.s.Limit.Concurrency
				}
				learnInto(st, l, micros(now), p.id, p.epochs[i], conf)
			}
			delete(st.permits, p.id)
			if id.credential != "" && st.idle(micros(now)) {
				delete(m.scopes, id) // providers are few (the config's); credentials are not
			}
		}
		close(m.changed)
		m.changed = make(chan struct{})
	})
}
