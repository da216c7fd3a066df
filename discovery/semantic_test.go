package discovery

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// fakeEmbedder embeds a text as the bag of its words' concepts: words
// of one concept (refund, reimburse, money back) share a dimension, so
// texts that say the same thing in other words come out close, as with a
// real model. fail, when set, fails every call.
type fakeEmbedder struct {
	mu    sync.Mutex
	calls int
	texts int
	fail  error
}

const fakeDims = 1024

var fakeConcepts = map[string]string{
	"reimburse": "refund", "reimbursement": "refund", "refund": "refund", "money": "refund",
	"holiday": "vacation", "vacation": "vacation", "away": "vacation", "responder": "vacation",
}

func (f *fakeEmbedder) Embed(_ context.Context, texts []string) ([][]float32, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return nil, f.fail
	}
	f.texts += len(texts)
	out := make([][]float32, len(texts))
	for i, t := range texts {
		v := make([]float32, fakeDims)
		for _, w := range strings.Fields(strings.ToLower(splitIdentifiers(t))) {
			if c, ok := fakeConcepts[w]; ok {
				w = c
			}
			h := fnv.New32a()
			h.Write([]byte(w))
			v[h.Sum32()%fakeDims]++
		}
		out[i] = v
	}
	return out, nil
}

func (f *fakeEmbedder) set(err error) {
	f.mu.Lock()
	f.fail = err
	f.mu.Unlock()
}

func (f *fakeEmbedder) counts() (calls, texts int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.texts
}

// logBuffer is a slog logger writing to a buffer, safe for the
// background fill to write while the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

func newSemanticTestIndex(t *testing.T, sem *Semantic) *Index {
	t.Helper()
	ix, err := NewIndexWith(allDemoTools(t), IndexOptions{Semantic: sem})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	ix.SemanticReady(t.Context()) // its error is the log's; tests look there
	return ix
}

