package scaleout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/redisstore"
	"github.com/trawl-dev/trawl/stream/redistest"
)

// seedThreads stores n threads of two turns each (about 3 KB of JSON):
// mine of them benchUser's, the rest 100 to a user, updated over the
// last 30 days.
func seedThreads(ctx context.Context, s agent.ThreadStore, n, mine int) error {
	output, _ := json.Marshal(map[string]any{"_boundary": "complete: 7 pages, 364 items", "_resultId": "r_0123456789abcdef",
		"items": strings.Repeat(`{"id":"o_1","total":120.5,"currency":"EUR"},`, 20)})
	now := time.Now().UTC()
	for i := range n {
		user := benchUser
		if i >= mine {
			user = fmt.Sprintf("user-%d", (i-mine)/100)
		}
		chat := fmt.Sprintf("seed-%d", i)
		t := &agent.Thread{Key: agent.ThreadKey(user, "demo", chat), ChatID: chat, AgentID: "demo", UserID: user,
			Created: now.Add(-30 * 24 * time.Hour), Updated: now.Add(-time.Duration(n-i) * 30 * 24 * time.Hour / time.Duration(n))}
		for turn := range 2 {
			t.Msgs = append(t.Msgs,
				agent.UIMessage{ID: fmt.Sprintf("u%d", turn), Role: agent.RoleUser, Parts: []agent.Part{{Type: "text", Text: demoQuestions[turn]}}},
				agent.UIMessage{ID: fmt.Sprintf("a%d", turn), Role: agent.RoleAssistant, Parts: []agent.Part{
					{Type: "step-start"},
					{Type: "dynamic-tool", ToolName: "acme.list_orders", ToolCallID: fmt.Sprintf("call_%d", turn), State: "output-available",
						Input: json.RawMessage(`{"status":"open","_all_pages":true}`), Output: output},
					{Type: "text", Text: strings.Repeat("You have 278 open orders worth more than 100. ", 8), State: "done"},
				}})
		}
		if err := s.PutThread(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// seedEmbedded seeds the bbolt file of a data directory before trawl
// opens it.
func seedEmbedded(b *testing.B, dataDir string, n, mine int) {
	db, err := bolt.Open(filepath.Join(dataDir, "trawl.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.NoSync = true // seeding only; trawl opens it afterwards as usual
	s, err := agent.NewBoltStore(db, agent.Retention{})
	if err != nil {
		b.Fatal(err)
	}
	if err := seedThreads(context.Background(), s, n, mine); err != nil {
		b.Fatal(err)
	}
	if err := db.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTurnsThreadsStored: the per-turn cost of BenchmarkTurns (one
// replica, 20 conversations, 10 at once) with 10 and with 10,000 threads
// already stored (a tenth of them the benching user's), on the embedded
// default and on Redis, the four side by side and measured in turn,
// three times.
// Target: nothing in a turn's cost grows with the threads stored.
func BenchmarkTurnsThreadsStored(b *testing.B) {
	l := load{Conversations: 20, Concurrent: 10}
	var ms []measurement
	for _, onRedis := range []bool{false, true} {
		for _, n := range []int{10, 10000} {
			kind := "embedded"
			if onRedis {
				kind = "redis"
			}
			seed := func(dataDir string, c *redis.Client, prefix string) {
				if c == nil {
					seedEmbedded(b, dataDir, n, n/10)
					return
				}
				if err := seedThreads(context.Background(), redisstore.New(c, prefix, agent.Retention{}), n, n/10); err != nil {
					b.Fatal(err)
				}
			}
			d := startDeployment(b, 1, onRedis, seed)
			if err := d.checkSeeded(context.Background(), min(100, n/10)); err != nil {
				b.Fatal(err)
			}
			ms = append(ms, measurement{fmt.Sprintf("%s/threads=%d", kind, n), d, l})
		}
	}
	interleave(b, 3, ms, map[string][2]string{
		"embedded-10000/10-cpu": {"embedded/threads=10000", "embedded/threads=10"},
		"redis-10000/10-cpu":    {"redis/threads=10000", "redis/threads=10"},
	})
}

// checkSeeded asks the deployment for benchUser's chats: the seeded ones
// must be there (else the seed went where trawl does not look).
func (d *deployment) checkSeeded(ctx context.Context, want int) error {
	var out struct {
		Chats []json.RawMessage `json:"chats"`
	}
	if err := d.getJSON(ctx, d.replicas[0], "/v1/agents/demo/chats", &out); err != nil {
		return err
	}
	if len(out.Chats) < want {
		return fmt.Errorf("trawl lists %d chats of %s, want %d seeded ones", len(out.Chats), benchUser, want)
	}
	return nil
}

// BenchmarkThreadStoreTurn: a turn's work on the thread store alone — a
// new chat of benchUser read (a miss), its user message saved, then three
// checkpoints and the final save of the growing thread — with 10 and
// 10,000 threads stored (1 or 1,000 of them benchUser's: at 1,000, the
// per-user bound, each new chat pushes out the oldest), on bbolt and on
// Redis: six stores, measured in turn, rounds times; "ratios" gives the
// medians' ratios. CPU is this process's and, on Redis, the server's.
// The end-to-end figure is BenchmarkTurnsThreadsStored.
func BenchmarkThreadStoreTurn(b *testing.B) {
	ctx := context.Background()
	srv := redistest.Start(b).Addr
	type store struct {
		name    string
		s       agent.ThreadStore
		admin   *redis.Client // nil for bolt
		counter *cmdCounter
		next    int // the next new chat
	}
	var stores []*store
	for _, backend := range []string{"bolt", "redis"} {
		for _, sc := range []struct{ n, mine int }{{10, 1}, {10000, 1}, {10000, 1000}} {
			st := &store{name: fmt.Sprintf("%s/threads=%d/mine=%d", backend, sc.n, sc.mine), counter: &cmdCounter{}}
			switch backend {
			case "bolt":
				db, err := bolt.Open(filepath.Join(b.TempDir(), "trawl.db"), 0o600, nil)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { db.Close() })
				db.NoSync = true
				bs, err := agent.NewBoltStore(db, agent.Retention{})
				if err != nil {
					b.Fatal(err)
				}
				if err := seedThreads(ctx, bs, sc.n, sc.mine); err != nil {
					b.Fatal(err)
				}
				db.NoSync = false
				st.s = bs
			case "redis":
				c := redis.NewClient(&redis.Options{Addr: srv})
				b.Cleanup(func() { c.Close() })
				prefix := "t" + randomHex(4) + ":"
				if err := seedThreads(ctx, redisstore.New(c, prefix, agent.Retention{}), sc.n, sc.mine); err != nil {
					b.Fatal(err)
				}
				c.AddHook(st.counter)
				st.s, st.admin = redisstore.New(c, prefix, agent.Retention{}), c
			}
			stores = append(stores, st)
		}
	}
	seeded, err := stores[0].s.GetThread(ctx, agent.ThreadKey(benchUser, "demo", "seed-0"))
	if err != nil {
		b.Fatal(err)
	}
	turn := func(b *testing.B, st *store) {
		chat := fmt.Sprintf("bench-%d", st.next)
		st.next++
		key := agent.ThreadKey(benchUser, "demo", chat)
		if _, err := st.s.GetThread(ctx, key); err == nil {
			b.Fatal("a new chat found")
		}
		t := &agent.Thread{Key: key, ChatID: chat, AgentID: "demo", UserID: benchUser, Created: time.Now()}
		t.Msgs = append(t.Msgs, seeded.Msgs[0])
		for step := range 5 {
			if step > 0 && step < len(seeded.Msgs) {
				t.Msgs = append(t.Msgs, seeded.Msgs[step])
			}
			t.Updated = time.Now()
			if err := st.s.PutThread(ctx, t); err != nil {
				b.Fatal(err)
			}
		}
	}
	cpu := map[string][]float64{}
	for range rounds {
		for _, st := range stores {
			b.Run(st.name, func(b *testing.B) {
				sent0 := st.counter.n.Load()
				var rs0 redisStats
				if st.admin != nil {
					if rs0, err = readRedisStats(ctx, st.admin); err != nil {
						b.Fatal(err)
					}
				}
				cpu0 := processCPU()
				for b.Loop() {
					turn(b, st)
				}
				used := processCPU() - cpu0
				if st.admin != nil {
					rs1, err := readRedisStats(ctx, st.admin)
					if err != nil {
						b.Fatal(err)
					}
					d := rs1.sub(rs0)
					used += d.CPU
					b.ReportMetric(float64(st.counter.n.Load()-sent0)/float64(b.N), "sent-cmds/turn")
					b.ReportMetric(float64(d.Commands)/float64(b.N), "redis-cmds/turn")
				}
				per := float64(used.Microseconds()) / float64(b.N)
				b.ReportMetric(per, "cpu-µs/turn")
				cpu[st.name] = append(cpu[st.name], per)
			})
		}
	}
	b.Run("ratios", func(b *testing.B) {
		for _, backend := range []string{"bolt", "redis"} {
			base := median(cpu[backend+"/threads=10/mine=1"])
			b.ReportMetric(median(cpu[backend+"/threads=10000/mine=1"])/base, backend+"-10000/10-cpu")
			b.ReportMetric(median(cpu[backend+"/threads=10000/mine=1000"])/base, backend+"-10000-mine1000/10-cpu")
		}
	})
}
