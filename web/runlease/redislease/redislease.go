// Package redislease is the runlease.Registry replicas share on Redis.
//
// A claim is the key "<prefix>lease:<key>" holding the run id, set with
// NX and a lease (PX) that the holder renews every third of it; a holder
// that dies stops renewing, so its claim lapses within the lease and Wait
// on any replica returns. Stop marks "<prefix>stop:<key>" with the
// holder's run id and publishes on "<prefix>stop"; each registry
// subscribes once and tells its local holder at once, and the holder also
// finds the mark on its next renewal, so a stop is never lost to a pub/sub
// reconnect. A holder that cannot renew for a whole lease (Redis
// unreachable) loses its claim: Done closes with ErrLost, because another
// replica may claim the key meanwhile.
//
// Every claim is also a member "<key>\n<run id>" of the sorted set
// "<prefix>leases", scored by its lease's deadline, so Lapsed finds the
// claims whose holder died (the deadline passed and the lease key no
// longer names the run) and hands each to one caller; and of
// "<prefix>leases-by-key" (score 0, ordered by name), so ActiveKeys reads
// a prefix's claims without scanning the keyspace. The scripts name
// keys they build, so this registry needs a single Redis, not a cluster.
package redislease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/web/runlease"
)

// Registry is the Redis runlease.Registry.
type Registry struct {
	c      redis.UniversalClient
	prefix string
	lease  time.Duration

	mu    sync.Mutex
	local map[string]*lease // held here, by key
	sub   *redis.PubSub
}

var (
	_ runlease.Registry = (*Registry)(nil)
	_ runlease.Fencer   = (*Registry)(nil)
)

// New returns the registry of client; every key begins with prefix; a
// zero leaseFor means runlease.DefaultLease. Close it to stop its
// subscription.
func New(client redis.UniversalClient, prefix string, leaseFor time.Duration) *Registry {
	if leaseFor <= 0 {
		leaseFor = runlease.DefaultLease
	}
	return &Registry{c: client, prefix: prefix, lease: leaseFor, local: map[string]*lease{}}
}

// Close ends the stop subscription. Held leases are not released.
func (r *Registry) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sub == nil {
		return nil
	}
	err := r.sub.Close()
	r.sub = nil
	return err
}

func (r *Registry) leaseKey(key string) string { return r.prefix + "lease:" + key }

// FenceKey implements runlease.Fencer: the Redis key holding key's claim,
// whose value is the id of the run holding it. A store that fences a
// write on it (in the same script as the write) writes only for the
// current holder.
func (r *Registry) FenceKey(key string) string { return r.leaseKey(key) }
func (r *Registry) stopKey(key string) string  { return r.prefix + "stop:" + key }
func (r *Registry) setKey() string             { return r.prefix + "leases" }
func (r *Registry) byKeyKey() string           { return r.prefix + "leases-by-key" }

func member(key, runID string) string { return key + "\n" + runID }

func (r *Registry) deadline() float64 { return float64(time.Now().Add(r.lease).UnixMilli()) }

// subscribe starts the stop subscription once; r.mu is held.
func (r *Registry) subscribe(ctx context.Context) error {
	if r.sub != nil {
		return nil
	}
	sub := r.c.Subscribe(context.WithoutCancel(ctx), r.prefix+"stop")
	if _, err := sub.Receive(ctx); err != nil { // the subscription confirmation
		sub.Close()
		return fmt.Errorf("run registry: redis: %w", err)
	}
	r.sub = sub
	go func() {
		for m := range sub.Channel() {
			key, runID, ok := strings.Cut(m.Payload, "\n")
			if !ok {
				continue
			}
			r.mu.Lock()
			l := r.local[key]
			r.mu.Unlock()
			if l != nil && l.id == runID {
				l.Fire(runlease.ErrStopped)
			}
		}
	}()
	return nil
}

