package deploy

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/runlease"
)

// On a real three-master Redis Cluster, a deployment's stores as
// openStores wires them put each chat's keys (its thread and its claim),
// each run's (its event log), each workflow run's (the run and its claim)
// and each stored result's (the result and its marker) in one slot —
// every fenced save and every script ran, which a cluster refuses
// (CROSSSLOT) for keys in different slots — and different chats, runs and
// results in different slots, over more than one master.
func TestClusterKeysBySlot(t *testing.T) {
	cl := redistest.StartCluster(t)
	ctx := context.Background()
	cfg := &Config{RedisURL: "redis+cluster://" + cl.Addrs[0] + "?addr=" + cl.Addrs[1] + "&addr=" + cl.Addrs[2],
		AdminKey: strings.Repeat("k", MinAdminKeyLength), SecretKey: strings.Repeat("5e", 32)}
	st, err := openStores(ctx, cfg, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	fencer := st.runs.(runlease.Fencer)
	hold := func(key, runID string) (string, string) {
		l, err := st.runs.Acquire(ctx, key, runID)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Release(context.Background()) })
		return fencer.FenceKey(key), l.(runlease.Fenced).FenceValue()
	}

	chats := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"}
	groups := map[string][]string{} // what must share a slot → the text its keys hold
	for _, chat := range chats {
		key := agent.ThreadKey("user-"+chat, "demo", chat)
		runID := "run-" + chat
		fk, fv := hold(key, runID)
		th := &agent.Thread{Key: key, UserID: "user-" + chat, Updated: time.Now()}
		if ok, err := st.threads.(fencedThreads).PutThreadFenced(ctx, th, fk, fv); !ok || err != nil {
			t.Fatalf("chat %s: fenced thread save: %v %v", chat, ok, err)
		}
		if err := st.events.Open(ctx, runID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.events.Append(ctx, runID, stream.Start{}); err != nil {
			t.Fatal(err)
		}
		if err := st.events.Close(ctx, runID); err != nil {
			t.Fatal(err)
		}
		wf := &workflow.Run{ID: "wfr-" + chat, Workflow: "w", Status: workflow.StatusRunning, Started: time.Now()}
		wk, wv := hold(workflow.ClaimKey(wf.ID), wf.ID)
		if ok, err := st.workflowRuns.(fencedRuns).PutRunFenced(ctx, wf, wk, wv); !ok || err != nil {
			t.Fatalf("workflow run %s: fenced save: %v %v", wf.ID, ok, err)
		}
		rec, err := loop.NewStoredResult("demo.list", []byte(`{"items":[1]}`), "items")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.results.Put(ctx, "result-"+chat, rec, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		groups["chat "+chat] = []string{"thread:" + key, "lease:" + key}
		groups["run "+runID] = []string{"run:{" + runID + "}:"}
		groups["workflow run "+wf.ID] = []string{"wfrun:" + wf.ID, "lease:" + workflow.ClaimKey(wf.ID)}
		groups["result "+chat] = []string{"res:result-" + chat, "res-gone:result-" + chat}
	}

	// Every key of the deployment, with its slot and the master holding it.
	c := st.redis.(*redis.ClusterClient)
	type where struct {
		slot   int64
		master string
	}
	at := map[string]where{}
	var mu sync.Mutex // ForEachMaster asks the masters at once
	err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, DefaultRedisPrefix+"*").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			slot, err := node.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			mu.Lock()
			at[k] = where{slot, node.Options().Addr}
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]int64{} // a kind of group ("chat", "run", …) → the slot of each
	masters := map[string]bool{}
	for name, parts := range groups {
		var slots []int64
		found := map[string]bool{}
		for k, w := range at {
			for _, p := range parts {
				if strings.HasPrefix(k, DefaultRedisPrefix) && strings.Contains(k, p) {
					slots, found[p] = append(slots, w.slot), true
					masters[w.master] = true
				}
			}
		}
		for _, p := range parts {
			if !found[p] {
				t.Errorf("%s: no key holds %q", name, p)
			}
		}
		slices.Sort(slots)
		if slots = slices.Compact(slots); len(slots) != 1 {
			t.Errorf("%s: its keys are in slots %v, want one", name, slots)
			continue
		}
		kind, _, _ := strings.Cut(name, " ")
		if kind == "workflow" {
			kind = "workflow run"
		}
		kinds[kind] = append(kinds[kind], slots[0])
	}
	for kind, slots := range kinds {
		slices.Sort(slots)
		if n := len(slices.Compact(slots)); n != len(chats) {
			t.Errorf("the %d %ss share %d slots, want one each: %v", len(chats), kind, n, slots)
		}
	}
	if len(masters) < 2 {
		t.Errorf("every key is on %v: the deployment does not spread over the masters", masters)
	}
}
