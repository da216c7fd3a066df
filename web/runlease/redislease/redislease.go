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
package redislease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

var _ runlease.Registry = (*Registry)(nil)

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
func (r *Registry) stopKey(key string) string  { return r.prefix + "stop:" + key }

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

// renewScript: KEYS lease, stop; ARGV run id, lease ms. Returns 0: lost,
// 1: held, 2: held and asked to stop.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('GET', KEYS[2]) == ARGV[1] then return 2 end
return 1`)

func (l *lease) renew() {
	defer close(l.stopped)
	every := l.r.lease / 3
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now() // of the last successful renewal
	for {
		select {
		case <-l.release:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		res, err := renewScript.Run(ctx, l.r.c, []string{l.r.leaseKey(l.key), l.r.stopKey(l.key)}, l.id, l.r.lease.Milliseconds()).Int()
		cancel()
		switch {
		case err != nil:
			if time.Since(last) >= l.r.lease {
				l.Fire(fmt.Errorf("%w: could not renew it for %v: %v", runlease.ErrLost, l.r.lease, err))
			}
			continue
		case res == 0:
			l.Fire(fmt.Errorf("%w: the claim lapsed", runlease.ErrLost))
		case res == 2:
			l.Fire(runlease.ErrStopped)
		}
		last = time.Now()
	}
}

var releaseScript = redis.NewScript(`
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
	if err := releaseScript.Run(ctx, l.r.c, []string{l.r.leaseKey(l.key), l.r.stopKey(l.key)}, l.id).Err(); err != nil {
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

// stopScript: KEYS lease, stop; ARGV stop channel, key, lease ms.
var stopScript = redis.NewScript(`
local h = redis.call('GET', KEYS[1])
if not h then return 0 end
redis.call('SET', KEYS[2], h, 'PX', ARGV[3])
redis.call('PUBLISH', ARGV[1], ARGV[2] .. '\n' .. h)
return 1`)

// Stop implements runlease.Registry.
func (r *Registry) Stop(ctx context.Context, key string) (bool, error) {
	n, err := stopScript.Run(ctx, r.c, []string{r.leaseKey(key), r.stopKey(key)}, r.prefix+"stop", key, r.lease.Milliseconds()).Int()
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
