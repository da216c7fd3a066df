package deploy

import (
	"fmt"
	"sort"
	"time"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// DemoConfig is the configuration trawl runs without any config file: the
// Acme sample API served in-process on a loopback port, its toolkits, and
// an agent "demo" bound to them with looping on.
func DemoConfig() *Config {
	cfg := &Config{File: "(built-in demo)", lines: map[string]int{}, demo: true}
	cfg.setDefaults()
	return cfg
}

// IsDemo reports whether cfg serves the built-in demo.
func (c *Config) IsDemo() bool { return c.demo }

// SetDemoLatency delays every answer of the demo upstream by ms
// milliseconds (serve's --demo-latency); it is an error for a config that
// does not serve the demo.
func (c *Config) SetDemoLatency(ms int) error {
	if !c.demo {
		return fmt.Errorf("--demo-latency applies only to the built-in demo (%s serves none)", c.File)
	}
	if ms < 0 || ms > 10000 {
		return fmt.Errorf("--demo-latency must be 0 to 10000 (milliseconds), not %d", ms)
	}
	if c.Demo == nil {
		c.Demo = &DemoSettings{}
	}
	c.Demo.LatencyMs = ms
	return nil
}

// demoAgent is the demo agent: the Acme API with looping on, plus the
// connected-app toolkits.
func demoAgent(acme []*tools.Tool, toolkits []string) agent.Definition {
	d := agent.Definition{
		ID:   "demo",
		Name: "Acme operations assistant",
		System: "You are the operations assistant of Acme, a property-rental company. " +
			"Answer questions about orders, customers, support tickets, events, properties and bookings " +
			"using the Acme API, and help with mail, chat, CRM and calendar tasks through the connected apps.",
	}
	for _, t := range acme {
		d.AgentTools = append(d.AgentTools, agent.Binding{ToolID: t.ID, ProviderID: t.Provider, LoopResponses: true})
	}
	for _, tk := range toolkits {
		d.AgentTools = append(d.AgentTools, agent.Binding{Toolkit: tk})
	}
	return d
}

// startDemo starts the Acme upstream on a loopback port and fills cfg
// with its provider, toolkits and agent.
func (s *Deployment) startDemo(cfg *Config) error {
	token := "demo_" + RandomHex(16)
	opt := demo.Options{Token: token}
	if cfg.Demo != nil {
		opt.Latency = time.Duration(cfg.Demo.LatencyMs) * time.Millisecond
	}
	up := demo.NewServer(opt)
	url, err := up.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the demo upstream: %w", err)
	}
	s.closers = append(s.closers, up.Close)
	cfg.Providers = []ProviderConfig{{
		ID: "acme", BaseURL: url, specData: demo.Spec(),
		Auth: tools.AuthSpec{Type: "bearer", Token: token},
	}}
	manifests := demo.Manifests(url)
	names := make([]string, 0, len(manifests))
	for name := range manifests {
		names = append(names, name)
	}
	sort.Strings(names)
	cfg.toolkitData, cfg.toolkitToken = nil, token
	for _, name := range names {
		cfg.toolkitData = append(cfg.toolkitData, manifests[name])
	}
	acme, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: url})
	if err != nil {
		return fmt.Errorf("the demo's own spec: %w", err)
	}
	def := demoAgent(acme, names)
	if cfg.Demo != nil {
		def.Approval = cfg.Demo.Approval
		if err := loopOff(&def, cfg.Demo.LoopOff); err != nil {
			return err
		}
	}
	cfg.Agents = []agent.Definition{def}
	return nil
}

// DemoToken is the credential the demo upstream and its toolkits accept
// ("" until the deployment started the demo).
func (c *Config) DemoToken() string { return c.toolkitToken }

// ConnectDemoToolkits leaves the demo's toolkits without an organization
// credential, so each user connects them on the connect page (as a real
// connected app would be), rather than the demo connecting them for all.
func (c *Config) ConnectDemoToolkits() { c.toolkitNoOrgToken = true }

// loopOff switches looping off in the demo agent's bindings of tools
// (demo.loop_off).
func loopOff(def *agent.Definition, tools []string) error {
	for _, id := range tools {
		found := false
		for i, b := range def.AgentTools {
			if b.ToolID == id {
				def.AgentTools[i].LoopResponses, found = false, true
			}
		}
		if !found {
			return fmt.Errorf("demo.loop_off: the demo agent binds no tool %q (its tools are acme.list_orders, acme.list_properties, …)", id)
		}
	}
	return nil
}
