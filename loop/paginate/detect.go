package paginate

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

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
		p.because(High, "the document's "+strings.TrimPrefix(p.Provenance, "extension:")+" extension")
		return p
	}
	req := readParams(t)
	modeNote := ""
	if flag := modeFlag(t, req); flag != "" {
		// A second mode behind a flag: walk the documented default.
		modeNote = fmt.Sprintf("%s switches to %s pagination when set; the default, %s, is walked", flag, req.cursor.name, firstNonEmpty(req.offset.name, req.page.name))
		req.cursor, req.before, req.after, req.dated = pagingParam{}, pagingParam{}, pagingParam{}, pagingParam{}
	}
	ev := evidence{params: req.any(), resource: resourceNames(t.Path)}
	ev.single = ev.resource == nil && strings.HasSuffix(strings.TrimRight(t.Path, "/"), "}")
	var res bodyOffer
	if t.Response != nil {
		res = readResponse(newSchemaShape(t.Response), ev, req.cursorFolds())
	}
	dated := false
	if req.cursor.name == "" && req.dated.name != "" && (res.token != "" || res.more != "" && res.itemsFound) {
		// A cursor that reads like a time is still the cursor when the
		// response hands one back (Plaid's date-time cursor) or says
		// whether there is more (Discord's archived threads, before a
		// timestamp).
		req.cursor, dated = req.dated, true
	}
	p := decidePlan(req, res, declaresLink(t, req, res))
	if why := writes(t, res); why != "" && (p.Paginated() || req.any()) {
		// Paging-like fields on an operation that changes data are not
		// pages.
		p = Plan{Strategy: None, Items: res.items, ItemsFound: res.itemsFound, ItemID: res.itemID}
		p.because(High, why)
	} else {
		if p.Strategy == None || p.Strategy == Offset {
			if k, ok := keysetOffset(t, req, res); ok {
				p = k
			}
		}
		if p.Strategy == None {
			if q, ok := outOfBand(t, req, res, p); ok {
				p = q
			}
		}
		if dated && p.Strategy == Cursor && p.CursorFromItem != "" {
			p.because(Low, fmt.Sprintf("%s is a time, taken from the last item's %s: the document does not say which of its times", p.CursorParam, p.CursorFromItem))
		}
		grade(&p, req, res)
		if modeNote != "" {
			p.Evidence = append(p.Evidence, modeNote)
		}
		if (p.Strategy == Offset || p.Strategy == PageNumber) && res.token != "" && p.NextToken == "" {
			p.Evidence = append(p.Evidence, fmt.Sprintf("the response's %s continues another mode (no parameter of this walk sends it), so it does not end the walk: the numbers do", showPath(res.token)))
		}
		if p.Strategy == Offset || p.Strategy == PageNumber {
			if why := snapshotEvidence(t, req, p); why != "" {
				p.Snapshot = true
				p.Evidence = append(p.Evidence, why)
			}
		}
	}
	switch {
	case t.Response != nil || req.any():
		p.Provenance = "schema"
	default:
		p.Provenance = "none"
	}
	return p
}

// modeWords find a flag's description saying it switches the operation
// to another kind of pagination (Box's usemarker: "use marker-based
// pagination instead of offset-based pagination").
var modeWords = regexp.MustCompile(`(?i)\b(marker|cursor|token|keyset|continuation)[- ]based (pagination|paging)\b`)

// modeFlag names the boolean parameter that switches an operation with
// both an offset (or page) and a cursor parameter to its cursor mode
// ("" when there is none, or the cursor mode is the default): named
// use<cursor> (usemarker), or described as switching to marker-, cursor-
// or token-based pagination. Without the flag the server pages by
// offsets and never returns the cursor, so walking the cursor would end
// after the first page.
func modeFlag(t *tools.Tool, req paramOffer) string {
	if req.cursor.name == "" || req.offset.name == "" && req.page.name == "" {
		return ""
	}
	for _, p := range t.Params {
		s := p.Schema
		if s == nil || s.Type != "boolean" {
			continue
		}
		if d, ok := s.Default.(bool); ok && d {
			continue // on by default: the cursor mode is the default
		}
		f := foldName(p.WireName())
		named := strings.HasPrefix(f, "use") && slices.Contains(append(cursorNames, "marker", "cursors"), f[3:])
		if named || modeWords.MatchString(p.Description+" "+s.Description) {
			return p.Name
		}
	}
	return ""
}

// snapshotWords find a description saying that an offset or page walk
// reads one snapshot of the collection, so that rows cannot move between
// pages.
var snapshotWords = regexp.MustCompile(`(?i)\bsnapshot\b|\bpoint[- ]in[- ]time\b|\bconsistent (across|between) (pages|requests|calls)\b|\b(will|does|do) not change (while|during|between) (paging|pages|pagination|requests)\b`)

