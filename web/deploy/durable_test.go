package deploy

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/runlease"
	bolt "go.etcd.io/bbolt"
)

// TestPoisonRunEnds: a run whose process died again after it was
// continued MaxTakeovers times is not continued once more: its stream
// ends with an error chunk saying so, its record is dropped, and its
// continuer is never called; a run continued fewer times is continued.
func TestPoisonRunEnds(t *testing.T) {
	ctx := context.Background()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	records, err := newBoltRecords(db, "run_records")
	if err != nil {
		t.Fatal(err)
	}
	events := stream.NewMemoryLog(stream.MemoryLogOptions{})
	for _, rec := range []RunRecord{
		{Key: "poison", RunID: "run-poison", Kind: KindTurn, Takeovers: MaxTakeovers, Started: time.Now()},
		{Key: "fine", RunID: "run-fine", Kind: KindTurn, Takeovers: MaxTakeovers - 1, Started: time.Now()},
	} {
		if err := events.Open(ctx, rec.RunID); err != nil {
			t.Fatal(err)
		}
		if _, err := events.Append(ctx, rec.RunID, stream.Start{MessageID: "m"}); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(rec)
		if err := records.Put(ctx, rec.Key, b); err != nil {
			t.Fatal(err)
		}
	}
	h := newRunHost(ctx, runHostOptions{Registry: runlease.NewMemory(), Events: events, Records: records, Lease: time.Second})
	continued := make(chan RunRecord, 2)
	h.Continue(map[string]Continuer{KindTurn: func(_ context.Context, _ *Run, rec RunRecord, how Continuation) (func(context.Context), error) {
		continued <- rec
		return func(context.Context) {}, nil
	}})
	defer h.StopAll()

	var types, texts []string
	for ev, err := range events.Read(ctx, "run-poison", 0) {
		if err != nil {
			t.Fatal(err)
		}
		c, _ := stream.ParseChunk(ev.Data)
		types = append(types, c.Type())
		if e, ok := c.(stream.Error); ok {
			texts = append(texts, e.ErrorText)
		}
	}
	if len(types) != 2 || types[1] != "error" || !strings.Contains(texts[0], "continued 3 times") {
		t.Errorf("the poison run's log: %v %q; want start, then an error chunk saying it was continued 3 times", types, texts)
	}
	if _, ok, _ := records.Get(ctx, "poison"); ok {
		t.Error("the poison run's record is kept")
	}
	select {
	case rec := <-continued:
		if rec.RunID != "run-fine" || rec.Takeovers != MaxTakeovers {
			t.Errorf("continued %s after %d takeovers; want run-fine, its %dth", rec.RunID, rec.Takeovers, MaxTakeovers)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run continued fewer times was not continued")
	}
	select {
	case rec := <-continued:
		t.Errorf("%s was continued too", rec.RunID)
	default:
	}
}
