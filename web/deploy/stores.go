package deploy

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/agent"
	agentredis "github.com/trawl-dev/trawl/agent/redisstore"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/discovery/redisvectors"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/loop/boltstore"
	loopredis "github.com/trawl-dev/trawl/loop/redisstore"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/boltlog"
	"github.com/trawl-dev/trawl/stream/redislog"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/redisactivity"
	"github.com/trawl-dev/trawl/tools/redislimit"
	webredis "github.com/trawl-dev/trawl/web/redisstore"
	"github.com/trawl-dev/trawl/web/runlease"
	"github.com/trawl-dev/trawl/web/runlease/redislease"
)

// stores is every piece of a deployment's state. openStores is the one
// place that picks where it lives: the embedded store (one bbolt file in
// data_dir, the event log and stored results in memory) or, with
// redis_url, one Redis every replica shares. Nothing else in trawl knows
// which it got.
type stores struct {
	kind string // "embedded" or "redis"

	threads  agent.ThreadStore // also the agent.DefinitionStore
	defs     agent.DefinitionStore
	sessions SessionStore
	events   stream.EventLog
	results  loop.ResultStore  // nil: the in-memory default
	datasets loop.DatasetStore // the dataset cache (and shadow records)
	walks    loop.SharedWalks  // nil: collapsed walks within this process
	activity tools.ActivityStore
	limiter  tools.RateLimiter // nil: one of the process's own
	vectors  discovery.VectorCache
	runs     runlease.Registry
	// approvals is the approvals inbox's store; nil: memory.
	approvals agent.ApprovalStore

	workflows, connections Records
	workflowRuns           workflow.RunStore
	// runRecords keeps each running run's record (durable.go).
	runRecords Records
	grants     grants        // connect codes and attempts
	locks      refreshLocker // OAuth refreshes, one per credential at a time

	// adminKey is the admin API's key; keyIsNew when it was generated
	// now (the banner shows it once). secretKey seals connections.
	adminKey  string
	keyIsNew  bool
	secretKey []byte

	db      *bolt.DB              // the embedded store; nil on Redis
	redis   redis.UniversalClient // nil on the embedded store, unless it shares its limits there (RedisLimitsOnly)
	pingers map[string]pinger
	closers []func() error
}

// DefaultRedisPrefix begins every key when redis_prefix is unset.
const DefaultRedisPrefix = "trawl:"

// checkRedis validates redis_url, redis_prefix and run_lease.
func (c *Config) checkRedis() error {
	if c.RedisURL == "" {
		switch {
		case c.RedisPrefix != "":
			return c.errAt("redis_prefix", "is only for a deployment on Redis (set redis_url)")
		case c.RunLease != 0:
			return c.errAt("run_lease", "is only for a deployment on Redis (set redis_url); one process needs no lease")
		}
		return nil
	}
	if _, _, err := parseRedisURL(c.RedisURL); err != nil {
		return c.errAt("redis_url", badRedisURL(err, c.RedisURL))
	}
	if strings.ContainsAny(c.RedisPrefix, " \t\r\n*?[]") {
		return c.errAt("redis_prefix", "must not hold spaces or the pattern characters * ? [ ]")
	}
	if c.RunLease < 0 || (c.RunLease > 0 && c.RunLease < time.Second) || c.RunLease > maxRunLease {
		return c.errAt("run_lease", "must be at least 1s and at most 10m (zero: 3s)")
	}
	return nil
}

// maxRunLease bounds run_lease: a run lasts at most runDeadline, so a
// longer lease would only keep a dead replica's chats answering 409.
const maxRunLease = runDeadline

// parseRedisURL parses redis_url: redis:// or rediss:// is one Redis;
// redis+cluster:// or rediss+cluster:// a Redis Cluster, its seed nodes
// the URL's host and each addr= parameter (go-redis's cluster URL).
func parseRedisURL(raw string) (*redis.Options, *redis.ClusterOptions, error) {
	for _, scheme := range []string{"redis", "rediss"} {
		if rest, ok := strings.CutPrefix(raw, scheme+"+cluster://"); ok {
			opt, err := redis.ParseClusterURL(scheme + "://" + rest)
			return nil, opt, err
		}
	}
	opt, err := redis.ParseURL(raw)
	return opt, nil, err
}

