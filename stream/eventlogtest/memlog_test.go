package eventlogtest_test

import (
	"testing"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/stream/eventlogtest"
)

func TestMemoryLogConforms(t *testing.T) {
	eventlogtest.Run(t, func(t *testing.T, o eventlogtest.Options) stream.EventLog {
		return stream.NewMemoryLog(stream.MemoryLogOptions{MaxRunBytes: o.MaxRunBytes, Retention: o.Retention})
	})
}
