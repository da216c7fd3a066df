// Package redislog is the stream.EventLog on Redis Streams: every replica
// of a deployment appends to and reads from one Redis, so a client
// resumes a run (Last-Event-ID) on any replica.
//
// Layout, under the key prefix: a run's events are the stream
// "<prefix>run:{<id>}:s" whose entry ids are 0-<seq>, so a resume point is
// a stream id; its state (last seq, bytes held, closed) is the hash
// "<prefix>run:{<id>}:m". Appends and closes are Lua scripts, atomic on
// both keys (the braces keep them in one cluster slot). Close appends an
// end marker entry (0-<last+1>, field "e") that tells readers the run is
// over; readers never yield it.
//
// Readers hold no connection while they wait: every append (and the end)
// is published on "<prefix>run:{<id>}:n" with the entry itself
// ("d<seq> <data>", or "e<seq>" for the end), and each Log keeps one
// pub/sub connection subscribed to the runs its readers follow. A live
// reader takes each next event from its notification, so following a run
// costs no command per event; it reads with XRANGE only to catch up (the
// backlog when it starts, a gap, a notification it could not hold). A
// notification lost to a reconnect is made up by a poll every
// Options.Block.
//
// Bounds: MaxRunBytes as MemoryLog counts it (past it the run ends with
// stream.OverflowChunk). A run is trimmed whole: a closed run's keys
// expire after Retention, and an open run's after OpenTTL without an
// append (a replica that died mid-run leaves nothing behind for long).
// No run is trimmed in its middle, so every id of a live run resumes.
// Redis's own maxmemory bounds the total.
package redislog

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/stream"
)

// Options configure a Log. The zero value means every default.
type Options struct {
	// Prefix begins every key (for sharing one Redis between
	// deployments), e.g. "trawl:".
	Prefix string
	// MaxRunBytes bounds one run as stream.MemoryLogOptions does. Zero:
	// 8 MiB.
	MaxRunBytes int64
	// Retention is how long a closed run stays readable. Zero: 10 minutes.
	Retention time.Duration
	// OpenTTL is how long an open run is kept without an append. Zero:
	// 24 hours.
	OpenTTL time.Duration
	// Block is the longest a waiting reader goes without looking at the
	// run (for a notification lost to a reconnect, or a run that
	// expired). Zero: one second.
	Block time.Duration
}

// Log is the Redis stream.EventLog. Shut it down to end its subscription.
type Log struct {
	c   redis.UniversalClient
	opt Options

	mu      sync.Mutex
	sub     *redis.PubSub
	waiters map[string]map[*waiter]bool // by notification channel
	// pending: channels whose SUBSCRIBE is not confirmed yet, closed
	// when it is.
	pending map[string]chan struct{}
}

// waiter is one reader's inbox of notifications.
type waiter struct {
	notes chan string   // notification payloads, in publish order
	lost  chan struct{} // a payload did not fit in notes: catch up
}

// waiterNotes is how many notifications a reader holds before it drops
// them and catches up with XRANGE instead.
const waiterNotes = 64

var _ stream.EventLog = (*Log)(nil)

// New returns the log of client with opts.
func New(client redis.UniversalClient, opts Options) *Log {
	if opts.MaxRunBytes <= 0 {
		opts.MaxRunBytes = 8 << 20
	}
	if opts.Retention <= 0 {
		opts.Retention = 10 * time.Minute
	}
	if opts.OpenTTL <= 0 {
		opts.OpenTTL = 24 * time.Hour
	}
	if opts.Block <= 0 {
		opts.Block = time.Second
	}
	return &Log{c: client, opt: opts, waiters: map[string]map[*waiter]bool{},
		pending: map[string]chan struct{}{}}
}

func (l *Log) keys(runID string) (meta, events string) {
	base := l.opt.Prefix + "run:{" + runID + "}"
	return base + ":m", base + ":s"
}

func (l *Log) notifyChannel(runID string) string { return l.opt.Prefix + "run:{" + runID + "}:n" }

