package deploy

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// batchDelay bounds how long a batched write of the bbolt file waits for
// others to join it (bbolt's default is 10 ms).
const batchDelay = 2 * time.Millisecond

// openStore opens (creating) the embedded store, trawl.db in dataDir,
// after checking the folder is writable so a misconfigured deployment
// fails at start with a clear message.
func openStore(dataDir string) (*bolt.DB, error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data_dir %s: cannot create it: %w", dataDir, errors.Unwrap(err))
	}
	probe, err := os.CreateTemp(dataDir, ".write-check-*")
	if err != nil {
		return nil, fmt.Errorf("data_dir %s is not writable (%v); set data_dir or --data-dir to a writable folder", dataDir, errors.Unwrap(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	path := filepath.Join(dataDir, "trawl.db")
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("%s is in use by another trawl process", path)
	}
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// Writes made with Batch (a turn's checkpoints) wait at most this long
	// for others to share their transaction.
	db.MaxBatchDelay = batchDelay
	return db, nil
}

// adminKey returns the configured key, or the one saved in dataDir, or a
// new one (saved, with generated == true so the caller prints it once).
func adminKey(configured, dataDir string) (key string, generated bool, err error) {
	if configured != "" {
		return configured, false, nil
	}
	path := filepath.Join(dataDir, "admin_key")
	if b, err := os.ReadFile(path); err == nil {
		if k := strings.TrimSpace(string(b)); k != "" {
			if len(k) < MinAdminKeyLength {
				return "", false, fmt.Errorf("%s holds a key of %d characters; an admin key must be at least %d (delete the file to have one generated)", path, len(k), MinAdminKeyLength)
			}
			return k, false, nil
		}
	}
	key = "trawl_admin_" + RandomHex(24)
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("saving the generated admin key: %w", err)
	}
	return key, true, nil
}

// RandomHex returns n random bytes from crypto/rand, hex-encoded.
func RandomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return hex.EncodeToString(b)
}
