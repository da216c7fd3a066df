package discovery

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"testing"
)

// Scoring only the tools a rare word matched (prune.go) finds what a full
// search finds: the same hits, in the same order, with the same scores
// to the last bit and the same why lines, over a pool of 10,000 tools
// (and the demo and vendor toolkits' 1,759 when ../shared is there), for
// the benchmark's queries and every labelled query, with and without a
// toolkit filter. And it answers a good share of them (else this test
// would compare a full search with itself).
func TestPrunedSearchIsExact(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) {
		comparePruned(t, newTestIndex(t, synthTools(t, 10000)), "app0003", "app0100")
	})
	t.Run("vendor", func(t *testing.T) {
		if sharedSpecs() == "" {
			t.Skip("../shared not found: the vendor toolkits are not searched")
		}
		comparePruned(t, newTestIndex(t, allDemoTools(t), vendorTools(t)), "xero", "okta")
	})
}

func comparePruned(t *testing.T, ix *Index, kits ...string) {
	qs := slices.Clone(benchQueries)
	for _, path := range []string{demoSet, tuningSet, heldOutSet} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var set []labelledQuery
		if err := json.Unmarshal(data, &set); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		for _, q := range set {
			qs = append(qs, q.Query)
		}
	}
	searched, pruned := 0, 0
	for _, kit := range append([]string{""}, kits...) {
		for _, q := range qs {
			ix.noPrune = true
			want, err := ix.search(context.Background(), q, kit, rerankDepth, false)
			if err != nil {
				t.Fatal(err)
			}
			ix.noPrune = false
			before := ix.prunedRuns.Load()
			got, err := ix.search(context.Background(), q, kit, rerankDepth, false)
			if err != nil {
				t.Fatal(err)
			}
			searched++
			if ix.prunedRuns.Load() > before {
				pruned++
			}
			if !slices.EqualFunc(want, got, func(a, b Hit) bool { return a.Tool == b.Tool && a.Score == b.Score && a.Why == b.Why }) {
				t.Errorf("%q in %q: pruned search\n%v\nfull search\n%v", q, kit, hitsWithScores(got), hitsWithScores(want))
			}
		}
	}
	t.Logf("%d of %d searches answered pruned", pruned, searched)
	if pruned*2 < searched/3 {
		t.Errorf("only %d of %d searches were answered pruned", pruned, searched)
	}
}

func hitsWithScores(hs []Hit) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Tool.Name+" "+strconv.FormatFloat(h.Score, 'g', -1, 64))
	}
	return out
}
