package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/agent/redisstore"
	"github.com/trawl-dev/trawl/agent/storetest"
	"github.com/trawl-dev/trawl/agent/workflow"
	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/runlease"
	"github.com/trawl-dev/trawl/web/runlease/redislease"
)

func TestStoreConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		storetest.Run(t, func(t *testing.T, ret agent.Retention) storetest.Store {
			n++
			return redisstore.New(c, fmt.Sprintf("t%d:", n), ret)
		})
	})
}

func TestApprovalsConform(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		storetest.RunApprovals(t, func(t *testing.T) agent.ApprovalStore {
			n++
			return redisstore.NewApprovals(c, fmt.Sprintf("a%d:", n))
		})
	})
}

// An edit on one replica applies on another from its next read.
func TestReplicasShare(t *testing.T) {
	c := redistest.Start(t).Client(t)
	a, b := redisstore.New(c, "p:", agent.Retention{}), redisstore.New(c, "p:", agent.Retention{})
	ctx := context.Background()
	if err := a.PutDefinition(ctx, agent.Definition{ID: "x", Name: "on A"}); err != nil {
		t.Fatal(err)
	}
	defs, err := b.ListDefinitions(ctx)
	if err != nil || len(defs) != 1 || defs[0].Name != "on A" {
		t.Fatalf("B lists %v, %v", defs, err)
	}
	th := &agent.Thread{Key: agent.ThreadKey("u", "x", "c"), UserID: "u", Updated: time.Now()}
	if err := a.PutThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetThread(ctx, th.Key); err != nil {
		t.Fatal(err)
	}
	other := redisstore.New(c, "q:", agent.Retention{})
	if _, err := other.GetThread(ctx, th.Key); !errors.Is(err, agent.ErrNotFound) {
		t.Fatalf("another prefix sees the thread: %v", err)
	}
}

func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	s := redisstore.New(srv.Client(t), "", agent.Retention{})
	ctx := context.Background()
	th := &agent.Thread{Key: agent.ThreadKey("u", "x", "c"), UserID: "u", Updated: time.Now()}
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.PutThread(short, th); err == nil {
		t.Error("PutThread with Redis down: no error")
	}
	if _, err := s.GetThread(short, th.Key); err == nil || errors.Is(err, agent.ErrNotFound) {
		t.Errorf("GetThread with Redis down: %v, want a Redis error, not ErrNotFound", err)
	}
	if _, err := s.ListDefinitions(short); err == nil {
		t.Error("ListDefinitions with Redis down: no error")
	}
	srv.Restart(t)
	if err := s.PutThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(ctx, th.Key); err != nil {
		t.Fatal(err)
	}
}

