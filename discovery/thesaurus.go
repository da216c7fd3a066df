package discovery

import (
	"strings"

	"github.com/blevesearch/bleve/v2/analysis"
)

// synonymWeight is how much a word the thesaurus adds counts, relative to
// the query's own words: enough to find a tool described in other words,
// not enough to outrank one that uses the user's.
const synonymWeight = 0.5

// thesaurus maps words people use when asking for something to the words
// tool names and descriptions of business apps tend to use instead. It is
// vocabulary of the domains connected apps cover (mail, calendar, CRM,
// chat), not of any one toolkit; keys are lowercase and unstemmed, and a
// key's plural is looked up as the key.
var thesaurus = map[string]string{
	// mail
	"email":        "mail message",
	"inbox":        "mail message",
	"folder":       "label",
	"tag":          "label",
	"category":     "label",
	"rule":         "filter",
	"junk":         "spam",
	"flag":         "star",
	"unflag":       "unstar",
	"bin":          "trash",
	"wastebasket":  "trash",
	"restore":      "untrash",
	"recover":      "untrash restore",
	"undelete":     "untrash restore",
	"ooo":          "vacation auto reply",
	"office":       "vacation",
	"away":         "vacation auto reply",
	"holiday":      "vacation",
	"autoreply":    "vacation auto reply",
	"compose":      "draft send",
	"assistant":    "delegate",
	"secretary":    "delegate",
	"respond":      "reply",
	"answer":       "reply",
	"preference":   "settings",
	"conversation": "thread",
	"file":         "attachment",
	"pdf":          "attachment",
	"document":     "attachment",
	// calendar
	"meeting":      "event",
	"appointment":  "event",
	"invite":       "event attendee",
	"invitation":   "event attendee",
	"schedule":     "event",
	"reschedule":   "update event",
	"postpone":     "update",
	"available":    "free busy",
	"availability": "free busy",
	"agenda":       "event calendar",
	// CRM
	"lead":          "contact",
	"prospect":      "contact",
	"person":        "contact",
	"people":        "contact",
	"opportunity":   "deal",
	"opportunities": "deal",
	"organisation":  "company",
	"organization":  "company",
	"firm":          "company",
	"account":       "company",
	"comment":       "note",
	"employee":      "headcount",
	"staff":         "headcount",
	"headcount":     "employee",
	// chat
	"text": "chat message",
	"sms":  "chat message",
	"dm":   "chat message",
	// verbs
	"cancel":  "delete",
	"remove":  "delete",
	"discard": "delete",
	"erase":   "delete",
	"change":  "update",
	"edit":    "update",
	"modify":  "update",
	"rename":  "update",
	"add":     "create",
	"new":     "create",
	"make":    "create",
	"show":    "list get",
	"view":    "list get",
	"find":    "search",
	"look":    "search",
}

// expand returns the thesaurus words for a query's plain tokens, without
// the words the query already holds.
func expand(tokens analysis.TokenStream) []string {
	have := map[string]bool{}
	for _, t := range tokens {
		have[string(t.Term)] = true
	}
	var out []string
	for _, t := range tokens {
		w := string(t.Term)
		syn, ok := thesaurus[w]
		if !ok && len(w) > 3 && strings.HasSuffix(w, "s") {
			syn, ok = thesaurus[strings.TrimSuffix(w, "s")]
		}
		if !ok {
			continue
		}
		for _, s := range strings.Fields(syn) {
			if !have[s] {
				have[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}
