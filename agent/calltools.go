package agent

import (
	"slices"
	"strconv"
	"strings"
	"sync"
)

// callToolsCache keeps what a conversation's one call resolves and
// assembles before it runs — the agent's bound tools and the step's tool
// list — by what they derive from: the catalog's generation, the agent's
// bindings, the tools the thread loaded and whether it holds a live
// stored result. An MCP client's calls repeat these mostly unchanged, so
// each call need not resolve the bindings and assemble the list anew.
type callToolsCache struct {
	mu sync.RWMutex
	m  map[string]*callTools
}

type callTools struct {
	bindings []Binding // the agent's, as they were made from
	bound    []boundTool
	tl       stepTools
}

// maxCallTools bounds the entries kept; past it they all go (each is
// made again by its next call).
const maxCallTools = 256

// callStepTools are the bound tools and the tool list of a conversation
// call (st.callOnly), from the cache when nothing they derive from
// changed. The bound tools and the list's maps are shared between calls
// and read only; the list itself is the call's copy (a call indexes its
// pool when it searches, and sets its room).
func (r *Runner) callStepTools(st *turnState, def Definition) ([]boundTool, *stepTools, error) {
	key, ok := r.callToolsKey(st, def)
	if ok {
		r.callTools.mu.RLock()
		e := r.callTools.m[key]
		r.callTools.mu.RUnlock()
		if e != nil && slices.EqualFunc(e.bindings, def.AgentTools, sameBinding) {
			tl := e.tl
			return e.bound, &tl, nil
		}
	}
	bound, err := resolveBindings(def, r.opt.Catalog)
	if err != nil {
		return nil, nil, err
	}
	tl, err := r.assemble(st, def, bound)
	if err != nil {
		return nil, nil, err
	}
	// Kept only when nothing changed while they were made (the catalog,
	// or a stored result expiring meanwhile).
	if again, ok2 := r.callToolsKey(st, def); ok && ok2 && again == key && tl.index == nil {
		c := &r.callTools
		c.mu.Lock()
		if c.m == nil || len(c.m) >= maxCallTools {
			c.m = map[string]*callTools{}
		}
		c.m[key] = &callTools{bindings: slices.Clone(def.AgentTools), bound: bound, tl: *tl}
		c.mu.Unlock()
	}
	return bound, tl, nil
}

// callToolsKey is what a conversation call's bindings and tool list
// derive from; ok is false when they are not kept (no catalog, a step
// with a cut result waiting).
func (r *Runner) callToolsKey(st *turnState, def Definition) (string, bool) {
	cat := r.opt.Catalog
	if cat == nil || !st.callOnly {
		return "", false
	}
	gen := cat.Generation()
	st.mu.Lock()
	gated := len(st.pending) > 0
	live := st.Thread.liveResults(r.opt.Now())
	loaded := strings.Join(st.Thread.Loaded, "\x00")
	st.mu.Unlock()
	if gated {
		return "", false
	}
	var b strings.Builder
	b.Grow(len(def.ID) + len(loaded) + 24)
	b.WriteString(strconv.FormatUint(gen, 10))
	b.WriteString(strconv.FormatBool(live))
	b.WriteByte(0)
	b.WriteString(def.ID)
	b.WriteByte(0)
	b.WriteString(loaded)
	return b.String(), true
}

// sameBinding reports whether two bindings are equal, their limits by
// value (a definition read again holds copies).
func sameBinding(a, b Binding) bool {
	la, lb := a.Limits, b.Limits
	a.Limits, b.Limits = nil, nil
	return a == b && (la == lb || la != nil && lb != nil && *la == *lb)
}
