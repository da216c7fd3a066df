package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
)

// Connections answers, for one user's turn, which connected apps have a
// credential and how the user connects one. Implementations are safe for
// concurrent use.
type Connections interface {
	// Connected reports whether calls of toolkit have a credential (the
	// organization's or the user's).
	Connected(ctx context.Context, toolkit string) (bool, error)
	// Credential is the user's own credential for toolkit ("" when the
	// organization's is used).
	Credential(ctx context.Context, toolkit string) (string, error)
	// ConnectLink is a link to the page where the user connects toolkit.
	ConnectLink(ctx context.Context, toolkit string) (string, error)
}

// stepTools is one step's tool list: what the model is offered and how
// each name is served.
type stepTools struct {
	specs  []ToolSpec
	byName map[string]boundTool
	meta   map[string]bool // discovery meta-tools offered
	pool   []*tools.Tool
	index  *discovery.Index // over pool; nil when the pool is empty
	apps   []string         // bound toolkits, sorted
	// room is each call's share of what is left of the agent's context
	// once the model has called (viewRoom); 0: no bound. The size guard
	// cuts a result to it when it is below the configured view budget.
	room int
	// gated: a cut result waits to be read, so only the retrieval tools
	// are offered and a tool call is required.
	gated bool
}

// assemble builds the step's tool list: own API and MCP tools, the
// connected-app tools discovery keeps direct (plus those the thread
// loaded), the meta-tools, and the retrieval tools when any binding loops
// or the thread holds a live stored result — or only the retrieval tools
// while a cut result waits to be queried.
func (r *Runner) assemble(st *turnState, def Definition, bound []boundTool) (*stepTools, error) {
	out := &stepTools{byName: map[string]boundTool{}, meta: map[string]bool{}}
	st.mu.Lock()
	gated := len(st.pending) > 0 && r.opt.Retrieval != nil
	live := st.Thread.liveResults(r.opt.Now())
	loaded := slices.Clone(st.Thread.Loaded)
	st.mu.Unlock()

	byID := map[string]boundTool{}
	looping := false
	var entries []discovery.Entry
	group := map[string]int{} // toolkit binding → entry index
	apps := map[string]bool{}
	for _, bt := range bound {
		byID[bt.tool.ID] = bt
		looping = looping || bt.binding.LoopResponses
		if bt.tool.UserConnected() {
			apps[bt.tool.Provider] = true
		}
		mode := discovery.ModeAuto
		switch bt.binding.Discovery {
		case DiscoveryPooled:
			mode = discovery.ModePooled
		case DiscoveryDirect:
			mode = discovery.ModeDirect
		}
		if tk := bt.binding.Toolkit; tk != "" {
			key := tk + "\x00" + string(bt.binding.Discovery)
			if i, ok := group[key]; ok {
				entries[i].Tools = append(entries[i].Tools, bt.tool)
				continue
			}
			group[key] = len(entries)
			entries = append(entries, discovery.Entry{Tools: []*tools.Tool{bt.tool}, Toolkit: tk, Mode: mode})
			continue
		}
		entries = append(entries, discovery.Entry{Tools: []*tools.Tool{bt.tool}, Mode: mode})
	}
	// A toolkit each user connects whose tools are not known yet (an MCP
	// server no user has connected): connect_toolkit is offered for it.
	for _, b := range def.AgentTools {
		if tk := b.Toolkit; tk != "" && !apps[tk] && r.opt.Catalog != nil && r.opt.Catalog.PerUser(tk) && len(r.opt.Catalog.Provider(tk)) == 0 {
			apps[tk] = true
			entries = append(entries, discovery.Entry{Toolkit: tk})
		}
	}
	for a := range apps {
		out.apps = append(out.apps, a)
	}
	sort.Strings(out.apps)
	asm := discovery.Assemble(entries, loaded, discovery.AssembleOptions{DirectBudget: r.opt.DirectBudget})
	out.pool = asm.Pool
	if !gated {
		for _, t := range asm.Direct {
			bt, ok := byID[t.ID]
			if !ok {
				continue
			}
			out.byName[bt.name] = bt
			if st.callOnly {
				continue // no model reads the list: no schema to render
			}
			lb := bt.loopBinding()
			schema, _ := json.Marshal(r.opt.Engine.Schema(bt.tool, lb))
			desc := loop.Describe(bt.tool, r.opt.Engine.Effect(bt.tool, lb))
			out.specs = append(out.specs, ToolSpec{Name: bt.name, Description: desc, Parameters: schema})
		}
		for _, m := range asm.MetaTools() {
			out.meta[m.Name] = true
			out.specs = append(out.specs, ToolSpec{Name: m.Name, Description: m.Description, Parameters: json.RawMessage(m.InputSchema)})
		}
		if len(asm.Pool) > 0 && !st.callOnly { // one call: indexed when it searches (poolIndex)
			ix, err := r.index(asm.Pool)
			if err != nil {
				return nil, err
			}
			out.index = ix
		}
	}
	if r.opt.Retrieval != nil && (gated || looping || live) {
		for _, rt := range r.opt.Retrieval.Tools() {
			out.specs = append(out.specs, ToolSpec{Name: rt.Name, Description: rt.Description, Parameters: rt.InputSchema})
		}
	}
	out.gated = gated
	return out, nil
}