// badRedisURL says what is wrong with a redis_url that does not parse.
func badRedisURL(err error, raw string) string {
	msg := "want redis://[user:password@]host:port[/db] or rediss://…, or for a Redis Cluster redis+cluster://[user:password@]host:port?addr=host2:port&addr=… (or rediss+cluster://…): " + redactURLError(err, raw)
	if strings.Contains(raw, "@") {
		msg += " (a password holding any of @ : / ? # % or a space must be percent-encoded)"
	}
	return msg
}

// redactURLError keeps a password in a redis_url out of an error message.
// A URL that does not parse is never echoed, and when it holds user info
// neither is what the parser says about it, which quotes parts of it
// (`invalid port ":s3cret" after host`).
func redactURLError(err error, raw string) string {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		if strings.Contains(raw, "@") {
			return "it does not parse as a URL"
		}
		err = uerr.Err
	}
	u, perr := url.Parse(raw)
	if perr == nil && u.User == nil && strings.Contains(raw, "@") {
		// The user info was read as part of the path: the message
		// would quote it.
		return "its password is not where a URL's user info goes"
	}
	// What is left quotes at most a part of the URL the parser did not
	// object to; the password is masked in it, in any spelling, by the
	// scrubber every secret goes through.
	return tools.NewScrubber(redisPassword(raw)...).String(err.Error())
}

// redisStartError says why the Redis at addr failed its first command: it
// does not answer (the cause: refused, timed out, a TLS handshake that
// failed), or it answered with an error (a wrong password, a db out of
// range) — never with the password of raw.
func redisStartError(addr string, err error, raw string) string {
	var ue *unavailableError
	if errors.As(err, &ue) {
		err = ue.err
	}
	var reply redis.Error
	if errors.As(err, &reply) {
		return fmt.Sprintf("Redis at %s refused the connection: %s", addr, redactURLError(err, raw))
	}
	msg := fmt.Sprintf("Redis at %s does not answer: %s", addr, redactURLError(err, raw))
	if strings.HasPrefix(raw, "rediss://") && errors.Is(err, context.DeadlineExceeded) {
		msg += " (rediss:// needs TLS at that address; is it on?)"
	}
	return msg
}

// openStores opens the deployment's state as cfg says. A Redis that does
// not answer is a start-up error naming redis_url.
func openStores(ctx context.Context, cfg *Config, tel *Telemetry, log *slog.Logger) (*stores, error) {
	if cfg.RedisURL != "" {
		redisLogOnce.Do(func() { redis.SetLogger(redisLogger{log}) })
		if !cfg.RedisLimitsOnly {
			return openRedisStores(ctx, cfg, tel)
		}
	}
	st, err := openEmbeddedStores(cfg, tel)
	if err != nil || cfg.RedisURL == "" {
		return st, err
	}
	st.shareLimits(ctx, cfg, log, time.Now)
	return st, nil
}

