// Package redisstore is the Redis agent.ThreadStore,
// agent.DefinitionStore, agent.ApprovalStore and workflow.RunStore
// (Runs): threads, agent definitions edited over the API, the approvals
// inbox and workflow runs, shared by every replica (a PATCH on one
// applies on the others from their next read), within the same
// agent.Retention and workflow.RunRetention contracts as the embedded
// stores.
//
// Keys, under the prefix: "thread:<key>" (the thread's JSON, trimmed by
// Retention.Encode; on a Redis Cluster in the slot of its key, which is
// the chat's claim's too, so a fenced put is one script in one slot),
// "threads-of:<owner>" (a sorted set of the owner's thread keys by last
// update, for MaxThreadsPerUser), "threads-by-age" (all thread keys by
// last update, for Prune) and "agents" with "agents:version" (a hash of
// definitions by id, a deletion kept as a tombstone, and its version
// counter, in one slot); the runs' keys are Runs'. A put writes the
// thread (fenced) and the indexes in one script on one Redis; on a
// cluster the thread's script, then the indexes, each with its own
// command;
// the owner's bound is one script on the owner's set, so concurrent puts
// keep it exactly. The approvals inbox (Approvals) keeps "approval:<id>"
// and "approvals" beside them. See tools/rediskey for the cluster's
// hash tags.
package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools/rediskey"
)

// Store is the Redis store of threads and definitions.
type Store struct {
	c   redis.UniversalClient
	k   rediskey.Keys
	ret agent.Retention
}

var (
	_ agent.ThreadStore         = (*Store)(nil)
	_ agent.DefinitionStore     = (*Store)(nil)
	_ agent.DefinitionVersioner = (*Store)(nil)
	_ agent.ThreadLister        = (*Store)(nil)
)

// New returns the store of client; every key begins with prefix.
func New(client redis.UniversalClient, prefix string, ret agent.Retention) *Store {
	return &Store{c: client, k: rediskey.New(client, prefix), ret: ret.WithDefaults()}
}

// owner is the part of a thread key that names its owner (agent.ThreadKey
// begins "u=<escaped user>;", and the escaping escapes ';').
func owner(key string) string {
	o, _, _ := strings.Cut(key, ";")
	return o
}

// GetThread implements agent.ThreadStore.
func (s *Store) GetThread(ctx context.Context, key string) (*agent.Thread, error) {
	b, err := s.c.Get(ctx, s.threadKey(key)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, agent.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("thread store: redis: %w", err)
	}
	t := new(agent.Thread)
	if err := json.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("thread store: %w", err)
	}
	return t, nil
}

// ListThreads implements agent.ThreadLister: the owner's threads by last
// update (the owner set, bounded by MaxThreadsPerUser), those with
// agentID, newest first.
func (s *Store) ListThreads(ctx context.Context, userID, agentID string, limit int) ([]*agent.Thread, error) {
	prefix := agent.ThreadKey(userID, agentID, "")
	keys, err := s.c.ZRevRange(ctx, s.ownerKey(prefix), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("thread store: redis: %w", err)
	}
	var want []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			want = append(want, k)
			if limit > 0 && len(want) == limit {
				break
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	// One GET each, pipelined (on a cluster the threads are in their
	// own slots, where one MGET cannot reach).
	cmds := make([]*redis.StringCmd, len(want))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range want {
			cmds[i] = p.Get(ctx, s.threadKey(k))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("thread store: redis: %w", err)
	}
	out := make([]*agent.Thread, 0, len(want))
	for i, cmd := range cmds {
		str, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue // deleted since the set was read
		}
		if err != nil {
			return nil, fmt.Errorf("thread store: redis: %w", err)
		}
		t := new(agent.Thread)
		if err := json.Unmarshal([]byte(str), t); err != nil {
			return nil, fmt.Errorf("thread %q: %w", want[i], err)
		}
		out = append(out, t)
	}
	return out, nil
}

// putScript: KEYS thread[, fence]; ARGV JSON[, fence value]. With a
// fence, nothing is written unless the fence key holds the fence value
// (-1). Otherwise it returns 1 when the thread is new, else 0.
var putScript = redis.NewScript(`
if #KEYS == 2 and redis.call('GET', KEYS[2]) ~= ARGV[2] then return -1 end
local isNew = redis.call('EXISTS', KEYS[1]) == 0
redis.call('SET', KEYS[1], ARGV[1])
if isNew then return 1 end
return 0`)

