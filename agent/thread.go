package agent

import (
	"bytes"
	"context"
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
	Created time.Time    `json:"created"`
	Updated time.Time    `json:"updated"`
}

// KeptResult is a stored result of a thread.
type KeptResult struct {
	ID      string    `json:"id"`
	Expires time.Time `json:"expires"`
}

// ThreadKey builds a thread's storage key.
func ThreadKey(userID, agentID, chatID string) string {
	return "u=" + url.PathEscape(userID) + ";a=" + url.PathEscape(agentID) + ";c=" + url.PathEscape(chatID)
}

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
)

// BoltStore keeps threads and agent definitions in the embedded bbolt
// file. Threads survive a restart.
type BoltStore struct{ db *bolt.DB }

// NewBoltStore returns a store on db, creating its buckets.
func NewBoltStore(db *bolt.DB) (*BoltStore, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketThreads, bucketAgents} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent store: %w", err)
	}
	return &BoltStore{db: db}, nil
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

// PutThread implements ThreadStore.
func (s *BoltStore) PutThread(_ context.Context, t *Thread) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketThreads).Put([]byte(t.Key), v) })
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
