package boltlog_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/boltlog"
)

// BenchmarkTurnLog is the event log's share of a turn: open, 300 text
// deltas, close, and one reader reading it whole — in memory (what the
// embedded default used before) and in bbolt with group commit.
func BenchmarkTurnLog(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, l stream.EventLog) {
		b.ReportAllocs()
		cpu0 := cpuTime()
		defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op") }()
		for i := range b.N {
			id := fmt.Sprint("run", i)
			if err := l.Open(ctx, id); err != nil {
				b.Fatal(err)
			}
			for range 300 {
				if _, err := l.Append(ctx, id, stream.TextDelta{ID: "t", Delta: "a few words "}); err != nil {
					b.Fatal(err)
				}
			}
			if err := l.Close(ctx, id); err != nil {
				b.Fatal(err)
			}
			for _, err := range l.Read(ctx, id, 0) {
				if err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("memory", func(b *testing.B) { run(b, stream.NewMemoryLog(stream.MemoryLogOptions{})) })
	b.Run("bbolt", func(b *testing.B) {
		db := openDB(b, filepath.Join(b.TempDir(), "log.db"))
		defer db.Close()
		l, err := boltlog.New(db, boltlog.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Shutdown()
		run(b, l)
	})
}

// cpuTime is the process's CPU time so far (user + system), in ns: the
// log's cost, whatever its waits for the disk.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
