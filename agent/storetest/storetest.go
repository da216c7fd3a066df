// Package storetest is the conformance suite of agent.ThreadStore (with
// its Retention contract), agent.DefinitionStore (Run),
// agent.ApprovalStore (RunApprovals) and workflow.RunStore (with its
// RunRetention contract; RunRuns): the embedded bbolt stores and the
// Redis ones run it, so they behave the same.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/agent"
)

// Store is what a deployment keeps agents' state in.
type Store interface {
	agent.ThreadStore
	agent.DefinitionStore
	agent.ThreadLister
	// Prune deletes the threads not updated within Retention.MaxAge and
	// reports how many.
	Prune(ctx context.Context) (int, error)
}

// New returns a fresh, empty store with ret, for t alone.
type New func(t *testing.T, ret agent.Retention) Store

// Run runs the suite.
func Run(t *testing.T, newStore New) {
	t.Run("ThreadRoundTrip", func(t *testing.T) { roundTrip(t, newStore) })
	t.Run("ThreadsPerUser", func(t *testing.T) { threadsPerUser(t, newStore) })
	t.Run("ThreadBytes", func(t *testing.T) { threadBytes(t, newStore) })
	t.Run("MaxAge", func(t *testing.T) { maxAge(t, newStore) })
	t.Run("ConcurrentPuts", func(t *testing.T) { concurrentPuts(t, newStore) })
	t.Run("Definitions", func(t *testing.T) { definitions(t, newStore) })
	t.Run("ListThreads", func(t *testing.T) { listThreads(t, newStore) })
}

func textMsg(id string, role agent.Role, text string) agent.UIMessage {
	return agent.UIMessage{ID: id, Role: role, Parts: []agent.Part{{Type: "text", Text: text}}}
}

func chatIDs(t *testing.T, s Store, user string, chats []string) []string {
	t.Helper()
	var kept []string
	for _, c := range chats {
		_, err := s.GetThread(context.Background(), agent.ThreadKey(user, "a", c))
		switch {
		case err == nil:
			kept = append(kept, c)
		case !errors.Is(err, agent.ErrNotFound):
			t.Fatal(err)
		}
	}
	return kept
}