// Semantic ranking finds a tool described in other words than the
// query's, and says so in the why line.
func TestSemanticFindsOtherWords(t *testing.T) {
	plain := demoIndex(t)
	ix := newSemanticTestIndex(t, &Semantic{Embedder: &fakeEmbedder{}, Model: "fake"})
	const q = "holiday autoresponder"
	hits, err := ix.Search(t.Context(), q, "", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || !strings.Contains(hits[0].Tool.Name, "VACATION") {
		t.Fatalf("Search(%q) = %v, want a vacation tool first", q, hitNames(hits))
	}
	if !strings.Contains(hits[0].Why, "close in meaning") {
		t.Errorf("why = %q, want it to say close in meaning", hits[0].Why)
	}
	// "reimburse" is no word of any demo tool: BM25 finds nothing, fusion
	// still answers from the semantic ranking.
	if got, _ := plain.Search(t.Context(), "reimburse", "", 5); len(got) != 0 {
		t.Fatalf("BM25 alone found %v for a word no tool has", hitNames(got))
	}
	if got, err := ix.Search(t.Context(), "reimburse", "", 5); err != nil || len(got) == 0 || got[0].Why != "close in meaning (no words in common)" {
		t.Errorf("semantic Search(reimburse) = %v, %v; want hits that say they are close in meaning", got, err)
	}
	// The toolkit filter holds for the semantic ranking too.
	got, err := ix.Search(t.Context(), "holiday", "crm", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range got {
		if h.Tool.Toolkit != "crm" {
			t.Errorf("toolkit crm: got %s", h.Tool.Name)
		}
	}
}

// A failing endpoint at build time leaves a BM25 index that answers as
// a plain one does, logs the failure, and tries again (in the
// background) once RetryAfter has passed.
func TestSemanticDegradesAndRecovers(t *testing.T) {
	var logs logBuffer
	emb := &fakeEmbedder{fail: errors.New("connection refused")}
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	ix := newSemanticTestIndex(t, &Semantic{Embedder: emb, Model: "fake", Logger: logs.logger(), RetryAfter: time.Minute, Now: clock})
	plain := demoIndex(t)
	if !strings.Contains(logs.String(), "searching with BM25 alone") || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("log = %q, want the failure and the fallback", logs.String())
	}
	for _, q := range []string{"set an out-of-office reply", "reimburse", "archive this conversation"} {
		got, err := ix.Search(t.Context(), q, "", 5)
		if err != nil {
			t.Fatalf("Search(%q) with a failing endpoint: %v", q, err)
		}
		want, _ := plain.Search(t.Context(), q, "", 5)
		if diff := cmp.Diff(hitNames(want), hitNames(got)); diff != "" {
			t.Errorf("Search(%q) with a failing endpoint differs from BM25 (-want +got):\n%s", q, diff)
		}
	}
	if calls, _ := emb.counts(); calls != 1 {
		t.Errorf("%d embeddings calls before the retry interval, want 1 (the build's)", calls)
	}

	emb.set(nil)
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	ix.Search(t.Context(), "reimburse", "", 5) // starts the background fill
	if err := ix.SemanticReady(t.Context()); err != nil {
		t.Fatalf("the retry failed: %v", err)
	}
	got, err := ix.Search(t.Context(), "reimburse", "", 5)
	if err != nil || len(got) == 0 {
		t.Errorf("after recovery Search(reimburse) = %v, %v; want semantic hits", got, err)
	}
}

// A query that cannot be embedded is answered by BM25, with a log line.
func TestSemanticQueryFailure(t *testing.T) {
	var logs logBuffer
	emb := &fakeEmbedder{}
	ix := newSemanticTestIndex(t, &Semantic{Embedder: emb, Model: "fake", Logger: logs.logger()})
	emb.set(errors.New("HTTP 503"))
	got, err := ix.SearchTool(t.Context(), []byte(`{"query":"set an out-of-office reply"}`), nil)
	if err != nil {
		t.Fatalf("SearchTool with a failing query embedding: %v", err)
	}
	if !bytes.Contains(got, []byte("MAIL_UPDATE_VACATION_SETTINGS")) {
		t.Errorf("answer %s, want the BM25 result", got)
	}
	if !strings.Contains(logs.String(), "embedding the query failed") {
		t.Errorf("log = %q, want the query failure", logs.String())
	}
}

// Tool vectors are cached by text: a second index over the same tools
// embeds nothing but queries, even after the store is reopened; a
// cache of another model is not used.
func TestSemanticCache(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trawl.db")
	open := func() (*bolt.DB, *BoltVectors) {
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewBoltVectors(db, 0)
		if err != nil {
			t.Fatal(err)
		}
		return db, c
	}
	db, cache := open()
	first := &fakeEmbedder{}
	newSemanticTestIndex(t, &Semantic{Embedder: first, Model: "fake", Cache: cache})
	n := len(allDemoTools(t))
	if _, texts := first.counts(); texts != n {
		t.Fatalf("first index embedded %d texts, want %d", texts, n)
	}
	db.Close()

	db, cache = open()
	defer db.Close()
	second := &fakeEmbedder{}
	ix := newSemanticTestIndex(t, &Semantic{Embedder: second, Model: "fake", Cache: cache})
	if calls, _ := second.counts(); calls != 0 {
		t.Errorf("second index made %d embeddings calls, want 0 (all cached)", calls)
	}
	if hits, _ := ix.Search(t.Context(), "reimburse", "", 3); len(hits) == 0 {
		t.Error("no semantic hits from cached vectors")
	}
	other := &fakeEmbedder{}
	newSemanticTestIndex(t, &Semantic{Embedder: other, Model: "another-model", Cache: cache})
	if _, texts := other.counts(); texts != n {
		t.Errorf("another model embedded %d texts, want %d (its own vectors)", texts, n)
	}
}

func TestBoltVectorsBound(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "v.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c, err := NewBoltVectors(db, 3)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if err := c.PutVectors(ctx, map[string][]float32{k: {1, -2.5, float32(len(k))}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PutVectors(ctx, map[string][]float32{"c": {9}}); err != nil { // rewriting makes c the newest
		t.Fatal(err)
	}
	if err := c.PutVectors(ctx, map[string][]float32{"f": {7}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.Vectors(ctx, []string{"a", "b", "c", "d", "e", "f"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float32{"c": {9}, "e": {1, -2.5, 1}, "f": {7}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}

// A semantic index needs an embedder.
func TestSemanticNeedsEmbedder(t *testing.T) {
	if _, err := NewIndexWith(allDemoTools(t), IndexOptions{Semantic: &Semantic{Model: "m"}}); err == nil {
		t.Error("NewIndexWith without an Embedder: no error")
	}
}

// fuse: a tool both rankings agree on beats one that tops only one.
func TestFuse(t *testing.T) {
	ts := allDemoTools(t)[:4]
	lexical := []Hit{{Tool: ts[0]}, {Tool: ts[1]}, {Tool: ts[2]}}
	got := fuse(lexical, []int{3, 1, 0}, ts)
	if diff := cmp.Diff([]string{ts[0].Name, ts[1].Name, ts[3].Name, ts[2].Name}, hitNames(got)); diff != "" {
		t.Errorf("fused (-want +got):\n%s", diff)
	}
}

// An index of no tools with semantic ranking answers nothing, without
// calling the embedder for the query.
func TestSemanticEmpty(t *testing.T) {
	emb := &fakeEmbedder{}
	ix, err := NewIndexWith(nil, IndexOptions{Semantic: &Semantic{Embedder: emb, Model: "fake"}})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.SemanticReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if hits, err := ix.Search(t.Context(), "anything", "", 5); err != nil || len(hits) != 0 {
		t.Errorf("Search over no tools = %v, %v", hits, err)
	}
}
