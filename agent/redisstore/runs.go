package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/tools/rediskey"
)

// Runs is the Redis workflow.RunStore, within the same
// workflow.RunRetention as the embedded store. Keys, under the prefix:
// "wfrun:<id>" (a hash: the run's summary JSON, its status, its workflow
// and, once it ended, its result JSON), "wfruns-of:<workflow>" (a sorted
// set of the workflow's run ids by start, for lists and MaxPerWorkflow)
// and "wfruns-by-start" (every run id by start, for Prune). On a Redis
// Cluster a run's hash is in the slot of its claim (workflow.ClaimKey),
// so a fenced put is one script; the indexes are written after it, each
// with its own command, and the bound takes a run out of its workflow's set in
// one script on that set, so concurrent runs keep it exactly.
type Runs struct {
	c   redis.UniversalClient
	k   rediskey.Keys
	ret workflow.RunRetention
}

var _ workflow.RunStore = (*Runs)(nil)

// NewRuns returns the run store of client; every key begins with prefix.
func NewRuns(client redis.UniversalClient, prefix string, ret workflow.RunRetention) *Runs {
	return &Runs{c: client, k: rediskey.New(client, prefix), ret: ret.WithDefaults()}
}

func (s *Runs) runKey(id string) string      { return s.k.In(workflow.ClaimKey(id), "wfrun:"+id) }
func (s *Runs) workflowKey(wf string) string { return s.k.Key("wfruns-of:" + wf) }
func (s *Runs) startKey() string             { return s.k.Key("wfruns-by-start") }

// putRunScript: KEYS run[, fence]; ARGV summary, result ("" for none),
// status, workflow[, fence value]. With a fence, nothing is written
// unless the fence key holds the fence value (-1). Returns 1 for a new
// run, else 0: the caller then applies the per-workflow bound.
var putRunScript = redis.NewScript(`
if #KEYS == 2 and redis.call('GET', KEYS[2]) ~= ARGV[5] then return -1 end
local isNew = redis.call('EXISTS', KEYS[1]) == 0
redis.call('HSET', KEYS[1], 'summary', ARGV[1], 'status', ARGV[3], 'workflow', ARGV[4])
if ARGV[2] == '' then redis.call('HDEL', KEYS[1], 'result') else redis.call('HSET', KEYS[1], 'result', ARGV[2]) end
if isNew then return 1 end
return 0`)

// unlistScript: KEYS the workflow's set; ARGV id, the bound. It takes id
// out of the set only while the set holds more runs than the bound
// (another put may have dropped some meanwhile): 1 when it did.
var unlistScript = redis.NewScript(`
if redis.call('ZCARD', KEYS[1]) <= tonumber(ARGV[2]) then return 0 end
return redis.call('ZREM', KEYS[1], ARGV[1])`)

// PutRun implements workflow.RunStore.
func (s *Runs) PutRun(ctx context.Context, r *workflow.Run) error {
	_, err := s.put(ctx, r, "", "")
	return err
}

// PutRunFenced stores r only if fenceKey holds fenceValue, in the same
// script as the write (the run's claim: runlease.Fencer): a run whose
// claim lapsed (its replica paused or cut off past its lease) cannot
// write its end over the one the replica that ended it wrote, however
// late its write arrives. written is false then, and nothing was written.
func (s *Runs) PutRunFenced(ctx context.Context, r *workflow.Run, fenceKey, fenceValue string) (written bool, err error) {
	return s.put(ctx, r, fenceKey, fenceValue)
}

func (s *Runs) put(ctx context.Context, r *workflow.Run, fenceKey, fenceValue string) (bool, error) {
	sum := *r
	sum.Result = nil
	sb, err := json.Marshal(&sum)
	if err != nil {
		return false, err
	}
	var rb []byte
	if r.Result != nil {
		if rb, err = json.Marshal(r.Result); err != nil {
			return false, err
		}
	}
	var score int64
	if !r.Started.IsZero() {
		score = r.Started.UnixNano()
	}
	keys := []string{s.runKey(r.ID)}
	args := []any{sb, rb, string(r.Status), r.Workflow}
	if fenceKey != "" {
		keys, args = append(keys, fenceKey), append(args, fenceValue)
	}
	n, err := putRunScript.Run(ctx, s.c, keys, args...).Int()
	if err != nil {
		return false, fmt.Errorf("workflow run store: redis: %w", err)
	}
	if n < 0 {
		return false, nil
	}
	// Then the indexes (in other slots), so that a bound never takes a
	// run for an ended one before it is written. A put cut off between
	// the two leaves the run unlisted until its next put (its end).
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.ZAdd(ctx, s.workflowKey(r.Workflow), redis.Z{Score: float64(score), Member: r.ID})
		p.ZAdd(ctx, s.startKey(), redis.Z{Score: float64(score), Member: r.ID})
		return nil
	})
	if err != nil {
		return true, fmt.Errorf("workflow run store: redis: %w", err)
	}
	if n == 1 && s.ret.MaxPerWorkflow > 0 {
		if err := s.bound(ctx, r); err != nil {
			return true, err
		}
	}
	return true, nil
}

