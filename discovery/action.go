package discovery

import (
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/tools"
)

// A tool's action is what its name says it does to its object: the verb
// of "MAIL_SEND_EMAIL", "listPropertyBookings" or "ban_user_from_guild".
// Tool names spell the same few actions many ways (get, retrieve, show,
// fetch; add, create, insert), and users spell them in yet other words
// (move a meeting, kick a member, who owes us), so both sides are mapped
// to a small set of canonical actions and the index matches them in a
// field of their own. That is what lets "send an email" prefer the tool
// that sends over one that lists send-as addresses: both names hold
// "send", only one's action is send.
//
// The canonical actions are list, get, search, create, update, delete and
// send; a verb outside them (ban, merge, archive, reply…) is its own
// action, so a tool named for it matches the user's word in the action
// field too.

// toolVerbs maps the verbs tool names begin with to their canonical
// action. Keys are lowercase.
var toolVerbs = map[string]string{
	"list": "list", "browse": "list", "enumerate": "list",
	"get": "get", "retrieve": "get", "show": "get", "fetch": "get", "read": "get",
	"find": "get", "describe": "get", "lookup": "get", "view": "get", "collect": "get",
	"search": "search", "query": "search",
	"create": "create", "add": "create", "new": "create", "insert": "create",
	"post": "create", "register": "create", "provision": "create", "make": "create",
	"submit": "create", "upload": "create", "enqueue": "create",
	"update": "update", "edit": "update", "modify": "update", "change": "update",
	"patch": "update", "replace": "update", "set": "update", "put": "update",
	"rename": "update", "upsert": "update", "mutate": "update", "manage": "update",
	"delete": "delete", "remove": "delete", "destroy": "delete", "erase": "delete",
	"discard": "delete", "unassign": "delete", "detach": "delete", "unlink": "delete",
	"send": "send", "email": "send",
}

// userVerbs maps the words people use for an action to the canonical
// actions they may mean, best first. A user's verb outside this table
// is matched as it is. Keys are lowercase and unstemmed; a key's -s, -ed
// and -ing forms are looked up as the key.
var userVerbs = map[string][]string{
	// reading
	"list": {"list"}, "show": {"list", "get"}, "view": {"get", "list"}, "see": {"get", "list"},
	"read": {"get", "list"}, "display": {"list", "get"}, "browse": {"list"},
	"get": {"get", "list"}, "retrieve": {"get"}, "fetch": {"get", "list"}, "check": {"get"},
	"download": {"get"}, "open": {"get", "create"},
	// finding
	"find": {"search", "get", "list"}, "search": {"search"}, "look": {"search", "get"},
	"lookup": {"search", "get"}, "query": {"search"}, "filter": {"search", "list"},
	// creating
	"create": {"create"}, "add": {"create"}, "new": {"create"}, "make": {"create"},
	"write": {"create"}, "compose": {"create"}, "start": {"create"}, "schedule": {"create"},
	"book": {"create"}, "log": {"create"}, "record": {"create"}, "raise": {"create"},
	"register": {"create"}, "submit": {"create"}, "post": {"create", "send"},
	"attach": {"create"}, "upload": {"create"}, "invite": {"create"}, "setup": {"create"},
	// changing
	"update": {"update"}, "edit": {"update"}, "change": {"update"}, "modify": {"update"},
	"move": {"update"}, "reschedule": {"update"}, "postpone": {"update"}, "push": {"update"},
	"rename": {"update"}, "fix": {"update"}, "set": {"update"}, "turn": {"update"},
	"switch": {"update"}, "enable": {"update"}, "disable": {"update"}, "replace": {"update"},
	// removing
	"delete": {"delete"}, "remove": {"delete"}, "cancel": {"delete"}, "discard": {"delete"},
	"erase": {"delete"}, "drop": {"delete"}, "kick": {"delete"}, "destroy": {"delete"},
	"unassign": {"delete"}, "detach": {"delete"}, "unlink": {"delete"},
	// sending
	"send": {"send"}, "email": {"send"}, "text": {"send"}, "message": {"send"},
	"notify": {"send"}, "dm": {"send"}, "rid": {"delete"},
}

// questionActions are what a request without a verb most often asks for
// when it is a question ("who is on the backend team", "which invoices
// are overdue"): to see things. They weigh less than a verb's.
var questionWords = map[string]bool{"who": true, "what": true, "which": true, "whats": true, "how": true, "where": true, "when": true, "any": true}

