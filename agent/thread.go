package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Thread is one conversation with an agent: its messages as the chat UI
// shows them, plus what the runner must remember between turns.
type Thread struct {
	// Key identifies the thread in storage and scopes its stored
	// results: owner, agent and chat id together, so two users' chats
	// with the same client-chosen id never meet.
	Key     string      `json:"key"`
	ChatID  string      `json:"chatId"`
	AgentID string      `json:"agentId"`
	UserID  string      `json:"userId,omitempty"` // "" for admin-key callers
	Msgs    []UIMessage `json:"messages"`
	// Loaded are the ids of tools made callable with load_tool.
	Loaded []string `json:"loaded,omitempty"`
	// Results are the stored results the thread holds, with their
	// expiry, so the retrieval tools stay attached while one lives.
	Results []KeptResult `json:"results,omitempty"`
	// Approvals are the approval requests issued in the thread.
	Approvals []IssuedApproval `json:"approvals,omitempty"`
	// Interrupted are calls of a conversation (see Conversation) that
	// their client cancelled mid-walk, not yet reported to it: the next
	// call tells the client what each fetched and where it is kept.
	Interrupted []InterruptedCall `json:"interrupted,omitempty"`
	// Reads are the verdicts of a conversation's latest reads, the
	// evidence its approval requests show (a chat's are its turn's).
	Reads   []string  `json:"reads,omitempty"`
	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
}

// InterruptedCall is a call cancelled mid-walk, with what it fetched.
type InterruptedCall struct {
	ToolCallID string `json:"toolCallId"`
	Tool       string `json:"tool"`
	// Note is the partial result's verdict in the engine's words.
	Note     string `json:"note"`
	ResultID string `json:"resultId,omitempty"`
}

// KeptResult is a stored result of a thread.
type KeptResult struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

// ThreadKey builds a thread's storage key.
func ThreadKey(userID, agentID, chatID string) string {
	return userKeyPrefix(userID) + "a=" + url.PathEscape(agentID) + ";c=" + url.PathEscape(chatID)
}

// userKeyPrefix starts the keys of every thread of userID (PathEscape
// escapes ';', so no user's prefix is another's).
func userKeyPrefix(userID string) string { return "u=" + url.PathEscape(userID) + ";" }

// liveResults reports whether the thread holds a stored result that has
// not expired at now.
func (t *Thread) liveResults(now time.Time) bool {
	for _, r := range t.Results {
		if r.Expires.After(now) {
			return true
		}
	}
	return false
}

func (t *Thread) keepResult(id string, expires time.Time, now time.Time) {
	live := t.Results[:0]
	for _, r := range t.Results {
		if r.Expires.After(now) {
			live = append(live, r)
		}
	}
	t.Results = append(live, KeptResult{ID: id, Expires: expires})
}

// ErrNotFound is returned for a thread or agent that does not exist (or
// is outside the caller's scope: the two answer alike).
var ErrNotFound = errors.New("not found")

// ThreadStore keeps threads. Implementations are safe for concurrent use;
// the runner serialises turns of one thread itself.
type ThreadStore interface {
	GetThread(ctx context.Context, key string) (*Thread, error)
	PutThread(ctx context.Context, t *Thread) error
}

// DefinitionStore keeps agent definitions changed through the API.
type DefinitionStore interface {
	ListDefinitions(ctx context.Context) ([]Definition, error)
	PutDefinition(ctx context.Context, d Definition) error
	DeleteDefinition(ctx context.Context, id string) error
}

var (
	bucketThreads = []byte("threads")
	bucketAgents  = []byte("agents")
	// bucketThreadAge maps a thread key to its last update (8 bytes, Unix
	// nanoseconds, big-endian): what retention reads without decoding
	// threads.
	bucketThreadAge = []byte("thread_age")
)

// Retention bounds what a BoltStore keeps; the oldest go first. Zero
// fields mean the defaults; a negative one lifts its bound.
type Retention struct {
	// MaxThreadsPerUser: when a user's new thread puts them over it, their
	// least recently updated threads are deleted. Zero: 1000.
	MaxThreadsPerUser int
	// MaxThreadBytes bounds one stored thread (its JSON): the oldest turns
	// (a user message and the answers to it) are dropped from the stored
	// copy until it fits; the newest turn is always kept whole. Zero: 4 MiB.
	MaxThreadBytes int
	// MaxAge: Prune deletes threads not updated for this long. Zero: 90
	// days.
	MaxAge time.Duration
	// Now is Prune's clock. Nil: time.Now.
	Now func() time.Time
}