// bound deletes the oldest ended runs of r's workflow beyond
// MaxPerWorkflow, r never.
func (s *Runs) bound(ctx context.Context, r *workflow.Run) error {
	set := s.workflowKey(r.Workflow)
	for from := int64(0); ; {
		n, err := s.c.ZCard(ctx, set).Result()
		if err != nil {
			return fmt.Errorf("workflow run store: redis: %w", err)
		}
		excess := n - int64(s.ret.MaxPerWorkflow)
		if excess <= 0 {
			return nil
		}
		ids, err := s.c.ZRange(ctx, set, from, from+excess-1).Result()
		if err != nil {
			return fmt.Errorf("workflow run store: redis: %w", err)
		}
		if len(ids) == 0 {
			return nil // every older run is still running
		}
		for _, id := range ids {
			dropped := 0
			if id != r.ID {
				if dropped, err = s.drop(ctx, id, r.Workflow, true); err != nil {
					return err
				}
			}
			if dropped == 0 {
				from++ // kept: look past it
			}
		}
	}
}

// drop deletes run id of workflow wf (with ended, only if it is not
// running and the workflow holds more runs than the bound): 1 when it
// did. The run and its index entries are in different slots on a
// cluster: with ended, the entry leaves the workflow's set in one script
// (so two bounds at once never drop the same excess twice), then the run
// and its other entry go.
func (s *Runs) drop(ctx context.Context, id, wf string, ended bool) (int, error) {
	if ended {
		st, err := s.c.HGet(ctx, s.runKey(id), "status").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, fmt.Errorf("workflow run store: redis: %w", err)
		}
		if st == string(workflow.StatusRunning) {
			return 0, nil
		}
		n, err := unlistScript.Run(ctx, s.c, []string{s.workflowKey(wf)}, id, s.ret.MaxPerWorkflow).Int()
		if err != nil {
			return 0, fmt.Errorf("workflow run store: redis: %w", err)
		}
		if n == 0 {
			return 0, nil
		}
	}
	_, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.runKey(id))
		p.ZRem(ctx, s.workflowKey(wf), id)
		p.ZRem(ctx, s.startKey(), id)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("workflow run store: redis: %w", err)
	}
	return 1, nil
}

// GetRun implements workflow.RunStore: summary and result in one read.
func (s *Runs) GetRun(ctx context.Context, id string) (*workflow.Run, error) {
	vals, err := s.c.HMGet(ctx, s.runKey(id), "summary", "result").Result()
	if err != nil {
		return nil, fmt.Errorf("workflow run store: redis: %w", err)
	}
	r, err := decodeRun(id, vals[0])
	if err != nil {
		return nil, err
	}
	if res, ok := vals[1].(string); ok {
		r.Result = new(workflow.Result)
		if err := json.Unmarshal([]byte(res), r.Result); err != nil {
			return nil, fmt.Errorf("workflow run %s: result: %w", id, err)
		}
	}
	return r, nil
}

// GetSummary implements workflow.RunStore.
func (s *Runs) GetSummary(ctx context.Context, id string) (*workflow.Run, error) {
	v, err := s.c.HGet(ctx, s.runKey(id), "summary").Result()
	if errors.Is(err, redis.Nil) {
		return nil, workflow.ErrRunNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("workflow run store: redis: %w", err)
	}
	return decodeRun(id, v)
}

// decodeRun decodes a summary field (nil: no such run).
func decodeRun(id string, v any) (*workflow.Run, error) {
	str, ok := v.(string)
	if !ok {
		return nil, workflow.ErrRunNotFound
	}
	r := new(workflow.Run)
	if err := json.Unmarshal([]byte(str), r); err != nil {
		return nil, fmt.Errorf("workflow run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns implements workflow.RunStore: the workflow's set, newest
// first, then the summaries in one pipeline.
func (s *Runs) ListRuns(ctx context.Context, workflowID string, limit int) ([]*workflow.Run, error) {
	ids, err := s.c.ZRevRange(ctx, s.workflowKey(workflowID), 0, int64(limit)-1).Result()
	if err != nil {
		return nil, fmt.Errorf("workflow run store: redis: %w", err)
	}
	out := make([]*workflow.Run, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cmds := make([]*redis.StringCmd, len(ids))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGet(ctx, s.runKey(id), "summary")
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("workflow run store: redis: %w", err)
	}
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue // deleted since the set was read
		}
		if err != nil {
			return nil, fmt.Errorf("workflow run store: redis: %w", err)
		}
		r, err := decodeRun(ids[i], v)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Prune implements workflow.RunStore.
func (s *Runs) Prune(ctx context.Context) (int, error) {
	if s.ret.MaxAge <= 0 {
		return 0, nil
	}
	cutoff := s.ret.Now().Add(-s.ret.MaxAge).UnixNano()
	total := 0
	for {
		old, err := s.c.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.startKey(), Start: "-inf", Stop: "(" + strconv.FormatInt(cutoff, 10), ByScore: true, Count: 1000}).Result()
		if err != nil {
			return total, fmt.Errorf("workflow run store: prune: redis: %w", err)
		}
		for _, id := range old {
			wf, err := s.c.HGet(ctx, s.runKey(id), "workflow").Result()
			if err != nil && !errors.Is(err, redis.Nil) {
				return total, fmt.Errorf("workflow run store: prune: redis: %w", err)
			}
			if _, err := s.drop(ctx, id, wf, false); err != nil {
				return total, err
			}
			total++
		}
		if len(old) < 1000 {
			return total, nil
		}
	}
}