// toolActions reads a tool name's words as an action and its object:
// the canonical action of the name's verb and the verb itself (["create",
// "add"] for okta's addGroup), and the other words ("group"). A "get"
// whose object is plural ("getInvoices") lists. A name without a known
// verb takes its action from the HTTP method and is all object; one
// without either has no action.
func toolActions(words []string, method, path string) (actions, object []string) {
	if len(words) > 1 && isActionWord(strings.ToLower(words[0])) {
		if _, common := toolVerbs[strings.ToLower(words[0])]; !common {
			return []string{strings.ToLower(words[0])}, words[1:] // a verb of its own: ban, merge, archive…
		}
	}
	// The verb is usually first, but may follow a qualifier or the
	// object ("bulk_delete_messages", "guild_search").
	for i, w := range words {
		lw := strings.ToLower(w)
		canon, ok := toolVerbs[lw]
		if !ok {
			continue
		}
		object = append(slices.Clone(words[:i]), words[i+1:]...)
		if len(object) == 0 {
			object = words
		}
		if canon == "get" && plural(words[len(words)-1]) {
			canon = "list"
		}
		if canon == lw {
			return []string{canon}, object
		}
		return []string{canon, lw}, object
	}
	return methodAction(method, path), words
}

// isActionWord says whether a name's first word reads as a verb of its
// own: not a noun the toolkit is named after or an object.
func isActionWord(w string) bool {
	switch w {
	case "ban", "unban", "merge", "archive", "unarchive", "block", "unblock", "reply", "forward",
		"star", "unstar", "trash", "untrash", "mark", "report", "import", "export", "empty",
		"activate", "deactivate", "reactivate", "suspend", "unsuspend", "unlock", "reset",
		"expire", "revoke", "assign", "convert", "publish", "link", "pin", "follow", "join",
		"leave", "sync", "crosspost", "execute", "consume", "prune", "stage", "dismiss",
		"resolve", "redact", "cancel", "start", "approve", "reject", "enable", "disable",
		"quick", "trigger", "verify", "rotate", "upload", "download", "attach", "identify":
		return true
	}
	return false
}

// methodAction is the action an HTTP operation implies: GET of a
// collection lists, of one item gets; POST creates, PUT and PATCH
// update, DELETE deletes.
func methodAction(method, path string) []string {
	switch strings.ToUpper(method) {
	case "GET":
		if strings.HasSuffix(strings.TrimRight(path, "/"), "}") {
			return []string{"get"}
		}
		return []string{"list"}
	case "POST":
		return []string{"create"}
	case "PUT", "PATCH":
		return []string{"update"}
	case "DELETE":
		return []string{"delete"}
	}
	return nil
}

// plural reports whether a name's last word is an English plural noun
// ("Invoices", "webhooks"), not a singular ending in s ("Status",
// "Address", "Analysis").
func plural(w string) bool {
	w = strings.ToLower(w)
	if len(w) < 3 || !strings.HasSuffix(w, "s") {
		return false
	}
	for _, end := range []string{"ss", "us", "is", "ys"} {
		if strings.HasSuffix(w, end) && !strings.HasSuffix(w, "ays") && !strings.HasSuffix(w, "eys") {
			return false
		}
	}
	return true
}

// queryAction is one canonical action a query asks for, with its weight.
type queryAction struct {
	action string
	weight float64
}

// Weights of the actions a query implies: its verbs' first meaning, their
// other meanings, and a question's "see it".
const (
	verbWeight      = 1
	otherMeanWeight = 0.5
	questionWeight  = 0.4
	whVerbScale     = 0.5 // a wh-question's verbs
)

// ambiguousVerbs are words of userVerbs that are as often nouns ("the
// email from Dana", "the sales pipeline's stages", "mark it as read"):
// they are read as verbs only where a request's verb stands, first in a
// clause.
var ambiguousVerbs = map[string]bool{
	"email": true, "text": true, "message": true, "log": true, "record": true, "book": true,
	"schedule": true, "post": true, "set": true, "filter": true, "start": true, "open": true,
	"check": true, "list": true, "view": true, "query": true, "search": true, "push": true,
	"read": true, "display": true, "dm": true, "lookup": true, "look": true, "get": true,
	"show": true, "see": true, "setup": true,
}

// leadIns are words a request may begin with before its verb ("can you
// move…", "I want to send…", "please add…"); clauseStarts begin a new
// clause ("… and send it").
var (
	leadIns      = map[string]bool{"please": true, "can": true, "could": true, "would": true, "will": true, "you": true, "i": true, "we": true, "d": true, "ll": true, "like": true, "want": true, "need": true, "let": true, "lets": true, "s": true, "me": true, "us": true, "help": true, "just": true, "also": true, "quickly": true, "hey": true, "ok": true, "now": true}
	clauseStarts = map[string]bool{"to": true, "and": true, "then": true, "or": true}
)