// shareLimits puts the providers' rate limits of an embedded store in
// the deployment's Redis (Config.RedisLimitsOnly): a command's own
// process then paces its upstream requests with every replica's, and
// keeps the rest to itself. A Redis that does not answer leaves the
// command its own limiter, with a warning, and so does one that stops
// answering later (sharedLimiter). The limiter reads its windows on
// Redis's clock (redisClock), not this machine's, which a laptop's is
// not kept to as the replicas' are.
//
// now is this machine's clock.
func (st *stores) shareLimits(ctx context.Context, cfg *Config, log *slog.Logger, now func() time.Time) {
	c, err := dialRedis(ctx, cfg, true)
	if err != nil {
		log.Warn("the deployment's Redis (redis_url) cannot be used: this command's rate limits are its own, not shared with the replicas'", "err", err)
		return
	}
	clock := &redisClock{local: now, drift: make(chan struct{}, 1)}
	if err := clock.measure(ctx, c, log); err != nil {
		c.Close()
		log.Warn("the deployment's Redis does not tell its time: this command's rate limits are its own, not shared with the replicas'", "err", err)
		return
	}
	if cfg.SecretKey == "" {
		log.Warn("no secret_key is set (TRAWL_SECRET_KEY): this command shares the providers' rate limits with the replicas, but not the limits learned per runtime credential")
	} else if key, err := cfg.secretKey(); err == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		theirs, err := c.Get(pctx, cfg.redisPrefix()+secretCheckKey).Result()
		cancel()
		if err == nil && theirs != secretCheck(key) {
			log.Warn("this command's secret_key is not the one the deployment's replicas use: it shares the providers' rate limits with them, but not the limits learned per runtime credential", "redis_prefix", cfg.redisPrefix())
		}
	}
	shared := redislimit.New(c, redislimit.Options{Prefix: cfg.redisPrefix(), LimiterOptions: tools.LimiterOptions{Clock: clock}})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = shared.Probe(pctx)
	cancel()
	if err != nil {
		c.Close()
		log.Warn("the deployment's Redis does not run the rate limiter's script: this command's rate limits are its own, not shared with the replicas'", "err", err)
		return
	}
	st.redis = c
	st.closers = append(st.closers, c.Close)
	l := &sharedLimiter{shared: shared, own: tools.NewMemoryLimiter(tools.LimiterOptions{}), clock: clock, log: log}
	st.limiter = l
	st.closers = append(st.closers, shared.Close, clock.keep(c, log, l.back))
	st.pingers["redis"] = pingFunc(func(ctx context.Context) error {
		if l.lost.Load() {
			return nil // the command paces on its own meanwhile: it works
		}
		return c.Ping(ctx).Err()
	})
}

// redisClock is Redis's clock (TIME) as this machine reads it: the time
// Redis gave at the last measure, plus the monotonic time since — so a
// step of this machine's wall clock (an NTP step, a VM resyncing after
// the host slept) does not reach the replicas' limiter windows. A wall
// clock that moved more than a second from the monotonic one since the
// last measure (a suspend, which the monotonic clock does not count)
// has keep measure again at once.
type redisClock struct {
	local func() time.Time
	at    atomic.Pointer[clockMark]
	drift chan struct{} // a measure wanted now (keep)
}

// clockMark is one measure: Redis's time at the middle of the round
// trip, and this machine's at that moment.
type clockMark struct{ redis, local time.Time }

func (c *redisClock) Now() time.Time {
	m := c.at.Load()
	now := c.local()
	mono := now.Sub(m.local) // monotonic: both readings carry it
	if wall := now.Round(0).Sub(m.local.Round(0)); (wall - mono).Abs() > time.Second {
		select {
		case c.drift <- struct{}{}:
		default:
		}
	}
	return m.redis.Add(mono)
}

func (c *redisClock) Sleep(ctx context.Context, d time.Duration) error {
	return tools.SystemClock().Sleep(ctx, d)
}

// measure reads TIME, taken at the round trip's middle; an offset from
// this machine's clock over a second is logged (when it first exceeds
// it) so the operator can fix the machine's clock.
func (c *redisClock) measure(ctx context.Context, r redis.UniversalClient, log *slog.Logger) error {
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	before := c.local()
	at, err := r.Time(tctx).Result()
	after := c.local()
	if err != nil {
		return err
	}
	mid := before.Add(after.Sub(before) / 2)
	off := at.Sub(mid.Round(0))
	if old := c.at.Swap(&clockMark{redis: at, local: mid}); off.Abs() > time.Second && (old == nil || old.redis.Sub(old.local.Round(0)).Abs() <= time.Second) {
		log.Warn("this machine's clock is off the deployment's Redis's: the shared rate limits are read on Redis's", "offset", off.Round(time.Millisecond),
			"round_trip", after.Sub(before).Round(time.Millisecond))
	}
	return nil
}

// keep measures again every minute, and at once when the wall clock
// drifted from the monotonic one, until the returned closer is called;
// ok hears of each measure that succeeded (Redis answers).
func (c *redisClock) keep(r redis.UniversalClient, log *slog.Logger, ok func()) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-c.drift:
			}
			if c.measure(ctx, r, log) == nil { // a Redis gone: the limiter notices
				ok()
			}
		}
	}()
	return func() error { cancel(); <-done; return nil }
}

