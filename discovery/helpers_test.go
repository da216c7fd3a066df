package discovery

import (
	"slices"
	"testing"

	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// demoKits are the demo toolkits' tools by toolkit id (chat 3, calendar
// 8, crm 15, mail 70).
func demoKits(tb testing.TB) map[string][]*tools.Tool {
	tb.Helper()
	out := map[string][]*tools.Tool{}
	for id, data := range demo.Manifests("http://127.0.0.1:1") {
		m, err := tools.ParseManifest(data)
		if err != nil {
			tb.Fatalf("demo manifest %s: %v", id, err)
		}
		ts, err := m.Tools()
		if err != nil {
			tb.Fatalf("demo manifest %s: %v", id, err)
		}
		out[m.Toolkit] = ts
	}
	return out
}

// allDemoTools are every demo toolkit's tools, toolkits in id order.
func allDemoTools(tb testing.TB) []*tools.Tool {
	kits := demoKits(tb)
	ids := make([]string, 0, len(kits))
	for id := range kits {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []*tools.Tool
	for _, id := range ids {
		out = append(out, kits[id]...)
	}
	return out
}

func names(ts []*tools.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func hitNames(hs []Hit) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Tool.Name
	}
	return out
}
