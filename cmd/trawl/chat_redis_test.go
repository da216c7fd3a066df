package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/stream/redistest"
)

// TestChatWithoutURLKeepsOutOfRedis: `trawl chat` without --url runs a
// deployment that keeps nothing, also when the config names the
// deployment's Redis: it writes no key there (no thread, no key check)
// but its providers' rate limits, shared with the replicas (a turn that
// calls no upstream, as here, writes none), and so takes no part in the
// replicas' runs. (web's TestRateLimitCommandSharesTheReplicasPace
// shows the limits shared.)
func TestChatWithoutURLKeepsOutOfRedis(t *testing.T) {
	rs := redistest.Start(t)
	dir := t.TempDir()
	tr := `{"name": "t", "turns": [{"user": "hi", "steps": [{"text": "hello back"}]}]}`
	if err := os.WriteFile(filepath.Join(dir, "transcript.json"), []byte(tr), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`redis_url: redis://%s/0
admin_key: %s
secret_key: %s
model: {provider: replay, transcript: %s}
agents:
  - id: a
    system: You answer.
`, rs.Addr, strings.Repeat("k", 32), strings.Repeat("5ca1e0a7", 8), filepath.Join(dir, "transcript.json"))
	path := filepath.Join(dir, "trawl.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "chat", "a", "--config", path, "--message", "hi")
	if code != 0 || !strings.Contains(out, "hello back") {
		t.Fatalf("trawl chat: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	keys, err := rs.Client(t).Keys(context.Background(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("trawl chat without --url wrote to the deployment's Redis: %q", keys)
	}
}
