// Package redislease is the runlease.Registry replicas share on Redis.
//
// A claim is the key "<prefix>lease:<key>" holding "<run id>@<holder>",
// set with NX and a lease (PX) that the holder renews every third of it.
// The holder part is new at every Acquire, so a run continued by another
// replica under the same run id is another holder: the one that lost the
// claim can neither renew, release, hand off nor write fenced on it. A holder
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
// a prefix's claims without scanning the keyspace. A lease handed off
// (HandOff: a draining replica) deletes its lease key and scores its
// member 0, so the next Lapsed on any replica returns it at once.
//
// On a Redis Cluster a claim's lease and stop keys are in the slot of its
// key (a chat's thread is in the same slot, so a save fenced on the
// claim is one script), and the two sets share a slot of their own: no
// script touches both a claim and the sets. A renewal, a release, a
// hand-off and a sweep run their script on the claim's keys and write
// the sets with commands of their own (see tools/rediskey).
package redislease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/tools/rediskey"
	"github.com/trawl-dev/trawl/web/runlease"
)

// Registry is the Redis runlease.Registry.
type Registry struct {
	c     redis.UniversalClient
	k     rediskey.Keys
	lease time.Duration

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
	return &Registry{c: client, k: rediskey.New(client, prefix), lease: leaseFor, local: map[string]*lease{}}
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

func (r *Registry) leaseKey(key string) string { return r.k.In(key, "lease:"+key) }

// FenceKey implements runlease.Fencer: the Redis key holding key's claim,
// whose value is the holder's (Lease.FenceValue). A store that fences a
// write on it (in the same script as the write) writes only for the
// current holder.
func (r *Registry) FenceKey(key string) string { return r.leaseKey(key) }
func (r *Registry) stopKey(key string) string  { return r.k.In(key, "stop:"+key) }
func (r *Registry) setKey() string             { return r.k.In("leases", "leases") }
func (r *Registry) byKeyKey() string           { return r.k.In("leases", "leases-by-key") }
func (r *Registry) channel() string            { return r.k.Key("stop") }

func member(key, runID string) string { return key + "\n" + runID }

func (r *Registry) deadline() float64 { return float64(time.Now().Add(r.lease).UnixMilli()) }

// subscribe starts the stop subscription once; r.mu is held.
func (r *Registry) subscribe(ctx context.Context) error {
	if r.sub != nil {
		return nil
	}
	sub := r.c.Subscribe(context.WithoutCancel(ctx), r.channel())
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
	value    string // the lease key's value while this lease holds it
	release  chan struct{}
	stopped  chan struct{} // the renewer has returned
	released sync.Once
}

func (l *lease) RunID() string { return l.id }

// FenceValue implements runlease.Fenced.
func (l *lease) FenceValue() string { return l.value }

// runOf is the run id of a lease key's value.
func runOf(value string) string {
	if i := strings.LastIndexByte(value, '@'); i >= 0 {
		return value[:i]
	}
	return value
}

// luaRunOf is runOf in the scripts.
const luaRunOf = `local function runOf(v) if not v then return v end return string.match(v, '^(.*)@[^@]*$') or v end
`

// Acquire implements runlease.Registry.
func (r *Registry) Acquire(ctx context.Context, key, runID string) (runlease.Lease, error) {
	r.mu.Lock()
	err := r.subscribe(ctx)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	value := runID + "@" + holderToken()
	ok, err := r.c.SetNX(ctx, r.leaseKey(key), value, r.lease).Result()
	if err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	if !ok {
		holder, err := r.c.Get(ctx, r.leaseKey(key)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("run registry: redis: %w", err)
		}
		return nil, &runlease.HeldError{Key: key, RunID: runOf(holder)}
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
	l := &lease{Signal: runlease.NewSignal(), r: r, key: key, id: runID, value: value, release: make(chan struct{}), stopped: make(chan struct{})}
	r.mu.Lock()
	r.local[key] = l
	r.mu.Unlock()
	go l.renew()
	return l, nil
}

// renewScript: KEYS lease, stop[, leases]; ARGV lease value, lease ms,
// run id, deadline, member. Returns 0: lost, 1: held, 2: held and asked
// to stop. With "leases" in KEYS (one Redis: one round trip) it moves
// the claim's deadline there too; on a cluster, where "leases" is in
// another slot, the caller does.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if #KEYS == 3 then redis.call('ZADD', KEYS[3], 'XX', ARGV[4], ARGV[5]) end
if redis.call('GET', KEYS[2]) == ARGV[3] then return 2 end
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
		deadline, m := l.r.deadline(), member(l.key, l.id)
		keys := []string{l.r.leaseKey(l.key), l.r.stopKey(l.key)}
		if !l.r.k.Cluster() {
			keys = append(keys, l.r.setKey())
		}
		res, err := renewScript.Run(ctx, l.r.c, keys, l.value, l.r.lease.Milliseconds(), l.id, deadline, m).Int()
		if err == nil && res > 0 && l.r.k.Cluster() {
			// XX: a member a sweep took away is not put back.
			err = l.r.c.ZAddXX(ctx, l.r.setKey(), redis.Z{Score: deadline, Member: m}).Err()
		}
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

// releaseScript: KEYS lease, stop; ARGV lease value. The caller takes
// the claim's members out of the sets first (a release cut off half-way
// then leaves a claim that lapses unlisted, never a member a sweep would
// hand over as a dead replica's).
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('DEL', KEYS[2])
  return 1
end
return 0`)

// handOffScript: KEYS lease, stop; ARGV lease value. The claim ends;
// the caller then makes its member due at once, for Lapsed.
var handOffScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[2])
return 1`)

// HandOff implements runlease.HandOff.
func (l *lease) HandOff(ctx context.Context) (bool, error) {
	l.stopRenewing()
	n, err := handOffScript.Run(ctx, l.r.c, []string{l.r.leaseKey(l.key), l.r.stopKey(l.key)}, l.value).Int()
	if err == nil && n == 1 {
		err = l.r.c.ZAddXX(ctx, l.r.setKey(), redis.Z{Score: 0, Member: member(l.key, l.id)}).Err()
	}
	if err != nil {
		return false, fmt.Errorf("run registry: hand-off: redis: %w (the claim lapses within the lease)", err)
	}
	return n == 1, nil
}

// stopRenewing ends the renewals and forgets the lease locally.
func (l *lease) stopRenewing() {
	l.released.Do(func() { close(l.release) })
	<-l.stopped
	l.r.mu.Lock()
	if l.r.local[l.key] == l {
		delete(l.r.local, l.key)
	}
	l.r.mu.Unlock()
}

// Release implements runlease.Lease.
func (l *lease) Release(ctx context.Context) error {
	l.stopRenewing()
	m := member(l.key, l.id)
	_, err := l.r.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, l.r.setKey(), m)
		p.ZRem(ctx, l.r.byKeyKey(), m)
		return nil
	})
	if err == nil {
		err = releaseScript.Run(ctx, l.r.c, []string{l.r.leaseKey(l.key), l.r.stopKey(l.key)}, l.value).Err()
	}
	if err != nil {
		return fmt.Errorf("run registry: release: redis: %w (the claim lapses within the lease)", err)
	}
	return nil
}