// maxIndexes bounds the distinct tool pools whose indexes are kept;
// indexes dropped past it are closed after indexGrace.
const (
	maxIndexes = 64
	indexGrace = 15 * time.Minute
)

// index returns the search index of a pool, built once per distinct pool
// (a toolkit change makes a new pool, hence a new index).
func (r *Runner) index(pool []*tools.Tool) (*discovery.Index, error) {
	h := sha256.New()
	var buf []byte
	for _, t := range pool {
		buf = append(append(buf[:0], t.ID...), 0)
		buf = strconv.AppendUint(buf, uint64(reflect.ValueOf(t).Pointer()), 16) // a reloaded tool is a new pointer
		h.Write(buf)
	}
	key := hex.EncodeToString(h.Sum(nil))
	if ix, ok := r.indexes.Load(key); ok {
		return ix.(*discovery.Index), nil
	}
	r.indexMu.Lock()
	defer r.indexMu.Unlock()
	if ix, ok := r.indexes.Load(key); ok {
		return ix.(*discovery.Index), nil
	}
	ix, err := discovery.NewIndexWith(pool, r.opt.Search)
	if err != nil {
		return nil, fmt.Errorf("indexing the tool pool: %w", err)
	}
	// Pools change only when bindings or toolkits do; past a bound, the
	// old indexes go (a turn still holding one keeps using it).
	if r.indexCount++; r.indexCount > maxIndexes {
		var old []*discovery.Index
		r.indexes.Range(func(k, v any) bool {
			old = append(old, v.(*discovery.Index))
			r.indexes.Delete(k)
			return true
		})
		r.indexCount = 1
		// Close them once no turn can still be using them.
		time.AfterFunc(indexGrace, func() {
			for _, ix := range old {
				ix.Close()
			}
		})
	}
	r.indexes.Store(key, ix)
	return ix, nil
}

// SearchIndex is the index the agent's search_tools would use ("" pool:
// nil), for the search endpoint.
func (r *Runner) SearchIndex(def Definition, loaded []string) (*discovery.Index, error) {
	bound, err := resolveBindings(def, r.opt.Catalog)
	if err != nil {
		return nil, err
	}
	st := &turnState{Turn: &Turn{Thread: &Thread{Loaded: loaded}}, pending: map[string]bool{}}
	tl, err := r.assemble(st, def, bound)
	if err != nil {
		return nil, err
	}
	return tl.index, nil
}

// poolIndex indexes the step's pool when assemble left it for the call
// that needs it (a conversation's one call: most never search).
func (r *Runner) poolIndex(tl *stepTools) error {
	if tl.index != nil || len(tl.pool) == 0 {
		return nil
	}
	ix, err := r.index(tl.pool)
	tl.index = ix
	return err
}

