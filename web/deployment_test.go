package web

import (
	"sync"
	"time"

	"github.com/trawl-dev/trawl/web/deploy"
)

// The tests configure the deployments they serve as a user's trawl.yaml
// does; these names keep them as short as the config they stand for.
type (
	Config           = deploy.Config
	ProviderConfig   = deploy.ProviderConfig
	ModelConfig      = deploy.ModelConfig
	DemoSettings     = deploy.DemoSettings
	EmbeddingsConfig = deploy.EmbeddingsConfig
	LogConfig        = deploy.LogConfig
	TelemetryConfig  = deploy.TelemetryConfig
	ToolView         = deploy.ToolView
	Readiness        = deploy.Readiness
)

var (
	DemoConfig          = deploy.DemoConfig
	ParseConfig         = deploy.ParseConfig
	LoadConfig          = deploy.LoadConfig
	NewLogger           = deploy.NewLogger
	ErrStoreUnavailable = deploy.ErrStoreUnavailable
)

const MinAdminKeyLength = deploy.MinAdminKeyLength

// env is a lookup of the environment variables vars.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// testClock is a deployment's clock that a test moves: time.Now until
// set.
type testClock struct {
	mu sync.Mutex
	f  func() time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return time.Now()
	}
	return f()
}

// set makes the clock read f.
func (c *testClock) set(f func() time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.f = f
}
