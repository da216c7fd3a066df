package web

import (
	"fmt"
	"sort"

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
func (s *Server) startDemo(cfg *Config) error {
	token := "demo_" + randomHex(16)
	up := demo.NewServer(demo.Options{Token: token})
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
	cfg.Agents = []agent.Definition{demoAgent(acme, names)}
	return nil
}