// sharedLimiter is a command's limiter shared in the deployment's Redis
// while Redis answers; when it stops, its own (with a warning) rather
// than failing every upstream request, until Redis answers again (back).
type sharedLimiter struct {
	shared *redislimit.Limiter
	own    *tools.MemoryLimiter
	clock  *redisClock // the shared limiter's
	lost   atomic.Bool
	log    *slog.Logger
}

func (l *sharedLimiter) Acquire(ctx context.Context, s tools.LimitScope) (tools.Permit, error) {
	if !l.lost.Load() {
		p, err := l.shared.Acquire(ctx, s)
		if !errors.Is(err, redislimit.ErrRedis) || ctx.Err() != nil {
			return p, err
		}
		if l.lost.CompareAndSwap(false, true) {
			l.log.Warn("the deployment's Redis stopped answering: this command's rate limits are its own until it answers again, not shared with the replicas'", "err", err)
		}
	}
	return l.own.Acquire(ctx, s)
}

// back shares the limits in Redis again once it answers (keep) and
// runs the limiter's script: a Redis that tells its time but refuses
// the script (restarted with scripting disabled) is not taken back, to
// be lost again at the next request, with a warning each way every
// minute.
func (l *sharedLimiter) back() {
	if !l.lost.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if l.shared.Probe(ctx) != nil {
		return
	}
	if l.lost.CompareAndSwap(true, false) {
		l.log.Warn("the deployment's Redis answers again: this command shares the replicas' rate limits again")
	}
}

// LimitStatus reports the limiter in use.
func (l *sharedLimiter) LimitStatus() []tools.LimitStatus {
	if l.lost.Load() {
		return l.own.LimitStatus()
	}
	return l.shared.LimitStatus()
}

// dialRedis connects to redis_url and checks it answers; with
// deadlines, a command's deadline bounds its round trips too.
func dialRedis(ctx context.Context, cfg *Config, deadlines bool) (redis.UniversalClient, error) {
	one, cluster, err := parseRedisURL(cfg.RedisURL)
	if err != nil {
		return nil, cfg.errAt("redis_url", badRedisURL(err, cfg.RedisURL))
	}
	if one != nil {
		one.ContextTimeoutEnabled = deadlines
	}
	if cluster != nil {
		cluster.ContextTimeoutEnabled = deadlines
	}
	var c redis.UniversalClient
	addr := ""
	if cluster != nil {
		c, addr = redis.NewClusterClient(cluster), strings.Join(cluster.Addrs, ", ")
	} else {
		c, addr = redis.NewClient(one), one.Addr
	}
	c.AddHook(unavailableHook{})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(pctx).Err(); err != nil {
		c.Close()
		return nil, cfg.errAt("redis_url", redisStartError(addr, err, cfg.RedisURL))
	}
	return c, nil
}

// redisPrefix is redis_prefix, or DefaultRedisPrefix.
func (c *Config) redisPrefix() string {
	if c.RedisPrefix == "" {
		return DefaultRedisPrefix
	}
	return c.RedisPrefix
}