// Two registries on one Redis (two replicas): a put, a patch and a delete
// on A are seen by B's next Sync, and a file definition B was started
// with stays under the stored ones.
func TestRegistriesSyncAcrossReplicas(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	file := []agent.Definition{{ID: "filed", Name: "from the file", Model: "m"}}
	a, err := agent.NewRegistry(ctx, file, redisstore.New(c, "p:", agent.Retention{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := agent.NewRegistry(ctx, file, redisstore.New(c, "p:", agent.Retention{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, agent.Definition{ID: "x", Name: "v1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Get("x"); ok {
		t.Fatal("B saw the put before it synced (the test proves nothing)")
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, ok := b.Get("x"); !ok || d.Name != "v1" {
		t.Fatalf("B after Sync: %+v %v", d, ok)
	}
	if d, ok := b.Get("filed"); !ok || d.Name != "from the file" {
		t.Fatalf("the file's agent is gone after a Sync: %+v %v", d, ok)
	}
	if err := a.Put(ctx, agent.Definition{ID: "x", Name: "v2", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "filed"); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := b.Get("x"); d.Name != "v2" {
		t.Fatalf("B has %q after the second put", d.Name)
	}
	if _, ok := b.Get("filed"); ok {
		t.Fatal("a delete on A did not apply on B")
	}
}

// Patches of one agent from two replicas at once all land: each is a
// read-modify-write, and a write that lost the race reads again.
func TestConcurrentPatchesAcrossReplicas(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	var tools []agent.Binding
	for i := range 12 {
		tools = append(tools, agent.Binding{ToolID: fmt.Sprintf("p.t%d", i), ProviderID: "p"})
	}
	file := []agent.Definition{{ID: "x", Name: "x", Model: "m", AgentTools: tools}}
	var regs []*agent.Registry
	for range 2 {
		r, err := agent.NewRegistry(ctx, file, redisstore.New(c, "p:", agent.Retention{}), nil)
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	on := true
	errs := make(chan error, len(tools))
	for i, b := range tools {
		go func() {
			_, err := regs[i%2].PatchBinding(ctx, "x", b.ToolID, func(string) string { return "" }, agent.BindingPatch{LoopResponses: &on})
			errs <- err
		}()
	}
	for range tools {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range regs {
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		d, _ := r.Get("x")
		for _, b := range d.AgentTools {
			if !b.LoopResponses {
				t.Fatalf("the patch of %s was lost", b.ToolID)
			}
		}
	}
}

// A fenced write lands only while the fence key holds the writer's value,
// checked in the write's own script.
// claim acquires key for runID in the real run registry: the fence key
// and value a fenced put is given (on a cluster the fence key is in the
// thread's or run's slot, or the put's script would fail CROSSSLOT).
func claim(t *testing.T, reg *redislease.Registry, key, runID string) (fenceKey, fenceValue string, l runlease.Lease) {
	t.Helper()
	l, err := reg.Acquire(context.Background(), key, runID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Release(context.Background()) })
	return reg.FenceKey(key), l.(runlease.Fenced).FenceValue(), l
}

func TestPutThreadFenced(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		ctx := context.Background()
		s := redisstore.New(c, "p:", agent.Retention{})
		reg := redislease.New(c, "p:", 0)
		t.Cleanup(func() { reg.Close() })
		th := &agent.Thread{Key: agent.ThreadKey("u", "a", "c"), UserID: "u", Updated: time.Now(),
			Msgs: []agent.UIMessage{{ID: "m1", Role: agent.RoleUser, Parts: []agent.Part{{Type: "text", Text: "first"}}}}}
		fk, fv, l := claim(t, reg, th.Key, "run-1")
		if written, err := s.PutThreadFenced(ctx, th, fk, fv); !written || err != nil {
			t.Fatalf("the holder's write: %v %v", written, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		stale := *th
		stale.Msgs = append([]agent.UIMessage(nil), th.Msgs...)
		stale.Msgs[0].Parts = []agent.Part{{Type: "text", Text: "stale"}}
		if written, err := s.PutThreadFenced(ctx, &stale, fk, fv); written || err != nil {
			t.Fatalf("a write with no claim: %v %v, want it refused", written, err)
		}
		claim(t, reg, th.Key, "run-2") // another run holds the chat now
		if written, err := s.PutThreadFenced(ctx, &stale, fk, fv); written || err != nil {
			t.Fatalf("a write after the claim moved on: %v %v, want it refused", written, err)
		}
		got, err := s.GetThread(ctx, th.Key)
		if err != nil || got.Msgs[0].Text() != "first" {
			t.Fatalf("the thread is %v (%v); the fenced writes must not have landed", got.Msgs, err)
		}
	})
}

func TestRunsConform(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		storetest.RunRuns(t, func(t *testing.T, ret workflow.RunRetention) workflow.RunStore {
			n++
			return redisstore.NewRuns(c, fmt.Sprintf("r%d:", n), ret)
		})
	})
}

// A run's fenced put writes only while the fence key holds the run's
// claim, in the write's own script.
func TestRunsPutFenced(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		s := redisstore.NewRuns(c, "p:", workflow.RunRetention{})
		reg := redislease.New(c, "p:", 0)
		t.Cleanup(func() { reg.Close() })
		ctx := context.Background()
		run := &workflow.Run{ID: "wfr_1", Workflow: "w", Status: workflow.StatusRunning, Started: time.Now()}
		if err := s.PutRun(ctx, run); err != nil {
			t.Fatal(err)
		}
		fk, fv, l := claim(t, reg, workflow.ClaimKey(run.ID), run.ID)
		done := *run
		done.Status = workflow.StatusDone
		if ok, err := s.PutRunFenced(ctx, &done, fk, fv); !ok || err != nil {
			t.Fatalf("a put holding the claim: %v %v", ok, err)
		}
		stopped := *run
		stopped.Status = workflow.StatusStopped
		if ok, err := s.PutRunFenced(ctx, &stopped, fk, fv+"x"); ok || err != nil {
			t.Fatalf("a put without the claim: %v %v", ok, err)
		}
		if err := l.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if ok, err := s.PutRunFenced(ctx, &stopped, fk, fv); ok || err != nil {
			t.Fatalf("a put on a claim that is gone: %v %v", ok, err)
		}
		if got, err := s.GetSummary(ctx, "wfr_1"); err != nil || got.Status != workflow.StatusDone {
			t.Errorf("after the refused puts: %+v %v, want done", got, err)
		}
	})
}