type lease struct {
	*runlease.Signal
	r        *Registry
	key, id  string
	release  chan struct{}
	stopped  chan struct{} // the renewer has returned
	released sync.Once
}

func (l *lease) RunID() string { return l.id }

// Acquire implements runlease.Registry.
func (r *Registry) Acquire(ctx context.Context, key, runID string) (runlease.Lease, error) {
	r.mu.Lock()
	err := r.subscribe(ctx)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ok, err := r.c.SetNX(ctx, r.leaseKey(key), runID, r.lease).Result()
	if err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	if !ok {
		holder, err := r.c.Get(ctx, r.leaseKey(key)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("run registry: redis: %w", err)
		}
		return nil, &runlease.HeldError{Key: key, RunID: holder}
	}
	_, err = r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, r.setKey(), redis.Z{Score: r.deadline(), Member: member(key, runID)})
		p.ZAdd(ctx, r.byKeyKey(), redis.Z{Member: member(key, runID)})
		return nil
	})
	if err != nil {
		r.c.Del(context.WithoutCancel(ctx), r.leaseKey(key))
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	// A stop meant for an earlier run of this id must not stop this one.
	if err := r.c.Del(ctx, r.stopKey(key)).Err(); err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	l := &lease{Signal: runlease.NewSignal(), r: r, key: key, id: runID, release: make(chan struct{}), stopped: make(chan struct{})}
	r.mu.Lock()
	r.local[key] = l
	r.mu.Unlock()
	go l.renew()
	return l, nil
}

// renewScript: KEYS lease, stop, leases; ARGV run id, lease ms, member,
// deadline. Returns 0: lost, 1: held, 2: held and asked to stop.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
if redis.call('GET', KEYS[2]) == ARGV[1] then return 2 end
return 1`)

func (l *lease) renew() {
	defer close(l.stopped)
	every := l.r.lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	// The holder gives its claim up a third of the lease before the claim
	// could lapse in Redis (counted from the start of the last renewal
	// that succeeded), so a replica cut off from Redis has ended its run
	// before another replica may take the key.
	giveUpAfter := l.r.lease - every
	var lastErr atomic.Pointer[error] // of the failed renewals since
	giveUp := time.AfterFunc(giveUpAfter, func() {
		why := "no renewal came through (was the process paused?)"
		if p := lastErr.Load(); p != nil {
			why = (*p).Error()
		}
		l.Fire(fmt.Errorf("%w: could not renew it for %v: %s", runlease.ErrLost, giveUpAfter, why))
	})
	defer giveUp.Stop()
	for {
		select {
		case <-l.release:
			return
		case <-t.C:
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), every)
		res, err := renewScript.Run(ctx, l.r.c, []string{l.r.leaseKey(l.key), l.r.stopKey(l.key), l.r.setKey()},
			l.id, l.r.lease.Milliseconds(), member(l.key, l.id), l.r.deadline()).Int()
		cancel()
		switch {
		case err != nil:
			lastErr.Store(&err)
			continue
		case res == 0:
			l.Fire(fmt.Errorf("%w: the claim lapsed", runlease.ErrLost))
		case res == 2:
			l.Fire(runlease.ErrStopped)
		}
		giveUp.Reset(time.Until(start.Add(giveUpAfter)))
	}
}

// releaseScript: KEYS lease, stop, leases, leases-by-key; ARGV run id,
// member.
var releaseScript = redis.NewScript(`
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[2])
  return 1
