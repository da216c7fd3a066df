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

// The retention contract every ThreadStore keeps (threads per user,
// thread bytes, max age) is tested in agent/storetest; these tests cover
// what is the bolt store's own.

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
