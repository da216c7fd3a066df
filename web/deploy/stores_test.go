package deploy

import (
	"errors"
	"testing"
)

// A Redis that answers but cannot serve — out of memory under
// noeviction, a replica made read-only by a failover — is unavailable,
// as a Redis that is down is; a fault of the command is not.
func TestOutageRepliesAreUnavailable(t *testing.T) {
	for _, reply := range []string{"READONLY You can't write against a read only replica.", "OOM command not allowed", "BUSY Redis is busy running a script", "ERR max number of clients reached"} {
		if err := markUnavailable(replyError(reply)); !errors.Is(err, ErrStoreUnavailable) {
			t.Errorf("%q is not marked unavailable", reply)
		}
	}
	for _, reply := range []string{"ERR wrong number of arguments", "WRONGTYPE Operation against a key", "BUSYGROUP Consumer Group name already exists"} {
		if err := markUnavailable(replyError(reply)); errors.Is(err, ErrStoreUnavailable) {
			t.Errorf("%q is marked unavailable", reply)
		}
	}
}

// replyError is an error reply of a Redis server (a redis.Error).
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}
