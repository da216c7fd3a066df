package discovery

import (
	"math"

	"github.com/blevesearch/bleve/v2/analysis"

	"github.com/trawl-dev/trawl/tools"
)

// kitStats tell which toolkit a query is about. A request's words say
// which app it is for even when the best-matching tool's own text does
// not hold them: "who else has access to my mailbox" is about mail, for
// the mail toolkit's tools speak of the mailbox throughout, though the
// tool that lists delegates never says "mailbox", while an identity
// app's "cross-app access" tools match "access" better. So each
// toolkit's share of tools whose name or description holds a word is
// kept, and a query's toolkit scores weigh its tools (see kitBoost).
type kitStats struct {
	kits  []string          // toolkit ids
	tools []int             // per toolkit, its number of tools
	df    map[string][]kitN // stem → the toolkits whose tools' names or descriptions hold it
}

// kitN is how many tools of toolkit kit (an index into kitStats.kits)
// hold a stem. Slices of them take a fraction of the memory of maps.
type kitN struct{ kit, n int32 }

// kitBoost is how much more the tools of the toolkit the query is most
// about score than those of a toolkit it is not about at all.
var kitBoost = 1.0

func newKitStats(ts []*tools.Tool, stemmed analysis.Analyzer) *kitStats {
	k := &kitStats{df: map[string][]kitN{}}
	index := map[string]int32{}
	counts := map[string]map[int32]int32{}
	for _, t := range ts {
		kit := toolkitOf(t)
		i, ok := index[kit]
		if !ok {
			i = int32(len(k.kits))
			index[kit] = i
			k.kits = append(k.kits, kit)
			k.tools = append(k.tools, 0)
		}
		k.tools[i]++
		seen := map[string]bool{}
		text := splitIdentifiers(nameWords(t.Name, kit, t.ToolkitName, t.Provider)) + "\n" + t.Description
		for _, tok := range stemmed.Analyze([]byte(text)) {
			s := string(tok.Term)
			if seen[s] {
				continue
			}
			seen[s] = true
			m := counts[s]
			if m == nil {
				m = map[int32]int32{}
				counts[s] = m
			}
			m[i]++
		}
	}
	for s, m := range counts {
		list := make([]kitN, 0, len(m))
		for kit, n := range m {
			list = append(list, kitN{kit, n})
		}
		k.df[s] = list
	}
	return k
}

// weights are the factor each toolkit's tools score with for the query's
// terms: 1 + kitBoost × the toolkit's score relative to the best one's.
// A toolkit's score sums, over the terms, the term's weight times the
// share of the toolkit's tools that hold it times how few toolkits do
// (an idf over toolkits). Nil when there is one toolkit or none scores.
func (k *kitStats) weights(terms []queryTerm) map[string]float64 {
	if len(k.kits) < 2 {
		return nil
	}
	score := map[string]float64{}
	best := 0.0
	for _, qt := range terms {
		kits := k.df[qt.stem]
		if len(kits) == 0 {
			continue
		}
		idf := math.Log(1 + float64(len(k.kits))/float64(len(kits)))
		for _, kn := range kits {
			kit := k.kits[kn.kit]
			score[kit] += qt.weight * idf * float64(kn.n) / float64(k.tools[kn.kit])
			best = max(best, score[kit])
		}
	}
	if best == 0 {
		return nil
	}
	for kit, s := range score {
		score[kit] = 1 + kitBoost*s/best
	}
	return score
}
