package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/agent"
)

// Approvals is the Redis agent.ApprovalStore: the approvals inbox shared
// by every replica, so a request issued on one is answered and taken on
// any. Keys, under the prefix: "approval:<id>" (a hash: "status" and
// "rec", the request's JSON; the key expires a grace period after the
// request does) and "approvals" (a sorted set of ids by expiry, in unix
// milliseconds, to list them). A swap compares the status and writes in
// one script, so of two replicas answering or taking one request at once
// exactly one succeeds.
type Approvals struct {
	c      redis.UniversalClient
	prefix string
}

var _ agent.ApprovalStore = (*Approvals)(nil)

// NewApprovals returns the inbox store of client under prefix.
func NewApprovals(client redis.UniversalClient, prefix string) *Approvals {
	return &Approvals{c: client, prefix: prefix}
}

// approvalGrace keeps an expired request's key a while after its expiry:
// reads already treat it as gone, by the caller's clock.
const approvalGrace = time.Hour

func (s *Approvals) key(id string) string { return s.prefix + "approval:" + id }
func (s *Approvals) index() string        { return s.prefix + "approvals" }

func ms(t time.Time) int64 { return t.UnixMilli() }

// addScript: KEYS record, index; ARGV id, status, rec, expiry ms, key
// expiry ms. It refuses an id that exists.
var addScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'rec', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
return 1`)

// swapScript: KEYS record, index; ARGV id, from status, to status, rec,
// expiry ms, key expiry ms, now ms. It writes only while the record's
// status is from and the index says it has not expired.
var swapScript = redis.NewScript(`
local exp = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not exp or tonumber(exp) <= tonumber(ARGV[7]) then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[3], 'rec', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[6])
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
return 1`)

// AddApproval implements agent.ApprovalStore.
func (s *Approvals) AddApproval(ctx context.Context, a agent.PendingApproval) error {
	rec, err := json.Marshal(a)
	if err != nil {
		return err
	}
	// Expired ids leave the index as requests are added.
	if err := s.c.ZRemRangeByScore(ctx, s.index(), "-inf", strconv.FormatInt(ms(a.Created), 10)).Err(); err != nil {
		return fmt.Errorf("approvals: redis: %w", err)
	}
	n, err := addScript.Run(ctx, s.c, []string{s.key(a.ID), s.index()},
		a.ID, string(a.Status), rec, ms(a.Expires), ms(a.Expires.Add(approvalGrace))).Int()
	if err != nil {
		return fmt.Errorf("approvals: redis: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("approval %q exists", a.ID)
	}
	return nil
}

func decodeApproval(id string, rec string, now time.Time) (agent.PendingApproval, bool, error) {
	var a agent.PendingApproval
	if err := json.Unmarshal([]byte(rec), &a); err != nil {
		return a, false, fmt.Errorf("approvals: request %q: %w", id, err)
	}
	if !now.Before(a.Expires) {
		return agent.PendingApproval{}, false, nil
	}
	return a, true, nil
}

// GetApproval implements agent.ApprovalStore.
func (s *Approvals) GetApproval(ctx context.Context, id string, now time.Time) (agent.PendingApproval, bool, error) {
	rec, err := s.c.HGet(ctx, s.key(id), "rec").Result()
	if errors.Is(err, redis.Nil) {
		return agent.PendingApproval{}, false, nil
	}
	if err != nil {
		return agent.PendingApproval{}, false, fmt.Errorf("approvals: redis: %w", err)
	}
	return decodeApproval(id, rec, now)
}

// ListApprovals implements agent.ApprovalStore.
func (s *Approvals) ListApprovals(ctx context.Context, now time.Time) ([]agent.PendingApproval, error) {
	ids, err := s.c.ZRangeByScore(ctx, s.index(), &redis.ZRangeBy{Min: "(" + strconv.FormatInt(ms(now), 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, fmt.Errorf("approvals: redis: %w", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	pipe := s.c.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HGet(ctx, s.key(id), "rec")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("approvals: redis: %w", err)
	}
	out := make([]agent.PendingApproval, 0, len(ids))
	for i, cmd := range cmds {
		rec, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue // its key went with its grace period
		}
		if err != nil {
			return nil, fmt.Errorf("approvals: redis: %w", err)
		}
		a, ok, err := decodeApproval(ids[i], rec, now)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, agent.CompareApprovals)
	return out, nil
}

// SwapApproval implements agent.ApprovalStore.
func (s *Approvals) SwapApproval(ctx context.Context, from agent.ApprovalStatus, a agent.PendingApproval, now time.Time) (bool, error) {
	rec, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	n, err := swapScript.Run(ctx, s.c, []string{s.key(a.ID), s.index()},
		a.ID, string(from), string(a.Status), rec, ms(a.Expires), ms(a.Expires.Add(approvalGrace)), ms(now)).Int()
	if err != nil {
		return false, fmt.Errorf("approvals: redis: %w", err)
	}
	return n == 1, nil
}