func openEmbeddedStores(cfg *Config, tel *Telemetry) (_ *stores, err error) {
	st := &stores{kind: "embedded", pingers: map[string]pinger{}}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	if st.db, err = openStore(cfg.DataDir); err != nil {
		return nil, err
	}
	st.closers = append(st.closers, st.db.Close)
	st.pingers["bolt"] = pingFunc(func(context.Context) error { return st.db.View(func(*bolt.Tx) error { return nil }) })
	if st.adminKey, st.keyIsNew, err = adminKey(cfg.AdminKey, cfg.DataDir); err != nil {
		return nil, err
	}
	if st.secretKey, err = cfg.secretKey(); err != nil {
		return nil, err
	}
	if st.secretKey == nil {
		if st.secretKey, err = deploymentKey(cfg.DataDir); err != nil {
			return nil, err
		}
	}
	threads, err := agent.NewBoltStore(st.db, cfg.retention())
	if err != nil {
		return nil, err
	}
	st.threads, st.defs = threads, threads
	if st.sessions, err = newBoltSessions(st.db); err != nil {
		return nil, err
	}
	// The event log of the runs is in the bbolt file too (group commit),
	// so the turns a restart interrupts are continued into their logs and
	// their clients resume them.
	events, err := boltlog.New(st.db, boltlog.Options{})
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, events.Shutdown) // before the file closes
	st.events = tel.wrapEvents(events)
	// The dataset cache (and shadow mode's records) persist in the bbolt
	// file, so a restart keeps them until they expire.
	if st.datasets, err = boltstore.New(st.db, boltstore.Options{}); err != nil {
		return nil, err
	}
	activity, err := tools.NewBoltActivityStore(st.db, tools.BoltActivityOptions{})
	if err != nil {
		return nil, err
	}
	st.activity = activity
	st.closers = append(st.closers, activity.Close) // before the file closes
	if st.vectors, err = discovery.NewBoltVectors(st.db, 0); err != nil {
		return nil, err
	}
	st.runs = runlease.NewMemory()
	if st.approvals, err = agent.NewBoltApprovals(st.db); err != nil {
		return nil, err
	}
	for _, b := range []struct {
		to   *Records
		name string
	}{{&st.workflows, "workflows"}, {&st.connections, "connections"}, {&st.runRecords, "run_records"}} {
		if *b.to, err = newBoltRecords(st.db, b.name); err != nil {
			return nil, err
		}
	}
	if st.workflowRuns, err = workflow.NewBoltRunStore(st.db, cfg.runRetention()); err != nil {
		return nil, err
	}
	if err := migrateBoltWorkflowRuns(st.db, st.workflowRuns); err != nil {
		return nil, err
	}
	st.grants = newMemGrants(time.Now, connectPending)
	st.locks = &memLocks{}
	return st, nil
}

func openRedisStores(ctx context.Context, cfg *Config, tel *Telemetry) (_ *stores, err error) {
	st := &stores{kind: "redis", pingers: map[string]pinger{}}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	// Replicas must share the admin key and the sealing key, and neither
	// may be written to Redis: both come from the config or environment.
	if cfg.AdminKey == "" {
		return nil, cfg.errAt("admin_key", "is required with redis_url (or TRAWL_ADMIN_KEY): every replica must accept the same key, and trawl does not store it in Redis")
	}
	st.adminKey = cfg.AdminKey
	if st.secretKey, err = cfg.secretKey(); err != nil {
		return nil, err
	}
	if st.secretKey == nil {
		return nil, cfg.errAt("secret_key", "is required with redis_url (or TRAWL_SECRET_KEY; 64 hex digits, e.g. from `openssl rand -hex 32`): every replica must open the connection tokens another sealed, and the key never goes to Redis")
	}
	if st.redis, err = dialRedis(ctx, cfg, false); err != nil {
		return nil, err
	}
	st.closers = append(st.closers, st.redis.Close)
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	prefix := cfg.redisPrefix()
	// On a cluster each store tags the keys a script touches together
	// with their chat's, thread's, run's or entry's hash tag, so each
	// script's keys share a slot and the deployment spreads over the
	// masters (tools/rediskey); on one Redis the names are the same as
	// ever.
	c := st.redis
	if err := checkSharedKeys(pctx, c, prefix, st.adminKey, st.secretKey); err != nil {
		return nil, cfg.errAt("secret_key", err.Error())
	}
	st.pingers["redis"] = pingFunc(func(ctx context.Context) error { return c.Ping(ctx).Err() })
	threads := agentredis.New(c, prefix, cfg.retention())
	st.threads, st.defs = threads, threads
	st.sessions = webredis.NewSessions[Session](c, prefix, func(s Session) time.Time { return s.Expires })
	events := redislog.New(c, redislog.Options{Prefix: prefix})
	st.closers = append(st.closers, events.Shutdown)
	st.events = tel.wrapEvents(events)
	lopt := loopredis.Options{Prefix: prefix}
	st.results = loopredis.NewResultStore(c, lopt)
	datasets := loopredis.NewDatasetStore(c, lopt)
	st.datasets = datasets
	st.walks = loopredis.NewWalks(c, datasets, loopredis.WalksOptions{Prefix: prefix, Lease: cfg.RunLease})
	st.activity = redisactivity.New(c, redisactivity.Options{Prefix: prefix})
	limiter := redislimit.New(c, redislimit.Options{Prefix: prefix})
	st.limiter = limiter
	st.closers = append(st.closers, limiter.Close)
	// The limiter, the run leases and the walk locks are Lua scripts: a
	// Redis that does not run them (scripting disabled, a proxy without
	// EVAL) is refused at start, not at every request.
	probeCtx, probeCancel := context.WithTimeout(ctx, 5*time.Second)
	err = limiter.Probe(probeCtx)
	probeCancel()
	if err != nil {
		return nil, cfg.errAt("redis_url", fmt.Sprintf("does not run Lua scripts (EVAL), which the replicas share their rate limits, runs and walks with: %v", err))
	}
	st.vectors = redisvectors.New(c, prefix)
	runs := redislease.New(c, prefix, cfg.RunLease)
	st.closers = append(st.closers, runs.Close)
	st.runs = runs
	st.approvals = agentredis.NewApprovals(c, prefix)
	st.workflows = webredis.NewBucket(c, prefix, "workflows")
	st.workflowRuns = agentredis.NewRuns(c, prefix, cfg.runRetention())
	if err := migrateWorkflowRuns(ctx, webredis.NewBucket(c, prefix, oldWorkflowRuns), st.workflowRuns); err != nil {
		return nil, err
	}
	st.connections = webredis.NewBucket(c, prefix, "connections")
	st.runRecords = webredis.NewBucket(c, prefix, "run_records")
	st.grants = webredis.NewGrants(c, prefix, connectPending)
	st.locks = webredis.NewLocks(c, prefix)
	return st, nil
}

