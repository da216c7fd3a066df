package discovery

import (
	"slices"
	"strings"
	"unicode/utf8"

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
	// Each term is listed once, in the first field that holds it; a
	// thesaurus word only when the query's own word matched nowhere.
	matched := make([][]queryTerm, len(fields))
	direct := map[string]bool{} // the query's own words that matched
	done := map[string]bool{}
	for fi, field := range fields {
		cand := candidates(field.text, prefixes)
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
		for _, qt := range terms {
			if !done[qt.stem] && stems[qt.stem] {
				done[qt.stem] = true
				matched[fi] = append(matched[fi], qt)
				if qt.from == "" {
					direct[qt.plain] = true
				}
			}
		}
	}
	var parts []string
	for fi, qts := range matched {
		var words []string
		for _, qt := range qts {
			switch {
			case len(words) == maxWhyWords:
			case qt.from == "":
				words = append(words, qt.plain)
			case !direct[qt.from]:
				words = append(words, qt.plain+" (for "+qt.from+")")
			}
		}
		if len(words) > 0 {
			parts = append(parts, fields[fi].label+": "+strings.Join(words, ", "))
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

// candidates are the words of lower (lowercase text) that begin with one
// of prefixes, found without splitting the whole text.
func candidates(lower string, prefixes []string) []string {
	var out []string
	for _, p := range prefixes {
		for from := 0; from < len(lower); {
			i := strings.Index(lower[from:], p)
			if i < 0 {
				break
			}
			start := from + i
			end := start + len(p)
			from = end
			if start > 0 {
				if r, _ := utf8.DecodeLastRuneInString(lower[:start]); isWordRune(r) {
					continue // inside a word
				}
			}
			for end < len(lower) {
				r, size := utf8.DecodeRuneInString(lower[end:])
				if !isWordRune(r) {
					break
				}
				end += size
			}
			from = end
			if w := lower[start:end]; !slices.Contains(out, w) {
				out = append(out, w)
			}
		}
	}
	return out
}
