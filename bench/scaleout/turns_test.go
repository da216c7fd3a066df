package scaleout_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// The demo's recorded questions (tools/demo/replay.json): a walk of every
// open order, then a fan-out over 40 properties' bookings and a query of
// the stored result.
var demoQuestions = []string{
	"How many open orders worth more than 100 do we have, and how do they split by currency?",
	"Across all our properties, how many confirmed bookings were for a week or longer?",
}

const benchUser = "bench-user"

// deployment is the replicas under test and, on Redis, their server.
type deployment struct {
	cfg      deploymentConfig
	replicas []*replica
	redis    *redistest.Server // nil: the embedded default
	admin    *redis.Client     // the bench's own client of it
	token    string            // a session of benchUser
	redisPid int
}

// startDeployment starts n replicas on the embedded default (onRedis
// false: n must be 1) or on one redis-server. seed, when set, runs
// before the replicas start: on the data directory of the embedded one,
// or on the Redis they will share.
func startDeployment(b *testing.B, n int, onRedis bool, seed func(dataDir string, c *redis.Client, prefix string)) *deployment {
	return startDeploymentOf(b, "", n, onRedis, seed)
}

// startDeploymentOf is startDeployment running the trawl binary bin (""
// for one built from this tree).
func startDeploymentOf(b *testing.B, bin string, n int, onRedis bool, seed func(dataDir string, c *redis.Client, prefix string)) *deployment {
	b.Helper()
	d := &deployment{}
	dataDir := ""
	if onRedis {
		d.redis = redistest.Start(b)
		d.admin = d.redis.Client(b)
		d.cfg = newDeploymentConfig("redis://" + d.redis.Addr + "/0")
		pid, err := redisPid(context.Background(), d.admin)
		if err != nil {
			b.Fatal(err)
		}
		d.redisPid = pid
	} else {
		if n != 1 {
			b.Fatal("the embedded default is one replica")
		}
		d.cfg = newDeploymentConfig("")
		dataDir = b.TempDir()
	}
	d.cfg.Bin = bin
	if seed != nil {
		seed(dataDir, d.admin, d.cfg.Prefix)
	}
	for range n {
		r, err := startReplica(b, d.cfg, dataDir)
		if err != nil {
			b.Fatal(err)
		}
		d.replicas = append(d.replicas, r)
	}
	tok, err := session(context.Background(), d.replicas[0], d.cfg.AdminKey, benchUser)
	if err != nil {
		b.Fatal(err)
	}
	d.token = tok
	return d
}

func redisPid(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server: no process_id")
}

// cpu is the CPU time of every replica and of redis-server.
func (d *deployment) cpu(b *testing.B) time.Duration {
	var total time.Duration
	pids := []int{}
	for _, r := range d.replicas {
		pids = append(pids, r.Pid())
	}
	if d.redisPid != 0 {
		pids = append(pids, d.redisPid)
	}
	for _, pid := range pids {
		t, err := procCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		total += t
	}
	return total
}

// rss is the resident memory of every replica (redis-server's is its
// data, reported apart).
func (d *deployment) rss() int64 {
	var total int64
	for _, r := range d.replicas {
		n, _ := procRSS(r.Pid())
		total += n
	}
	return total
}

// publishTimes records when each run's events were appended, from the
// notification the Redis event log publishes with each append
// (stream/redislog): the bench subscribes to every run's channel.
type publishTimes struct {
	mu sync.Mutex
	at map[string]map[int64]time.Time // run id → seq → time
	ps *redis.PubSub
}

