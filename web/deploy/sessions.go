package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Session is what the store keeps of a session: never the token (only its
// hash is the key) and the runtime credentials sealed with a key derived
// from the token, so the store alone cannot reveal them.
type Session struct {
	UserID     string    `json:"user_id"`
	CacheScope string    `json:"cache_scope,omitempty"`
	Sealed     []byte    `json:"sealed,omitempty"` // AES-GCM(nonce‖ciphertext) of the credentials
	Expires    time.Time `json:"expires_at"`
}

// SessionStore keeps sessions by token hash. Implementations are safe for
// concurrent use.
type SessionStore interface {
	PutSession(ctx context.Context, hash string, s Session) error
	GetSession(ctx context.Context, hash string) (Session, bool, error)
	DeleteSession(ctx context.Context, hash string) error
}

var bucketSessions = []byte("sessions")

// boltSessions is the embedded SessionStore.
type boltSessions struct{ db *bolt.DB }

func newBoltSessions(db *bolt.DB) (*boltSessions, error) {
	err := db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketSessions)
		return err
	})
	return &boltSessions{db: db}, err
}

func (b *boltSessions) PutSession(_ context.Context, hash string, s Session) error {
	v, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSessions).Put([]byte(hash), v) })
}

func (b *boltSessions) DeleteSession(_ context.Context, hash string) error {
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketSessions).Delete([]byte(hash)) })
}

func (b *boltSessions) GetSession(_ context.Context, hash string) (Session, bool, error) {
	var s Session
	var found bool
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketSessions).Get([]byte(hash))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &s)
	})
	return s, found, err
}

// TokenHash is the key a session token, or a connect link's secret, is
// stored under: the store never holds the token itself.
func TokenHash(token string) string {
	sum := sha256.Sum256([]byte("trawl-session:" + token))
	return hex.EncodeToString(sum[:])
}