// queryActions reads the actions a query asks for from its words
// (lowercased, unstemmed, stop words kept, since "who" and "which" say
// something here): each verb of userVerbs gives its canonical actions (an
// ambiguous one only first in a clause), a word first in a clause that
// names a tool's own verb (ban, merge) gives itself, and a question
// without either gives list and get.
func queryActions(words []string) []queryAction {
	var out []queryAction
	seen := map[string]bool{}
	add := func(a string, w float64) {
		if !seen[a] {
			seen[a] = true
			out = append(out, queryAction{a, w})
		}
	}
	question, whQuestion, start, first := false, false, true, true
	scale := 1.0
	for _, w := range words {
		w = strings.ToLower(w)
		switch {
		case questionWords[w]:
			question = true
			if first && w != "how" {
				// "which addresses can I send as", "who changed the
				// settings": a wh-question asks about things; its verbs
				// say which, not what to do.
				whQuestion, scale = true, whVerbScale
			}
			start, first = false, false
			continue
		case leadIns[w]:
			continue
		case clauseStarts[w]:
			start = true
			continue
		}
		atStart := start
		start, first = false, false
		if key, acts, ok := lookupVerb(w); ok && (atStart || !ambiguousVerbs[key]) {
			for i, a := range acts {
				weight := otherMeanWeight
				if i == 0 {
					weight = verbWeight
				}
				add(a, scale*weight)
			}
			continue
		}
		if atStart && isActionWord(w) { // most are nouns too: a reply, a pin, a report
			add(w, scale*verbWeight)
		}
	}
	if question && (len(out) == 0 || whQuestion) {
		add("list", questionWeight)
		add("get", questionWeight)
	}
	return out
}

// lookupVerb finds w in userVerbs, or its stem when w is an -s, -ed or
// -ing form of a key ("moved", "schedules", "cancelling").
func lookupVerb(w string) (key string, actions []string, ok bool) {
	if acts, ok := userVerbs[w]; ok {
		return w, acts, true
	}
	for _, suffix := range []string{"s", "es", "ed", "d", "ing"} {
		stem, ok := strings.CutSuffix(w, suffix)
		if !ok || len(stem) < 3 {
			continue
		}
		if acts, ok := userVerbs[stem]; ok {
			return stem, acts, true
		}
		// a doubled final consonant: cancelled, dropping
		if n := len(stem); n > 3 && stem[n-1] == stem[n-2] {
			if acts, ok := userVerbs[stem[:n-1]]; ok {
				return stem[:n-1], acts, true
			}
		}
	}
	return "", nil, false
}

// actionOf is the action of t and the object words of its short name.
func actionOf(t *tools.Tool, short string) (actions []string, object string) {
	acts, obj := toolActions(strings.Fields(short), t.Method, t.Path)
	return acts, strings.Join(obj, " ")
}

// toolFacts are what ranking knows of a tool beyond its text.
type toolFacts struct {
	actions []string // toolActions
	// specificity orders tools that tie: the number of the name's words
	// and of required parameters. The general tool (listUsers) has fewer
	// than its specialised variants (listGroupUsers, listApplicationUsers).
	specificity int
	// Lowercased words of the name (without its toolkit prefix), of the
	// toolkit's id and name, and of the parameters' names: what why
	// reads, kept to spare every search splitting them again.
	nameText, kitText, paramText string
	kitDescText                  string // lowercased toolkit description, shared by the toolkit's tools
}

func factsOf(t *tools.Tool) toolFacts {
	short := nameWords(t.Name, toolkitOf(t), t.ToolkitName, t.Provider)
	acts, obj := toolActions(strings.Fields(short), t.Method, t.Path)
	f := toolFacts{actions: acts, specificity: len(obj)}
	var params []string
	for _, p := range t.Params {
		if p.Required {
			f.specificity++
		}
		params = append(params, splitIdentifiers(p.Name))
	}
	f.nameText = strings.ToLower(short)
	f.kitText = strings.ToLower(splitIdentifiers(toolkitOf(t)) + " " + t.ToolkitName)
	f.paramText = strings.ToLower(strings.Join(params, " "))
	f.kitDescText = strings.ToLower(t.ToolkitDescription)
	return f
}

// actionMatch is the weight of the best of the query's actions that the
// tool's action is, 0 when none is.
func (f toolFacts) actionMatch(acts []queryAction) float64 {
	best := 0.0
	for _, a := range acts {
		if a.weight > best && slices.Contains(f.actions, a.action) {
			best = a.weight
		}
	}
	return best
}