func watchPublishes(b *testing.B, c *redis.Client, prefix string) *publishTimes {
	p := &publishTimes{at: map[string]map[int64]time.Time{}}
	p.ps = c.PSubscribe(context.Background(), prefix+"run:{*}:n")
	if _, err := p.ps.Receive(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { p.ps.Close() })
	go func() {
		for m := range p.ps.Channel(redis.WithChannelSize(10000)) {
			now := time.Now()
			run, ok := strings.CutPrefix(m.Channel, prefix+"run:{")
			run, ok2 := strings.CutSuffix(run, "}:n")
			// "d<seq> <data>" or "e<seq>" (stream/redislog).
			num, _, _ := strings.Cut(strings.TrimLeft(m.Payload, "de"), " ")
			seq, err := strconv.ParseInt(num, 10, 64)
			if !ok || !ok2 || err != nil {
				continue
			}
			p.mu.Lock()
			if p.at[run] == nil {
				p.at[run] = map[int64]time.Time{}
			}
			p.at[run][seq] = now
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *publishTimes) get(run string, seq int64) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, ok := p.at[run][seq]
	return t, ok
}

// turnResults gather what the clients measured.
type turnResults struct {
	mu        sync.Mutex
	turns     int
	ttfc      []time.Duration // POST sent → first event read
	cross     []time.Duration // publish → read, on the replica the client resumed on
	home      []time.Duration // publish → read, on the replica running the turn
	resumes   int
	conflicts int
	events    int64 // the last event id of each turn, summed
}

// load is the chat traffic of one measurement.
type load struct {
	Conversations int // each a new chat of the demo's two turns
	Concurrent    int
	// Resume: each turn's client leaves after its first progress chunk
	// and resumes (Last-Event-ID) on the next replica.
	Resume bool
	// Delays: measure publish-to-read on the replica running the turn
	// (on Redis; the bench's own subscription costs Redis a little).
	Delays bool
}

// rounds is how many times each deployment (or store) is measured,
// interleaved with the others', so that a ratio is read within one run.
const rounds = 5

// measure runs l on d and reports per turn: CPU of the replicas and
// redis-server together, Redis commands and bytes, memory per active
// turn, time to first chunk and, when resuming, publish-to-read on the
// other replica.
func (d *deployment) measure(b *testing.B, l load, round int) (cpuPerTurn float64) {
	b.Helper()
	tag := strconv.Itoa(round)
	ctx := context.Background()
	var pub *publishTimes
	if (l.Resume || l.Delays) && d.admin != nil {
		pub = watchPublishes(b, d.admin, d.cfg.Prefix)
	}
	res := &turnResults{}
	// Warm up: connections, pools, the first thread.
	if round == 0 {
		for c := range 2 {
			if err := d.conversation(ctx, fmt.Sprintf("warm-%s-%d", tag, c), c, l.Resume, pub, &turnResults{}); err != nil {
				b.Fatal(err)
			}
		}
	}
	var rs0 redisStats
	if d.admin != nil {
		var err error
		if rs0, err = readRedisStats(ctx, d.admin); err != nil {
			b.Fatal(err)
		}
	}
	cpu0 := d.cpu(b)
	rss0 := d.rss()
	// The live heap of each replica's last GC before the measured part,
	// and where its log stands.
	heap0 := make([]int64, len(d.replicas))
	logAt := make([]int64, len(d.replicas))
	for i, r := range d.replicas {
		var hs []int64
		hs, logAt[i] = r.liveHeaps(0)
		if len(hs) > 0 {
			heap0[i] = hs[len(hs)-1]
		}
	}
	var active atomic.Int64
	var peakPerRun atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
			if n := active.Load(); n >= int64(l.Concurrent)/2 {
				if per := (d.rss() - rss0) / n; per > peakPerRun.Load() {
					peakPerRun.Store(per)
				}
			}
		}
	})
	b.ResetTimer()
	start := time.Now()
	sem := make(chan struct{}, l.Concurrent)
	var wg sync.WaitGroup
	var failed atomic.Pointer[error]
	for c := range l.Conversations {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			active.Add(1)
			defer active.Add(-1)
			if err := d.conversation(ctx, fmt.Sprintf("c-%s-%d", tag, c), c, l.Resume, pub, res); err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	close(stopSampling)
	sampler.Wait()
	cpu := d.cpu(b) - cpu0
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
	turns := float64(res.turns)
	cpuPerTurn = float64(cpu.Microseconds()) / 1000 / turns
	b.ReportMetric(cpuPerTurn, "cpu-ms/turn")
	b.ReportMetric(turns/wall.Seconds(), "turns/s")
	if round == 0 {
		// Later rounds start with the heap the first grew to.
		b.ReportMetric(float64(peakPerRun.Load())/1024, "rss-KiB/active-turn")
	}
	// Live heap per active turn: the peak over the GCs of the measured part
	// over the last one before it, summed over replicas, per concurrent
	// turn.
	var heapGrowth int64
	for i, r := range d.replicas {
		hs, _ := r.liveHeaps(logAt[i])
		peak := heap0[i]
		for _, h := range hs {
			peak = max(peak, h)
		}
		heapGrowth += peak - heap0[i]
	}
	b.ReportMetric(float64(heapGrowth)/1024/float64(l.Concurrent), "heap-KiB/active-turn")
	if d.admin != nil {
		rs1, err := readRedisStats(ctx, d.admin)
		if err != nil {
			b.Fatal(err)
		}
		ds := rs1.sub(rs0)
		b.ReportMetric(float64(ds.Commands)/turns, "redis-cmds/turn")
		b.ReportMetric(float64(ds.NetBytes)/1024/turns, "redis-KiB/turn")
		b.ReportMetric(float64(ds.CPU.Microseconds())/1000/turns, "redis-cpu-ms/turn")
		b.Log(ds.top(12, turns, "turn"))
		if held, err := d.heldByKind(ctx); err == nil {
			b.Log("held in Redis after the run, by key kind: " + held)
		}
	}
	percentiles(b, res.ttfc, "ttfc-")
	if l.Resume {
		if len(res.cross) == 0 {
			b.Fatalf("no event was read live after a resume (%d resumes)", res.resumes)
		}
		percentiles(b, res.cross, "cross-")
		b.ReportMetric(float64(res.resumes)/turns, "resumes/turn")
	}
	if l.Delays && pub != nil {
		percentiles(b, res.home, "home-")
	}
	b.ReportMetric(float64(res.conflicts)/turns, "409s/turn")
	b.ReportMetric(float64(res.events)/turns, "events/turn")
	return cpuPerTurn
}