// snapshotEvidence says why an offset or page-number plan may trust its
// positions ("" when nothing says so): the operation's x-trawl-snapshot
// extension, or its description or its offset or page parameter's
// describing a snapshot.
func snapshotEvidence(t *tools.Tool, req paramOffer, p Plan) string {
	if v, ok := t.Extensions["x-trawl-snapshot"].(bool); ok {
		if v {
			return "x-trawl-snapshot: the pages come from one snapshot, so rows cannot shift between them"
		}
		return ""
	}
	param := firstNonEmpty(p.OffsetParam, p.PageParam)
	for _, text := range []string{req.descs[param], t.Description} {
		if m := snapshotWords.FindString(text); m != "" {
			return fmt.Sprintf("the document says the pages come from a %s (%q), so rows cannot shift between them", "snapshot", m)
		}
	}
	return ""
}

// ---- what the schema alone cannot say ----

// readWords are the path and operationId words of an operation that
// reads, whatever its method (POST /v2/orders/search, Plaid's
// /transactions/get).
var readWords = regexp.MustCompile(`(?i)(^|[^a-z])(search|list|query|get|sync|find|filter|retrieve|fetch|export|scroll|lookup|browse|read)([^a-z]|$)|^(get|list|search|query|find|fetch)[A-Z_]`)

// writes says why an operation changes data rather than reads pages (""
// when it reads): a PUT, PATCH or DELETE, or a POST whose body carries the
// response's item array (Xero's create bodies hold Invoices, pagination,
// Warnings: the list envelope reused), unless its path or operationId
// says it reads (POST …/search, Plaid's /transactions/get).
func writes(t *tools.Tool, res bodyOffer) string {
	m := strings.ToUpper(t.Method)
	if m == "GET" || m == "" || readWords.MatchString(t.Path) || readWords.MatchString(t.OperationID) {
		return ""
	}
	switch m {
	case "PUT", "PATCH", "DELETE":
		return "a " + m + " changes data and does not read pages: its paging-like fields are not a walk"
	case "POST":
		if !res.itemsFound || res.items == "" {
			return ""
		}
		keys, err := query.SplitPath(res.items)
		if err != nil || len(keys) == 0 {
			return ""
		}
		items := foldName(keys[len(keys)-1])
		for _, p := range t.Params {
			if p.In == tools.InBody && foldName(p.WireName()) == items {
				return "a POST that writes: its body carries the response's " + keys[len(keys)-1] + ", so its paging fields echo the list envelope"
			}
		}
	}
	return ""
}

// greaterThan finds the item field an offset is compared with when the
// "offset" is a keyset ("journals with a JournalNumber greater than the
// offset will be returned").
var greaterThan = regexp.MustCompile(`(?i)\b([A-Za-z_][A-Za-z0-9_]*)\s+(?:is\s+)?(?:greater|later|higher|more)\s+than\b`)

// keysetOffset reads an integer offset whose description says it is
// compared with an item field: a cursor taken from the last item.
func keysetOffset(t *tools.Tool, req paramOffer, res bodyOffer) (Plan, bool) {
	o := req.offset
	if o.name == "" || !res.itemsFound {
		return Plan{}, false
	}
	m := greaterThan.FindStringSubmatch(req.descs[o.name])
	if m == nil {
		return Plan{}, false
	}
	field := m[1]
	if _, ok := itemMember(t.Response, res.items, field); !ok {
		return Plan{}, false
	}
	p := Plan{Strategy: Cursor, SizeParam: req.size.name, CursorParam: o.name, ParamsIn: string(o.in),
		Items: res.items, ItemsFound: true, ItemID: res.itemID, CursorFromItem: field,
		MoreFlag: res.more, MoreInverted: res.moreInverted, Total: res.total, Continuation: showPath(res.more)}
	p.because(Medium, fmt.Sprintf("%s is a keyset, not a row offset: its description compares it with the items' %s", o.name, field))
	return p, true
}

// itemMember finds a member of the items at itemsPath in a response schema.
func itemMember(resp *tools.Schema, itemsPath, field string) (string, bool) {
	if resp == nil {
		return "", false
	}
	var n shape = newSchemaShape(resp)
	if itemsPath != "" {
		keys, err := query.SplitPath(itemsPath)
		if err != nil {
			return "", false
		}
		for _, k := range keys {
			f, ok := memberOf(n, foldName(k))
			if !ok {
				return "", false
			}
			n = f.val
		}
	}
	if n.kind() != shapeArray {
		return "", false
	}
	f, ok := memberOf(n.elem(), foldName(field))
	return f.name, ok
}

// linkWords find a Link header named in prose.
var linkWords = regexp.MustCompile(`(?i)\blink\b[^.]{0,40}\bheader|rel=\\?"?next|link response header`)

