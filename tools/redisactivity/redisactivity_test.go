package redisactivity_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/stream/redistest"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/activitytest"
	"github.com/trawl-dev/trawl/tools/redisactivity"
)

func TestStoreConforms(t *testing.T) {
	redistest.Each(t, func(t *testing.T, srv redistest.Backend) {
		c := srv.Universal(t)
		n := 0
		activitytest.Run(t, func(t *testing.T, max int) tools.ActivityStore {
			n++
			return redisactivity.New(c, redisactivity.Options{Prefix: fmt.Sprintf("t%d:", n), Max: max})
		})
	})
}

func TestRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	s := redisactivity.New(srv.Client(t), redisactivity.Options{})
	ctx := context.Background()
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := s.AppendActivity(short, tools.Activity{Tool: "x"}); err == nil {
		t.Error("AppendActivity with Redis down: no error")
	}
	if _, err := s.ListActivity(short, "", 10); err == nil {
		t.Error("ListActivity with Redis down: no error")
	}
	srv.Restart(t)
	if err := s.AppendActivity(ctx, tools.Activity{Tool: "x"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListActivity(ctx, "", 10); err != nil || len(got) != 1 {
		t.Fatalf("after restart: %v, %v", got, err)
	}
}