// conversation is one chat of the demo's turns; turn i is posted on
// replica (c+i) mod n.
func (d *deployment) conversation(ctx context.Context, chatID string, c int, resume bool, pub *publishTimes, res *turnResults) error {
	for i, q := range demoQuestions {
		home := d.replicas[(c+i)%len(d.replicas)]
		other := d.replicas[(c+i+1)%len(d.replicas)]
		if err := d.turn(ctx, home, other, chatID, fmt.Sprintf("m%d", i), q, resume, pub, res); err != nil {
			return fmt.Errorf("chat %s, turn %d: %w", chatID, i, err)
		}
	}
	return nil
}

func (d *deployment) turn(ctx context.Context, home, other *replica, chatID, msgID, text string, resume bool, pub *publishTimes, res *turnResults) error {
	body := fmt.Sprintf(`{"id": %q, "messages": [{"id": %q, "role": "user", "parts": [{"type": "text", "text": %q}]}]}`, chatID, msgID, text)
	var resp *http.Response
	var sent time.Time
	conflicts := 0
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, home.URL+"/v1/agents/demo/chat", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+d.token)
		sent = time.Now()
		var err error
		if resp, err = http.DefaultClient.Do(req); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusConflict || conflicts > 500 {
			break
		}
		// The previous turn's client saw its end a moment before the run
		// let go of the chat.
		resp.Body.Close()
		conflicts++
		time.Sleep(10 * time.Millisecond)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST chat: %s", resp.Status)
	}
	var first time.Time
	var last int64
	left := false
	var read []sseEvent
	runID := ""
	err := readEvents(resp.Body, func(ev sseEvent) bool {
		if first.IsZero() {
			first = ev.At
			if pub != nil && !resume {
				runID, _ = d.runID(ctx, chatID)
			}
		}
		if runID != "" {
			read = append(read, ev)
		}
		last = ev.Seq
		if resume && home != other && ev.Type == "data-"+stream.ProgressName {
			left = true
			return false
		}
		return true
	})
	if err != nil {
		return err
	}
	resp.Body.Close()
	var cross []time.Duration
	resumed := false
	if left {
		var err error
		cross, resumed, last, err = d.resume(ctx, other, chatID, last, pub)
		if err != nil {
			return err
		}
	}
	res.mu.Lock()
	defer res.mu.Unlock()
	res.turns++
	res.conflicts += conflicts
	res.events += last
	res.ttfc = append(res.ttfc, first.Sub(sent))
	res.cross = append(res.cross, cross...)
	for _, ev := range read {
		if at, ok := pub.get(runID, ev.Seq); ok {
			res.home = append(res.home, ev.At.Sub(at))
		}
	}
	if resumed {
		res.resumes++
	}
	return nil
}