// Shutdown ends the log's subscription; readers still waiting fall back
// to polling every Block.
func (l *Log) Shutdown() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sub == nil {
		return nil
	}
	err := l.sub.Close()
	l.sub = nil
	return err
}

// watch subscribes a waiter to runID's notifications; stop ends it. It
// returns once Redis confirmed the subscription (or after Block without
// a confirmation: the poll then covers), so that every append after the
// reader's next XRANGE is notified to it.
func (l *Log) watch(ctx context.Context, runID string) (w *waiter, stop func(), err error) {
	ch := l.notifyChannel(runID)
	w = &waiter{notes: make(chan string, waiterNotes), lost: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.sub == nil {
		sub := l.c.Subscribe(context.WithoutCancel(ctx))
		l.sub = sub
		go l.dispatch(sub)
	}
	if len(l.waiters[ch]) == 0 {
		if l.pending[ch] == nil {
			l.pending[ch] = make(chan struct{})
		}
		if err := l.sub.Subscribe(ctx, ch); err != nil {
			l.mu.Unlock()
			return nil, nil, fmt.Errorf("reading run %q: redis: %w", runID, err)
		}
		l.waiters[ch] = map[*waiter]bool{}
	}
	l.waiters[ch][w] = true
	sub := l.sub
	ready := l.pending[ch]
	l.mu.Unlock()
	if ready != nil {
		t := time.NewTimer(l.opt.Block)
		select {
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	return w, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.waiters[ch], w)
		if len(l.waiters[ch]) == 0 {
			delete(l.waiters, ch)
			if l.sub == sub {
				_ = sub.Unsubscribe(context.Background(), ch)
			}
		}
	}, nil
}

func (l *Log) dispatch(sub *redis.PubSub) {
	for v := range sub.ChannelWithSubscriptions() {
		m, ok := v.(*redis.Message)
		if !ok {
			if s, ok := v.(*redis.Subscription); ok && s.Kind == "subscribe" {
				l.mu.Lock()
				if ready := l.pending[s.Channel]; ready != nil {
					close(ready)
					delete(l.pending, s.Channel)
				}
				l.mu.Unlock()
			}
			continue
		}
		l.mu.Lock()
		for w := range l.waiters[m.Channel] {
			select {
			case w.notes <- m.Payload:
			default: // the reader is behind: it catches up from the log
				select {
				case w.lost <- struct{}{}:
				default:
				}
			}
		}
		l.mu.Unlock()
	}
}

var openScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'seq', 0, 'bytes', 0, 'closed', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1`)

// Open implements stream.EventLog.
func (l *Log) Open(ctx context.Context, runID string) error {
	meta, _ := l.keys(runID)
	ok, err := openScript.Run(ctx, l.c, []string{meta}, l.opt.OpenTTL.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("opening run %q: redis: %w", runID, err)
	}
	if ok == 0 {
		return fmt.Errorf("opening run %q: %w", runID, stream.ErrRunExists)
	}
	return nil
}

// Results of appendScript and closeScript below 1.
const (
	resNotFound = -1
	resClosed   = -2
	resFull     = -3
)

// appendScript: KEYS meta, events; ARGV data, cost, max run bytes,
// overflow chunk, open TTL ms, retention ms, notification channel.
var appendScript = redis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'seq', 'bytes', 'closed')
if not m[1] then return {-1, 0} end
if m[3] == '1' then return {-2, 0} end
local seq = tonumber(m[1])
local bytes = tonumber(m[2])
local n = tonumber(ARGV[2])
if bytes + n > tonumber(ARGV[3]) then
  redis.call('XADD', KEYS[2], '0-' .. (seq + 1), 'd', ARGV[4])
  redis.call('XADD', KEYS[2], '0-' .. (seq + 2), 'e', '1')
  redis.call('HSET', KEYS[1], 'seq', seq + 1, 'closed', 1)
  redis.call('PEXPIRE', KEYS[1], ARGV[6])
  redis.call('PEXPIRE', KEYS[2], ARGV[6])
  redis.call('PUBLISH', ARGV[7], 'd' .. (seq + 1) .. ' ' .. ARGV[4])
  redis.call('PUBLISH', ARGV[7], 'e' .. (seq + 2))
  return {-3, bytes}
end
redis.call('XADD', KEYS[2], '0-' .. (seq + 1), 'd', ARGV[1])
redis.call('HSET', KEYS[1], 'seq', seq + 1, 'bytes', bytes + n)
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('PEXPIRE', KEYS[2], ARGV[5])
redis.call('PUBLISH', ARGV[7], 'd' .. (seq + 1) .. ' ' .. ARGV[1])
return {seq + 1, bytes + n}`)