// Retention defaults.
const (
	DefaultMaxThreadsPerUser = 1000
	DefaultMaxThreadBytes    = 4 << 20
	DefaultThreadMaxAge      = 90 * 24 * time.Hour
)

// WithDefaults returns r with its zero fields set to the defaults, as
// every ThreadStore applies it.
func (r Retention) WithDefaults() Retention {
	if r.MaxThreadsPerUser == 0 {
		r.MaxThreadsPerUser = DefaultMaxThreadsPerUser
	}
	if r.MaxThreadBytes == 0 {
		r.MaxThreadBytes = DefaultMaxThreadBytes
	}
	if r.MaxAge == 0 {
		r.MaxAge = DefaultThreadMaxAge
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return r
}

// BoltStore keeps threads and agent definitions in the embedded bbolt
// file. Threads survive a restart, within the store's Retention.
type BoltStore struct {
	db  *bolt.DB
	ret Retention
}

// NewBoltStore returns a store on db, creating its buckets.
func NewBoltStore(db *bolt.DB, ret Retention) (*BoltStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketThreads, bucketAgents} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		if tx.Bucket(bucketThreadAge) != nil {
			return nil
		}
		// A store from before retention: index the threads it holds.
		ages, err := tx.CreateBucket(bucketThreadAge)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketThreads).ForEach(func(k, v []byte) error {
			var t struct {
				Updated time.Time `json:"updated"`
			}
			_ = json.Unmarshal(v, &t) // undecodable: indexed as oldest
			return ages.Put(k, ageValue(t.Updated))
		})
	})
	if err != nil {
		return nil, fmt.Errorf("agent store: %w", err)
	}
	return &BoltStore{db: db, ret: ret.WithDefaults()}, nil
}

func ageValue(t time.Time) []byte {
	var b [8]byte
	if !t.IsZero() {
		binary.BigEndian.PutUint64(b[:], uint64(t.UnixNano()))
	}
	return b[:]
}

func ageOf(v []byte) int64 {
	if len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// GetThread implements ThreadStore.
func (s *BoltStore) GetThread(_ context.Context, key string) (*Thread, error) {
	var t *Thread
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketThreads).Get([]byte(key))
		if v == nil {
			return ErrNotFound
		}
		t = new(Thread)
		return json.Unmarshal(v, t)
	})
	return t, err
}

// PutThread implements ThreadStore. The stored copy keeps within
// MaxThreadBytes; a user's new thread may push out their oldest ones.
// t itself is not changed.
func (s *BoltStore) PutThread(_ context.Context, t *Thread) error {
	v, err := s.ret.Encode(t)
	if err != nil {
		return err
	}
	key := []byte(t.Key)
	// A batch (bbolt's Batch): the saves of the turns running at once
	// share one transaction and one fsync; it returns once committed.
	return s.db.Batch(func(tx *bolt.Tx) error {
		ages := tx.Bucket(bucketThreadAge)
		isNew := tx.Bucket(bucketThreads).Get(key) == nil
		if err := tx.Bucket(bucketThreads).Put(key, v); err != nil {
			return err
		}
		if err := ages.Put(key, ageValue(t.Updated)); err != nil {
			return err
		}
		if isNew && s.ret.MaxThreadsPerUser > 0 {
			return s.pruneUser(tx, t.UserID, key)
		}
		return nil
	})
}

// Encode marshals t as a ThreadStore stores it: dropping its oldest turns
// while it is over MaxThreadBytes (r's defaults applied by the caller),
// the newest turn always whole. t itself is not changed.
func (r Retention) Encode(t *Thread) ([]byte, error) {
	v, err := json.Marshal(t)
	if err != nil || r.MaxThreadBytes <= 0 || len(v) <= r.MaxThreadBytes {
		return v, err
	}
	// Sizes of the messages, to find the first turn to keep in one pass.
	sizes := make([]int, len(t.Msgs))
	total := 0
	for i, m := range t.Msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		sizes[i] = len(b) + 1 // and its comma
		total += sizes[i]
	}
	last := 0 // where the newest turn starts
	for i, m := range t.Msgs {
		if m.Role == RoleUser {
			last = i
		}
	}
	over := len(v) - r.MaxThreadBytes
	cut, dropped := 0, 0
	for i := range last {
		if dropped >= over && t.Msgs[i].Role == RoleUser {
			break
		}
		dropped += sizes[i]
		cut = i + 1
	}
	// Cut only at a turn's start, so no answer is kept without its
	// question.
	for cut < last && t.Msgs[cut].Role != RoleUser {
		cut++
	}
	if cut == 0 {
		return v, nil
	}
	trimmed := *t
	trimmed.Msgs = t.Msgs[cut:]
	return json.Marshal(&trimmed)
}

