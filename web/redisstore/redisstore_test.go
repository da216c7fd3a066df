package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/web/redisstore"
)

func TestBucket(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		ctx := context.Background()
		a := redisstore.NewBucket(c, "p:", "workflows")
		b := redisstore.NewBucket(c, "p:", "workflow_runs")
		other := redisstore.NewBucket(c, "q:", "workflows")
		for i := range 1200 { // more than one HSCAN batch
			if err := a.Put(ctx, fmt.Sprintf("w%04d", i), fmt.Appendf(nil, `{"n":%d}`, i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := a.Put(ctx, "w0001", []byte("\x00binary\xff")); err != nil {
			t.Fatal(err)
		}
		if v, ok, err := a.Get(ctx, "w0001"); err != nil || !ok || string(v) != "\x00binary\xff" {
			t.Fatalf("Get: %q %v %v", v, ok, err)
		}
		for _, bk := range []*redisstore.Bucket{b, other} {
			if _, ok, err := bk.Get(ctx, "w0001"); ok || err != nil {
				t.Errorf("another bucket or prefix sees the record (%v)", err)
			}
		}
		var keys []string
		if err := a.ForEach(ctx, func(k string, _ []byte) error { keys = append(keys, k); return nil }); err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1200 || !slices.IsSorted(keys) {
			t.Fatalf("ForEach: %d keys, sorted %v", len(keys), slices.IsSorted(keys))
		}
		stop := errors.New("stop")
		n := 0
		if err := a.ForEach(ctx, func(string, []byte) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
			t.Errorf("ForEach's error: %v after %d", err, n)
		}
		if ok, err := a.Delete(ctx, "w0001"); !ok || err != nil {
			t.Errorf("Delete: %v %v", ok, err)
		}
		if ok, err := a.Delete(ctx, "w0001"); ok || err != nil {
			t.Errorf("Delete again: %v %v", ok, err)
		}
	})
}

type sess struct {
	User    string    `json:"user"`
	Expires time.Time `json:"expires"`
}

func TestSessionsExpire(t *testing.T) {
	c := redistest.Start(t).Client(t)
	ctx := context.Background()
	s := redisstore.NewSessions(c, "p:", func(s sess) time.Time { return s.Expires })
	if err := s.PutSession(ctx, "h1", sess{User: "u", Expires: time.Now().Add(300 * time.Millisecond)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSession(ctx, "h2", sess{User: "v", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.GetSession(ctx, "h1"); err != nil || !ok || got.User != "u" {
		t.Fatalf("GetSession: %+v %v %v", got, ok, err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, ok, err := s.GetSession(ctx, "h1"); ok || err != nil {
		t.Errorf("an expired session is found (%v)", err)
	}
	if _, ok, _ := s.GetSession(ctx, "h2"); !ok {
		t.Error("a live session is gone")
	}
	if err := s.DeleteSession(ctx, "h2"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.GetSession(ctx, "h2"); ok {
		t.Error("a deleted session is found")
	}
}

func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	ctx := context.Background()
	s := redisstore.NewSessions(c, "", func(s sess) time.Time { return s.Expires })
	b := redisstore.NewBucket(c, "", "connections")
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, ok, err := s.GetSession(short, "h"); err == nil || ok {
		t.Errorf("GetSession with Redis down: %v (found %v), want an error", err, ok)
	}
	if _, ok, err := b.Get(short, "k"); err == nil || ok {
		t.Errorf("Bucket.Get with Redis down: %v, want an error", err)
	}
	srv.Restart(t)
	if err := s.PutSession(ctx, "h", sess{User: "u", Expires: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := b.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}