end
return 0`)

// Release implements runlease.Lease.
func (l *lease) Release(ctx context.Context) error {
	l.released.Do(func() { close(l.release) })
	<-l.stopped
	l.r.mu.Lock()
	if l.r.local[l.key] == l {
		delete(l.r.local, l.key)
	}
	l.r.mu.Unlock()
	if err := releaseScript.Run(ctx, l.r.c, []string{l.r.leaseKey(l.key), l.r.stopKey(l.key), l.r.setKey(), l.r.byKeyKey()}, l.id, member(l.key, l.id)).Err(); err != nil {
		return fmt.Errorf("run registry: release: redis: %w (the claim lapses within the lease)", err)
	}
	return nil
}

// Active implements runlease.Registry.
func (r *Registry) Active(ctx context.Context, key string) (string, error) {
	id, err := r.c.Get(ctx, r.leaseKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("run registry: redis: %w", err)
	}
	return id, nil
}

// stopScript: KEYS lease, stop; ARGV stop channel, key, lease ms, run id.
var stopScript = redis.NewScript(`
local h = redis.call('GET', KEYS[1])
if h ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[2], h, 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2] .. '\n' .. h)
return 1`)

// Stop implements runlease.Registry.
func (r *Registry) Stop(ctx context.Context, key, runID string) (bool, error) {
	n, err := stopScript.Run(ctx, r.c, []string{r.leaseKey(key), r.stopKey(key)}, r.prefix+"stop", key, r.lease.Milliseconds(), runID).Int()
	if err != nil {
		return false, fmt.Errorf("run registry: redis: %w", err)
	}
	return n == 1, nil
}

// Wait implements runlease.Registry: it polls the claim every
// twentieth of the lease (at least every 100 ms).
func (r *Registry) Wait(ctx context.Context, key, runID string) error {
	every := min(r.lease/20, 100*time.Millisecond)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		id, err := r.Active(ctx, key)
		if err != nil {
			return err
		}
		if id != runID {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// ActiveKeys implements runlease.Registry: a lexicographic range of
// "<prefix>leases-by-key" (every claim as "<key>\n<run id>", score 0),
// each checked against its lease key, so its cost follows the matching
// claims, not the size of the keyspace.
func (r *Registry) ActiveKeys(ctx context.Context, prefix string) ([]string, error) {
	ms, err := r.c.ZRangeByLex(ctx, r.byKeyKey(), &redis.ZRangeBy{Min: "[" + prefix, Max: "[" + prefix + "\xff"}).Result()
	if err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	var keys, ids []string
	for _, m := range ms {
		key, id, _ := strings.Cut(m, "\n")
		if strings.HasPrefix(key, prefix) {
			keys, ids = append(keys, key), append(ids, id)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	lk := make([]string, len(keys))
	for i, k := range keys {
		lk[i] = r.leaseKey(k)
	}
	held, err := r.c.MGet(ctx, lk...).Result()
	if err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	var out []string
	for i, h := range held {
		if id, ok := h.(string); ok && id == ids[i] {
			out = append(out, keys[i]) // a lapsed claim not yet swept is not active
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// lapsedScript: KEYS leases, leases-by-key; ARGV now (ms), the lease key prefix. It
// removes and returns the members whose deadline passed and whose lease
// key no longer names their run.
var lapsedScript = redis.NewScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, 100)
local out = {}
for _, m in ipairs(due) do
  local nl = string.find(m, '\n', 1, true)
  if nl then
    local key, id = string.sub(m, 1, nl - 1), string.sub(m, nl + 1)
    if redis.call('GET', ARGV[2] .. key) ~= id then
      redis.call('ZREM', KEYS[1], m)
      redis.call('ZREM', KEYS[2], m)
      table.insert(out, m)
    end
  else
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZREM', KEYS[2], m)
  end
end
return out`)

// Lapsed implements runlease.Sweeper.
func (r *Registry) Lapsed(ctx context.Context) ([]runlease.Claim, error) {
	ms, err := lapsedScript.Run(ctx, r.c, []string{r.setKey(), r.byKeyKey()}, time.Now().UnixMilli(), r.leaseKey("")).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	out := make([]runlease.Claim, 0, len(ms))
	for _, m := range ms {
		key, id, _ := strings.Cut(m, "\n")
		out = append(out, runlease.Claim{Key: key, RunID: id})
	}
	return out, nil
}

var _ runlease.Sweeper = (*Registry)(nil)
