package paginate

import (
	"regexp"
	"slices"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// ---- response side ----

// evidence is what makes an array property the primary one when its name
// alone does not.
type evidence struct {
	params   bool     // the paramOffer has paging parameters
	resource []string // folded names of the collection the path names
	single   bool     // the path names one resource (ends in a parameter)
}

var (
	// itemNames hold the items whatever else the envelope says.
	itemNames = []string{"data", "items", "results", "records", "entries", "values", "value", "elements", "rows"}
	// listNames hold the items of an envelope that looks like a page.
	listNames = []string{"content", "list", "hits", "nodes", "edges", "objects", "resources", "collection"}
	// containerNames may wrap the envelope one level down
	// ({"data": {"items": [...]}}).
	containerNames = []string{"data", "result", "response", "payload", "body", "page", "collection", "embedded"}
)

// resourceNames are the folded names an array holding the collection at
// path would carry: /2010-04-01/Accounts/{Sid}/Usage/Records.json gives
// "records" and "usagerecords". A path ending in a parameter names one
// resource and gives none. Trailing verbs and qualifiers (/search, /list,
// /get, /archived/public) name no collection: the segment before them
// does (/v2/invoices/search gives "invoices"). Earlier segments follow, so
// that a sub-collection's own name wins over its parent's.
func resourceNames(path string) []string {
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	if len(segs) == 0 || strings.HasPrefix(segs[len(segs)-1], "{") {
		return nil
	}
	for i, s := range segs {
		if j := strings.IndexAny(s, ".?"); j > 0 {
			segs[i] = s[:j]
		}
	}
	for len(segs) > 1 && slices.Contains(pathVerbs, foldName(segs[len(segs)-1])) {
		segs = segs[:len(segs)-1]
	}
	last := foldName(segs[len(segs)-1])
	out := []string{last}
	if len(segs) > 1 && !strings.HasPrefix(segs[len(segs)-2], "{") {
		out = append(out, foldName(segs[len(segs)-2])+last, singular(foldName(segs[len(segs)-2]))+last)
	}
	for i := len(segs) - 2; i >= 0; i-- {
		if s := segs[i]; !strings.HasPrefix(s, "{") && !slices.Contains(pathVerbs, foldName(s)) {
			out = append(out, foldName(s))
		}
	}
	return out
}

// pathVerbs are path segments that name an action or a qualifier rather
// than a collection.
var pathVerbs = []string{"search", "list", "get", "sync", "all", "query", "find", "filter", "archived", "public",
	"private", "active", "history", "scroll", "export", "v1", "v2", "v3", "api", "me"}

// singular strips an English plural ending from a folded name.
func singular(s string) string {
	switch {
	case strings.HasSuffix(s, "ies") && len(s) > 4:
		return s[:len(s)-3] + "y"
	case strings.HasSuffix(s, "sses"), strings.HasSuffix(s, "ches"), strings.HasSuffix(s, "shes"), strings.HasSuffix(s, "xes"):
		return s[:len(s)-2]
	case strings.HasSuffix(s, "s") && !strings.HasSuffix(s, "ss") && len(s) > 3:
		return s[:len(s)-1]
	}
	return s
}

// namesResource reports that an array named fold holds the collection
// res names: the same word in either number, or a compound ending or
// starting with it (subscription_events under /events, audit_log_entries
// under /audit-logs, gift_card_activities under /gift-cards/activities).
func namesResource(fold, res string) bool {
	if fold == "" || res == "" {
		return false
	}
	f, r := singular(fold), singular(res)
	switch {
	case f == r:
		return true
	case len(r) >= 4 && (strings.HasSuffix(f, r) || strings.HasPrefix(f, r)):
		return true
	}
	return false
}

// notItems are arrays every response of some APIs carries beside the
// data: they are never the items (Square's errors, Xero's Warnings).
var notItems = []string{"errors", "warnings", "error", "messages_errors"}

// bodyOffer is what the response offers: the primary array and the
// continuation signals of the object holding it.
type bodyOffer struct {
	items      string
	itemsFound bool
	itemID     string // the items' id member
	itemsKnown bool   // the items' members are known (an object schema)

	token, tokenShow  string // next cursor path; how inspect names it
	tokenNext         bool   // the token's name says "next": its absence ends the walk
	weakToken         string // a well-known token path under an opaque member
	nextURL, urlShow  string
	more              string
	moreInverted      bool
	total, totalPages string
	stream            bool // the token is a stream position (next_stream_position)
}

func (r bodyOffer) signals() bool {
	return r.token != "" || r.nextURL != "" || r.more != "" || r.total != "" || r.totalPages != ""
}

// readResponse finds the primary array of root and reads the signals of
// the object that holds it.
func readResponse(root shape, ev evidence, cursorFolds []string) bodyOffer {
	var res bodyOffer
	env, prefix := root, []string(nil)
	switch root.kind() {
	case shapeArray:
		res.items, res.itemsFound = "", true
		res.itemID, res.itemsKnown = idMember(root.elem())
		return res
	case shapeObject:
	default:
		return res
	}
	if f, ok := pickArray(root, ev, cursorFolds); ok {
		res.items, res.itemsFound = query.JoinPath(f.name), true
		res.itemID, res.itemsKnown = idMember(f.val.elem())
	} else if w, f, ok := namedWrapper(root, ev, cursorFolds); !ev.single && ok {
		// A page one level inside a member named for what it holds
		// ({"albums": {"items": [...], "next": …, "total": …}}).
		env, prefix = w.val, []string{w.name}
		res.items, res.itemsFound = query.JoinPath(w.name, f.name), true
		res.itemID, res.itemsKnown = idMember(f.val.elem())
	} else if !ev.single {
		// One level down, inside a container member (never for a path
		// naming one resource: its data is that resource).
		for _, c := range root.fields() {
			if !slices.Contains(containerNames, c.fold) || c.val.kind() != shapeObject {
				continue
			}
			inner := ev
			if !inner.params {
				var probe bodyOffer
				readSignals(root, nil, cursorFolds, &probe)
				inner.params = probe.signals()
			}
			if f, ok := pickArray(c.val, inner, cursorFolds); ok {
				env, prefix = c.val, []string{c.name}
				res.items, res.itemsFound = query.JoinPath(c.name, f.name), true
				res.itemID, res.itemsKnown = idMember(f.val.elem())
				break
			}
		}
	}
	if res.itemsFound {
		// Without a primary array the response is one resource, and
		// its members say nothing about pages (a todo's "done", a
		// document's "next" chapter).
		readEnvelope(root, env, prefix, cursorFolds, &res)
	}
	return res
}

// namedWrapper finds the member of root that is a page of its own: an
// object holding the items and paging signals of its own, under any name
// (Spotify's {"albums": {"items", "next", "total", …}}, {"artists": {"items",
// "cursors", …}}). When several members are pages (a search answering
// several kinds), the one the path names wins, else none does.
func namedWrapper(root shape, ev evidence, cursorFolds []string) (wrapper, items shapeField, ok bool) {
	type cand struct{ w, f shapeField }
	var cands []cand
	for _, c := range root.fields() {
		if c.val.kind() != shapeObject || slices.Contains(containerNames, c.fold) {
			continue
		}
		var own bodyOffer
		readSignals(c.val, nil, nil, &own) // signals by their own names, not a member named like a parameter
		if !own.signals() {
			continue
		}
		inner := ev
		inner.params = true // its own signals make it a page
		if f, ok := pickArray(c.val, inner, cursorFolds); ok {
			cands = append(cands, cand{c, f})
		}
	}
	switch {
	case len(cands) == 1:
		return cands[0].w, cands[0].f, true
	case len(cands) > 1:
		for _, r := range ev.resource {
			for _, c := range cands {
				if namesResource(c.w.fold, r) {
					return c.w, c.f, true
				}
			}
		}
	}
	return shapeField{}, shapeField{}, false
}

// readEnvelope reads the signals of env, the object holding the items
// (at keys prefix of root). When that is a container one level down, the
// wrapping object may carry signals too (HAL's _links beside _embedded);
// the container's own win.
func readEnvelope(root, env shape, prefix, cursorFolds []string, res *bodyOffer) {
	readSignals(env, prefix, cursorFolds, res)
	if len(prefix) > 0 {
		readSignals(root, nil, cursorFolds, res)
	}
}

// pickArray chooses the array member of obj that holds the items.
func pickArray(obj shape, ev evidence, cursorFolds []string) (shapeField, bool) {
	var arrays []shapeField
	for _, f := range obj.fields() {
		if f.val.kind() == shapeArray && !slices.Contains(notItems, f.fold) {
			arrays = append(arrays, f)
		}
	}
	if len(arrays) == 0 {
		return shapeField{}, false
	}
	byName := func(names []string) (shapeField, bool) {
		for _, n := range names {
			for _, f := range arrays {
				if f.fold == n {
					return f, true
				}
			}
		}
		return shapeField{}, false
	}
	if f, ok := byName(itemNames); ok {
		return f, true
	}
	if ev.single {
		// One resource: its arrays are its members, not a page.
		return shapeField{}, false
	}
	if f, ok := byName(ev.resource); ok {
		return f, true
	}
	for _, r := range ev.resource {
		for _, f := range arrays {
			if namesResource(f.fold, r) {
				return f, true
			}
		}
	}
	if !ev.params {
		var probe bodyOffer
		readSignals(obj, nil, cursorFolds, &probe)
		if !probe.signals() {
			return shapeField{}, false
		}
	}
	if f, ok := byName(listNames); ok {
		return f, true
	}
	if len(arrays) == 1 {
		return arrays[0], true
	}
	for _, f := range arrays {
		if e := f.val.elem(); e != nil && e.kind() == shapeObject {
			return f, true
		}
	}
	return arrays[0], true
}

// idMember names the member of an item that identifies it.
func idMember(item shape) (string, bool) {
	if item == nil || item.kind() != shapeObject {
		return "", false
	}
	for _, n := range []string{"id", "gid", "sid", "uuid", "key"} {
		if f, ok := memberOf(item, n); ok {
			return f.name, true
		}
	}
	// An item wrapping the object it is about ({reason, user} of a ban,
	// {member, user} of a guild member): that object's id.
	for _, n := range []string{"user", "member", "object", "node", "resource"} {
		if f, ok := memberOf(item, n); ok && f.val.kind() == shapeObject {
			if g, ok := memberOf(f.val, "id"); ok {
				return query.JoinPath(f.name, g.name), true
			}
		}
	}
	return "", true
}

type signalRole uint8

const (
	sigToken signalRole = iota
	sigURL
	sigMore
	sigLast // a "this is the last page" flag: more, inverted
	sigTotal
	sigPages
)

type signalName struct {
	path string // folded keys joined by dots
	role signalRole
}

// signalNames are the continuation signals trawl knows, folded, best first
// within each role.
var signalNames = []signalName{
	{"nextcursor", sigToken}, {"nextpagetoken", sigToken}, {"nexttoken", sigToken},
	{"nextpagecursor", sigToken}, {"nextmarker", sigToken}, {"nextcontinuationtoken", sigToken},
	{"continuationtoken", sigToken}, {"nextpage", sigToken},
	{"responsemetadata.nextcursor", sigToken}, {"metadata.nextcursor", sigToken},
	{"meta.nextcursor", sigToken}, {"pagination.nextcursor", sigToken},
	{"paging.nextcursor", sigToken}, {"paging.next.after", sigToken},
	{"paging.cursors.after", sigToken}, {"cursors.after", sigToken}, {"pageinfo.endcursor", sigToken},
	{"pagination.cursor", sigToken}, {"cursor", sigToken},
	{"meta.page.after", sigToken}, {"meta.page.nextcursor", sigToken}, {"meta.pagination.nextcursor", sigToken},
	{"meta.pagination.nextrecordid", sigToken}, {"meta.pagination.nextoffset", sigToken},
	{"pages.next.startingafter", sigToken}, {"nextstreamposition", sigToken},

	{"next", sigURL}, {"nextlink", sigURL}, {"odatanextlink", sigURL}, {"nextpageuri", sigURL},
	{"nextpageurl", sigURL}, {"nexturl", sigURL}, {"nexturi", sigURL}, {"nexthref", sigURL},
	{"nextpagelink", sigURL}, {"links.next", sigURL}, {"paging.next", sigURL},
	{"pagination.next", sigURL}, {"pagination.nexturl", sigURL}, {"pagination.links.next", sigURL},
	{"meta.next", sigURL}, {"meta.links.next", sigURL}, {"meta.pagination.links.next", sigURL},
	{"links.pages.next", sigURL}, {"pages.next", sigURL},

	{"hasmore", sigMore}, {"hasnextpage", sigMore}, {"hasnext", sigMore}, {"more", sigMore},
	{"moreitems", sigMore}, {"moreresults", sigMore}, {"pageinfo.hasnextpage", sigMore},
	{"pagination.hasmore", sigMore}, {"pagination.hasnextpage", sigMore}, {"meta.hasmore", sigMore},
	{"paging.hasmore", sigMore}, {"istruncated", sigMore},
	{"islast", sigLast}, {"islastpage", sigLast}, {"last", sigLast}, {"lastpage", sigLast}, {"done", sigLast},

	{"totalpages", sigPages}, {"pagecount", sigPages}, {"numpages", sigPages}, {"lastpage", sigPages},
	{"paging.pages", sigPages}, {"paging.totalpages", sigPages}, {"pages.totalpages", sigPages}, {"pagination.totalpages", sigPages},
	{"pagination.pagecount", sigPages}, {"pagination.lastpage", sigPages}, {"meta.totalpages", sigPages},
	{"meta.lastpage", sigPages}, {"meta.pagination.totalpages", sigPages},

	{"totalcount", sigTotal}, {"total", sigTotal}, {"totalresults", sigTotal}, {"totalitems", sigTotal},
	{"totalrecords", sigTotal}, {"totalsize", sigTotal}, {"totalelements", sigTotal}, {"count", sigTotal},
	{"paging.total", sigTotal}, {"pagination.total", sigTotal}, {"pagination.totalcount", sigTotal},
	{"pagination.totalitems", sigTotal}, {"pagination.totalrecords", sigTotal}, {"meta.total", sigTotal},
	{"meta.totalcount", sigTotal}, {"meta.pagination.total", sigTotal}, {"meta.page.totalcount", sigTotal},
}

// Members of a next-page object that carry the token or the URL
// (Asana's next_page {offset, path, uri}; HAL's next {href}).
var (
	tokenMembers = []string{"offset", "cursor", "after", "startingafter", "token", "pagetoken", "nextcursor"}
	urlMembers   = []string{"uri", "url", "href", "link", "path"}
)

// tokenHint says a plain string named like a URL ("next") is a token.
var tokenHint = regexp.MustCompile(`(?i)\b(cursor|token)\b`)

// followPath follows a folded dotted path through obj. It returns the real
// member names on the way and the node reached; weak is set instead when
// the walk stops at a declared member that is opaque (it may well hold the
// rest of the path: Slack declares response_metadata without properties).
func followPath(obj shape, path string) (names []string, n shape, weak bool) {
	n = obj
	steps := strings.Split(path, ".")
	for i, step := range steps {
		f, ok := memberOf(n, step)
		if !ok {
			if i > 0 && n.opaque() {
				return names, nil, true
			}
			return nil, nil, false
		}
		names = append(names, f.name)
		n = f.val
	}
	return names, n, false
}

// readSignals fills res with the continuation signals of env, whose keys
// in the body are prefix.
func readSignals(env shape, prefix []string, cursorFolds []string, res *bodyOffer) {
	full := func(names ...string) string {
		return query.JoinPath(append(slices.Clone(prefix), names...)...)
	}
	show := func(names ...string) string {
		return strings.Join(append(slices.Clone(prefix), names...), ".")
	}
	setToken := func(names []string, showNames []string) {
		if res.token == "" {
			res.token, res.tokenShow = full(names...), show(showNames...)
			last := foldName(names[len(names)-1])
			res.tokenNext = strings.Contains(foldName(showNames[len(showNames)-1]), "next") || strings.Contains(last, "next")
			res.stream = strings.Contains(last, "streamposition")
		}
	}
	setURL := func(names []string, showNames []string) {
		if res.nextURL == "" {
			res.nextURL, res.urlShow = full(names...), show(showNames...)
		}
	}
	// A member named like the cursor parameter is the next token (Asana's
	// sync, Airtable's offset).
	for _, cf := range cursorFolds {
		if f, ok := memberOf(env, cf); ok {
			switch f.val.kind() {
			case shapeString, shapeNumber, shapeNull, shapeUnknown:
				setToken([]string{f.name}, []string{f.name})
			}
		}
	}
	for _, sn := range signalNames {
		names, n, weak := followPath(env, sn.path)
		if weak {
			if sn.role == sigToken && res.weakToken == "" {
				// Only the opaque member's own name is known; the rest
				// takes the usual spelling.
				res.weakToken = full(append(names, wellKnownTail(sn.path, len(names))...)...)
			}
			continue
		}
		if n == nil {
			continue
		}
		k := n.kind()
		switch sn.role {
		case sigToken, sigURL:
			if k == shapeObject {
				// A next-page object: its members carry the token or URL.
				for _, m := range tokenMembers {
					if f, ok := memberOf(n, m); ok && scalarish(f.val) {
						setToken(append(slices.Clone(names), f.name), names)
						break
					}
				}
				for _, m := range urlMembers {
					if f, ok := memberOf(n, m); ok && scalarish(f.val) {
						setURL(append(slices.Clone(names), f.name), names)
						break
					}
				}
				continue
			}
			if !scalarish(n) {
				continue
			}
			url := n.isURL()
			if !url && sn.role == sigURL {
				// Named as a URL: believe the name unless the value or
				// the description says it is a token.
				url = !isRawToken(n) && !tokenHint.MatchString(n.hint())
			}
			if url {
				setURL(names, names)
			} else {
				setToken(names, names)
			}
		case sigMore, sigLast:
			if (k == shapeBool || (k == shapeUnknown && n.opaque())) && res.more == "" {
				res.more, res.moreInverted = full(names...), sn.role == sigLast
			}
		case sigTotal:
			if k == shapeNumber && res.total == "" {
				res.total = full(names...)
			}
		case sigPages:
			if k == shapeNumber && res.totalPages == "" {
				res.totalPages = full(names...)
			}
		}
	}
}

// wellKnownTail is the rest of a folded signal path after its first n
// steps, in the usual snake_case spelling (next_cursor).
func wellKnownTail(path string, n int) []string {
	steps := strings.Split(path, ".")[n:]
	for i, s := range steps {
		if sp, ok := spelled[s]; ok {
			steps[i] = sp
		}
	}
	return steps
}

var spelled = map[string]string{
	"nextcursor": "next_cursor", "endcursor": "end_cursor",
}

// scalarish accepts what a token or URL can be: a string, a number, null,
// or an undeclared type.
func scalarish(n shape) bool {
	switch n.kind() {
	case shapeString, shapeNumber, shapeNull:
		return true
	case shapeUnknown:
		return n.opaque()
	}
	return false
}

// isRawToken reports an actual string value that is plainly not a URL
// (Refine's nodes); a declared one never is.
func isRawToken(n shape) bool {
	if r, ok := n.(tokenValued); ok {
		return r.tokenValue()
	}
	return false
}

// tokenValued is implemented by actual values, which know what they hold.
type tokenValued interface{ tokenValue() bool }