// keyCheckKey holds, under the prefix, a MAC of the deployment's admin
// key under its secret key: the first replica writes it, every other
// checks it, so a replica started with other keys than its peers — whose
// connections the others could not open, whose admin key they would
// refuse behind the same load balancer — does not start. It reveals
// nothing of either key without the secret key.
const keyCheckKey = "keycheck"

func checkSharedKeys(ctx context.Context, c redis.UniversalClient, prefix, adminKey string, secretKey []byte) error {
	mac := hmac.New(sha256.New, secretKey)
	mac.Write([]byte("trawl replica key check v1\n" + adminKey))
	want := hex.EncodeToString(mac.Sum(nil))
	key := prefix + keyCheckKey
	if err := c.SetNX(ctx, key, want, 0).Err(); err != nil {
		return fmt.Errorf("checking the keys against the other replicas': %w", err)
	}
	got, err := c.Get(ctx, key).Result()
	if err != nil {
		return fmt.Errorf("checking the keys against the other replicas': %w", err)
	}
	if got != want {
		return fmt.Errorf("this replica's secret_key or admin_key is not the one the deployment's other replicas use "+
			"(redis_prefix %q); start every replica with the same keys (after changing them on purpose on every replica, delete the Redis key %q)", prefix, key)
	}
	// The secret key's own check, for the commands that share only the
	// rate limits (they need not know the admin key): every replica that
	// got here has the same secret key, so each writes the same value.
	if err := c.Set(ctx, prefix+secretCheckKey, secretCheck(secretKey), 0).Err(); err != nil {
		return fmt.Errorf("checking the keys against the other replicas': %w", err)
	}
	return nil
}

// secretCheckKey holds, under the prefix, secretCheck of the replicas'
// secret key: a command sharing their rate limits (RedisLimitsOnly,
// trawl call) with another secret key fingerprints runtime credentials
// otherwise, and is told it does not share the limits learned per
// credential.
const secretCheckKey = "keycheck:secret"

// secretCheck is a MAC under the secret key of a fixed text: it reveals
// nothing of the key.
func secretCheck(secretKey []byte) string {
	mac := hmac.New(sha256.New, secretKey)
	mac.Write([]byte("trawl secret key check v1"))
	return hex.EncodeToString(mac.Sum(nil))
}

