package web

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/stream/redistest"
)

// A redis_url that Redis refuses, or that does not parse, is a start-up
// error that says why — the server's own answer (a wrong password, a db
// out of range), the dial's failure — and never shows the password.
func TestRedisStartErrorsSayWhy(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	if err := srv.Client(t).ConfigSet(ctx, "requirepass", "right-pw-4711").Err(); err != nil {
		t.Fatal(err)
	}
	host := srv.Addr
	for _, tt := range []struct {
		name, url string
		want      []string
	}{
		{"wrong password", "redis://:wrong-pw-not-shown@" + host + "/0", []string{"redis_url: Redis at " + host + " refused the connection", "WRONGPASS"}},
		{"no password", "redis://" + host + "/0", []string{"refused the connection", "NOAUTH"}},
		{"db out of range", "redis://:right-pw-4711@" + host + "/99", []string{"refused the connection", "DB index is out of range"}},
		{"refused", "redis://:pw-not-shown@127.0.0.1:1/0", []string{"redis_url: Redis at 127.0.0.1:1 does not answer: dial tcp", "connection refused"}},
		{"malformed", "redis://:pw-not-shown@[::1/0", []string{"redis_url: ", "missing ']' in host"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := redisConfig(t, host)
			cfg.RedisURL = tt.url
			_, err := New(ctx, cfg, Options{Stdout: io.Discard})
			if err == nil {
				t.Fatal("New succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New: %v; want %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "pw-not-shown") || strings.Contains(err.Error(), "<nil>") {
				t.Errorf("New: %v", err)
			}
		})
	}
}
