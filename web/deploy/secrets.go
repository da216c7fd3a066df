package deploy

import (
	"encoding/hex"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"

	"github.com/trawl-dev/trawl/tools"
)

// deploymentSecrets are the secrets the deployment holds besides the
// providers' and toolkits' credentials (the invoker has those) and the
// MCP servers' (added as each is connected): the model's and the
// embeddings' keys, the admin key, the secret key (as configured, in hex
// and as the raw key) and the Redis password (decoded and as written in
// redis_url). The invoker's scrubber masks all of them everywhere.
func deploymentSecrets(cfg *Config, st *stores) []string {
	out := []string{cfg.Model.APIKey, cfg.Discovery.Embeddings.APIKey, st.adminKey}
	if key := st.secretKey; key != nil {
		out = append(out, strings.TrimSpace(cfg.SecretKey), hex.EncodeToString(key), strings.ToUpper(hex.EncodeToString(key)), string(key))
	}
	return append(out, redisPassword(cfg.RedisURL)...)
}

// redisPassword is the password of a redis_url, decoded and as written
// (percent-encoded); none when it has none or does not parse.
func redisPassword(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return nil
	}
	p, ok := u.User.Password()
	if !ok || p == "" {
		return nil
	}
	out := []string{p}
	if _, rest, ok := strings.Cut(raw, "://"); ok {
		if info, _, ok := strings.Cut(rest, "@"); ok {
			if _, written, ok := strings.Cut(info, ":"); ok && written != p {
				out = append(out, written)
			}
		}
	}
	return out
}

// scrubbedLogger is log with every record masked by the invoker's
// scrubber once inv holds one: the deployment's logs never carry a
// secret it holds, whatever logged it (an MCP server's stderr, an
// upstream's error text, a library's message).
func scrubbedLogger(log *slog.Logger, inv *atomic.Pointer[tools.Invoker]) *slog.Logger {
	return slog.New(tools.ScrubHandler(log.Handler(), func() *tools.Scrubber {
		if i := inv.Load(); i != nil {
			return i.Scrubber()
		}
		return nil
	}))
}
