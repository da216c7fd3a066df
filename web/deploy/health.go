package deploy

import (
	"context"
	"sort"
	"sync"
)

// Readiness is the body of /readyz: each store, MCP server and OAuth
// authorization server with its state. Status is "ready" (every store
// answers; MCP servers too, and every issuer's metadata was read),
// "degraded" (every store answers, an MCP server does not, or an
// issuer has not answered since the start: their tools fail but the
// rest works, so the answer is still 200) or "unavailable" (a store
// does not: 503). While the server drains, /readyz answers 503
// shutting_down. Causes are logged, never shown: /readyz needs no key.
type Readiness struct {
	Status     string            `json:"status"`
	Stores     map[string]string `json:"stores"`
	MCPServers map[string]string `json:"mcp_servers"`
	// AuthServers are the OAuth providers and toolkits, by id: ok once
	// their issuer's metadata was read (endpoints set in the config need
	// none), unreachable until then.
	AuthServers map[string]string `json:"auth_servers,omitempty"`
}

// Component states in a Readiness.
const (
	stateOK          = "ok"
	stateUnreachable = "unreachable"
)

// pinger is a store that can say whether it answers (a networked store
// implements it; the embedded ones share the bbolt file).
type pinger interface {
	Ping(ctx context.Context) error
}

// Ready checks every store and MCP server at once, each within ctx.
func (s *Deployment) Ready(ctx context.Context) Readiness {
	type check struct {
		kind, name string
		run        func(context.Context) error
	}
	var checks []check
	for name, p := range s.stores.pingers {
		checks = append(checks, check{"store", name, p.Ping})
	}
	for id, m := range s.mcp {
		checks = append(checks, check{"mcp", id, m.Ping})
	}
	sort.Slice(checks, func(i, j int) bool { return checks[i].kind+checks[i].name < checks[j].kind+checks[j].name })
	states := make([]string, len(checks))
	var wg sync.WaitGroup
	for i, ch := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			states[i] = stateOK
			if err := ch.run(ctx); err != nil {
				states[i] = stateUnreachable
				s.log.WarnContext(ctx, "readiness check failed", ch.kind, ch.name, "err", err)
			}
		}()
	}
	wg.Wait()
	r := Readiness{Status: "ready", Stores: map[string]string{}, MCPServers: map[string]string{}}
	for i, ch := range checks {
		if ch.kind == "store" {
			r.Stores[ch.name] = states[i]
			if states[i] != stateOK {
				r.Status = "unavailable"
			}
			continue
		}
		r.MCPServers[ch.name] = states[i]
		if states[i] != stateOK && r.Status == "ready" {
			r.Status = "degraded"
		}
	}
	for id, c := range s.authServers {
		if r.AuthServers == nil {
			r.AuthServers = map[string]string{}
		}
		r.AuthServers[id] = stateOK
		if _, down := c.Unavailable(); down {
			r.AuthServers[id] = stateUnreachable
			if r.Status == "ready" {
				r.Status = "degraded"
			}
		}
	}
	return r
}
