package tools

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func TestRedactURL(t *testing.T) {
	tests := map[string]string{
		"/a?limit=5":                             "/a?limit=5",
		"/a?api_key=s1&limit=5":                  "/a?api_key=REDACTED&limit=5",
		"/a?access_token=s1":                     "/a?access_token=REDACTED",
		"/a?X-Amz-Signature=abc":                 "/a?X-Amz-Signature=REDACTED",
		"/a?custom=s1":                           "/a?custom=REDACTED", // named in extra
		"/a?next=https%3A%2F%2Fx%2F%3Fk%3DPLANT": "/a?next=REDACTED",   // holds a secret value
	}
	for in, want := range tests {
		u, _ := url.Parse(in)
		if got := RedactURL(u, []string{"custom"}, "PLANT"); got != want {
			t.Errorf("RedactURL(%s) = %s; want %s", in, got, want)
		}
	}
}

func TestBoltActivityStore(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := NewBoltActivityStore(db, 2048)
	if err != nil {
		t.Fatal(err)
	}
	log := NewActivityLog(st, 5)
	ctx := context.Background()
	for i := range 3000 {
		th := "a"
		if i%2 == 1 {
			th = "b"
		}
		if err := log.Record(ctx, Activity{Time: time.Unix(int64(i), 0), ThreadID: th, Tool: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := log.List(ctx, "b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Tool != "2999" || got[2].Tool != "2995" {
		t.Errorf("newest of thread b = %+v", got)
	}
	all, _ := st.ListActivity(ctx, "", 5000)
	if len(all) > 2048+1024 || len(all) < 2048 {
		t.Errorf("kept %d records; want about the 2048 newest", len(all))
	}
}
