package web

import (
	"net"

	"github.com/trawl-dev/trawl/tools/demo"
)

func netListen() (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func demoScript() []byte { return demo.ReplayScript() }

// toolkitTokenForTests is the credential the demo toolkits accept.
func (c *Config) toolkitTokenForTests() string { return c.toolkitToken }
