package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/trawl-dev/trawl/tools"
)

// Registry holds the agent definitions: the config file gives the initial
// state, and changes made through the API persist in the store and win
// over the file. It is safe for concurrent use; a running turn reads its
// agent afresh at every step, so a change applies from the next step.
type Registry struct {
	store DefinitionStore
	check func(Binding) error // validates a binding against the catalog

	// patch serialises PatchBinding's read-modify-write, so concurrent
	// patches of one agent (a console flipping a whole group) all land.
	patch sync.Mutex

	config []Definition // the file's definitions, under the stored ones

	mu      sync.RWMutex
	defs    map[string]Definition
	version string // the store's DefinitionsVersion the defs were loaded at
}

// DefinitionVersioner is a DefinitionStore other processes write too (the
// replicas of a deployment on Redis): its version changes with every put
// and delete, so Sync sees their edits.
type DefinitionVersioner interface {
	DefinitionsVersion(ctx context.Context) (string, error)
	// PutDefinitionAt stores d only while the version is still version
	// (ok false when another process wrote since), so a read-modify-write
	// such as PatchBinding never loses a concurrent edit.
	PutDefinitionAt(ctx context.Context, d Definition, version string) (ok bool, err error)
}

// NewRegistry loads the config's definitions, then the stored ones over
// them. check validates each binding of a definition put through the API
// (nil: no check).
func NewRegistry(ctx context.Context, config []Definition, store DefinitionStore, check func(Binding) error) (*Registry, error) {
	r := &Registry{store: store, check: check, config: slices.Clone(config)}
	if err := r.load(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the definitions afresh: the config's, then the stored ones
// over them. The version is read first, so a put landing in between
// only causes one more load.
func (r *Registry) load(ctx context.Context) error {
	var version string
	if v, ok := r.store.(DefinitionVersioner); ok {
		var err error
		if version, err = v.DefinitionsVersion(ctx); err != nil {
			return fmt.Errorf("loading stored agents: %w", err)
		}
	}
	defs := map[string]Definition{}
	for _, d := range r.config {
		defs[d.ID] = cloneDef(d)
	}
	if r.store != nil {
		stored, err := r.store.ListDefinitions(ctx)
		if err != nil {
			return fmt.Errorf("loading stored agents: %w", err)
		}
		for _, d := range stored {
			if d.Deleted {
				delete(defs, d.ID)
				continue
			}
			defs[d.ID] = d
		}
	}
	r.mu.Lock()
	r.defs, r.version = defs, version
	r.mu.Unlock()
	return nil
}

// Sync reloads the definitions when another process changed them since
// they were loaded (a store that is not a DefinitionVersioner has no
// other writer: Sync does nothing). A deployment calls it before each
// request and each step, so an edit on one replica applies on every other
// from its next request or step. It costs one read of the version.
func (r *Registry) Sync(ctx context.Context) error {
	v, ok := r.store.(DefinitionVersioner)
	if !ok {
		return nil
	}
	version, err := v.DefinitionsVersion(ctx)
	if err != nil {
		return fmt.Errorf("agent definitions: %w", err)
	}
	r.mu.RLock()
	same := version == r.version
	r.mu.RUnlock()
	if same {
		return nil
	}
	return r.load(ctx)
}

// Get returns the agent with id.
func (r *Registry) Get(id string) (Definition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.defs[id]
	return cloneDef(d), ok
}

// List returns every agent, by id.
func (r *Registry) List() []Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Definition, 0, len(r.defs))
	for _, d := range r.defs {
		out = append(out, cloneDef(d))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Put validates and stores d (creating or replacing it).
func (r *Registry) Put(ctx context.Context, d Definition) error {
	d.Deleted = false
	if err := r.validate(d); err != nil {
		return err
	}
	if r.store != nil {
		if err := r.store.PutDefinition(ctx, d); err != nil {
			return err
		}
	}
	r.keep(d)
	return nil
}

func (r *Registry) validate(d Definition) error {
	if err := d.Validate(); err != nil {
		return err
	}
	for i, b := range d.AgentTools {
		if r.check != nil {
			if err := r.check(b); err != nil {
				return &FieldError{Field: fmt.Sprintf("agentTools[%d]", i), Msg: err.Error()}
			}
		}
	}
	return nil
}

func (r *Registry) keep(d Definition) {
	r.mu.Lock()
	r.defs[d.ID] = cloneDef(d)
	r.mu.Unlock()
}

// ErrEditConflict: PatchBinding kept losing to concurrent edits from
// other processes.
var ErrEditConflict = errors.New("the agent is being edited concurrently; retry")

// Delete removes the agent with id.
func (r *Registry) Delete(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.defs[id]; !ok {
		return ErrNotFound
	}
	if r.store != nil {
		if err := r.store.DeleteDefinition(ctx, id); err != nil {
			return err
		}
	}
	delete(r.defs, id)
	return nil
}

// BindingPatch changes one binding; nil fields stay as they are.
type BindingPatch struct {
	LoopResponses   *bool      `json:"loop_responses"`
	DatasetTTLHours *float64   `json:"dataset_ttl_hours"`
	Discovery       *Discovery `json:"discovery"`
	// Effect overrides the tool's effect ("" goes back to the tool's).
	Effect     *tools.Effect `json:"effect"`
	Bulk       *bool         `json:"bulk"`
	BulkValues *int          `json:"bulk_values"`
	Approval   *Approval     `json:"approval"`
}

// PatchBinding changes the binding of toolID in agent id: the entry bound
// to that tool, or — for a tool of a bound toolkit — a new entry for the
// tool alone, which then overrides the toolkit's for that tool.
func (r *Registry) PatchBinding(ctx context.Context, id, toolID string, toolkitOf func(string) string, p BindingPatch) (Definition, error) {
	r.patch.Lock()
	defer r.patch.Unlock()
	v, shared := r.store.(DefinitionVersioner)
	for range 20 {
		if err := r.Sync(ctx); err != nil {
			return Definition{}, err
		}
		r.mu.RLock()
		d, ok := r.defs[id]
		version := r.version
		r.mu.RUnlock()
		if !ok {
			return Definition{}, ErrNotFound
		}
		d, err := patched(cloneDef(d), id, toolID, toolkitOf, p)
		if err != nil {
			return Definition{}, err
		}
		if !shared {
			if err := r.Put(ctx, d); err != nil {
				return Definition{}, err
			}
			return d, nil
		}
		if err := r.validate(d); err != nil {
			return Definition{}, err
		}
		// Another process may edit the agent between the read and the
		// write: store only if nothing was written since, else read again.
		stored, err := v.PutDefinitionAt(ctx, d, version)
		if err != nil {
			return Definition{}, err
		}
		if stored {
			r.keep(d)
			return d, nil
		}
	}
	return Definition{}, ErrEditConflict
}

// patched applies p to the binding of toolID in d.
func patched(d Definition, id, toolID string, toolkitOf func(string) string, p BindingPatch) (Definition, error) {
	if p.DatasetTTLHours != nil && *p.DatasetTTLHours < 0 {
		return Definition{}, &FieldError{Field: "dataset_ttl_hours", Msg: "must not be negative"}
	}
	i := slices.IndexFunc(d.AgentTools, func(b Binding) bool { return b.ToolID == toolID })
	if i < 0 {
		tk := toolkitOf(toolID)
		j := slices.IndexFunc(d.AgentTools, func(b Binding) bool { return tk != "" && b.Toolkit == tk })
		if j < 0 {
			return Definition{}, &FieldError{Field: "tool_id", Msg: fmt.Sprintf("agent %q has no binding for tool %q", id, toolID)}
		}
		nb := d.AgentTools[j]
		nb.Toolkit, nb.ToolID, nb.ProviderID = "", toolID, tk
		d.AgentTools = append(d.AgentTools, nb)
		i = len(d.AgentTools) - 1
	}
	b := &d.AgentTools[i]
	if p.LoopResponses != nil {
		b.LoopResponses = *p.LoopResponses
	}
	if p.DatasetTTLHours != nil {
		b.DatasetTTLHours = *p.DatasetTTLHours
	}
	if p.Discovery != nil {
		b.Discovery = *p.Discovery
	}
	if p.Effect != nil {
		b.Effect = *p.Effect
	}
	if p.Bulk != nil {
		b.Bulk = *p.Bulk
	}
	if p.BulkValues != nil {
		b.BulkValues = *p.BulkValues
	}
	if p.Approval != nil {
		b.Approval = *p.Approval
	}
	if err := d.Validate(); err != nil {
		return Definition{}, err
	}
	return d, nil
}

func cloneDef(d Definition) Definition {
	d.AgentTools = slices.Clone(d.AgentTools)
	return d
}