// Active implements runlease.Registry.
func (r *Registry) Active(ctx context.Context, key string) (string, error) {
	v, err := r.c.Get(ctx, r.leaseKey(key)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("run registry: redis: %w", err)
	}
	return runOf(v), nil
}

// stopScript: KEYS lease, stop; ARGV stop channel, key, lease ms, run id.
var stopScript = redis.NewScript(luaRunOf + `
local h = runOf(redis.call('GET', KEYS[1]))
if h ~= ARGV[4] then return 0 end
redis.call('SET', KEYS[2], h, 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2] .. '\n' .. h)
return 1`)

// Stop implements runlease.Registry.
func (r *Registry) Stop(ctx context.Context, key, runID string) (bool, error) {
	n, err := stopScript.Run(ctx, r.c, []string{r.leaseKey(key), r.stopKey(key)}, r.channel(), key, r.lease.Milliseconds(), runID).Int()
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
	// One GET each, pipelined: on a cluster the claims are in their
	// chats' slots.
	held := make([]*redis.StringCmd, len(lk))
	_, err = r.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range lk {
			held[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	var out []string
	for i, h := range held {
		if v, err := h.Result(); err == nil && runOf(v) == ids[i] {
			out = append(out, keys[i]) // a lapsed claim not yet swept is not active
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// sweepScript: KEYS leases, leases-by-key; ARGV member, now (ms). It
// removes the member and returns 1 when its deadline passed — once,
// whatever the number of replicas sweeping — else 0. The caller has
// checked that the member's lease key no longer names its run (a claim
// taken again, by a takeover, is under a new deadline, so a sweep that
// read the lease key before it finds the member not due).
var sweepScript = redis.NewScript(`
local due = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not due or tonumber(due) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`)

// Lapsed implements runlease.Sweeper: the members whose deadline passed
// (up to 100 a sweep), each then swept by its own script.
func (r *Registry) Lapsed(ctx context.Context) ([]runlease.Claim, error) {
	now := time.Now().UnixMilli()
	due, err := r.c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: r.setKey(), Start: "-inf", Stop: now, ByScore: true, Count: 100}).Result()
	if err != nil {
		return nil, fmt.Errorf("run registry: redis: %w", err)
	}
	var out []runlease.Claim
	for _, m := range due {
		key, id, ok := strings.Cut(m, "\n")
		if !ok { // not a member this registry wrote
			if err := r.c.ZRem(ctx, r.setKey(), m).Err(); err != nil {
				return out, fmt.Errorf("run registry: redis: %w", err)
			}
			continue
		}
		holder, err := r.c.Get(ctx, r.leaseKey(key)).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return out, fmt.Errorf("run registry: redis: %w", err)
		}
		if err == nil && runOf(holder) == id {
			continue // renewed since it was read, or held again
		}
		n, err := sweepScript.Run(ctx, r.c, []string{r.setKey(), r.byKeyKey()}, m, now).Int()
		if err != nil {
			return out, fmt.Errorf("run registry: redis: %w", err)
		}
		if n == 1 {
			out = append(out, runlease.Claim{Key: key, RunID: id})
		}
	}
	return out, nil
}

var (
	_ runlease.Sweeper = (*Registry)(nil)
	_ runlease.HandOff = (*lease)(nil)
	_ runlease.Fenced  = (*lease)(nil)
)

// holderToken tells one Acquire's claim from another's.
func holderToken() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
