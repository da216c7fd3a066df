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
	"github.com/trawl-dev/trawl/tools/rediskey"
)

// Approvals is the Redis agent.ApprovalStore: the approvals inbox shared
// by every replica, so a request issued on one is answered and taken on
// any. Keys, under the prefix: "approval:<id>" (a hash: "status", "rec",
// the request's JSON, and "exp", its expiry in unix milliseconds; the key
// expires a grace period after the request does) and "approvals" (a
// sorted set of ids by expiry, to list them). A swap compares the status
// and the expiry and writes in one script on the request's own key, so
// of two replicas answering or taking one request at once exactly one
// succeeds; the index, in a slot of its own on a Redis Cluster, is
// written after it.
type Approvals struct {
	c redis.UniversalClient
	k rediskey.Keys
}

var _ agent.ApprovalStore = (*Approvals)(nil)

// NewApprovals returns the inbox store of client under prefix.
func NewApprovals(client redis.UniversalClient, prefix string) *Approvals {
	return &Approvals{c: client, k: rediskey.New(client, prefix)}
}

// approvalGrace keeps an expired request's key a while after its expiry:
// reads already treat it as gone, by the caller's clock.
const approvalGrace = time.Hour

func (s *Approvals) key(id string) string { return s.k.Key("approval:" + id) }
func (s *Approvals) index() string        { return s.k.Key("approvals") }

func ms(t time.Time) int64 { return t.UnixMilli() }

// addScript: KEYS record; ARGV status, rec, expiry ms, key expiry ms.
// It refuses an id that exists.
var addScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'rec', ARGV[2], 'exp', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], ARGV[4])
return 1`)

// swapScript: KEYS record; ARGV from status, to status, rec, expiry ms,
// key expiry ms, now ms, grace ms. It writes only while the record's
// status is from and it has not expired (a record written before "exp"
// was kept: its key's time to live, less the grace, tells).
var swapScript = redis.NewScript(`
local exp = redis.call('HGET', KEYS[1], 'exp')
if exp then
  if tonumber(exp) <= tonumber(ARGV[6]) then return 0 end
elseif redis.call('PTTL', KEYS[1]) <= tonumber(ARGV[7]) then return 0 end
if redis.call('HGET', KEYS[1], 'status') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'rec', ARGV[3], 'exp', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
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
	n, err := addScript.Run(ctx, s.c, []string{s.key(a.ID)},
		string(a.Status), rec, ms(a.Expires), ms(a.Expires.Add(approvalGrace))).Int()
	if err != nil {
		return fmt.Errorf("approvals: redis: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("approval %q exists", a.ID)
	}
	return s.indexAt(ctx, a)
}

// indexAt lists a in the index until it expires.
func (s *Approvals) indexAt(ctx context.Context, a agent.PendingApproval) error {
	if err := s.c.ZAdd(ctx, s.index(), redis.Z{Score: float64(ms(a.Expires)), Member: a.ID}).Err(); err != nil {
		return fmt.Errorf("approvals: redis: %w", err)
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
	n, err := swapScript.Run(ctx, s.c, []string{s.key(a.ID)},
		string(from), string(a.Status), rec, ms(a.Expires), ms(a.Expires.Add(approvalGrace)), ms(now), approvalGrace.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("approvals: redis: %w", err)
	}
	if n != 1 {
		return false, nil
	}
	return true, s.indexAt(ctx, a)
}
