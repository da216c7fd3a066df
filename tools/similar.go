package tools

import (
	"cmp"
	"slices"
	"strings"
)

// EditDistance is the Levenshtein distance between a and b, in runes.
func EditDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

// Similar returns the names among candidates a misspelt name most likely
// meant, nearest first (case ignored, ties by name): those within a few
// edits of it (a quarter of its length, at least 2), and those that
// equal it once "_" and "-" are ignored.
func Similar(name string, candidates []string) []string {
	type cand struct {
		name string
		dist int
	}
	lower := strings.ToLower(name)
	bare := strings.NewReplacer("_", "", "-", "").Replace(lower)
	maxDist := max(2, len([]rune(name))/4)
	var near []cand
	for _, c := range candidates {
		lc := strings.ToLower(c)
		d := EditDistance(lower, lc)
		if d > maxDist && strings.NewReplacer("_", "", "-", "").Replace(lc) == bare {
			d = maxDist
		}
		if d <= maxDist {
			near = append(near, cand{c, d})
		}
	}
	slices.SortFunc(near, func(a, b cand) int { return cmp.Or(cmp.Compare(a.dist, b.dist), cmp.Compare(a.name, b.name)) })
	var out []string
	for _, c := range near {
		out = append(out, c.name)
	}
	return out
}