// putIndexedScript is putScript with the index entries, for one Redis
// (where a script may touch any key): KEYS thread, owner set, age
// set[, fence]; ARGV JSON, score, key[, fence value].
var putIndexedScript = redis.NewScript(`
if #KEYS == 4 and redis.call('GET', KEYS[4]) ~= ARGV[4] then return -1 end
local isNew = redis.call('EXISTS', KEYS[1]) == 0
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
if isNew then return 1 end
return 0`)

// boundScript: KEYS owner set; ARGV key, max per user. The keys of the
// owner's threads past the bound, oldest first, but key — for the caller
// to drop (the threads are in their own slots). They leave the set here,
// so two puts at once never both count the same excess.
var boundScript = redis.NewScript(`
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[2])
if excess <= 0 then return {} end
local out = {}
for _, k in ipairs(redis.call('ZRANGE', KEYS[1], 0, excess)) do
  if #out == excess then break end
  if k ~= ARGV[1] then table.insert(out, k) end
end
for _, k in ipairs(out) do redis.call('ZREM', KEYS[1], k) end
return out`)

// PutThread implements agent.ThreadStore.
func (s *Store) PutThread(ctx context.Context, t *agent.Thread) error {
	_, err := s.put(ctx, t, "", "")
	return err
}

// PutThreadFenced stores t only if fenceKey holds fenceValue, in the same
// script as the write (a run's claim on the chat: runlease.Fencer): a
// writer whose claim lapsed (a replica paused or cut off past its lease)
// cannot overwrite what the thread's new owner wrote, however late its
// write arrives. written is false then, and nothing was written.
func (s *Store) PutThreadFenced(ctx context.Context, t *agent.Thread, fenceKey, fenceValue string) (written bool, err error) {
	return s.put(ctx, t, fenceKey, fenceValue)
}

func (s *Store) put(ctx context.Context, t *agent.Thread, fenceKey, fenceValue string) (bool, error) {
	v, err := s.ret.Encode(t)
	if err != nil {
		return false, err
	}
	var score int64
	if !t.Updated.IsZero() {
		score = t.Updated.UnixNano()
	}
	n, err := s.write(ctx, t.Key, v, score, fenceKey, fenceValue)
	if err != nil {
		return false, fmt.Errorf("thread store: redis: %w", err)
	}
	if n < 0 {
		return false, nil
	}
	if n == 0 || s.ret.MaxThreadsPerUser <= 0 {
		return true, nil
	}
	excess, err := boundScript.Run(ctx, s.c, []string{s.ownerKey(t.Key)}, t.Key, s.ret.MaxThreadsPerUser).StringSlice()
	if err != nil {
		return true, fmt.Errorf("thread store: redis: %w", err)
	}
	for _, k := range excess {
		if err := s.drop(ctx, k); err != nil {
			return true, err
		}
	}
	return true, nil
}

// write stores the thread's JSON v and its index entries: -1 when the
// fence refused it, 1 for a new thread, else 0. On one Redis that is one
// script (one round trip, as a turn's checkpoints want); on a cluster the
// thread's script, then the indexes (in other slots), so that a bound
// never drops a thread before it is written — a put cut off between the
// two leaves the thread unindexed until its next put.
func (s *Store) write(ctx context.Context, key string, v []byte, score int64, fenceKey, fenceValue string) (int, error) {
	if !s.k.Cluster() {
		keys, args := []string{s.threadKey(key), s.ownerKey(key), s.ageKey()}, []any{v, score, key}
		if fenceKey != "" {
			keys, args = append(keys, fenceKey), append(args, fenceValue)
		}
		return putIndexedScript.Run(ctx, s.c, keys, args...).Int()
	}
	keys, args := []string{s.threadKey(key)}, []any{v}
	if fenceKey != "" {
		keys, args = append(keys, fenceKey), append(args, fenceValue)
	}
	n, err := putScript.Run(ctx, s.c, keys, args...).Int()
	if err != nil || n < 0 {
		return n, err
	}
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, s.ownerKey(key), redis.Z{Score: float64(score), Member: key})
		p.ZAdd(ctx, s.ageKey(), redis.Z{Score: float64(score), Member: key})
		return nil
	})
	return n, err
}

