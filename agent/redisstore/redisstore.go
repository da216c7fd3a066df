// Package redisstore is the Redis agent.ThreadStore,
// agent.DefinitionStore, agent.ApprovalStore and workflow.RunStore
// (Runs): threads, agent definitions edited over the API, the approvals
// inbox and workflow runs, shared by every replica (a PATCH on one
// applies on the others from their next read), within the same
// agent.Retention and workflow.RunRetention contracts as the embedded
// stores.
//
// Keys, under the prefix: "thread:<key>" (the thread's JSON, trimmed by
// Retention.Encode), "threads-of:<owner>" (a sorted set of the owner's
// thread keys by last update, for MaxThreadsPerUser), "threads-by-age"
// (all thread keys by last update, for Prune) and "agents" (a hash of
// definitions by id; a deletion is kept as a tombstone); the runs' keys
// are Runs'. A put and its
// pruning are one Lua script, so concurrent puts keep the bound exactly.
// The approvals inbox (Approvals) keeps "approval:<id>" and "approvals"
// beside them. The scripts name keys they build, so this store needs a
// single Redis (or one cluster slot), not a cluster.
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
)

// Store is the Redis store of threads and definitions.
type Store struct {
	c      redis.UniversalClient
	prefix string
	ret    agent.Retention
}

var (
	_ agent.ThreadStore         = (*Store)(nil)
	_ agent.DefinitionStore     = (*Store)(nil)
	_ agent.DefinitionVersioner = (*Store)(nil)
	_ agent.ThreadLister        = (*Store)(nil)
)

// New returns the store of client; every key begins with prefix.
func New(client redis.UniversalClient, prefix string, ret agent.Retention) *Store {
	return &Store{c: client, prefix: prefix, ret: ret.WithDefaults()}
}

// owner is the part of a thread key that names its owner (agent.ThreadKey
// begins "u=<escaped user>;", and the escaping escapes ';').
func owner(key string) string {
	o, _, _ := strings.Cut(key, ";")
	return o
}

// GetThread implements agent.ThreadStore.
func (s *Store) GetThread(ctx context.Context, key string) (*agent.Thread, error) {
	b, err := s.c.Get(ctx, s.prefix+"thread:"+key).Bytes()
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
	keys, err := s.c.ZRevRange(ctx, s.prefix+"threads-of:"+owner(prefix), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("thread store: redis: %w", err)
	}
	var want []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			want = append(want, s.prefix+"thread:"+k)
			if limit > 0 && len(want) == limit {
				break
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	vals, err := s.c.MGet(ctx, want...).Result()
	if err != nil {
		return nil, fmt.Errorf("thread store: redis: %w", err)
	}
	out := make([]*agent.Thread, 0, len(vals))
	for i, v := range vals {
		str, ok := v.(string)
		if !ok {
			continue // deleted since the set was read
		}
		t := new(agent.Thread)
		if err := json.Unmarshal([]byte(str), t); err != nil {
			return nil, fmt.Errorf("thread %q: %w", want[i], err)
		}
		out = append(out, t)
	}
	return out, nil
}

// putScript: KEYS thread, owner set, age set[, fence]; ARGV JSON,
// score, key, max per user[, fence value]. With a fence, nothing is
// written unless the fence key holds the fence value ({-1}). Otherwise it
// returns {0, the keys of the owner's threads past the bound, oldest
// first} — for the caller to drop: a script touches only the keys named
// in KEYS.
var putScript = redis.NewScript(`
if #KEYS == 4 and redis.call('GET', KEYS[4]) ~= ARGV[5] then return {-1} end
local isNew = redis.call('EXISTS', KEYS[1]) == 0
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[3])
local out = {0}
local max = tonumber(ARGV[4])
if not isNew or max <= 0 then return out end
local excess = redis.call('ZCARD', KEYS[2]) - max
if excess <= 0 then return out end
for _, k in ipairs(redis.call('ZRANGE', KEYS[2], 0, excess)) do
  if #out - 1 == excess then break end
  if k ~= ARGV[3] then table.insert(out, k) end
end
return out`)

// dropScript: KEYS thread, owner set, age set; ARGV key. Deletes one
// thread and its index entries.
var dropScript = redis.NewScript(`
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return 1`)

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
	keys := []string{s.threadKey(t.Key), s.ownerKey(t.Key), s.ageKey()}
	args := []any{v, score, t.Key, s.ret.MaxThreadsPerUser}
	if fenceKey != "" {
		keys, args = append(keys, fenceKey), append(args, fenceValue)
	}
	res, err := putScript.Run(ctx, s.c, keys, args...).Slice()
	if err != nil {
		return false, fmt.Errorf("thread store: redis: %w", err)
	}
	if n, _ := res[0].(int64); n < 0 {
		return false, nil
	}
	for _, k := range res[1:] {
		if k, ok := k.(string); ok {
			if err := s.drop(ctx, k); err != nil {
				return true, err
			}
		}
	}
	return true, nil
}

// drop deletes the thread under key k with its index entries.
func (s *Store) drop(ctx context.Context, k string) error {
	if err := dropScript.Run(ctx, s.c, []string{s.threadKey(k), s.ownerKey(k), s.ageKey()}, k).Err(); err != nil {
		return fmt.Errorf("thread store: redis: %w", err)
	}
	return nil
}

func (s *Store) threadKey(k string) string { return s.prefix + "thread:" + k }
func (s *Store) ownerKey(k string) string  { return s.prefix + "threads-of:" + owner(k) }
func (s *Store) ageKey() string            { return s.prefix + "threads-by-age" }

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
	m, err := s.c.HGetAll(ctx, s.prefix+"agents").Result()
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
		p.HSet(ctx, s.prefix+"agents", d.ID, v)
		p.Incr(ctx, s.prefix+"agents:version")
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
	n, err := putAtScript.Run(ctx, s.c, []string{s.prefix + "agents", s.prefix + "agents:version"}, d.ID, v, version).Int()
	if err != nil {
		return false, fmt.Errorf("agent store: redis: %w", err)
	}
	return n == 1, nil
}

// DefinitionsVersion implements agent.DefinitionVersioner: a counter
// every put and delete increments (in the same transaction), so each
// replica's Registry sees another's edits.
func (s *Store) DefinitionsVersion(ctx context.Context) (string, error) {
	v, err := s.c.Get(ctx, s.prefix+"agents:version").Result()
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