func roundTrip(t *testing.T, newStore New) {
	s := newStore(t, agent.Retention{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	th := &agent.Thread{Key: agent.ThreadKey("u", "a", "c"), ChatID: "c", AgentID: "a", UserID: "u",
		Msgs: []agent.UIMessage{textMsg("m1", agent.RoleUser, "hello")}, Loaded: []string{"acme.list"},
		Results: []agent.KeptResult{{ID: "r1", Expires: at.Add(time.Hour)}}, Created: at, Updated: at}
	if err := s.PutThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetThread(ctx, th.Key)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(th)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Errorf("round trip:\n got %s\nwant %s", b, a)
	}
	for _, k := range []string{agent.ThreadKey("v", "a", "c"), agent.ThreadKey("u", "b", "c"), agent.ThreadKey("u", "a", "d")} {
		if _, err := s.GetThread(ctx, k); !errors.Is(err, agent.ErrNotFound) {
			t.Errorf("GetThread %q: %v, want ErrNotFound", k, err)
		}
	}
}

// threadsPerUser: a user's new thread beyond the bound deletes their
// least recently updated ones, and nobody else's — not even a user whose
// id extends theirs.
func threadsPerUser(t *testing.T, newStore New) {
	s := newStore(t, agent.Retention{MaxThreadsPerUser: 3})
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(user, chat string, at time.Duration) {
		t.Helper()
		th := &agent.Thread{Key: agent.ThreadKey(user, "a", chat), ChatID: chat, AgentID: "a", UserID: user, Updated: base.Add(at)}
		if err := s.PutThread(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	for i, user := range []string{"u", "u;x", "u%3Bx", ""} {
		for c := range 3 {
			put(user, fmt.Sprintf("c%d", c), time.Duration(i*10+c)*time.Minute)
		}
	}
	put("u", "c0", time.Hour) // c0 is now u's newest: updating prunes nothing
	put("u", "c3", 2*time.Hour)
	put("u", "c4", 3*time.Hour)
	all := []string{"c0", "c1", "c2", "c3", "c4"}
	if got, want := chatIDs(t, s, "u", all), []string{"c0", "c3", "c4"}; !slices.Equal(got, want) {
		t.Errorf("u keeps %v; want %v", got, want)
	}
	for _, other := range []string{"u;x", "u%3Bx", ""} {
		if got := chatIDs(t, s, other, all); len(got) != 3 {
			t.Errorf("user %q keeps %v; want its 3 threads untouched", other, got)
		}
	}
}

// threadBytes: a stored thread over the byte bound loses its oldest
// turns, cut at a user message; the newest turn stays whole even alone
// over the bound; the caller's thread is not changed.
func threadBytes(t *testing.T, newStore New) {
	const limit = 64 << 10
	s := newStore(t, agent.Retention{MaxThreadBytes: limit})
	ctx := context.Background()
	th := &agent.Thread{Key: agent.ThreadKey("u", "a", "big"), UserID: "u", AgentID: "a"}
	for i := range 20 {
		th.Msgs = append(th.Msgs,
			textMsg(fmt.Sprintf("q%d", i), agent.RoleUser, "question"),
			textMsg(fmt.Sprintf("a%d", i), agent.RoleAssistant, strings.Repeat("x", 5000)),
			textMsg(fmt.Sprintf("b%d", i), agent.RoleAssistant, strings.Repeat("y", 1000)))
	}
	if err := s.PutThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if len(th.Msgs) != 60 {
		t.Fatalf("the caller's thread changed: %d messages", len(th.Msgs))
	}
	got, err := s.GetThread(ctx, th.Key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(got)
	if len(b) > limit {
		t.Errorf("stored thread is %d bytes; limit %d", len(b), limit)
	}
	if got.Msgs[0].Role != agent.RoleUser || got.Msgs[len(got.Msgs)-1].ID != "b19" {
		t.Errorf("stored thread runs %s … %s; want a user message first and the newest last", got.Msgs[0].ID, got.Msgs[len(got.Msgs)-1].ID)
	}
	if n := len(got.Msgs); n%3 != 0 || n < 3*8 {
		t.Errorf("stored %d messages: want whole turns, as many as fit (at least 8)", n)
	}
	huge := &agent.Thread{Key: agent.ThreadKey("u", "a", "huge"), UserID: "u", Msgs: []agent.UIMessage{
		textMsg("q0", agent.RoleUser, "old"), textMsg("a0", agent.RoleAssistant, "old answer"),
		textMsg("q1", agent.RoleUser, "new"), textMsg("a1", agent.RoleAssistant, strings.Repeat("z", 2*limit))}}
	if err := s.PutThread(ctx, huge); err != nil {
		t.Fatal(err)
	}
	got, _ = s.GetThread(ctx, huge.Key)
	if len(got.Msgs) != 2 || got.Msgs[0].ID != "q1" || len(got.Msgs[1].Parts[0].Text) != 2*limit {
		t.Errorf("an oversized newest turn: stored %d messages", len(got.Msgs))
	}
}

// maxAge: Prune deletes the threads not updated within MaxAge, by the
// injected clock.
func maxAge(t *testing.T, newStore New) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	s := newStore(t, agent.Retention{MaxAge: 30 * 24 * time.Hour, Now: func() time.Time { return now }})
	ctx := context.Background()
	for chat, age := range map[string]time.Duration{"old": 31 * 24 * time.Hour, "older": 300 * 24 * time.Hour, "fresh": 29 * 24 * time.Hour, "new": 0} {
		if err := s.PutThread(ctx, &agent.Thread{Key: agent.ThreadKey("u", "a", chat), UserID: "u", Updated: now.Add(-age)}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.Prune(ctx)
	if err != nil || n != 2 {
		t.Errorf("Prune = %d, %v; want 2", n, err)
	}
	if got, want := chatIDs(t, s, "u", []string{"older", "old", "fresh", "new"}), []string{"fresh", "new"}; !slices.Equal(got, want) {
		t.Errorf("kept %v; want %v", got, want)
	}
	if n, _ := s.Prune(ctx); n != 0 {
		t.Errorf("a second Prune deleted %d", n)
	}
	// A pruned thread no longer counts against its user's bound.
	if err := s.PutThread(ctx, &agent.Thread{Key: agent.ThreadKey("u", "a", "old"), UserID: "u", Updated: now}); err != nil {
		t.Fatal(err)
	}
	if got := chatIDs(t, s, "u", []string{"old", "fresh", "new"}); len(got) != 3 {
		t.Errorf("kept %v after putting a pruned thread again", got)
	}
}

func concurrentPuts(t *testing.T, newStore New) {
	s := newStore(t, agent.Retention{MaxThreadsPerUser: 10})
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 15 {
				th := &agent.Thread{Key: agent.ThreadKey("u", "a", fmt.Sprintf("c%d-%d", w, i)), UserID: "u",
					Updated: base.Add(time.Duration(w*100+i) * time.Second)}
				if err := s.PutThread(ctx, th); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	var all []string
	for w := range 6 {
		for i := range 15 {
			all = append(all, fmt.Sprintf("c%d-%d", w, i))
		}
	}
	if got := chatIDs(t, s, "u", all); len(got) != 10 {
		t.Errorf("concurrent new threads: %d kept, want exactly the bound, 10", len(got))
	}
}

func definitions(t *testing.T, newStore New) {
	s := newStore(t, agent.Retention{})
	ctx := context.Background()
	if defs, err := s.ListDefinitions(ctx); err != nil || len(defs) != 0 {
		t.Fatalf("empty store lists %v, %v", defs, err)
	}
	for _, id := range []string{"b", "a", "c"} {
		if err := s.PutDefinition(ctx, agent.Definition{ID: id, Name: "Agent " + id, MaxSteps: 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.PutDefinition(ctx, agent.Definition{ID: "a", Name: "changed"}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDefinition(ctx, "from-config"); err != nil {
		t.Fatal(err)
	}
	defs, err := s.ListDefinitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range defs {
		got = append(got, fmt.Sprintf("%s:%s:%v", d.ID, d.Name, d.Deleted))
	}
	want := []string{"a:changed:false", "b:Agent b:false", "c::true", "from-config::true"}
	if !slices.Equal(got, want) {
		t.Errorf("definitions %v, want %v (sorted by id; deletions kept as tombstones)", got, want)
	}
}

// listThreads: a user's threads with one agent, newest first, at most
// limit; never another user's (even one whose id is a prefix) or another
// agent's.
func listThreads(t *testing.T, newStore New) {
	s := newStore(t, agent.Retention{})
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	put := func(user, ag, chat string, minute int) {
		th := &agent.Thread{Key: agent.ThreadKey(user, ag, chat), ChatID: chat, AgentID: ag, UserID: user,
			Created: at, Updated: at.Add(time.Duration(minute) * time.Minute)}
		if err := s.PutThread(ctx, th); err != nil {
			t.Fatal(err)
		}
	}
	put("ann", "a", "old", 1)
	put("ann", "a", "new", 3)
	put("ann", "a", "mid", 2)
	put("ann", "b", "other-agent", 4)
	put("anne", "a", "prefix-user", 5)
	put("bob", "a", "other-user", 6)
	got, err := s.ListThreads(ctx, "ann", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	var chats []string
	for _, th := range got {
		chats = append(chats, th.ChatID)
	}
	if fmt.Sprint(chats) != "[new mid old]" {
		t.Fatalf("ListThreads(ann, a) = %v, want [new mid old]", chats)
	}
	if got, _ := s.ListThreads(ctx, "ann", "a", 2); len(got) != 2 || got[0].ChatID != "new" {
		t.Fatalf("limit 2: %d threads", len(got))
	}
	if got, _ := s.ListThreads(ctx, "nobody", "a", 0); len(got) != 0 {
		t.Fatalf("a user with no threads lists %d", len(got))
	}
}
