package runleasetest_test

import (
	"testing"
	"time"

	"github.com/trawl-dev/trawl/web/runlease"
	"github.com/trawl-dev/trawl/web/runlease/runleasetest"
)

func TestMemoryConforms(t *testing.T) {
	runleasetest.Run(t, func(t *testing.T, _ time.Duration) (runlease.Registry, runlease.Registry) {
		m := runlease.NewMemory()
		return m, m
	})
}
