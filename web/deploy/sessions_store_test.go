package deploy

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/redisstore"
)

// The Redis session store is a SessionStore for the deployment's Session
// type.
var _ SessionStore = (*redisstore.Sessions[Session])(nil)

// testSessionStore is the SessionStore conformance suite.
func testSessionStore(t *testing.T, s SessionStore) {
	ctx := context.Background()
	live := Session{UserID: "u", CacheScope: "acme", Sealed: []byte{0, 1, 2, 255}, Expires: time.Now().Add(time.Hour).Truncate(time.Millisecond)}
	if err := s.PutSession(ctx, "h1", live); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.GetSession(ctx, "h1")
	if err != nil || !ok || got.UserID != "u" || got.CacheScope != "acme" || string(got.Sealed) != string(live.Sealed) || !got.Expires.Equal(live.Expires) {
		t.Fatalf("GetSession: %+v %v %v", got, ok, err)
	}
	if _, ok, err := s.GetSession(ctx, "h2"); ok || err != nil {
		t.Errorf("an unknown hash is found (%v)", err)
	}
	if err := s.DeleteSession(ctx, "h1"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.GetSession(ctx, "h1"); ok {
		t.Error("a deleted session is found")
	}
	if err := s.DeleteSession(ctx, "never"); err != nil {
		t.Errorf("deleting an unknown session: %v", err)
	}
}

func TestSessionStoresConform(t *testing.T) {
	t.Run("bolt", func(t *testing.T) {
		db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		s, err := newBoltSessions(db)
		if err != nil {
			t.Fatal(err)
		}
		testSessionStore(t, s)
	})
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		testSessionStore(t, redisstore.NewSessions(srv.Universal(t), "trawl:", func(s Session) time.Time { return s.Expires }))
	})
}
