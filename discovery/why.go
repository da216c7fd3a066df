package discovery

import (
	"slices"
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"

	"github.com/trawl-dev/trawl/tools"
)

// maxWhyWords is how many matched words a why line lists per field.
const maxWhyWords = 6

var porterStemmer = porter.NewPorterStemmer() // stateless; safe for concurrent use

// why says in one short line why t matched: the query's words found in
// each of its fields (a thesaurus word as "event (for meeting)"), the
// action it shares with the query, and whether the semantic ranking
// found it close in meaning. Two near-duplicates (listUsers,
// listGroupUsers) read apart by it: one matched "group", one did not.
func (ix *Index) why(t *tools.Tool, terms []queryTerm, acts []queryAction, semantic bool) string {
	f := ix.facts[t.ID]
	fields := []struct{ label, text string }{
		{"name", f.nameText},
		{"toolkit", f.kitText},
		{"description", strings.ToLower(t.Description)},
		{"parameters", f.paramText},
		{"toolkit description", f.kitDescText},
	}
	// A word can stem to a query stem only if it begins with the stem
	// less its last letter (Porter turns a final y into i, drops an e):
	// only those words are stemmed, which keeps this cheap next to the
	// search itself.
	prefixes := make([]string, len(terms))
	for i, qt := range terms {
		prefixes[i] = qt.stem[:max(1, len(qt.stem)-1)]
	}
	done := map[string]bool{}
	var parts []string
	for _, field := range fields {
		lower := field.text
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.Contains(lower, p) }) {
			continue
		}
		var cand []string
		for _, lw := range strings.FieldsFunc(lower, func(r rune) bool { return !isWordRune(r) }) {
			for _, p := range prefixes {
				if strings.HasPrefix(lw, p) {
					cand = append(cand, lw)
					break
				}
			}
		}
		if len(cand) == 0 {
			continue
		}
		toks := make(analysis.TokenStream, len(cand))
		for i, w := range cand {
			toks[i] = &analysis.Token{Term: []byte(w)}
		}
		stems := map[string]bool{}
		for _, tok := range porterStemmer.Filter(toks) { // the stemmed analyzer's last step; the words are lowercased already
			stems[string(tok.Term)] = true
		}
		var words []string
		for _, qt := range terms {
			if done[qt.stem] || !stems[qt.stem] {
				continue
			}
			done[qt.stem] = true
			if len(words) == maxWhyWords {
				continue
			}
			w := qt.plain
			if qt.from != "" {
				w += " (for " + qt.from + ")"
			}
			words = append(words, w)
		}
		if len(words) > 0 {
			parts = append(parts, field.label+": "+strings.Join(words, ", "))
		}
	}
	for _, a := range acts {
		if slices.Contains(f.actions, a.action) {
			parts = append(parts, "action: "+a.action)
			break
		}
	}
	switch {
	case len(parts) == 0 && semantic:
		return "close in meaning (no words in common)"
	case len(parts) == 0:
		return "matched a word within one edit" // the typo fallback
	case semantic:
		parts = append(parts, "close in meaning")
	}
	return "matched " + strings.Join(parts, "; ")
}