// runMeta serves a discovery meta-tool.
func (r *Runner) runMeta(ctx context.Context, st *turnState, tl *stepTools, name string, raw json.RawMessage) ([]byte, error) {
	switch name {
	case discovery.MetaSearchTools:
		if err := r.poolIndex(tl); err != nil {
			return nil, err
		}
		if tl.index == nil {
			return nil, &loop.ToolError{Code: loop.CodeInvalidArgument, Message: "there are no tools to search"}
		}
		st.mu.Lock()
		loadedNames := map[string]bool{}
		for _, id := range st.Thread.Loaded {
			if t, ok := r.opt.Catalog.Get(id); ok {
				loadedNames[t.Name] = true
			}
		}
		st.mu.Unlock()
		return tl.index.SearchTool(ctx, raw, func(n string) bool { return loadedNames[n] })
	case discovery.MetaLoadTool:
		if err := r.poolIndex(tl); err != nil {
			return nil, err
		}
		toLoad, out, err := discovery.LoadTool(raw, tl.pool, tl.index)
		if err != nil {
			return nil, err
		}
		st.mu.Lock()
		for _, t := range toLoad {
			if !slices.Contains(st.Thread.Loaded, t.ID) {
				st.Thread.Loaded = append(st.Thread.Loaded, t.ID)
			}
		}
		st.mu.Unlock()
		return out, nil
	case discovery.MetaListConnections:
		type conn struct {
			Toolkit     string `json:"toolkit"`
			Name        string `json:"name"`
			Description string `json:"description,omitempty"`
			Connected   bool   `json:"connected"`
			// Tools says where the toolkit's tools are: "in your tool
			// list", or "find with search_tools".
			Tools string `json:"tools"`
			// Waiting says why its tools are not listed yet (an MCP
			// server no user has connected, or whose sign-in cannot be
			// reached).
			Waiting string `json:"waiting,omitempty"`
		}
		pooled := map[string]bool{}
		for _, t := range tl.pool {
			pooled[t.Provider] = true
		}
		list := []conn{}
		for _, tk := range tl.apps {
			c := conn{Toolkit: tk, Connected: true, Tools: "in your tool list"}
			if pooled[tk] {
				c.Tools = "find with search_tools"
			}
			if ts := r.opt.Catalog.Provider(tk); len(ts) > 0 {
				c.Name, c.Description = ts[0].ToolkitName, shorten(ts[0].ToolkitDescription, 200)
			} else if why, waiting := r.opt.Catalog.Waiting(tk); waiting {
				c.Tools, c.Waiting = "not listed yet", why
			}
			if st.Connections != nil {
				ok, err := st.Connections.Connected(ctx, tk)
				if err != nil {
					return nil, err
				}
				c.Connected = ok
			}
			list = append(list, c)
		}
		return json.Marshal(map[string]any{"connections": list})
	case discovery.MetaConnectToolkit:
		var args struct {
			Toolkit string `json:"toolkit"`
		}
		if err := json.Unmarshal(raw, &args); err != nil || args.Toolkit == "" {
			return nil, &loop.ToolError{Code: loop.CodeInvalidArgument, Message: "connect_toolkit needs {\"toolkit\": \"<toolkit id>\"}"}
		}
		if !slices.Contains(tl.apps, args.Toolkit) {
			return nil, &loop.ToolError{Code: loop.CodeInvalidArgument, Message: fmt.Sprintf("toolkit %q is not bound to this agent; bound toolkits: %v", args.Toolkit, tl.apps)}
		}
		if st.Connections == nil {
			return json.Marshal(map[string]any{"toolkit": args.Toolkit, "connected": true, "message": "This toolkit is connected for the whole organization."})
		}
		if ok, err := st.Connections.Connected(ctx, args.Toolkit); err != nil {
			return nil, err
		} else if ok {
			return json.Marshal(map[string]any{"toolkit": args.Toolkit, "connected": true, "message": "Already connected."})
		}
		link, err := st.Connections.ConnectLink(ctx, args.Toolkit)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"toolkit": args.Toolkit, "connected": false, "url": link,
			"message": "Give this link to the user only: they open it, connect their account (sign in at the app, or enter an access token), and come back. It works once and for a few minutes; if it has expired, call connect_toolkit again for a new one."}
		if cat := r.opt.Catalog; cat != nil && len(cat.Provider(args.Toolkit)) == 0 {
			if why, waiting := cat.Waiting(args.Toolkit); waiting {
				out["waiting"] = why // e.g. its sign-in cannot be reached right now
			}
		}
		return json.Marshal(out)
	}
	return nil, fmt.Errorf("unknown meta-tool %q", name)
}

// appCredential checks that an app tool's toolkit is connected and returns
// the user's own credential for it ("" for the organization's).
func appCredential(ctx context.Context, st *turnState, t *tools.Tool) (string, error) {
	if !t.UserConnected() || st.Connections == nil {
		return st.Credentials[t.Provider], nil
	}
	ok, err := st.Connections.Connected(ctx, t.Provider)
	if err != nil {
		return "", err
	}
	if !ok {
		refused := tools.NeedsCredential(t)
		if b, isB := st.Connections.(brokenConnections); isB {
			if why, err := b.Broken(ctx, t.Provider); err == nil && why != "" {
				refused = tools.ConnectionBroken(t, why)
			}
		}
		return "", &loop.ToolError{Code: refused.Code, Message: refused.Msg}
	}
	cred, err := st.Connections.Credential(ctx, t.Provider)
	var refused *tools.RefusedError
	if errors.As(err, &refused) {
		return "", &loop.ToolError{Code: refused.Code, Message: refused.Msg}
	}
	return cred, err
}

// brokenConnections are Connections that say why a connection stopped
// working (an OAuth refresh the provider refused), and refresh an OAuth
// token an upstream refused (see tools.WithTokenRefresh).
type brokenConnections interface {
	Broken(ctx context.Context, toolkit string) (string, error)
}

type refreshingConnections interface {
	RefreshCredential(ctx context.Context, toolkit, stale string) (string, error)
}

// secretConnections are Connections whose credentials come with secrets
// that are not sent (an OAuth connection's refresh token): the call's
// scrubber masks them too (see tools.WithCallSecrets).
type secretConnections interface {
	CredentialSecrets(ctx context.Context, toolkit string) []string
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
