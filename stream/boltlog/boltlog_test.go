package boltlog_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/boltlog"
	"github.com/trawl-dev/trawl/stream/eventlogtest"
	bolt "go.etcd.io/bbolt"
)

func openDB(t testing.TB, path string) *bolt.DB {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestLogConforms(t *testing.T) {
	eventlogtest.Run(t, func(t *testing.T, o eventlogtest.Options) stream.EventLog {
		db := openDB(t, filepath.Join(t.TempDir(), "log.db"))
		l, err := boltlog.New(db, boltlog.Options{MaxRunBytes: o.MaxRunBytes, Retention: o.Retention})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := l.Shutdown(); err != nil {
				t.Error(err)
			}
			db.Close()
		})
		return l
	})
}

// TestRestart: a process that stops (after Shutdown, or once Sync
// answered) leaves its runs to the next one: the open run reads back
// whole and is Recovered, appends go on after its last event with no
// gap, and a reader that resumes from any event of the first process
// reads on from there; the closed run stays readable, and ends.
func TestRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	db := openDB(t, path)
	l, err := boltlog.New(db, boltlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"open", "closed"} {
		if err := l.Open(ctx, id); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"a", "b", "c"} {
			if _, err := l.Append(ctx, id, stream.TextDelta{ID: "t", Delta: d}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := l.Close(ctx, "closed"); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(); err != nil {
		t.Fatal(err)
	}
	db.Close()

	db = openDB(t, path)
	defer db.Close()
	l, err = boltlog.New(db, boltlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown()
	if diff := cmp.Diff([]string{"open"}, l.Recovered()); diff != "" {
		t.Errorf("recovered runs (-want +got):\n%s", diff)
	}
	st, err := l.Stat(ctx, "open")
	if err != nil || st != (stream.RunState{LastSeq: 3}) {
		t.Fatalf("the open run after the restart: %+v %v", st, err)
	}
	seq, err := l.Append(ctx, "open", stream.TextDelta{ID: "t", Delta: "d"})
	if err != nil || seq != 4 {
		t.Fatalf("appending after the restart: %d %v", seq, err)
	}
	if err := l.Close(ctx, "open"); err != nil {
		t.Fatal(err)
	}
	for after := int64(0); after <= 4; after++ {
		_, got, err := eventlogtest.ReadAll(ctx, l, "open", after)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range []string{"a", "b", "c", "d"}[after:] {
			b, _ := stream.Encode(stream.TextDelta{ID: "t", Delta: d})
			want = append(want, string(b))
		}
		if !slices.Equal(got, want) {
			t.Errorf("resumed after %d: %q, want %q", after, got, want)
		}
	}
	_, got, err := eventlogtest.ReadAll(ctx, l, "closed", 1)
	if err != nil || len(got) != 2 {
		t.Errorf("the closed run after the restart: %q %v", got, err)
	}
	if _, err := l.Append(ctx, "closed", stream.TextDelta{ID: "t", Delta: "x"}); !errors.Is(err, stream.ErrRunClosed) {
		t.Errorf("appending to the closed run after the restart: %v", err)
	}
}

// TestRetentionAcrossRestart: a closed run whose retention passed while
// the process was stopped is gone at the next start, and from the file.
func TestRetentionAcrossRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	db := openDB(t, path)
	l, err := boltlog.New(db, boltlog.Options{Retention: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	if err := l.Shutdown(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	time.Sleep(60 * time.Millisecond)
	db = openDB(t, path)
	defer db.Close()
	l, err = boltlog.New(db, boltlog.Options{Retention: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown()
	if _, err := l.Stat(ctx, "r"); !errors.Is(err, stream.ErrRunNotFound) {
		t.Errorf("an expired run after the restart: %v", err)
	}
	var buckets int
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("event_log")).ForEachBucket(func([]byte) error { buckets++; return nil })
	})
	if buckets != 0 {
		t.Errorf("%d runs left in the file", buckets)
	}
}

// TestShutdownWrites: what was appended before Shutdown is in the file,
// though nobody called Sync.
func TestShutdownWrites(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "log.db")
	db := openDB(t, path)
	l, err := boltlog.New(db, boltlog.Options{Interval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := l.Append(ctx, "r", stream.TextDelta{ID: "t", Delta: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Shutdown(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openDB(t, path)
	defer db.Close()
	l, err = boltlog.New(db, boltlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Shutdown()
	if st, err := l.Stat(ctx, "r"); err != nil || st.LastSeq != 100 {
		t.Errorf("after the restart: %+v %v", st, err)
	}
}
