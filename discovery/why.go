package discovery

import (
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/tools"
)

// maxWhyWords is how many matched words a why line lists per field.
const maxWhyWords = 6

// why says in one short line why t matched: the query's words found in
// each of its fields (a thesaurus word as "event (for meeting)"), the
// action it shares with the query, and whether the semantic ranking
// found it close in meaning. Two near-duplicates (listUsers,
// listGroupUsers) read apart by it: one matched "group", one did not.
func (ix *Index) why(t *tools.Tool, terms []queryTerm, acts []queryAction, semantic bool) string {
	short := nameWords(t.Name, toolkitOf(t), t.ToolkitName, t.Provider)
	var params strings.Builder
	for _, p := range t.Params {
		params.WriteString(splitIdentifiers(p.Name) + " " + p.Description + "\n")
	}
	fields := []struct{ label, text string }{
		{"name", splitIdentifiers(short)},
		{"toolkit", splitIdentifiers(toolkitOf(t)) + " " + t.ToolkitName},
		{"description", t.Description},
		{"parameters", params.String()},
		{"path", pathWords(t.Path)},
		{"toolkit description", t.ToolkitDescription},
	}
	done := map[string]bool{}
	var parts []string
	for _, f := range fields {
		stems := map[string]bool{}
		for _, tok := range ix.stemmed.Analyze([]byte(f.text)) {
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
			parts = append(parts, f.label+": "+strings.Join(words, ", "))
		}
	}
	f := ix.facts[t.ID]
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