// redisLogger sends go-redis's own logs (a dial that failed, a pool that
// reconnects) to the deployment's log at debug level: an outage shows as
// 503s and in /readyz, not as a line per attempt. go-redis's logger is
// one per process: the first deployment on Redis sets it.
type redisLogger struct{ log *slog.Logger }

var redisLogOnce sync.Once

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.DebugContext(ctx, "redis: "+fmt.Sprintf(format, v...))
}

// scopeKey keys the credential fingerprints of cache scopes: derived
// from the secret key (never the key itself), so whoever reads the cache's
// keys in Redis or the bbolt file cannot test guessed tokens against them.
// Nil (a fixed key) for a store of its own in memory.
func (st *stores) scopeKey() []byte {
	if st.secretKey == nil {
		return nil
	}
	mac := hmac.New(sha256.New, st.secretKey)
	mac.Write([]byte("trawl dataset cache scope v1"))
	return mac.Sum(nil)
}

// secretKey is the configured secret_key, nil when none is.
func (c *Config) secretKey() ([]byte, error) {
	if c.SecretKey == "" {
		return nil, nil
	}
	k, err := hex.DecodeString(strings.TrimSpace(c.SecretKey))
	if err == nil && len(k) == 32 {
		return k, nil
	}
	msg := "must be 64 hex digits (32 bytes), e.g. from `openssl rand -hex 32`"
	if c.secretKeyFromEnv {
		return nil, &ConfigError{File: "environment", Key: "TRAWL_SECRET_KEY", Msg: msg}
	}
	return nil, c.errAt("secret_key", msg)
}

func (st *stores) close() error {
	var errs []error
	for i := len(st.closers) - 1; i >= 0; i-- {
		errs = append(errs, st.closers[i]())
	}
	st.closers = nil
	return errors.Join(errs...)
}

type pingFunc func(context.Context) error

func (f pingFunc) Ping(ctx context.Context) error { return f(ctx) }

// ErrStoreUnavailable marks a failure to reach the deployment's shared
// store (Redis down or unreachable): the API answers it with 503
// store_unavailable, never with local state instead.
var ErrStoreUnavailable = errors.New("the deployment's store is unavailable")

// unavailableHook marks every error of a Redis command that is not the
// server's own answer (a missing key, an error reply) as
// ErrStoreUnavailable: the connection failed, timed out or was refused.
type unavailableHook struct{}

func (unavailableHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (unavailableHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if marked := markUnavailable(err); marked != err {
			cmd.SetErr(marked)
			return marked
		}
		return err
	}
}

func (unavailableHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		var outage error
		for _, cmd := range cmds {
			if e := cmd.Err(); e != nil {
				marked := markUnavailable(e)
				cmd.SetErr(marked)
				if outage == nil && errors.Is(marked, ErrStoreUnavailable) {
					outage = marked
				}
			}
		}
		if err != nil && outage != nil {
			// A transaction that Redis discarded (EXECABORT) because a
			// command in it met an outage (OOM) failed for that.
			return outage
		}
		return markUnavailable(err)
	}
}

func markUnavailable(err error) error {
	var reply redis.Error
	switch {
	case err == nil, errors.Is(err, redis.Nil), errors.Is(err, ErrStoreUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.As(err, &reply) && !errors.Is(err, redis.ErrClosed) && !outageReply(reply.Error()):
		return err // the server answered: not an outage
	}
	return &unavailableError{err}
}

// outageReplies begin the error replies of a Redis that cannot serve
// for now — loading its data, out of memory, a read-only replica after a
// failover, a failing snapshot, a script that blocks it, a password
// changed under the replicas — rather than a fault of the command.
var outageReplies = []string{"LOADING ", "OOM ", "READONLY ", "MASTERDOWN ", "MISCONF ", "BUSY ",
	"TRYAGAIN ", "CLUSTERDOWN ", "NOREPLICAS ", "NOAUTH ", "WRONGPASS "}

func outageReply(msg string) bool {
	if msg == "ERR max number of clients reached" {
		return true
	}
	for _, p := range outageReplies {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return "redis: " + e.err.Error() }
func (e *unavailableError) Unwrap() []error {
	return []error{ErrStoreUnavailable, e.err}
}