var overflowData = func() string {
	b, err := stream.Encode(stream.OverflowChunk)
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// Append implements stream.EventLog.
func (l *Log) Append(ctx context.Context, runID string, c stream.Chunk) (int64, error) {
	data, err := stream.Encode(c)
	if err != nil {
		return 0, err
	}
	meta, events := l.keys(runID)
	res, err := appendScript.Run(ctx, l.c, []string{meta, events}, data, int64(len(data))+stream.EventOverhead,
		l.opt.MaxRunBytes, overflowData, l.opt.OpenTTL.Milliseconds(), l.opt.Retention.Milliseconds(), l.notifyChannel(runID)).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("appending to run %q: redis: %w", runID, err)
	}
	switch res[0] {
	case resNotFound:
		return 0, fmt.Errorf("appending to run %q: %w", runID, stream.ErrRunNotFound)
	case resClosed:
		return 0, fmt.Errorf("appending to run %q: %w", runID, stream.ErrRunClosed)
	case resFull:
		return 0, fmt.Errorf("appending to run %q (%d bytes held): %w", runID, res[1], stream.ErrLogFull)
	}
	return res[0], nil
}

var closeScript = redis.NewScript(`
local m = redis.call('HMGET', KEYS[1], 'seq', 'closed')
if not m[1] then return -1 end
if m[2] == '1' then return 0 end
redis.call('XADD', KEYS[2], '0-' .. (tonumber(m[1]) + 1), 'e', '1')
redis.call('HSET', KEYS[1], 'closed', 1)
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
redis.call('PUBLISH', ARGV[2], 'e' .. (tonumber(m[1]) + 1))
return 1`)

// Close implements stream.EventLog.
func (l *Log) Close(ctx context.Context, runID string) error {
	meta, events := l.keys(runID)
	res, err := closeScript.Run(ctx, l.c, []string{meta, events}, l.opt.Retention.Milliseconds(), l.notifyChannel(runID)).Int()
	if err != nil {
		return fmt.Errorf("closing run %q: redis: %w", runID, err)
	}
	if res == resNotFound {
		return fmt.Errorf("closing run %q: %w", runID, stream.ErrRunNotFound)
	}
	return nil
}

// Stat implements stream.EventLog.
func (l *Log) Stat(ctx context.Context, runID string) (stream.RunState, error) {
	meta, _ := l.keys(runID)
	m, err := l.c.HMGet(ctx, meta, "seq", "closed").Result()
	if err != nil {
		return stream.RunState{}, fmt.Errorf("run %q: redis: %w", runID, err)
	}
	if m[0] == nil {
		return stream.RunState{}, fmt.Errorf("run %q: %w", runID, stream.ErrRunNotFound)
	}
	seq, err := strconv.ParseInt(fmt.Sprint(m[0]), 10, 64)
	if err != nil {
		return stream.RunState{}, fmt.Errorf("run %q: corrupt state: %w", runID, err)
	}
	return stream.RunState{LastSeq: seq, Closed: fmt.Sprint(m[1]) == "1"}, nil
}

// readBatch is the most entries one read fetches.
const readBatch = 512

