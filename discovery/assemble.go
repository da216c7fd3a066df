package discovery

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/trawl-dev/trawl/tools"
)

// DefaultDirectBudget is how many connected-app tools go to the model
// directly when AssembleOptions.DirectBudget is zero.
const DefaultDirectBudget = 15

// Mode is a binding entry's discovery override. The zero value is ModeAuto.
type Mode int

const (
	// ModeAuto follows the budget rule: the entry's toolkit is direct when
	// it fits, pooled otherwise.
	ModeAuto Mode = iota
	// ModePooled always puts the entry's app tools in the pool
	// (discovery: true).
	ModePooled
	// ModeDirect always gives the entry's app tools to the model directly,
	// and counts them against the budget (discovery: false).
	ModeDirect
)

func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModePooled:
		return "pooled"
	case ModeDirect:
		return "direct"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Entry is one binding of an agent as discovery sees it: a whole toolkit,
// or a single tool.
type Entry struct {
	// Tools are the entry's tools. Only connected-app tools (Kind app)
	// take part in discovery; any other tool is always direct and never
	// counted against the budget.
	Tools []*tools.Tool
	// Toolkit is the toolkit id of a toolkit binding. Empty for a single
	// tool binding: an app tool then belongs to its own Toolkit (or, when
	// that is empty, its Provider), so single tools of one toolkit bound
	// one by one are sized and placed together.
	Toolkit string
	// Mode overrides the budget rule for the entry's app tools.
	Mode Mode
}

// AssembleOptions tunes Assemble. The zero value applies the defaults.
type AssembleOptions struct {
	// DirectBudget is how many connected-app tools may go to the model
	// directly. Zero: DefaultDirectBudget (15). Negative: none, so every
	// ModeAuto toolkit is pooled (ModeDirect entries stay direct).
	DirectBudget int
}

func (o AssembleOptions) budget() int {
	switch {
	case o.DirectBudget == 0:
		return DefaultDirectBudget
	case o.DirectBudget < 0:
		return 0
	}
	return o.DirectBudget
}

// Names of the meta-tools discovery adds to a step's tool list.
const (
	MetaSearchTools     = "search_tools"
	MetaLoadTool        = "load_tool"
	MetaListConnections = "list_connections"
	MetaConnectToolkit  = "connect_toolkit"
)

// Assembly is one step's tool list as discovery decides it.
type Assembly struct {
	// Direct are the tools the model gets this step, in binding order
	// (each tool once), followed by the thread's loaded tools in the order
	// they were loaded.
	Direct []*tools.Tool
	// Pool are the app tools behind search_tools, in binding order. It does
	// not depend on what a thread has loaded: a loaded tool stays in the
	// pool (and is also in Direct), so one index built from Pool serves
	// every thread of the agent, and search_tools can mark it loaded.
	Pool []*tools.Tool
	// Meta names the meta-tools to add, in this order: MetaSearchTools and
	// MetaLoadTool when Pool is not empty; MetaListConnections and MetaConnectToolkit
	// when any connected app is bound.
	Meta []string
}

// MetaTools describes the assembly's meta-tools for the model.
func (a Assembly) MetaTools() []MetaTool {
	out := make([]MetaTool, 0, len(a.Meta))
	for _, name := range a.Meta {
		if m, ok := LookupMeta(name); ok {
			out = append(out, m)
		}
	}
	return out
}

// Assemble splits an agent's bindings into the tools the model gets
// directly and the pool behind search_tools. It is a pure function of its
// arguments: the same bindings and loaded ids give the same assembly.
//
// The rule, for connected-app tools (Kind app) only:
//   - ModeDirect entries are direct and use up budget first;
//   - ModeAuto tools are grouped by toolkit; toolkits are kept direct
//     whole, smallest first (ties by toolkit id), while they fit in what
//     is left of the budget; the first toolkit that does not fit, and every
//     one after it, is pooled whole;
//   - ModePooled entries are pooled.
//
// A tool bound twice appears once; when its entries disagree, direct wins
// over pooled, and either over auto. Own API tools, MCP tools and any
// other non-app tool are always direct and do not count.
//
// loaded are the ids of tools the thread made callable with load_tool.
// Each one that is in the pool joins Direct on top of the budget: loading
// never pushes a toolkit out, so the model keeps what it was already
// given. Ids of tools that are not pooled (unbound since, or already
// direct) are ignored.
func Assemble(entries []Entry, loaded []string, opt AssembleOptions) Assembly {
	type placed struct {
		tool   *tools.Tool
		mode   Mode
		kit    string
		pooled bool
		added  bool // a loaded tool already appended to Direct
	}
	total := 0
	for _, e := range entries {
		total += len(e.Tools)
	}
	order := make([]placed, 0, total)
	byID := make(map[string]int, total) // index in order
	apps := false
	for _, e := range entries {
		if e.Toolkit != "" {
			apps = true
		}
		for _, t := range e.Tools {
			if t == nil {
				continue
			}
			if t.Kind == tools.KindApp {
				apps = true
			}
			if i, ok := byID[t.ID]; ok {
				order[i].mode = stronger(order[i].mode, e.Mode)
				continue
			}
			byID[t.ID] = len(order)
			order = append(order, placed{tool: t, mode: e.Mode, kit: cmp.Or(e.Toolkit, t.Toolkit, t.Provider)})
		}
	}

	// Size the ModeAuto toolkits and spend what ModeDirect left over.
	remaining := opt.budget()
	size := map[string]int{}
	for _, p := range order {
		if p.tool.Kind != tools.KindApp {
			continue
		}
		switch p.mode {
		case ModeDirect:
			remaining--
		case ModeAuto:
			size[p.kit]++
		}
	}
	kits := make([]string, 0, len(size))
	for k := range size {
		kits = append(kits, k)
	}
	slices.SortFunc(kits, func(a, b string) int {
		return cmp.Or(cmp.Compare(size[a], size[b]), cmp.Compare(a, b))
	})
	directKit := make(map[string]bool, len(kits))
	for _, k := range kits {
		if size[k] > remaining {
			break // this toolkit and every later (larger or equal) one is pooled
		}
		directKit[k] = true
		remaining -= size[k]
	}

	var a Assembly
	for i := range order {
		p := &order[i]
		p.pooled = p.tool.Kind == tools.KindApp &&
			(p.mode == ModePooled || p.mode == ModeAuto && !directKit[p.kit])
		if p.pooled {
			a.Pool = append(a.Pool, p.tool)
		} else {
			a.Direct = append(a.Direct, p.tool)
		}
	}
	for _, id := range loaded {
		if i, ok := byID[id]; ok && order[i].pooled && !order[i].added {
			order[i].added = true // a repeated id is added once
			a.Direct = append(a.Direct, order[i].tool)
		}
	}
	if len(a.Pool) > 0 {
		a.Meta = append(a.Meta, MetaSearchTools, MetaLoadTool)
	}
	if apps {
		a.Meta = append(a.Meta, MetaListConnections, MetaConnectToolkit)
	}
	return a
}

// stronger is the mode that wins when one tool is bound by two entries.
func stronger(a, b Mode) Mode {
	rank := func(m Mode) int {
		switch m {
		case ModeDirect:
			return 2
		case ModePooled:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