// drop deletes the thread under key k with its index entries: one
// command each (they are in different slots), the thread first.
func (s *Store) drop(ctx context.Context, k string) error {
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.threadKey(k))
		p.ZRem(ctx, s.ownerKey(k), k)
		p.ZRem(ctx, s.ageKey(), k)
		return nil
	})
	if err != nil {
		return fmt.Errorf("thread store: redis: %w", err)
	}
	return nil
}

// threadKey is in the slot of the thread's key, which is the key of its
// chat's claim (web/runlease/redislease tags its keys alike).
func (s *Store) threadKey(k string) string { return s.k.In(k, "thread:"+k) }
func (s *Store) ownerKey(k string) string  { return s.k.Key("threads-of:" + owner(k)) }
func (s *Store) ageKey() string            { return s.k.Key("threads-by-age") }

// agentsKey and versionKey share a slot: a put writes both in one
// transaction.
func (s *Store) agentsKey() string  { return s.k.In("agents", "agents") }
func (s *Store) versionKey() string { return s.k.In("agents", "agents:version") }

// Prune deletes the threads not updated within MaxAge and reports how
// many: the age index names them, a script per thread drops each.
func (s *Store) Prune(ctx context.Context) (int, error) {
	if s.ret.MaxAge <= 0 {
		return 0, nil
	}
	cutoff := s.ret.Now().Add(-s.ret.MaxAge).UnixNano()
	total := 0
	for {
		old, err := s.c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.ageKey(), Start: "-inf", Stop: "(" + strconv.FormatInt(cutoff, 10), ByScore: true, Count: 1000}).Result()
		if err != nil {
			return total, fmt.Errorf("thread store: prune: redis: %w", err)
		}
		for _, k := range old {
			if err := s.drop(ctx, k); err != nil {
				return total, err
			}
			total++
		}
		if len(old) < 1000 {
			return total, nil
		}
	}
}

// ListDefinitions implements agent.DefinitionStore, sorted by id.
func (s *Store) ListDefinitions(ctx context.Context) ([]agent.Definition, error) {
	m, err := s.c.HGetAll(ctx, s.agentsKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("agent store: redis: %w", err)
	}
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []agent.Definition
	for _, id := range ids {
		var d agent.Definition
		if err := json.Unmarshal([]byte(m[id]), &d); err != nil {
			return nil, fmt.Errorf("agent store: %s: %w", id, err)
		}
		out = append(out, d)
	}
	return out, nil
}

// PutDefinition implements agent.DefinitionStore.
func (s *Store) PutDefinition(ctx context.Context, d agent.Definition) error {
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.agentsKey(), d.ID, v)
		p.Incr(ctx, s.versionKey())
		return nil
	})
	if err != nil {
		return fmt.Errorf("agent store: redis: %w", err)
	}
	return nil
}

// putAtScript: KEYS agents, version; ARGV id, JSON, expected version.
var putAtScript = redis.NewScript(`
local v = redis.call('GET', KEYS[2]) or '0'
if v ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
return 1`)

// PutDefinitionAt implements agent.DefinitionVersioner: one script, so
// the check and the write are atomic.
func (s *Store) PutDefinitionAt(ctx context.Context, d agent.Definition, version string) (bool, error) {
	v, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	n, err := putAtScript.Run(ctx, s.c, []string{s.agentsKey(), s.versionKey()}, d.ID, v, version).Int()
	if err != nil {
		return false, fmt.Errorf("agent store: redis: %w", err)
	}
	return n == 1, nil
}

// DefinitionsVersion implements agent.DefinitionVersioner: a counter
// every put and delete increments (in the same transaction), so each
// replica's Registry sees another's edits.
func (s *Store) DefinitionsVersion(ctx context.Context) (string, error) {
	v, err := s.c.Get(ctx, s.versionKey()).Result()
	if errors.Is(err, redis.Nil) {
		return "0", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent store: redis: %w", err)
	}
	return v, nil
}

// DeleteDefinition implements agent.DefinitionStore: the deletion is kept
// as a tombstone, so an agent from the config file stays deleted.
func (s *Store) DeleteDefinition(ctx context.Context, id string) error {
	return s.PutDefinition(ctx, agent.Definition{ID: id, Deleted: true})
}
