package paginate

import (
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// Detect reads how t paginates from its schema alone: an explicit
// pagination extension wins (x-speakeasy-pagination, x-ms-pageable,
// x-fern-pagination); otherwise the parameter names and types and the
// response schema decide (DESIGN.md §6). Refine completes the plan with
// the first live response.
//
// Parameters are matched case-insensitively and without separators
// (page_size, pageSize, PageSize and page[size] are one name), at the top
// level or one level down in a request body; a property one level down is
// named "<param>.<property>" in the plan. A string page or offset is a
// cursor unless the response counts pages instead of returning a token.
//
// The response is read in one place only: the object that holds the
// primary array. The primary array is reported for every list operation,
// paginated or not, since the size guard cuts views at its items.
//
// A None plan keeps the request-side candidates it saw (a cursor parameter
// whose response declares no continuation, for instance), so that Refine
// can promote it when a live response carries the missing signal.
func Detect(t *tools.Tool) Plan {
	if t == nil {
		return Plan{Strategy: None, Provenance: "none"}
	}
	if p, ok := fromExtensions(t); ok {
		return p
	}
	req := readParams(t)
	ev := evidence{params: req.any(), resource: resourceNames(t.Path)}
	ev.single = ev.resource == nil && strings.HasSuffix(strings.TrimRight(t.Path, "/"), "}")
	var res bodyOffer
	if t.Response != nil {
		res = readResponse(newSchemaShape(t.Response), ev, req.cursorFolds())
	}
	p := decidePlan(req, res, declaresLink(t, req, res))
	switch {
	case t.Response != nil || req.any():
		p.Provenance = "schema"
	default:
		p.Provenance = "none"
	}
	return p
}

// ---- names ----

// foldName folds a parameter or property name for matching: lower case,
// without the separators vendors put between words, so that page_size,
// pageSize, PageSize, page-size, page[size], $top and @odata.nextLink
// compare equal to pagesize, top and odatanextlink.
func foldName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch r {
		case '_', '-', '$', '[', ']', '.', '@', ' ':
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// Request-side names, folded, best first within each role.
var (
	sizeNames   = []string{"itemsperpage", "perpage", "pagesize", "maxresults", "limit", "top", "maxpagesize", "maxitems", "count", "size"}
	pageNames   = []string{"page", "pagenumber", "pageindex", "pageno", "pagenum"}
	offsetNames = []string{"offset", "skip", "startindex", "startat", "pageoffset", "start"}
	cursorNames = []string{
		"cursor", "after", "startingafter", "pagetoken", "marker", "continuation",
		"continuationtoken", "pageafter", "pagecursor", "nextpagetoken", "nexttoken",
		"nextcursor", "startcursor", "skiptoken", "nextpage", "sync", "since",
	}
)

// dateLike matches descriptions of time filters, which share names with
// cursors (GitHub's since is a timestamp on most operations, a user id on
// /users).
var dateLike = regexp.MustCompile(`(?i)\b(timestamp|iso[ -]?8601|date-time|datetime|yyyy-mm-dd)\b`)

func isDateFormat(f string) bool {
	switch strings.ToLower(f) {
	case "date", "date-time", "datetime", "time", "date-time-rfc-2822", "unix-time":
		return true
	}
	return false
}

// ---- request side ----

// pagingParam is one parameter (or body property) that plays a paging
// role.
type pagingParam struct {
	name string // as the tool names it; "<param>.<property>" one level down
	in   tools.Location
	rank int // index in its role's name list
	pos  int // order among the tool's parameters
}

func (a pagingParam) better(b pagingParam) bool {
	if b.name == "" {
		return true
	}
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

// paramOffer is what the parameters offer, one best candidate per role.
type paramOffer struct {
	size, page, offset, cursor pagingParam
	// pageStr and offsetStr are a page or offset typed as a string: a
	// cursor in disguise (Stripe search, Asana) unless the response counts
	// pages (Slack files.list).
	pageStr, offsetStr pagingParam
}

func (r paramOffer) any() bool {
	return r.size.name != "" || r.page.name != "" || r.offset.name != "" ||
		r.cursor.name != "" || r.pageStr.name != "" || r.offsetStr.name != ""
}

// cursorFolds are the folded wire names of the cursor candidates: a
// response member of the same name is the next token (Asana's sync).
func (r paramOffer) cursorFolds() []string {
	var out []string
	for _, c := range []pagingParam{r.cursor, r.pageStr, r.offsetStr} {
		if c.name != "" {
			out = append(out, foldName(lastSegment(c.name)))
		}
	}
	return out
}

func lastSegment(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[i+1:]
	}
	return name
}

func readParams(t *tools.Tool) paramOffer {
	var r paramOffer
	pos := 0
	consider := func(name, wire string, in tools.Location, s *tools.Schema) {
		pos++
		typ, format, desc := "", "", ""
		if s != nil {
			typ, format, desc = s.Type, s.Format, s.Description
		}
		f := foldName(wire)
		if f == "" {
			f = foldName(name)
		}
		put := func(dst *pagingParam, rank int) {
			c := pagingParam{name: name, in: in, rank: rank, pos: pos}
			if c.better(*dst) {
				*dst = c
			}
		}
		numeric := typ == "integer" || typ == "number" || typ == ""
		// "size" alone (Spring's page+size) is too common a word to
		// take unless it is a number.
		if i := slices.Index(sizeNames, f); i >= 0 && (numeric || typ == "string" && f != "size") {
			put(&r.size, i)
		}
		if i := slices.Index(pageNames, f); i >= 0 {
			switch {
			case numeric:
				put(&r.page, i)
			case typ == "string" && !isDateFormat(format):
				put(&r.pageStr, i)
			}
		}
		if i := slices.Index(offsetNames, f); i >= 0 {
			switch {
			case typ == "integer" || typ == "number" || (typ == "" && f != "start"):
				put(&r.offset, i)
			case typ == "string" && f != "start" && !isDateFormat(format):
				put(&r.offsetStr, i)
			}
		}
		if i := slices.Index(cursorNames, f); i >= 0 && (numeric || typ == "string") &&
			!isDateFormat(format) && !dateLike.MatchString(desc) {
			put(&r.cursor, i)
		}
	}
	for _, p := range t.Params {
		if p.In == tools.InPath {
			continue
		}
		if p.In == tools.InBody && p.Schema != nil && len(p.Schema.Properties) > 0 &&
			(p.Schema.Type == "object" || p.Schema.Type == "") {
			// One level down: the properties of a whole-body or object
			// body parameter.
			for _, k := range sortedNames(p.Schema.Properties) {
				consider(p.Name+"."+k, k, tools.InBody, p.Schema.Properties[k])
			}
			continue
		}
		consider(p.Name, p.WireName(), p.In, p.Schema)
	}
	return r
}

func sortedNames[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// ---- shapes: a response read the same way from a schema or a body ----

type shapeKind uint8

const (
	shapeUnknown shapeKind = iota
	shapeObject
	shapeArray
	shapeString
	shapeNumber
	shapeBool
	shapeNull
)

// shape is one node of a response, declared (a schema) or actual (a raw
// JSON value), so Detect and Refine find arrays and signals alike.
type shape interface {
	kind() shapeKind
	fields() []shapeField // object members, in a stable order
	elem() shape          // an array's element; nil when unknown
	isURL() bool          // a string that names a URL
	// opaque reports a declared node that may hide members it does not
	// list (an untyped schema, an object without properties).
	opaque() bool
	// hint is free text about the node (a schema's description).
	hint() string
}

type shapeField struct {
	name, fold string
	val        shape
}

func memberOf(s shape, fold string) (shapeField, bool) {
	if s == nil || s.kind() != shapeObject {
		return shapeField{}, false
	}
	for _, f := range s.fields() {
		if f.fold == fold {
			return f, true
		}
	}
	return shapeField{}, false
}

// schemaShape is a declared response node. Its members are listed once
// per detection (memo is shared by every node of one response), since
// each signal name looks them up again.
type schemaShape struct {
	s    *tools.Schema
	memo map[*tools.Schema][]shapeField
}

func newSchemaShape(s *tools.Schema) schemaShape {
	return schemaShape{s: s, memo: map[*tools.Schema][]shapeField{}}
}

func (s schemaShape) kind() shapeKind {
	if s.s == nil {
		return shapeUnknown
	}
	switch s.s.Type {
	case "object":
		return shapeObject
	case "array":
		return shapeArray
	case "string":
		return shapeString
	case "integer", "number":
		return shapeNumber
	case "boolean":
		return shapeBool
	case "null":
		return shapeNull
	case "":
		switch {
		case len(s.s.Properties) > 0:
			return shapeObject
		case s.s.Items != nil:
			return shapeArray
		}
	}
	return shapeUnknown
}

func (s schemaShape) fields() []shapeField {
	if s.s == nil {
		return nil
	}
	if out, ok := s.memo[s.s]; ok {
		return out
	}
	out := make([]shapeField, 0, len(s.s.Properties))
	for _, k := range sortedNames(s.s.Properties) {
		out = append(out, shapeField{name: k, fold: foldName(k), val: schemaShape{s.s.Properties[k], s.memo}})
	}
	if s.memo != nil {
		s.memo[s.s] = out
	}
	return out
}

func (s schemaShape) elem() shape {
	if s.s == nil || s.s.Items == nil {
		return nil
	}
	return schemaShape{s.s.Items, s.memo}
}

func (s schemaShape) isURL() bool {
	if s.s == nil || (s.s.Type != "string" && s.s.Type != "") {
		return false
	}
	switch strings.ToLower(s.s.Format) {
	case "uri", "url", "uri-reference", "iri", "iri-reference":
		return true
	}
	return false
}

func (s schemaShape) opaque() bool {
	k := s.kind()
	return k == shapeUnknown || (k == shapeObject && len(s.s.Properties) == 0)
}

func (s schemaShape) hint() string {
	if s.s == nil {
		return ""
	}
	return s.s.Description
}

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
// resource and gives none.
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
	last := segs[len(segs)-1]
	if i := strings.IndexByte(last, '.'); i > 0 {
		last = last[:i]
	}
	out := []string{foldName(last)}
	if len(segs) > 1 && !strings.HasPrefix(segs[len(segs)-2], "{") {
		out = append(out, foldName(segs[len(segs)-2])+out[0])
	}
	return out
}

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
	} else {
		// One level down, inside a container member.
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
		if f.val.kind() == shapeArray {
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
	if !ev.single {
		if f, ok := byName(ev.resource); ok {
			return f, true
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
	{"paging.cursors.after", sigToken}, {"pageinfo.endcursor", sigToken},
	{"pagination.cursor", sigToken}, {"cursor", sigToken},

	{"next", sigURL}, {"nextlink", sigURL}, {"odatanextlink", sigURL}, {"nextpageuri", sigURL},
	{"nextpageurl", sigURL}, {"nexturl", sigURL}, {"nexturi", sigURL}, {"nexthref", sigURL},
	{"nextpagelink", sigURL}, {"links.next", sigURL}, {"paging.next", sigURL},
	{"pagination.next", sigURL}, {"pagination.nexturl", sigURL}, {"pagination.links.next", sigURL},
	{"meta.next", sigURL}, {"meta.links.next", sigURL}, {"meta.pagination.links.next", sigURL},

	{"hasmore", sigMore}, {"hasnextpage", sigMore}, {"hasnext", sigMore}, {"more", sigMore},
	{"moreitems", sigMore}, {"moreresults", sigMore}, {"pageinfo.hasnextpage", sigMore},
	{"pagination.hasmore", sigMore}, {"pagination.hasnextpage", sigMore}, {"meta.hasmore", sigMore},
	{"paging.hasmore", sigMore}, {"istruncated", sigMore},
	{"islast", sigLast}, {"islastpage", sigLast}, {"last", sigLast}, {"lastpage", sigLast}, {"done", sigLast},

	{"totalpages", sigPages}, {"pagecount", sigPages}, {"numpages", sigPages}, {"lastpage", sigPages},
	{"paging.pages", sigPages}, {"paging.totalpages", sigPages}, {"pagination.totalpages", sigPages},
	{"pagination.pagecount", sigPages}, {"pagination.lastpage", sigPages}, {"meta.totalpages", sigPages},
	{"meta.lastpage", sigPages}, {"meta.pagination.totalpages", sigPages},

	{"totalcount", sigTotal}, {"total", sigTotal}, {"totalresults", sigTotal}, {"totalitems", sigTotal},
	{"totalrecords", sigTotal}, {"totalsize", sigTotal}, {"totalelements", sigTotal}, {"count", sigTotal},
	{"paging.total", sigTotal}, {"pagination.total", sigTotal}, {"pagination.totalcount", sigTotal},
	{"pagination.totalitems", sigTotal}, {"pagination.totalrecords", sigTotal}, {"meta.total", sigTotal},
	{"meta.totalcount", sigTotal}, {"meta.pagination.total", sigTotal},
}

// Members of a next-page object that carry the token or the URL
// (Asana's next_page {offset, path, uri}; HAL's next {href}).
var (
	tokenMembers = []string{"offset", "cursor", "after", "token", "pagetoken", "nextcursor"}
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
			res.tokenNext = strings.Contains(foldName(showNames[len(showNames)-1]), "next")
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

// ---- the decision ----

// declaresLink reports that the operation's pages are linked by the Link
// header: its response declares one, or (for importers that do not keep
// response headers) its description says so and the body is a bare array.
func declaresLink(t *tools.Tool, req paramOffer, res bodyOffer) bool {
	for _, h := range t.ResponseHeaders {
		if strings.EqualFold(h, "Link") {
			return true
		}
	}
	return res.itemsFound && res.items == "" && req.any() &&
		strings.Contains(strings.ToLower(t.Description), "link header")
}

// decidePlan turns what the request and the response offer into a plan.
func decidePlan(req paramOffer, res bodyOffer, link bool) Plan {
	p := Plan{
		Strategy:     None,
		SizeParam:    req.size.name,
		PageParam:    req.page.name,
		OffsetParam:  req.offset.name,
		Items:        res.items,
		ItemsFound:   res.itemsFound,
		ItemID:       res.itemID,
		NextToken:    res.token,
		NextURLField: res.nextURL,
		MoreFlag:     res.more,
		MoreInverted: res.moreInverted,
		Total:        res.total,
		TotalPages:   res.totalPages,
	}
	// A string page or offset is a cursor, unless the response counts
	// pages and returns no token (then it is a number sent as a string).
	cursor := req.cursor
	counted := res.token == "" && (res.totalPages != "" || res.total != "")
	if c := req.pageStr; c.name != "" {
		if counted && p.PageParam == "" {
			p.PageParam = c.name
		} else if cursor.name == "" {
			cursor = c
		}
	}
	if c := req.offsetStr; c.name != "" {
		if counted && p.OffsetParam == "" {
			p.OffsetParam = c.name
		} else if cursor.name == "" {
			cursor = c
		}
	}
	p.CursorParam = cursor.name
	token := res.token
	if token == "" && cursor.name != "" && res.nextURL == "" {
		token = res.weakToken
		p.NextToken = token
	}
	in := func(c pagingParam) string { return string(c.in) }
	switch {
	case cursor.name != "" && (token != "" || res.more != ""):
		p.Strategy, p.ParamsIn = Cursor, in(cursor)
		switch {
		case token == "":
			p.CursorFromItem = res.itemID
			if !res.itemsKnown {
				p.CursorFromItem = "id"
			}
			p.Continuation = showPath(res.more)
		case res.more != "" && !res.tokenNext && token == res.token:
			// A position token returned on every page (a sync token):
			// the more flag says whether to follow it.
			p.Continuation = showPath(res.more)
		case token == res.token:
			p.Continuation = res.tokenShow
		default:
			p.Continuation = showPath(token)
		}
	case link:
		p.Strategy, p.Continuation = LinkHeader, "Link header"
	case res.nextURL != "" && req.offset.name != "" && cursor.name == "":
		// An integer offset reproduces the walk by itself; the next URL
		// says when it ends.
		p.Strategy, p.Continuation = Offset, res.urlShow
	case res.nextURL != "":
		p.Strategy, p.Continuation = NextURL, res.urlShow
	case p.PageParam != "":
		p.Strategy = PageNumber
		p.Continuation = showPath(firstNonEmpty(res.more, res.totalPages, res.total))
	case p.OffsetParam != "":
		p.Strategy = Offset
		p.Continuation = showPath(firstNonEmpty(res.more, res.total))
	}
	switch p.Strategy {
	case None:
		p.ParamsIn = in(firstParam(cursor, req.page, req.offset))
	case LinkHeader, NextURL:
		p.ParamsIn = in(firstParam(req.page, cursor, req.offset, req.size))
	case PageNumber:
		p.ParamsIn = in(firstParam(req.page, req.pageStr, req.size))
	case Offset:
		p.ParamsIn = in(firstParam(req.offset, req.offsetStr, req.size))
	}
	return p
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func firstParam(ps ...pagingParam) pagingParam {
	for _, p := range ps {
		if p.name != "" {
			return p
		}
	}
	return pagingParam{}
}

// showPath renders a field path for people: keys joined by dots.
func showPath(path string) string {
	if path == "" {
		return ""
	}
	keys, err := query.SplitPath(path)
	if err != nil {
		return path
	}
	return strings.Join(keys, ".")
}

// ---- explicit extensions ----

// extensionNames are the pagination extensions Detect honours, in the
// order it looks for them.
var extensionNames = []string{"x-speakeasy-pagination", "x-ms-pageable", "x-fern-pagination"}

// fromExtensions builds the plan an explicit pagination extension
// describes. What the extension leaves unsaid (the items of an
// x-ms-pageable operation with no itemName, a more flag) comes from the
// schema.
func fromExtensions(t *tools.Tool) (Plan, bool) {
	for _, name := range extensionNames {
		var v any
		found := false
		for k, x := range t.Extensions {
			if strings.EqualFold(k, name) {
				v, found = x, true
				break
			}
		}
		if !found {
			continue
		}
		req := readParams(t)
		var res bodyOffer
		if t.Response != nil {
			ev := evidence{params: true, resource: resourceNames(t.Path)}
			res = readResponse(newSchemaShape(t.Response), ev, req.cursorFolds())
		}
		var p Plan
		var ok bool
		switch name {
		case "x-speakeasy-pagination":
			p, ok = speakeasyPlan(t, v, req)
		case "x-ms-pageable":
			p, ok = msPageablePlan(v, req)
		case "x-fern-pagination":
			p, ok = fernPlan(t, v, req)
		}
		if !ok {
			continue
		}
		if !p.ItemsFound && res.itemsFound {
			p.Items, p.ItemsFound = res.items, true
		}
		if p.ItemsFound && p.Items == res.items {
			p.ItemID = res.itemID
		}
		if p.MoreFlag == "" && p.NextToken == "" && p.NextURLField == "" {
			p.MoreFlag, p.MoreInverted = res.more, res.moreInverted
		}
		if p.Total == "" {
			p.Total = res.total
		}
		if p.Continuation == "" {
			switch p.Strategy {
			case Cursor, PageNumber, Offset:
				p.Continuation = showPath(p.MoreFlag)
			}
		}
		p.Provenance = "extension:" + name
		return p, true
	}
	return Plan{}, false
}

// speakeasyPlan reads x-speakeasy-pagination:
//
//	type: offsetLimit | cursor | url
//	inputs: [{name, in: parameters | requestBody, type: page | offset | limit | cursor}]
//	outputs: {results, numPages, nextCursor, nextUrl}   (JSONPath)
func speakeasyPlan(t *tools.Tool, v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false
	}
	p := Plan{Strategy: None, SizeParam: req.size.name}
	var driving tools.Location
	inputs, _ := m["inputs"].([]any)
	for _, in := range inputs {
		im, _ := in.(map[string]any)
		wire, _ := im["name"].(string)
		if wire == "" {
			continue
		}
		name, loc := paramNamed(t, wire, extString(im["in"]) == "requestBody")
		switch strings.ToLower(extString(im["type"])) {
		case "page":
			p.PageParam, driving = name, loc
		case "offset":
			p.OffsetParam, driving = name, loc
		case "limit":
			p.SizeParam = name
		case "cursor":
			p.CursorParam, driving = name, loc
		}
	}
	out, _ := m["outputs"].(map[string]any)
	if r, _, ok := extPath(extString(out["results"])); ok {
		p.Items, p.ItemsFound = r, true
	}
	if r, _, ok := extPath(extString(out["numPages"])); ok && r != "" {
		p.TotalPages = r
	}
	switch strings.ToLower(extString(m["type"])) {
	case "offsetlimit":
		switch {
		case p.PageParam != "":
			p.Strategy = PageNumber
		case p.OffsetParam != "":
			p.Strategy = Offset
		default:
			return Plan{}, false
		}
		p.Continuation = showPath(p.TotalPages)
	case "cursor":
		if p.CursorParam == "" {
			return Plan{}, false
		}
		p.Strategy = Cursor
		path, fromItem, ok := extPath(extString(out["nextCursor"]))
		switch {
		case ok && fromItem != "":
			p.CursorFromItem = fromItem
			if !p.ItemsFound {
				p.Items, p.ItemsFound = path, true
			}
		case ok && path != "":
			p.NextToken, p.Continuation = path, showPath(path)
		}
	case "url":
		path, _, ok := extPath(extString(out["nextUrl"]))
		if !ok || path == "" {
			return Plan{}, false
		}
		p.Strategy, p.NextURLField, p.Continuation = NextURL, path, showPath(path)
	default:
		return Plan{}, false
	}
	p.ParamsIn = string(driving)
	if p.ParamsIn == "" && p.Strategy != NextURL {
		p.ParamsIn = string(tools.InQuery)
	}
	return p, true
}

// msPageablePlan reads x-ms-pageable {nextLinkName, itemName}: the next
// page is the URL in nextLinkName (null: everything comes in one page),
// the items are in itemName ("value" when absent).
func msPageablePlan(v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false
	}
	item := extString(m["itemName"])
	if item == "" {
		item = "value"
	}
	p := Plan{Strategy: None, Items: query.JoinPath(item), ItemsFound: true}
	if next := extString(m["nextLinkName"]); next != "" {
		p.Strategy, p.NextURLField = NextURL, query.JoinPath(next)
		p.Continuation = next
		p.SizeParam = req.size.name
		p.ParamsIn = string(req.size.in)
	}
	return p, true
}

// fernPlan reads x-fern-pagination {cursor, next_cursor, offset, step,
// results, has-next-page, next_uri, next_path} ($request.x / $response.y).
// Fern's offset may name a page number.
func fernPlan(t *tools.Tool, v any, req paramOffer) (Plan, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return Plan{}, false // `true` at document level says nothing per operation
	}
	p := Plan{Strategy: None, SizeParam: req.size.name}
	param := func(key string) (string, tools.Location) {
		path, _, ok := extPath(extString(m[key]))
		if !ok || path == "" {
			return "", ""
		}
		keys, err := query.SplitPath(path)
		if err != nil || len(keys) == 0 {
			return "", ""
		}
		return paramNamed(t, keys[len(keys)-1], len(keys) > 1)
	}
	resp := func(key string) string {
		path, _, ok := extPath(extString(m[key]))
		if !ok {
			return ""
		}
		return path
	}
	if r, _, ok := extPath(extString(m["results"])); ok {
		p.Items, p.ItemsFound = r, true
	}
	if s, _ := param("step"); s != "" {
		p.SizeParam = s
	}
	if h := resp("has-next-page"); h != "" {
		p.MoreFlag = h
	}
	var driving tools.Location
	switch {
	case resp("next_uri") != "" || resp("next_path") != "":
		p.Strategy, p.NextURLField = NextURL, firstNonEmpty(resp("next_uri"), resp("next_path"))
		p.Continuation = showPath(p.NextURLField)
		if c, loc := param("cursor"); c != "" {
			p.CursorParam, driving = c, loc
		}
	case extString(m["cursor"]) != "":
		p.CursorParam, driving = param("cursor")
		if p.CursorParam == "" {
			return Plan{}, false
		}
		p.Strategy, p.NextToken = Cursor, resp("next_cursor")
		p.Continuation = showPath(firstNonEmpty(p.NextToken, p.MoreFlag))
	case extString(m["offset"]) != "":
		name, loc := param("offset")
		if name == "" {
			return Plan{}, false
		}
		driving = loc
		if slices.Contains(pageNames, foldName(lastSegment(name))) {
			p.Strategy, p.PageParam = PageNumber, name
		} else {
			p.Strategy, p.OffsetParam = Offset, name
		}
		p.Continuation = showPath(p.MoreFlag)
	default:
		return Plan{}, false
	}
	p.ParamsIn = string(driving)
	return p, true
}

func extString(v any) string {
	s, _ := v.(string)
	return s
}

// paramNamed finds the tool parameter an extension names by its wire
// name: a parameter, or a property one level down in the body. An
// unknown name is kept as written.
func paramNamed(t *tools.Tool, wire string, body bool) (string, tools.Location) {
	for _, p := range t.Params {
		if (p.WireName() == wire || p.Name == wire) && (!body || p.In == tools.InBody) {
			return p.Name, p.In
		}
	}
	for _, p := range t.Params {
		if p.In == tools.InBody && p.Schema != nil && p.Schema.Properties[wire] != nil {
			return p.Name + "." + wire, tools.InBody
		}
	}
	if body {
		return wire, tools.InBody
	}
	return wire, tools.InQuery
}

// extPath turns an extension's JSONPath-like reference ("$.data",
// "$response.meta.next", "$['data'][-1].id") into a field path. A [-1]
// step means "the last item": the path before it is the items' and the
// rest is returned as fromItem. ok is false for an empty or unreadable
// reference.
func extPath(ref string) (path, fromItem string, ok bool) {
	ref = strings.TrimSpace(ref)
	for _, pre := range []string{"$response", "$request", "$"} {
		if strings.HasPrefix(ref, pre) {
			ref = ref[len(pre):]
			break
		}
	}
	if ref == "" {
		return "", "", false
	}
	var keys, tail []string
	dst := &keys
	for ref != "" {
		switch {
		case ref[0] == '.':
			ref = ref[1:]
		case ref[0] == '[':
			end := strings.IndexByte(ref, ']')
			if end < 0 {
				return "", "", false
			}
			inner := strings.Trim(ref[1:end], `'" `)
			ref = ref[end+1:]
			if inner == "-1" {
				if dst == &tail {
					return "", "", false
				}
				dst = &tail
				continue
			}
			*dst = append(*dst, inner)
		default:
			end := strings.IndexAny(ref, ".[")
			if end < 0 {
				end = len(ref)
			}
			*dst = append(*dst, ref[:end])
			ref = ref[end:]
		}
	}
	if dst == &tail && len(tail) == 0 {
		return "", "", false
	}
	return query.JoinPath(keys...), strings.Join(tail, "."), true
}