// pruneUser deletes user's least recently updated threads beyond
// MaxThreadsPerUser, never keep.
func (s *BoltStore) pruneUser(tx *bolt.Tx, user string, keep []byte) error {
	prefix := []byte(userKeyPrefix(user))
	type aged struct {
		key []byte
		at  int64
	}
	var mine []aged
	c := tx.Bucket(bucketThreadAge).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		mine = append(mine, aged{bytes.Clone(k), ageOf(v)})
	}
	excess := len(mine) - s.ret.MaxThreadsPerUser
	if excess <= 0 {
		return nil
	}
	slices.SortFunc(mine, func(a, b aged) int { return cmp.Compare(a.at, b.at) })
	for _, a := range mine {
		if excess == 0 {
			break
		}
		if bytes.Equal(a.key, keep) {
			continue
		}
		if err := s.deleteThread(tx, a.key); err != nil {
			return err
		}
		excess--
	}
	return nil
}

func (s *BoltStore) deleteThread(tx *bolt.Tx, key []byte) error {
	if err := tx.Bucket(bucketThreads).Delete(key); err != nil {
		return err
	}
	return tx.Bucket(bucketThreadAge).Delete(key)
}

// Prune deletes the threads not updated within MaxAge and reports how
// many. The server runs it at start and then hourly.
func (s *BoltStore) Prune(_ context.Context) (int, error) {
	if s.ret.MaxAge <= 0 {
		return 0, nil
	}
	cutoff := s.ret.Now().Add(-s.ret.MaxAge).UnixNano()
	n := 0
	err := s.db.Update(func(tx *bolt.Tx) error {
		var old [][]byte
		err := tx.Bucket(bucketThreadAge).ForEach(func(k, v []byte) error {
			if ageOf(v) < cutoff {
				old = append(old, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range old {
			if err := s.deleteThread(tx, k); err != nil {
				return err
			}
		}
		n = len(old)
		return nil
	})
	return n, err
}

// ListDefinitions implements DefinitionStore.
func (s *BoltStore) ListDefinitions(_ context.Context) ([]Definition, error) {
	var out []Definition
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAgents).ForEach(func(_, v []byte) error {
			var d Definition
			if err := json.Unmarshal(v, &d); err != nil {
				return err
			}
			out = append(out, d)
			return nil
		})
	})
	return out, err
}

// PutDefinition implements DefinitionStore.
func (s *BoltStore) PutDefinition(_ context.Context, d Definition) error {
	v, err := json.Marshal(d)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketAgents).Put([]byte(d.ID), v) })
}

// DeleteDefinition implements DefinitionStore. The deletion is kept as a
// tombstone so that an agent from the config file stays deleted.
func (s *BoltStore) DeleteDefinition(_ context.Context, id string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketAgents).Put([]byte(id), []byte(`{"id":`+jsonString(id)+`,"deleted":true}`))
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ThreadLister is a ThreadStore that can list the threads one owner has
// with one agent (a console's thread list). BoltStore implements it.
type ThreadLister interface {
	// ListThreads returns the threads of userID ("" for admin-key
	// callers) with agentID, most recently updated first, at most limit.
	ListThreads(ctx context.Context, userID, agentID string, limit int) ([]*Thread, error)
}

// ListThreads implements ThreadLister: a prefix scan of the thread keys.
func (s *BoltStore) ListThreads(_ context.Context, userID, agentID string, limit int) ([]*Thread, error) {
	prefix := []byte(ThreadKey(userID, agentID, ""))
	var out []*Thread
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketThreads).Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			t := new(Thread)
			if err := json.Unmarshal(v, t); err != nil {
				return fmt.Errorf("thread %q: %w", k, err)
			}
			out = append(out, t)
		}
		return nil
	})
	slices.SortStableFunc(out, func(a, b *Thread) int { return b.Updated.Compare(a.Updated) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, err
}
