package redislimit

import "github.com/redis/go-redis/v9"

// script decides acquisitions and applies releases, mirroring the
// embedded limiter (tools/ratelimit_memory.go: decide, learnInto) field
// for field, with two things only replicas need: the holders' leases are
// renewed (mode "k"), and waiters for a concurrency slot take turns
// across replicas (in one process, every waiter hears each release at
// once). The conformance suite (tools/limittest) runs both.
//
// KEYS: every scope's state key followed by its permits key, its
// waiters' turns and their expiries (scopeKeys in Go), so the script
// touches only keys named in KEYS. ARGV: how long a waiter keeps its
// turn without asking again (µs, mode "a"), now (µs), lease (µs), learn
// TTL (µs), growth divisor, concurrency ceiling, mode ("a": acquire,
// "r": releases only, "k": keep, renewing leases); for "a": max wait
// (µs), permit id, the provider's and the credential's index in KEYS
// (0: none), rps, burst, concurrency; then, for "a" and "r", the number
// of releases and 14 fields each (see release.args, the provider and
// credential as indexes); for "k", the number of permits and three
// fields each: the permit id and its provider's and credential's index.
// Numbers are written with %.17g, which keeps every microsecond
// timestamp exact.
//
// It answers, for "a": {code, wait µs, cause, provider epoch, credential
// epoch, provider's learned bound, provider's permits in flight}; code 1
// granted (wait: until the slot starts), 0 paused, 2 every concurrency
// slot taken, 3 the rate slot is further than the max wait.
var script = redis.NewScript(`
-- TIME below, before writes: replicated by effects (Redis 5 and 6 need
-- asking; from 7 it is all there is, and this does nothing).
if redis.replicate_commands then redis.replicate_commands() end
local GRACE = tonumber(ARGV[1]) or 1000000 -- µs a waiter keeps its turn without asking again
local now = tonumber(ARGV[2])
local lease = tonumber(ARGV[3])
local LEARN = tonumber(ARGV[4])
local GROW = tonumber(ARGV[5])
local CEIL = tonumber(ARGV[6])
local mode = ARGV[7]
local SAME = 1000000 -- µs: resets this close name one quota window (sameWindow in Go)

local function fmt(n) return string.format('%.17g', n) end

local function load(i)
  local key = KEYS[i]
  local v = redis.call('HMGET', key, 'tat', 'lrate', 'lburst', 'lrexp', 'rem', 'reset', 'pause', 'cwnd', 'cwexp', 'epoch')
  local st = {key = key, pkey = KEYS[i + 1], wkey = KEYS[i + 2], wlkey = KEYS[i + 3],
    tat = tonumber(v[1]) or 0, lrate = tonumber(v[2]) or 0, lburst = tonumber(v[3]) or 0, lrexp = tonumber(v[4]) or 0,
    rem = tonumber(v[5]) or -1, reset = tonumber(v[6]) or 0, pause = tonumber(v[7]) or 0,
    cwnd = tonumber(v[8]) or 0, cwexp = tonumber(v[9]) or 0, epoch = tonumber(v[10]) or 0}
  redis.call('ZREMRANGEBYSCORE', st.pkey, '-inf', fmt(now))
  st.n = redis.call('ZCARD', st.pkey)
  if st.cwnd > 0 and st.cwexp <= now then st.cwnd = 0 end
  if st.lrate > 0 and st.lrexp <= now then st.lrate = 0 end
  if st.rem >= 0 and st.reset <= now then st.rem = -1; st.reset = 0 end
  return st
end

local function save(st)
  redis.call('HSET', st.key, 'tat', fmt(st.tat), 'lrate', fmt(st.lrate), 'lburst', fmt(st.lburst), 'lrexp', fmt(st.lrexp),
    'rem', fmt(st.rem), 'reset', fmt(st.reset), 'pause', fmt(st.pause), 'cwnd', fmt(st.cwnd), 'cwexp', fmt(st.cwexp), 'epoch', fmt(st.epoch))
  local keep = LEARN
  for _, t in ipairs({st.pause, st.reset, st.tat, st.cwexp, st.lrexp}) do
    if t - now > keep then keep = t - now end
  end
  redis.call('PEXPIRE', st.key, math.floor(keep / 1000) + 60000)
end

local function scopeKeys(provider, cred)
  local keys = {tonumber(provider)}
  if tonumber(cred) > 0 then keys[2] = tonumber(cred) end
  return keys
end

local function release(a, i)
  local pid, provider, cred = a[i], a[i + 1], a[i + 2]
  local eps = {tonumber(a[i + 3]), tonumber(a[i + 4])}
  local conf, has, tm, ok = tonumber(a[i + 5]), tonumber(a[i + 6]), tonumber(a[i + 7]), tonumber(a[i + 8])
  local pauseU, remaining, reset = tonumber(a[i + 9]), tonumber(a[i + 10]), tonumber(a[i + 11])
  local rate, burst = tonumber(a[i + 12]), tonumber(a[i + 13])
  local keys = scopeKeys(provider, cred)
  for j, key in ipairs(keys) do
    local st = load(key)
    if j == #keys and has == 1 then
      local inflight = st.n
      if not redis.call('ZSCORE', st.pkey, pid) then inflight = inflight + 1 end
      if tm == 1 then
        if eps[j] == st.epoch then
          local base = inflight
          if st.cwnd > 0 and st.cwnd < base then base = st.cwnd end
          st.cwnd = math.max(1, base / 2)
          st.cwexp = now + LEARN
          st.epoch = st.epoch + 1
        end
      elseif ok == 1 and st.cwnd > 0 then
        st.cwnd = st.cwnd + 1 / (GROW * st.cwnd)
        local ceiling = CEIL
        if j == 1 and conf > 0 then ceiling = conf end
        if st.cwnd >= ceiling then st.cwnd = 0 end
      end
      if pauseU > st.pause then st.pause = pauseU end
      if remaining >= 0 and reset > now then
        local rem = math.max(0, remaining - (inflight - 1))
        if st.rem >= 0 and reset - st.reset <= SAME and st.reset - reset <= SAME then
          rem = math.min(rem, st.rem)
          reset = math.max(reset, st.reset)
        end
        st.rem = rem
        st.reset = reset
      end
      if rate > 0 then
        st.lrate = rate
        st.lburst = math.max(burst, 1)
        st.lrexp = now + LEARN
      end
      save(st)
    end
    redis.call('ZREM', st.pkey, pid)
    redis.call('ZREM', st.wkey, pid) -- a waiter that gave up leaves its turn
    redis.call('ZREM', st.wlkey, pid)
  end
end

local function releases(at)
  local n = tonumber(ARGV[at])
  local i = at + 1
  for _ = 1, n do
    release(ARGV, i)
    i = i + 14
  end
end

if mode == 'r' then
  releases(8)
  return {}
end

if mode == 'k' then
  -- A lease still running is extended to now + lease; one that ended
  -- (its permit no longer counts) stays ended.
  local n = tonumber(ARGV[8])
  local i = 9
  for _ = 1, n do
    local pid = ARGV[i]
    for _, k in ipairs(scopeKeys(ARGV[i + 1], ARGV[i + 2])) do
      local pkey = KEYS[k + 1]
      local sc = redis.call('ZSCORE', pkey, pid)
      if sc and tonumber(sc) > now then
        redis.call('ZADD', pkey, fmt(now + lease), pid)
        local ttl = math.floor(lease / 1000) + 1000
        if redis.call('PTTL', pkey) < ttl then redis.call('PEXPIRE', pkey, ttl) end
      end
    end
    i = i + 3
  end
  return {}
end

local maxWait, pid, provider, cred = tonumber(ARGV[8]), ARGV[9], ARGV[10], ARGV[11]
local cfgRps, cfgBurst, cfgConc = tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14])
releases(15)

local keys = scopeKeys(provider, cred)
local states = {}
for j, key in ipairs(keys) do states[j] = load(key) end
local function status(code, wait, cause, e1, e2)
  local learned = 0
  if states[1].cwnd > 0 then learned = math.floor(states[1].cwnd) end
  return {tostring(code), fmt(wait), cause, fmt(e1), fmt(e2), fmt(learned), fmt(states[1].n)}
end

-- Waiters for a concurrency slot take their turns in the order they
-- came, across replicas, in each scope that bounds its concurrency (the
-- provider, and a credential with a learned bound): a request takes a
-- free slot only when fewer waiters came before it than slots are free.
-- Otherwise a replica's next request, carrying the release of its last,
-- would take the slot it freed before another replica's waiter asked
-- again, and one replica's walk would starve the others'. A waiter asks
-- again at least every PollInterval; one that stops (its replica died)
-- loses its turn after GRACE, on Redis's own clock (TIME), so a replica
-- whose clock is off keeps its turns; one that gives up leaves them (a
-- release of its id). A request waits in the queues of the scopes that
-- hold it only: where it is not held, it holds up no one's turn.
local rnow = nil
local function redisNow()
  if not rnow then
    local t = redis.call('TIME')
    rnow = tonumber(t[1]) * 1000000 + tonumber(t[2])
  end
  return rnow
end
local function leaveTurn(st)
  redis.call('ZREM', st.wkey, pid)
  redis.call('ZREM', st.wlkey, pid)
end
local function keepTurn(st, extra)
  if not redis.call('ZSCORE', st.wkey, pid) then
    local last = redis.call('ZRANGE', st.wkey, -1, -1, 'WITHSCORES')
    local ticket = 1
    if last[2] then ticket = tonumber(last[2]) + 1 end
    redis.call('ZADD', st.wkey, ticket, pid)
  end
  redis.call('ZADD', st.wlkey, fmt(redisNow() + extra + GRACE), pid)
  local ttl = math.floor((extra + GRACE) / 1000) + 60000
  for _, k in ipairs({st.wkey, st.wlkey}) do
    if redis.call('PTTL', k) < ttl then redis.call('PEXPIRE', k, ttl) end
  end
end
local function pausedFor(st)
  local w = 0
  if st.pause > now then w = st.pause - now end
  if st.rem == 0 and st.reset > now and st.reset - now > w then w = st.reset - now end
  return w
end

local function purgeTurns(st)
  for _, d in ipairs(redis.call('ZRANGEBYSCORE', st.wlkey, '-inf', fmt(redisNow()))) do
    redis.call('ZREM', st.wkey, d)
    redis.call('ZREM', st.wlkey, d)
  end
end

-- A grant this call made before (go-redis sent it again after a read
-- timeout) is answered as granted, not as a slot held by someone else.
local mine = redis.call('ZSCORE', states[#states].pkey, pid)
if mine and tonumber(mine) > now then
  local e2 = 0
  if states[2] then e2 = states[2].epoch end
  return status(1, 0, '', states[1].epoch, e2)
end

local wait, cause = 0, ''
for _, st in ipairs(states) do
  local w = pausedFor(st)
  if w > wait then wait = w; cause = 'paused' end
end
if wait > 0 then
  -- A turn is kept through a pause that holds its whole scope as long
  -- (the scope's own, or for a credential its provider's, which holds
  -- every credential); a pause of another scope (its own credential's)
  -- holds this request only, and it leaves the turn it would hold up.
  for j, st in ipairs(states) do
    if redis.call('ZSCORE', st.wkey, pid) then
      purgeTurns(st)
      local cover = pausedFor(st)
      if j == 2 then cover = math.max(cover, pausedFor(states[1])) end
      if cover >= wait then
        if redis.call('ZSCORE', st.wkey, pid) then keepTurn(st, wait) end
      else
        leaveTurn(st)
      end
    end
  end
  return status(0, wait, cause, 0, 0)
end

local blocked = false
for j, st in ipairs(states) do
  local limit = 0
  if j == 1 then limit = cfgConc end
  if st.cwnd > 0 then
    local c = math.floor(st.cwnd)
    if limit == 0 or c < limit then limit = c end
  end
  if limit > 0 then
    purgeTurns(st)
    local ahead = redis.call('ZRANK', st.wkey, pid)
    st.queued = ahead ~= false
    if not st.queued then ahead = redis.call('ZCARD', st.wkey) end
    st.held = st.n + ahead >= limit
    blocked = blocked or st.held
  end
end
local function leaveTurns()
  for _, st in ipairs(states) do
    if st.queued then leaveTurn(st) end
  end
end
if blocked then
  for _, st in ipairs(states) do
    if st.held then keepTurn(st, 0) elseif st.queued then leaveTurn(st) end
  end
  return status(2, 0, 'concurrency', 0, 0)
end

local function rateOf(st, j)
  local r, b = 0, 0
  if j == 1 and cfgRps > 0 then r = cfgRps; b = cfgBurst end
  if st.lrate > 0 then
    local lb = math.max(st.lburst, 1)
    if r == 0 then r = st.lrate; b = lb else r = math.min(r, st.lrate); b = math.min(b, lb) end
  end
  return r, b
end

local delay = 0
for j, st in ipairs(states) do
  local r, b = rateOf(st, j)
  if r > 0 then
    local t = math.ceil(1e6 / r)
    local d = st.tat - (b - 1) * t - now
    if d > delay then delay = d end
  end
end
if delay > maxWait then
  leaveTurns()
  return status(3, delay, 'rate', 0, 0)
end
leaveTurns()

local eps = {0, 0}
for j, st in ipairs(states) do
  local r = rateOf(st, j)
  if r > 0 then st.tat = math.max(st.tat, now) + math.ceil(1e6 / r) end
  if st.rem > 0 then st.rem = st.rem - 1 end
  -- Leased for the lease from now, its rate slot's delay included: the
  -- holder renews it while it waits as while it runs (the embedded
  -- limiter, which nothing renews, leases it past the delay). The set's
  -- expiry is only ever extended: another permit's may be later.
  redis.call('ZADD', st.pkey, fmt(now + lease), pid)
  local ttl = math.floor(lease / 1000) + 1000
  if redis.call('PTTL', st.pkey) < ttl then redis.call('PEXPIRE', st.pkey, ttl) end
  st.n = st.n + 1
  save(st)
  eps[j] = st.epoch
end
return status(1, delay, '', eps[1], eps[2])
`)
