package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func openDB(t testing.TB) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func textMsg(id string, role Role, text string) UIMessage {
	return UIMessage{ID: id, Role: role, Parts: []Part{{Type: "text", Text: text}}}
}

func chatIDs(t *testing.T, s *BoltStore, user string, chats []string) []string {
	t.Helper()
	var kept []string
	for _, c := range chats {
		_, err := s.GetThread(context.Background(), ThreadKey(user, "a", c))
		switch {
		case err == nil:
			kept = append(kept, c)
		case !errors.Is(err, ErrNotFound):
			t.Fatal(err)
		}
	}
	return kept
}

// TestRetentionThreadsPerUser: a user's new thread beyond the bound
// deletes their least recently updated ones, and nobody else's — not
// even a user whose id extends theirs.
func TestRetentionThreadsPerUser(t *testing.T) {
	s, err := NewBoltStore(openDB(t), Retention{MaxThreadsPerUser: 3})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(user, chat string, at time.Duration) {
		t.Helper()
		th := &Thread{Key: ThreadKey(user, "a", chat), ChatID: chat, AgentID: "a", UserID: user, Updated: base.Add(at)}
		if err := s.PutThread(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	for i, user := range []string{"u", "u;x", "u%3Bx", ""} {
		for c := range 3 {
			put(user, fmt.Sprintf("c%d", c), time.Duration(i*10+c)*time.Minute)
		}
	}
	put("u", "c0", time.Hour) // c0 is now u's newest: updating prunes nothing
	put("u", "c3", 2*time.Hour)
	put("u", "c4", 3*time.Hour)
	all := []string{"c0", "c1", "c2", "c3", "c4"}
	if got, want := chatIDs(t, s, "u", all), []string{"c0", "c3", "c4"}; !slices.Equal(got, want) {
		t.Errorf("u keeps %v; want %v", got, want)
	}
	for _, other := range []string{"u;x", "u%3Bx", ""} {
		if got := chatIDs(t, s, other, all); len(got) != 3 {
			t.Errorf("user %q keeps %v; want its 3 threads untouched", other, got)
		}
	}
}

// TestRetentionThreadBytes: a stored thread over the byte bound loses its
// oldest turns, cut at a user message; the newest turn stays whole even
// alone over the bound; the caller's thread is not changed.
func TestRetentionThreadBytes(t *testing.T) {
	const limit = 64 << 10
	s, err := NewBoltStore(openDB(t), Retention{MaxThreadBytes: limit})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	th := &Thread{Key: ThreadKey("u", "a", "big"), UserID: "u", AgentID: "a"}
	for i := range 20 {
		th.Msgs = append(th.Msgs,
			textMsg(fmt.Sprintf("q%d", i), RoleUser, "question"),
			textMsg(fmt.Sprintf("a%d", i), RoleAssistant, strings.Repeat("x", 5000)),
			textMsg(fmt.Sprintf("b%d", i), RoleAssistant, strings.Repeat("y", 1000)))
	}
	if err := s.PutThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if len(th.Msgs) != 60 {
		t.Fatalf("the caller's thread changed: %d messages", len(th.Msgs))
	}
	got, err := s.GetThread(ctx, th.Key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if len(b) > limit {
		t.Errorf("stored thread is %d bytes; limit %d", len(b), limit)
	}
	if got.Msgs[0].Role != RoleUser || got.Msgs[len(got.Msgs)-1].ID != "b19" {
		t.Errorf("stored thread runs %s … %s; want a user message first and the newest last", got.Msgs[0].ID, got.Msgs[len(got.Msgs)-1].ID)
	}
	if n := len(got.Msgs); n%3 != 0 || n < 3*8 {
		t.Errorf("stored %d messages: want whole turns, as many as fit (at least 8)", n)
	}

	huge := &Thread{Key: ThreadKey("u", "a", "huge"), UserID: "u", Msgs: []UIMessage{
		textMsg("q0", RoleUser, "old"), textMsg("a0", RoleAssistant, "old answer"),
		textMsg("q1", RoleUser, "new"), textMsg("a1", RoleAssistant, strings.Repeat("z", 2*limit))}}
	if err := s.PutThread(ctx, huge); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetThread(ctx, huge.Key)
	if len(got.Msgs) != 2 || got.Msgs[0].ID != "q1" || len(got.Msgs[1].Parts[0].Text) != 2*limit {
		t.Errorf("an oversized newest turn: stored %d messages", len(got.Msgs))
	}
}

// TestRetentionMaxAge: Prune deletes the threads not updated within
// MaxAge, including those a store from before retention held.
func TestRetentionMaxAge(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	// A store written before the age index existed.
	legacy, _ := json.Marshal(&Thread{Key: ThreadKey("u", "a", "legacy"), Updated: now.Add(-40 * 24 * time.Hour)})
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(bucketThreads)
		if err != nil {
			return err
		}
		return b.Put([]byte(ThreadKey("u", "a", "legacy")), legacy)
	}); err != nil {
		t.Fatal(err)
	}
	s, err := NewBoltStore(db, Retention{MaxAge: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for chat, age := range map[string]time.Duration{"old": 31 * 24 * time.Hour, "fresh": 29 * 24 * time.Hour, "new": 0} {
		if err := s.PutThread(ctx, &Thread{Key: ThreadKey("u", "a", chat), UserID: "u", Updated: now.Add(-age)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Prune(ctx)
	if err != nil || n != 2 {
		t.Errorf("Prune = %d, %v; want 2 (old and legacy)", n, err)
	}
	if got, want := chatIDs(t, s, "u", []string{"legacy", "old", "fresh", "new"}), []string{"fresh", "new"}; !slices.Equal(got, want) {
		t.Errorf("kept %v; want %v", got, want)
	}
	if n, _ := s.Prune(ctx); n != 0 {
		t.Errorf("a second Prune deleted %d", n)
	}
}

// FuzzRetentionThreadBytes: whatever the thread, the stored copy is a
// suffix of its messages that starts a turn, within the bound unless it
// is the newest turn alone.
func FuzzRetentionThreadBytes(f *testing.F) {
	f.Add([]byte{1, 200, 3, 10, 1, 5, 2, 255, 1, 1})
	f.Add([]byte{2, 2, 2, 255, 255, 255})
	f.Add([]byte{1, 255, 1, 255, 1, 255, 1, 255, 1, 255, 1, 255})
	const limit = 64 << 10
	s, err := NewBoltStore(openDB(f), Retention{MaxThreadBytes: limit})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, shape []byte) {
		th := &Thread{Key: ThreadKey("u", "a", "f"), UserID: "u"}
		for i := 0; i+1 < len(shape) && i < 400; i += 2 {
			role := RoleAssistant
			if shape[i]%2 == 1 {
				role = RoleUser
			}
			th.Msgs = append(th.Msgs, textMsg(fmt.Sprintf("m%d", i), role, strings.Repeat("x", int(shape[i+1])*40)))
		}
		if err := s.PutThread(context.Background(), th); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetThread(context.Background(), th.Key)
		if err != nil {
			t.Fatal(err)
		}
		n, m := len(th.Msgs), len(got.Msgs)
		if m > n || (m > 0 && got.Msgs[m-1].ID != th.Msgs[n-1].ID) {
			t.Fatalf("stored %d of %d messages, not a suffix", m, n)
		}
		for i := range got.Msgs {
			if got.Msgs[i].ID != th.Msgs[n-m+i].ID {
				t.Fatalf("message %d differs", i)
			}
		}
		if m < n && got.Msgs[0].Role != RoleUser {
			t.Fatalf("a cut thread starts with a %s message", got.Msgs[0].Role)
		}
		b, _ := json.Marshal(got)
		newest := 0
		for i, msg := range th.Msgs {
			if msg.Role == RoleUser {
				newest = i
			}
		}
		if len(b) > limit && m > n-newest {
			t.Fatalf("stored %d bytes (limit %d) with %d messages, more than the newest turn's %d", len(b), limit, m, n-newest)
		}
		if m < n && m < n-newest {
			t.Fatalf("the newest turn was cut: %d of its %d messages", m, n-newest)
		}
	})
}