// Read implements stream.EventLog.
func (l *Log) Read(ctx context.Context, runID string, after int64) iter.Seq2[stream.Event, error] {
	return func(yield func(stream.Event, error) bool) {
		st, err := l.Stat(ctx, runID)
		if err != nil {
			yield(stream.Event{}, fmt.Errorf("reading: %w", err))
			return
		}
		if after < 0 || after > st.LastSeq {
			yield(stream.Event{}, fmt.Errorf("reading run %q after %d (last is %d): %w", runID, after, st.LastSeq, stream.ErrUnknownEventID))
			return
		}
		w, stop, err := l.watch(ctx, runID)
		if err != nil {
			yield(stream.Event{}, err)
			return
		}
		defer stop()
		meta, events := l.keys(runID)
		poll := time.NewTimer(l.opt.Block)
		defer poll.Stop()
		for {
			if err := ctx.Err(); err != nil {
				yield(stream.Event{}, err)
				return
			}
			msgs, err := l.c.XRangeN(ctx, events, "0-"+strconv.FormatInt(after+1, 10), "+", readBatch).Result()
			if err != nil {
				if ctx.Err() != nil {
					err = ctx.Err()
				} else {
					err = fmt.Errorf("reading run %q: redis: %w", runID, err)
				}
				yield(stream.Event{}, err)
				return
			}
			for _, m := range msgs {
				if _, end := m.Values["e"]; end {
					return
				}
				seq, err := seqOf(m.ID)
				d, ok := m.Values["d"].(string)
				if err != nil || !ok || seq != after+1 {
					yield(stream.Event{}, fmt.Errorf("reading run %q: corrupt entry %q after %d", runID, m.ID, after))
					return
				}
				if !yield(stream.Event{Seq: seq, Data: []byte(d)}, nil) {
					return
				}
				after = seq
			}
			// Read on at once only when the batch was full: what comes next
			// is in the notifications (the subscription was live before
			// this read).
			if len(msgs) == readBatch {
				continue
			}
			poll.Reset(l.opt.Block)
			polled := false
		follow:
			for {
				select {
				case note := <-w.notes:
					end, seq, data, ok := parseNote(note)
					switch {
					case ok && seq <= after:
						continue // read already (from the log)
					case !ok || seq > after+1:
						break follow // a gap (or a payload without the entry): catch up
					case end:
						return
					}
					if !yield(stream.Event{Seq: seq, Data: []byte(data)}, nil) {
						return
					}
					after = seq
					poll.Reset(l.opt.Block)
				case <-w.lost:
					break follow
				case <-ctx.Done():
					yield(stream.Event{}, ctx.Err())
					return
				case <-poll.C:
					polled = true
					break follow
				}
			}
			if !polled {
				continue
			}
			// Nothing new within Block: the run may have expired.
			n, err := l.c.Exists(ctx, meta).Result()
			switch {
			case ctx.Err() != nil:
				yield(stream.Event{}, ctx.Err())
				return
			case err != nil:
				yield(stream.Event{}, fmt.Errorf("reading run %q: redis: %w", runID, err))
				return
			case n == 0:
				yield(stream.Event{}, fmt.Errorf("reading run %q: %w", runID, stream.ErrRunNotFound))
				return
			}
		}
	}
}

// parseNote reads a notification payload: "d<seq> <data>" or
// "e<seq>". ok is false for any other (the reader then reads the log).
func parseNote(p string) (end bool, seq int64, data string, ok bool) {
	if len(p) < 2 {
		return false, 0, "", false
	}
	num := p[1:]
	switch p[0] {
	case 'e':
		end = true
	case 'd':
		var found bool
		num, data, found = strings.Cut(num, " ")
		if !found {
			return false, 0, "", false
		}
	default:
		return false, 0, "", false
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil || seq <= 0 {
		return false, 0, "", false
	}
	return end, seq, data, true
}

func seqOf(id string) (int64, error) {
	ms, seq, ok := strings.Cut(id, "-")
	if !ok || ms != "0" {
		return 0, errors.New("not an event id")
	}
	return strconv.ParseInt(seq, 10, 64)
}
