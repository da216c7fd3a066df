// Package rediskey names the keys of trawl's Redis stores, so that the
// same store runs on one Redis and on a Redis Cluster.
//
// On one Redis a key is the prefix and its name, as it always was. On a
// cluster, the keys one script or transaction touches together carry
// one hash tag right after the prefix — the chat's, the thread's, the
// run's, the cache entry's own — so each script's keys share a slot and
// different chats, runs and entries spread over the masters. A key no
// script shares with another needs no tag: Redis hashes its whole name.
// Work across entries (the indexes, the active-run registry, sweeps and
// bounds) reads or writes each key with its own command, never with one
// script across slots.
//
// A prefix that holds a hash tag itself ("{app}:trawl:") keeps every key
// of the deployment in that one slot, as its author asked.
package rediskey

import (
	"strings"

	"github.com/redis/go-redis/v9"
)

// Keys names a store's keys under a prefix.
type Keys struct {
	prefix  string
	cluster bool
}

// New names keys under prefix for the Redis behind c: a cluster when c
// is a *redis.ClusterClient.
func New(c redis.UniversalClient, prefix string) Keys {
	_, cluster := c.(*redis.ClusterClient)
	return Keys{prefix: prefix, cluster: cluster}
}

// Cluster reports whether the keys are a cluster's.
func (k Keys) Cluster() bool { return k.cluster }

// Key is the key name under the prefix: for a key no script shares.
func (k Keys) Key(name string) string { return k.prefix + name }

// In is the key name under the prefix, in the slot of tag on a cluster:
// every key built with the same tag is in the same slot. On one Redis
// it is Key(name).
func (k Keys) In(tag, name string) string {
	if !k.cluster {
		return k.prefix + name
	}
	return k.prefix + "{" + tagText(tag) + "}" + name
}

// tagText is s as the text of a hash tag: Redis ends a tag at its first
// '}', so each one is replaced; an empty s (which Redis would not take as
// a tag) is "_".
func tagText(s string) string {
	if s == "" {
		return "_"
	}
	return strings.ReplaceAll(s, "}", "%7D")
}
