package discovery

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
)

// Scoring only the tools a rare word matched (prune.go) finds what a full
// search finds: the same hits, in the same order, with the same scores
// to the last bit and the same why lines, over a pool of 10,000 tools
// (2,000 under -race; and the demo and vendor toolkits' 1,759 when
// ../shared is there), for
// the benchmark's queries and every labelled query, with and without a
// toolkit filter. And it answers a good share of them (else this test
// would compare a full search with itself).
func TestPrunedSearchIsExact(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) {
		comparePruned(t, synthIndex(t), "app0003", "app0040")
	})
	t.Run("vendor", func(t *testing.T) {
		if sharedSpecs() == "" {
			t.Skip("../shared not found: the vendor toolkits are not searched")
		}
		comparePruned(t, newTestIndex(t, allDemoTools(t), vendorTools(t)), "xero", "okta")
	})
}

var synth struct {
	sync.Once
	ix  *Index
	err error
}

// synthIndex is one index of 10,000 synthetic tools (2,000 under -race,
// which slows the build from seconds to most of a minute), for the tests
// of this file. Searching does not change it.
func synthIndex(t *testing.T) *Index {
	n := 10000
	if raceEnabled {
		n = 2000
	}
	synth.Do(func() { synth.ix, synth.err = NewIndex(synthTools(t, n)) })
	if synth.err != nil {
		t.Fatal(synth.err)
	}
	return synth.ix
}

// pruneQueries are the benchmark's queries and every labelled query.
func pruneQueries(t *testing.T) []string {
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
	if raceEnabled {
		// Every fifth (the searches are sequential: the race detector has
		// little to find in them, and slows them several-fold).
		var some []string
		for i := 0; i < len(qs); i += 5 {
			some = append(some, qs[i])
		}
		qs = some
	}
	return qs
}

// The bound a pruned search rests on holds: in the full query, no tool
// that no rare word (nor the whole name) matched scores above it — over
// every tool the full search scores, for each query pruning applies to,
// whether or not its bound was beaten.
func TestPruneBoundHolds(t *testing.T) {
	ix := synthIndex(t)
	ix.prune.once.Do(ix.initPrune)
	if ix.prune.docs == nil {
		t.Fatalf("pruning is off for a scorch index of %d tools", ix.Len())
	}
	adv, err := ix.bleve.Advanced()
	if err != nil {
		t.Fatal(err)
	}
	r, err := adv.Reader()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	planned, others, closest := 0, 0, 0.0
	for _, q := range pruneQueries(t) {
		terms := ix.queryTerms(q)
		clauses := ix.fieldClauses(terms)
		p := ix.prunePlan(r, clauses, exactKey(q))
		if p == nil {
			continue
		}
		planned++
		// The best score of a tool none of the plan's rare terms matched.
		var rare []query.Query
		for _, cl := range p.ts {
			for _, x := range cl {
				if x.list != nil {
					tq := bleve.NewTermQuery(x.stem)
					tq.SetField(x.field)
					rare = append(rare, tq)
				}
			}
		}
		only := bleve.NewBooleanQuery()
		only.AddMust(ix.buildQuery(q, terms, clauses, false))
		only.AddMustNot(rare...)
		req := bleve.NewSearchRequestOptions(only, 1, 0, false)
		req.SortBy([]string{"-_score"})
		res, err := ix.bleve.Search(req)
		if err != nil {
			t.Fatal(err)
		}
		others += int(res.Total)
		if len(res.Hits) == 0 {
			continue
		}
		h := res.Hits[0]
		closest = max(closest, h.Score/p.bound)
		if h.Score > p.bound {
			t.Errorf("%q: %s, which no rare word matched, scores %g, above the bound %g", q, h.ID, h.Score, p.bound)
		}
	}
	t.Logf("%d queries planned; %d tools only common words matched, the closest at %.2f of the bound", planned, others, closest)
	if planned == 0 || others == 0 {
		t.Errorf("%d queries planned, %d tools only common words matched: nothing was checked", planned, others)
	}
}

func comparePruned(t *testing.T, ix *Index, kits ...string) {
	qs := pruneQueries(t)
	searched, pruned := 0, 0
	for _, kit := range append([]string{""}, kits...) {
		if kit != "" {
			qs = qs[:min(len(qs), len(benchQueries)+40)] // a toolkit filter, on fewer queries
		}
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
