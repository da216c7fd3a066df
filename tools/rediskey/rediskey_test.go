package rediskey

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

// On one Redis a key keeps its plain name; on a cluster the keys of one
// tag share the tag's text right after the prefix, whatever the tag holds.
func TestIn(t *testing.T) {
	one := New(redis.NewClient(&redis.Options{}), "trawl:")
	if got := one.In("u=a;a=b;c=c", "thread:u=a;a=b;c=c"); got != "trawl:thread:u=a;a=b;c=c" {
		t.Errorf("one Redis: %q", got)
	}
	cl := New(redis.NewClusterClient(&redis.ClusterOptions{}), "trawl:")
	for tag, want := range map[string]string{
		"chat":  "trawl:{chat}lease:x",
		"a}b{c": "trawl:{a%7Db{c}lease:x",
		"":      "trawl:{_}lease:x",
	} {
		if got := cl.In(tag, "lease:x"); got != want {
			t.Errorf("cluster, tag %q: %q, want %q", tag, got, want)
		}
	}
	if got := cl.Key("leases"); got != "trawl:leases" {
		t.Errorf("cluster, an untagged key: %q", got)
	}
}