// resume reads the rest of a turn on r after event last, and returns the
// delay from publish to read of each event published after it asked, and
// the last event's id.
func (d *deployment) resume(ctx context.Context, r *replica, chatID string, last int64, pub *publishTimes) ([]time.Duration, bool, int64, error) {
	runID := ""
	if pub != nil {
		var err error
		if runID, err = d.runID(ctx, chatID); err != nil {
			return nil, false, last, err
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.URL+"/v1/agents/demo/chat/"+chatID+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Last-Event-ID", strconv.FormatInt(last, 10))
	asked := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, false, last, err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil, false, last, nil // the turn ended meanwhile
	case http.StatusOK:
	default:
		return nil, false, last, fmt.Errorf("GET stream: %s", resp.Status)
	}
	var delays []time.Duration
	next := last + 1
	err = readEvents(resp.Body, func(ev sseEvent) bool {
		if ev.Seq != next {
			err = fmt.Errorf("resumed after %d: event %d, want %d", last, ev.Seq, next)
			return false
		}
		next++
		if runID == "" {
			return true
		}
		if at, ok := pub.get(runID, ev.Seq); ok && at.After(asked) {
			delays = append(delays, ev.At.Sub(at))
		}
		return true
	})
	return delays, true, next - 1, err
}

// BenchmarkTurns: 40 conversations of the demo's two turns (80 turns),
// 20 at once, the demo upstream answering each page in 50 ms and the
// dataset cache off (every turn walks): on the embedded default, on
// Redis with one replica, on Redis with two (a conversation's turns
// alternate between them; publish-to-read measured on the replica running
// the turn), and on two where every turn's client leaves after its first
// progress chunk and resumes on the other replica (publish-to-read
// measured there). The
// four run side by side, measured in turn, rounds times; "ratios" gives
// the medians' ratios of CPU per turn.
func BenchmarkTurns(b *testing.B) {
	l := load{Conversations: 40, Concurrent: 20}
	delays := l
	delays.Delays = true
	resume := l
	resume.Resume = true
	interleave(b, rounds, []measurement{
		{"embedded", startDeployment(b, 1, false, nil), l},
		{"redis-1", startDeployment(b, 1, true, nil), l},
		{"redis-2", startDeployment(b, 2, true, nil), delays},
		{"redis-2-resume", startDeployment(b, 2, true, nil), resume},
	}, map[string][2]string{
		"redis-1/embedded-cpu":        {"redis-1", "embedded"},
		"redis-2/embedded-cpu":        {"redis-2", "embedded"},
		"redis-2-resume/embedded-cpu": {"redis-2-resume", "embedded"},
	})
}

// BenchmarkTurnsEmbeddedVsBase measures the embedded default's CPU per
// turn against another build of trawl, interleaved (the same load as
// BenchmarkTurns): TRAWL_BASE_BIN names that build's binary, e.g. one of
// main made from a copy of its tree (git archive main | tar -x -C DIR;
// go build -o DIR/trawl ./cmd/trawl in DIR). It skips without one.
func BenchmarkTurnsEmbeddedVsBase(b *testing.B) {
	benchVsBase(b, false)
}

// BenchmarkTurnsRedisVsBase is BenchmarkTurnsEmbeddedVsBase on Redis
// with one replica (each build on a redis-server of its own; CPU counts
// redis-server's too).
func BenchmarkTurnsRedisVsBase(b *testing.B) {
	benchVsBase(b, true)
}

func benchVsBase(b *testing.B, onRedis bool) {
	base := os.Getenv("TRAWL_BASE_BIN")
	if base == "" {
		b.Skip("set TRAWL_BASE_BIN to a trawl binary to compare against")
	}
	name := "embedded"
	if onRedis {
		name = "redis-1"
	}
	l := load{Conversations: 40, Concurrent: 20}
	interleave(b, rounds, []measurement{
		{name, startDeployment(b, 1, onRedis, nil), l},
		{name + "-base", startDeploymentOf(b, base, 1, onRedis, nil), l},
	}, map[string][2]string{name + "/base-cpu": {name, name + "-base"}})
}

// measurement is one deployment under one load.
type measurement struct {
	name string
	d    *deployment
	l    load
}

// interleave measures each of ms in turn, n times, then reports the
// ratio of the median CPU per turn for each pair {numerator, denominator}
// of ratios.
func interleave(b *testing.B, n int, ms []measurement, ratios map[string][2]string) {
	cpu := map[string][]float64{}
	for round := range n {
		for _, m := range ms {
			b.Run(m.name, func(b *testing.B) {
				cpu[m.name] = append(cpu[m.name], m.d.measure(b, m.l, round))
			})
		}
	}
	b.Run("ratios", func(b *testing.B) {
		for name, p := range ratios {
			num, den := median(cpu[p[0]]), median(cpu[p[1]])
			if num == 0 || den == 0 {
				b.Fatalf("%s: no figures", name)
			}
			b.ReportMetric(num/den, name)
		}
	})
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}

// runID is the id of the chat's active run, from the active-run
// registry (web/runlease/redislease): "" when none is active.
func (d *deployment) runID(ctx context.Context, chatID string) (string, error) {
	v, err := d.admin.Get(ctx, d.cfg.Prefix+"lease:"+agent.ThreadKey(benchUser, "demo", chatID)).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}

// heldByKind sums MEMORY USAGE of the deployment's keys by their kind
// (the key's first segment after the prefix).
func (d *deployment) heldByKind(ctx context.Context) (string, error) {
	sums := map[string]int64{}
	iter := d.admin.Scan(ctx, 0, d.cfg.Prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		kind := strings.TrimPrefix(k, d.cfg.Prefix)
		if i := strings.IndexAny(kind, ":{"); i > 0 {
			kind = kind[:i]
		}
		n, err := d.admin.MemoryUsage(ctx, k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return "", err
		}
		sums[kind] += n
	}
	if err := iter.Err(); err != nil {
		return "", err
	}
	kinds := make([]string, 0, len(sums))
	for k := range sums {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int { return int(sums[b] - sums[a]) })
	var out strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&out, "%s %d KiB, ", k, sums[k]>>10)
	}
	return strings.TrimSuffix(out.String(), ", "), nil
}
