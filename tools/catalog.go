package tools

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// Catalog is the set of tools a deployment knows, by id. It is safe for
// concurrent use; tools in it are never mutated (a source that changes
// replaces its tools with ReplaceProvider).
type Catalog struct {
	mu    sync.RWMutex
	byID  map[string]*Tool
	order []string // ids in insertion order
	// waiting are the providers whose tools are not known yet (an MCP
	// server unreachable so far), with why.
	waiting map[string]string
	// perUser are the toolkits each user connects whose tools may not be
	// known yet (an MCP server no user has connected).
	perUser map[string]bool
	// gen counts the changes: what was derived from the catalog at one
	// generation holds until the next.
	gen atomic.Uint64
}

// Generation is the catalog's change count: every Add, ReplaceProvider,
// SetWaiting and SetPerUser makes a new one (an MCP server's list
// changed, a user connected a toolkit, a provider answered), so what is
// derived from the catalog (an agent's resolved bindings) may be kept
// while it is the same.
func (c *Catalog) Generation() uint64 { return c.gen.Load() }

// SetPerUser marks provider as a toolkit each user connects with their
// own account even while it has no tools listed: agents bound to it are
// offered connect_toolkit for it.
func (c *Catalog) SetPerUser(provider string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.gen.Add(1)
	if c.perUser == nil {
		c.perUser = map[string]bool{}
	}
	c.perUser[provider] = true
}

// PerUser reports whether SetPerUser marked provider.
func (c *Catalog) PerUser(provider string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.perUser[provider]
}

// SetWaiting marks provider as one whose tools are not known yet (why
// says why: an MCP server that does not answer), or no longer (why "").
// Bindings to a waiting provider's tools are kept, not refused.
func (c *Catalog) SetWaiting(provider, why string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.gen.Add(1)
	if why == "" {
		delete(c.waiting, provider)
		return
	}
	if c.waiting == nil {
		c.waiting = map[string]string{}
	}
	c.waiting[provider] = why
}

// Waiting reports whether provider's tools are not known yet, and why.
func (c *Catalog) Waiting(provider string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	why, ok := c.waiting[provider]
	return why, ok
}

// WaitingFor reports whether the tool id belongs to a waiting provider
// ("<provider>.<name>"), and which.
func (c *Catalog) WaitingFor(toolID string) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for p := range c.waiting {
		if len(toolID) > len(p) && toolID[:len(p)] == p && toolID[len(p)] == '.' {
			return p, true
		}
	}
	return "", false
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog { return &Catalog{byID: map[string]*Tool{}} }

// Add adds tools; an id already present is an error and nothing is added.
func (c *Catalog) Add(ts ...*Tool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.gen.Add(1)
	seen := map[string]bool{}
	for _, t := range ts {
		if err := t.Validate(); err != nil {
			return err
		}
		if _, dup := c.byID[t.ID]; dup || seen[t.ID] {
			return fmt.Errorf("tool id %q is defined twice", t.ID)
		}
		seen[t.ID] = true
	}
	for _, t := range ts {
		c.byID[t.ID] = t
		c.order = append(c.order, t.ID)
	}
	return nil
}

// ReplaceProvider swaps every tool of provider for ts (an MCP server's
// list changed, a toolkit was reloaded).
func (c *Catalog) ReplaceProvider(provider string, ts []*Tool) error {
	for _, t := range ts {
		if err := t.Validate(); err != nil {
			return err
		}
		if t.Provider != provider {
			return fmt.Errorf("tool %q is not of provider %q", t.ID, provider)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.gen.Add(1)
	order := c.order[:0:0]
	for _, id := range c.order {
		if c.byID[id].Provider == provider {
			delete(c.byID, id)
			continue
		}
		order = append(order, id)
	}
	for _, t := range ts {
		if _, dup := c.byID[t.ID]; dup {
			return fmt.Errorf("tool id %q is defined twice", t.ID)
		}
		c.byID[t.ID] = t
		order = append(order, t.ID)
	}
	c.order = order
	return nil
}

// Get returns the tool with id.
func (c *Catalog) Get(id string) (*Tool, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.byID[id]
	return t, ok
}

// All returns every tool, in the order they were added.
func (c *Catalog) All() []*Tool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Tool, len(c.order))
	for i, id := range c.order {
		out[i] = c.byID[id]
	}
	return out
}

// Provider returns the tools of one provider, toolkit or MCP server.
func (c *Catalog) Provider(id string) []*Tool {
	var out []*Tool
	for _, t := range c.All() {
		if t.Provider == id {
			out = append(out, t)
		}
	}
	return out
}