// outOfBand reads an operation with a cursor parameter whose response
// body carries no continuation at all: its next page is handed over
// outside the body (a Link header) or made from the last item (a keyset
// over ids). Neither is in the document's schema; the plan says how sure
// it is.
func outOfBand(t *tools.Tool, req paramOffer, res bodyOffer, base Plan) (Plan, bool) {
	c := req.cursor
	if c.name == "" || !res.itemsFound || res.signals() || res.weakToken != "" {
		return Plan{}, false
	}
	p := base
	p.CursorParam, p.ParamsIn = c.name, string(c.in)
	f := foldName(lastSegment(c.name))
	prose := t.Description + " " + req.descs[c.name]
	switch {
	case linkWords.MatchString(prose):
		p.Strategy, p.Continuation = LinkHeader, "Link header"
		p.because(Medium, "the description says the next page comes in the Link header (the response declares no such header)")
		return p, true
	case slices.Contains(keysetCursors, f) && res.itemID != "" && !tokenHint.MatchString(req.descs[c.name]):
		if req.before.name != "" && req.after.name != "" && newestFirst(req, res) {
			c = req.before
			p.CursorParam, p.ParamsIn = c.name, string(c.in)
		}
		p.Strategy, p.CursorFromItem = Cursor, res.itemID
		p.because(Medium, fmt.Sprintf("a keyset: %s takes the last item's %s; no continuation is declared, so a short page ends the walk", p.CursorParam, res.itemID))
		return p, true
	case slices.Contains(opaqueCursors, f) || slices.Contains(keysetCursors, f) || tokenHint.MatchString(req.descs[c.name]) ||
		strings.Contains(strings.ToLower(req.descs[c.name]), "pagination"):
		p.Strategy, p.Continuation = LinkHeader, "Link header"
		p.because(Low, fmt.Sprintf("%s is a cursor the response body never returns: assumed to arrive in a Link header the document does not declare", c.name))
		return p, true
	}
	return Plan{}, false
}

// newestFirst reports a keyset read newest first, which walks with
// before: a timeline read around an id (Discord's messages), or an audit
// log.
func newestFirst(req paramOffer, res bodyOffer) bool {
	if req.around {
		return true
	}
	keys, _ := query.SplitPath(res.items)
	for _, k := range keys {
		if f := foldName(k); strings.Contains(f, "auditlog") || strings.Contains(f, "message") {
			return true
		}
	}
	return false
}

// grade sets the confidence of a plan decidePlan or outOfBand made, with
// the evidence, unless it has one already.
func grade(p *Plan, req paramOffer, res bodyOffer) {
	if p.Confidence != "" {
		return
	}
	if res.stream {
		p.Stream = true
	}
	switch p.Strategy {
	case None:
		if c := firstNonEmpty(req.cursor.name, req.pageStr.name, req.offsetStr.name); c != "" && res.itemsFound {
			p.because(Medium, c+" looks like a cursor, but nothing in the response continues it")
		} else {
			p.because(High, "no paging parameter with a continuation")
		}
	case Cursor:
		switch {
		case res.token != "" && p.NextToken == res.token && res.tokenNext:
			p.because(High, fmt.Sprintf("%s is sent back from %s", p.CursorParam, res.tokenShow))
		case p.NextToken != "" && p.NextToken == res.weakToken:
			p.because(Medium, fmt.Sprintf("%s: the response declares %s without its members; assumed the usual %s", p.CursorParam, showPath(firstSegment(p.NextToken)), showPath(p.NextToken)))
		case p.NextToken != "":
			p.because(High, fmt.Sprintf("%s is sent back from %s", p.CursorParam, showPath(p.NextToken)))
		case p.CursorFromItem != "":
			p.because(Medium, fmt.Sprintf("%s takes the last item's %s; %s says whether to go on", p.CursorParam, p.CursorFromItem, orWord(showPath(p.MoreFlag), "nothing")))
		default:
			p.because(Low, fmt.Sprintf("%s says whether there is more, but neither a next cursor nor an item id is declared: the first response must show what to send as %s", showPath(p.MoreFlag), p.CursorParam))
		}
	case LinkHeader:
		p.because(High, "the response declares a Link header")
	case NextURL:
		p.because(High, "the response names the next page's URL in "+showPath(p.NextURLField))
	case PageNumber, Offset:
		param := firstNonEmpty(p.PageParam, p.OffsetParam)
		if p.Continuation != "" {
			p.because(High, fmt.Sprintf("%s with %s", param, p.Continuation))
		} else {
			p.because(Medium, param+" without a declared total or more flag: an empty or short page ends the walk")
		}
	}
	if p.Stream {
		p.because(Low, "an event stream: the position comes back on every page, so the walk never ends by itself and stops only at a budget")
	}
}

func firstSegment(path string) string {
	keys, err := query.SplitPath(path)
	if err != nil || len(keys) == 0 {
		return path
	}
	return query.JoinPath(keys[0])
}

func orWord(s, alt string) string {
	if s == "" {
		return alt
	}
	return s
}

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
	if p.Strategy == PageNumber || p.Strategy == Offset {
		// A page or offset walk sends its own numbers: a cursor in the
		// response (no parameter of the walk sends it) belongs to another
		// mode or is a bookmark, and its absence says nothing (Box
		// answers offsets without next_marker, Intercom's page walks carry
		// pages.next.starting_after). Totals, more flags, next links and
		// the pages themselves decide.
		p.NextToken = ""
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
