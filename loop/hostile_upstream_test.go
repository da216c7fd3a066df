package loop_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// The hostile upstream of the property test (property_test.go): a seeded
// generator of scenarios, and an HTTP model of the API each scenario
// describes. The model serves every request of one engine call, keeps the
// truth (every collection's rows as they stand when the walk ends, what it
// delivered, which signals it sent), and records the contract breaches it
// can see from its side of the wire: a request after it said a collection
// was done, a cursor it never issued, a page position it never pointed at.
//
// A hostile server can make any walker wrong by lying in a way no response
// shows (a page cap that changes from page to page, a deletion behind a
// keyset cursor with no total). The model never does that: every change it
// makes leaves a trace a careful walker can read, or does no harm. A total
// below the truth (totalUnder) is such a trace: by whole pages, only the
// page after the one that reached it shows it (a closing probe reads it). Its changes (generated at run time, from the scenario's
// seed, against the position the walk has reached) are:
//
//   - on page and offset collections, whose walker computes its own
//     positions and must prove it saw every row (overlapping offset pages,
//     a closing probe, page-boundary probes, a total): inserts and deletes
//     anywhere — at the head, in the middle, at the tail — with or without
//     a total;
//   - otherwise, with an exact total on every page: inserts or deletes
//     anywhere, one direction per gap between two pages (so the total
//     moves);
//   - otherwise (token styles): inserts and deletes ahead of the walk, and
//     inserts behind it on offset-positioned tokens (the next page then
//     repeats a row).
//
// A page-number collection may number its pages by the size asked rather
// than by the size it serves (AskedOffsets): a walk that keeps asking for
// a size the server caps then skips rows.
//
// Answers may take a few milliseconds (Latency), so that a walk that
// fetches ahead (Budget.Concurrency: a page-number walk with a total, an
// offset walk) has several requests in flight. Such a walk may send up to
// its window's worth of requests before it has read the answer that said
// the collection ended (or refused it), at positions ahead of the pages
// delivered; every other walk — cursors, next URLs, Link headers, page
// numbers checked by probes — must never have two requests in flight at
// once.

// style is one way an upstream pages (or does not).
type style int

const (
	stylePage    style = iota // page + per_page; total and has_more optional
	styleOffset               // offset + limit; total and has_more optional
	styleCursor               // cursor + limit, next_cursor in the body (has_more optional)
	styleLastID               // starting_after + limit, has_more: the cursor is the last item's id
	styleNextURL              // limit, the next page's URL in the body
	styleLink                 // per_page + page, a bare array and a Link header with rel="next"
	styleList                 // a list without pagination
	styleObject               // one object whose arrays are part of it (an order's line items)
	styleText                 // a text body (a directory listing)
)

var styleNames = [...]string{"page", "offset", "cursor", "last_id", "next_url", "link", "list", "object", "text"}

func (s style) String() string {
	if int(s) < len(styleNames) {
		return styleNames[s]
	}
	return "style(" + strconv.Itoa(int(s)) + ")"
}

func (s style) paged() bool   { return s <= styleLink }
func (s style) numeric() bool { return s == stylePage || s == styleOffset }
func (s style) tokens() bool  { return s == styleCursor || s == styleNextURL || s == styleLink }
func (s style) rows() bool    { return s <= styleList } // the response is a collection

// strategy is what detection must find for the style's tool.
func (s style) strategy() paginate.Strategy {
	return [...]paginate.Strategy{paginate.PageNumber, paginate.Offset, paginate.Cursor, paginate.Cursor,
		paginate.NextURL, paginate.LinkHeader, paginate.None, paginate.None, paginate.None}[s]
}

// Total modes.
const (
	totalNone  = iota
	totalExact // the collection's size on every page
	totalOver  // a constant number above it (an approximate total)
	// totalUnder: a constant number below it (Over), on page and offset
	// collections that serve the size asked: often whole pages, so that
	// the total is reached on a full page and only the page after it
	// shows the lie.
	totalUnder
)

// End signals of the token styles: how "no next page" is written.
const (
	endAbsent = iota
	endNull
	endEmpty
)

// Event kinds.
const (
	evMutate      = iota + 1 // change the collection before answering
	evStatus                 // answer an error status
	evGarbage                // answer 200 with an HTML body (tools that declare JSON)
	evDup                    // repeat an already delivered row in the page
	evEmptyMore              // an empty page that still says more (token styles)
	evForeign                // the next page's URL is on another origin (next_url, link)
	evCycle                  // the next cursor is one already issued (token styles)
	evCut                    // send a response head and half a body, then drop the connection
	evErrorObject            // answer 200 with a JSON error object, none of the API's pages
)

var eventNames = map[int]string{evMutate: "evMutate", evStatus: "evStatus", evGarbage: "evGarbage", evDup: "evDup",
	evEmptyMore: "evEmptyMore", evForeign: "evForeign", evCycle: "evCycle", evCut: "evCut", evErrorObject: "evErrorObject"}

// event happens when a collection receives its At-th request (1-based,
// retries counted).
type event struct {
	At         int
	Kind       int
	Status     int  // evStatus
	RetryAfter int  // evStatus 429: seconds
	Ops        int  // evMutate: how many inserts or deletes
	Dir        int  // evMutate: +1 inserts only, -1 deletes only; 0 either
	Behind     bool // evMutate: change rows the walk has passed, where that leaves a trace
	// Where (evMutate, page and offset collections): whereAny, whereHead,
	// whereMiddle or whereTail.
	Where int
}

// Where a change hits a page or offset collection.
const (
	whereAny = iota
	whereHead
	whereMiddle
	whereTail
)

// collection is one _for_each value's collection (the only one without a
// fan-out).
type collection struct {
	Value  string
	Rows   int
	Events []event
	// FailFrom: from this request on, every request answers FailStatus
	// (0: never).
	FailFrom   int
	FailStatus int
}

// scenario is one generated upstream and the call made against it.
type scenario struct {
	Seed  uint64 // run-time choices of the model (which row a change hits)
	Style style
	// Keyset: token positions are keys (after the last row sent), not
	// offsets. Always true for last_id.
	Keyset    bool
	AllPages  bool
	ModelSize int // the page size the model asks for; 0: trawl chooses
	SizeMax   int // the size parameter's declared maximum; 0: none
	Cap       int // the largest page the server serves (silently); a list: the rows it sends, its count saying all
	Default   int // the page size the server serves when none is asked
	Total     int // totalNone, totalExact, totalOver, totalUnder
	Over      int // totalOver: how far above; totalUnder: how far below
	// WholePages (totalUnder): the total counts whole pages of this size
	// only, then Over fewer rows.
	WholePages int
	MoreFlag   bool // a list: its schema declares a next token and a more flag it never sends
	End        int  // token styles: endAbsent, endNull, endEmpty
	Relative   bool // next_url: a path-absolute URL
	Schema     bool // list, object: the response schema is declared
	Body       bool // offset: POST, offset and limit in a JSON body (a search)
	// AskedOffsets (page): page n starts at row (n-1) × the size asked,
	// whatever size the server serves (its cap).
	AskedOffsets bool
	Fields       bool // _fields without the fan-out key
	Filter       bool // _filter k eq "a"
	// FilterTypo: the _filter field is misspelt ("statsu"): no row has it.
	FilterTypo bool
	// MissingArg: the required list_id is left out (no fan-out): an
	// argument error, which costs no request and no wait.
	MissingArg bool
	ForEach    bool
	DupValue   bool // the first value is listed twice
	FanOut     int
	Budget     paginate.Budget
	// Latency is the most milliseconds an answer waits before the server
	// handles it (0: none).
	Latency int
	Cols    []collection
	// Aggregate: the call asks _aggregate (count, sum(n) and
	// count_distinct(id), by list_id in a fan-out); the rows are read
	// back with queryToolResult.
	Aggregate bool
	// Cached: the engine has a dataset cache, and a call whose walk was
	// complete is made a second time, to be served from it.
	Cached bool
}

// reported is the total an approximate or low total mode reports for a
// collection of n rows.
func (sc scenario) reported(n int) int {
	switch {
	case sc.Total == totalOver:
		return n + sc.Over
	case sc.WholePages > 0:
		n -= n % sc.WholePages
	}
	return max(0, n-sc.Over)
}

// fetchesAhead reports a walk that may send requests ahead of the page it
// reads: a page-number walk with a total, or an offset walk.
func (sc scenario) fetchesAhead() bool {
	return sc.AllPages && sc.Budget.Concurrency != 1 &&
		(sc.Style == styleOffset || sc.Style == stylePage && sc.Total != totalNone)
}

// late is how many positions such a walk may ask for after the server
// said the collection ended (or refused a request) before the walk has
// read that answer: those in flight then, and one more for each page
// before it that the walk reads meanwhile — twice its window less one.
func (sc scenario) late() int { return 2 * sc.ahead() }

// ahead is how many requests such a walk may have sent beyond the one
// whose answer it is reading: its window, less that one.
func (sc scenario) ahead() int {
	if sc.Budget.Concurrency == 0 {
		return 5 // the adaptive window grows to 6
	}
	return sc.Budget.Concurrency - 1
}

// generate builds the scenario of seed.
func generate(seed uint64) (sc scenario) {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	sc = scenario{Seed: seed, FanOut: 1}
	switch n := r.IntN(100); {
	case n < 14:
		sc.Style = stylePage
	case n < 28:
		sc.Style = styleOffset
	case n < 42:
		sc.Style = styleCursor
	case n < 54:
		sc.Style = styleLastID
	case n < 66:
		sc.Style = styleNextURL
	case n < 78:
		sc.Style = styleLink
	case n < 86:
		sc.Style = styleList
	case n < 93:
		sc.Style = styleObject
	default:
		sc.Style = styleText
	}
	if sc.Style.paged() {
		sc.AllPages = r.IntN(5) != 0
		sc.Keyset = sc.Style == styleLastID || sc.Style.tokens() && r.IntN(2) == 0
		sc.SizeMax = []int{0, 0, 5, 10, 25, 100}[r.IntN(6)]
		sc.Cap = 1 + r.IntN(12)
		if sc.SizeMax > 0 && r.IntN(2) == 0 {
			sc.Cap = sc.SizeMax // the declared maximum is honoured
		}
		sc.Default = 1 + r.IntN(10)
		if r.IntN(3) == 0 {
			sc.ModelSize = 1 + r.IntN(25)
		}
		switch n := r.IntN(100); {
		case sc.Style.numeric() && n < 45, !sc.Style.numeric() && n < 25:
			sc.Total = totalExact
		case n > 85:
			sc.Total, sc.Over = totalOver, 1+r.IntN(5)
		case sc.Style.numeric() && n >= 70 && sc.SizeMax > 0 && sc.AllPages:
			// A total below the truth, on a server that serves the size
			// asked (with a silent cap too, a short page and the total
			// would agree, and no response would show either lie), to a
			// walk (a call for the first page only makes one request: it
			// cannot see the page after the total's). Whole
			// pages of the size trawl asks (the declared maximum, or the
			// model's smaller one) are the shape only a probe shows.
			sc.Cap = sc.SizeMax
			size := sc.SizeMax
			if sc.ModelSize > 0 && sc.ModelSize < size {
				size = sc.ModelSize
			}
			sc.Total = totalUnder
			if r.IntN(3) == 0 {
				sc.Over = 1 + r.IntN(5)
			} else {
				sc.WholePages, sc.Over = size, size*r.IntN(3)
			}
		}
		if sc.Style == styleLink {
			sc.Total, sc.Over = totalNone, 0 // a bare array has nowhere to put one
		}
		sc.MoreFlag = (sc.Style.numeric() || sc.Style == styleCursor) && r.IntN(3) == 0
		sc.End = r.IntN(3)
		sc.Relative = sc.Style == styleNextURL && r.IntN(3) == 0
		sc.Body = sc.Style == styleOffset && r.IntN(3) == 0
		sc.AskedOffsets = sc.Style == stylePage && r.IntN(2) == 0
	}
	sc.Schema = !sc.Style.paged() && r.IntN(2) == 0
	if sc.Style == styleList && r.IntN(4) == 0 {
		// A list without pagination that sends its first Cap rows and
		// counts them all; its schema may declare paging members it never
		// sends.
		sc.Cap = 1 + r.IntN(12)
		sc.MoreFlag = sc.Schema && r.IntN(2) == 0
	}
	sc.Fields = r.IntN(4) == 0
	sc.Filter = sc.Style.rows() && r.IntN(5) == 0
	sc.FilterTypo = sc.Filter && r.IntN(4) == 0
	values := 1
	if (sc.Style.rows() || sc.Style == styleObject) && r.IntN(3) == 0 {
		sc.ForEach = true
		values = 1 + r.IntN(5)
		sc.DupValue = r.IntN(5) == 0
		if r.IntN(4) == 0 {
			sc.FanOut = 4
		}
	}
	sc.MissingArg = !sc.ForEach && r.IntN(50) == 0
	defer func() {
		// Drawn last, so that the draws above (and the cases they made
		// before these fields existed) are unchanged.
		sc.Budget.Concurrency = []int{0, 0, 0, 1, 1, 2, 3, 6}[r.IntN(8)]
		if r.IntN(3) == 0 {
			sc.Latency = 1 + r.IntN(3)
		}
	}()
	if r.IntN(3) == 0 {
		sc.Budget.Pages = 3 + r.IntN(8)
	}
	if r.IntN(3) == 0 {
		sc.Budget.Requests = 4 + r.IntN(20)
	}
	if sc.ForEach && sc.AllPages && r.IntN(3) == 0 {
		// A shared budget that runs out while values are mid-walk.
		values = 3 + r.IntN(5)
		sc.Budget.Requests = values + r.IntN(2*values)
		if r.IntN(2) == 0 {
			sc.FanOut = 4
		}
	}
	for i := range values {
		c := collection{Value: "L" + strconv.Itoa(i), Rows: r.IntN(r.IntN(40) + 1)}
		for range r.IntN(5) {
			ev := randomEvent(r, sc)
			c.Events = append(c.Events, ev)
			if ev.Kind == evEmptyMore && r.IntN(3) == 0 {
				for k := range 1 + r.IntN(5) { // a run of empty pages that say more
					c.Events = append(c.Events, event{At: ev.At + k + 1, Kind: evEmptyMore})
				}
			}
		}
		switch {
		case sc.ForEach && r.IntN(5) == 0:
			c.FailFrom, c.FailStatus = 1, []int{404, 401, 500, 403}[r.IntN(4)]
		case sc.Style.paged() && r.IntN(12) == 0:
			c.FailFrom, c.FailStatus = 2+r.IntN(4), []int{500, 503, 404}[r.IntN(3)]
		}
		slices.SortStableFunc(c.Events, func(a, b event) int { return a.At - b.At })
		sc.Cols = append(sc.Cols, c)
	}
	sc.Aggregate = sc.Style.rows() && r.IntN(4) == 0 // drawn last: the seeds before it make what they made
	sc.Cached = (sc.AllPages || sc.ForEach) && r.IntN(5) == 0
	return sc
}

func randomEvent(r *rand.Rand, sc scenario) event {
	ev := event{At: 1 + r.IntN(r.IntN(8)+1)} // early requests more often: walks are short
	n := r.IntN(100)
	switch {
	case n < 30 && sc.Style.paged() && sc.AllPages:
		ev.Kind, ev.Ops = evMutate, 1+r.IntN(3)
		if sc.Style.numeric() {
			ev.Where = r.IntN(4)
			ev.Dir = []int{0, 1, -1}[r.IntN(3)]
		}
	case n < 40 && sc.Style.paged():
		ev.Kind = evDup
	case n < 50 && sc.Style.tokens() || n < 50 && sc.Style == styleLastID:
		ev.Kind = evEmptyMore
	case n < 57 && (sc.Style == styleNextURL || sc.Style == styleLink):
		ev.Kind = evForeign
	case n < 64 && sc.Style.tokens():
		ev.Kind, ev.At = evCycle, ev.At+1 // a cycle needs a cursor issued before
	case n < 68 && sc.declaresJSON():
		ev.Kind = evGarbage
	case n < 72:
		ev.Kind = evCut
	case n < 76 && sc.Style.paged() && sc.Style != styleLink:
		ev.Kind = evErrorObject
	default:
		ev.Kind = evStatus
		switch m := r.IntN(10); {
		case m < 3:
			ev.Status, ev.RetryAfter = 429, r.IntN(4)
			if r.IntN(8) == 0 {
				ev.RetryAfter = 3600 // longer than the time budget
			}
		case m < 7:
			ev.Status = []int{500, 502, 503}[r.IntN(3)]
		case m < 9:
			ev.Status = 404
		default:
			ev.Status = 401
		}
	}
	return ev
}

// declaresJSON says the tool declares a JSON response, so that an HTML
// page in its place is an error page, not an answer.
// capped says a list without pagination sends fewer rows than it counts
// for some value.
func (sc scenario) capped() bool {
	if sc.Style != styleList || sc.Cap == 0 {
		return false
	}
	for _, c := range sc.Cols {
		if c.Rows > sc.Cap {
			return true
		}
	}
	return false
}

func (sc scenario) declaresJSON() bool {
	return sc.Style.paged() || sc.Schema && (sc.Style == styleList || sc.Style == styleObject)
}

// values are the _for_each values the call sends (with the repeat).
func (sc scenario) values() []any {
	var vs []any
	for _, c := range sc.Cols {
		vs = append(vs, c.Value)
	}
	if sc.DupValue {
		vs = append(vs, sc.Cols[0].Value)
	}
	return vs
}

// sizeParam and the other names of the style's parameters.
func (sc scenario) sizeParam() string {
	switch sc.Style {
	case stylePage, styleLink:
		return "per_page"
	case styleOffset, styleCursor, styleLastID, styleNextURL:
		return "limit"
	}
	return ""
}

// itemsKey is where the view holds the rows.
func (sc scenario) itemsKey() string {
	if sc.Style == styleLink {
		return "items" // a bare array becomes {"items": [...]}
	}
	return "data"
}

// tool builds the tool an importer would have made of the upstream.
func (sc scenario) tool(origin string) *tools.Tool {
	str := func() *tools.Schema { return &tools.Schema{Type: "string"} }
	integer := func(max int) *tools.Schema {
		s := &tools.Schema{Type: "integer"}
		if max > 0 {
			m := float64(max)
			s.Maximum = &m
		}
		return s
	}
	row := &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
		"id": str(), "n": integer(0), "k": str(), "tags": {Type: "array", Items: str()},
	}}
	t := &tools.Tool{ID: "hostile.list_items", Provider: "hostile", Name: "list_items", Kind: tools.KindAPI,
		Method: http.MethodGet, Path: "/lists/{list_id}/items", Origin: origin,
		Params: []tools.Param{{Name: "list_id", In: tools.InPath, Required: true, Schema: str()}}}
	q := func(name string, s *tools.Schema) {
		t.Params = append(t.Params, tools.Param{Name: name, In: tools.InQuery, Schema: s})
	}
	env := map[string]*tools.Schema{"data": {Type: "array", Items: row}}
	switch sc.Style {
	case stylePage:
		q("page", integer(0))
		q("per_page", integer(sc.SizeMax))
	case styleOffset:
		if sc.Body {
			t.Method = http.MethodPost
			t.Params = append(t.Params,
				tools.Param{Name: "offset", In: tools.InBody, Schema: integer(0)},
				tools.Param{Name: "limit", In: tools.InBody, Schema: integer(sc.SizeMax)})
			break
		}
		q("offset", integer(0))
		q("limit", integer(sc.SizeMax))
	case styleCursor:
		q("cursor", str())
		q("limit", integer(sc.SizeMax))
		env["next_cursor"] = str()
	case styleLastID:
		q("starting_after", str())
		q("limit", integer(sc.SizeMax))
	case styleNextURL:
		q("limit", integer(sc.SizeMax))
		env["next"] = &tools.Schema{Type: "string", Format: "uri"}
	case styleLink:
		q("per_page", integer(sc.SizeMax))
		q("page", integer(0))
		t.ResponseHeaders = []string{"Link"}
		t.Response = &tools.Schema{Type: "array", Items: row}
		return t
	case styleList:
		if sc.Schema {
			if sc.MoreFlag {
				// Declared, never sent: a paging member the operation's
				// parameters cannot use.
				env["next_cursor"] = str()
				env["has_more"] = &tools.Schema{Type: "boolean"}
			}
			t.Response = &tools.Schema{Type: "object", Properties: env}
		}
		return t
	case styleObject:
		t.ID, t.Name, t.Path = "hostile.get_order", "get_order", "/orders/{list_id}"
		if sc.Schema {
			t.Response = &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
				"id": str(), "total": {Type: "number"}, "status": str(),
				"line_items": {Type: "array", Items: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
					"sku": str(), "qty": integer(0), "total": {Type: "number"}}}},
			}}
		}
		return t
	case styleText:
		t.ID, t.Name, t.Path = "hostile.list_dir", "list_dir", "/dirs/{list_id}/listing"
		return t
	}
	if sc.Total != totalNone {
		env["total"] = integer(0)
	}
	if sc.MoreFlag || sc.Style == styleLastID {
		env["has_more"] = &tools.Schema{Type: "boolean"}
	}
	t.Response = &tools.Schema{Type: "object", Properties: env}
	return t
}

// args are the model's arguments for the call.
func (sc scenario) args() map[string]any {
	a := map[string]any{}
	if sc.ForEach {
		a["_for_each"] = map[string]any{"key": "list_id", "values": sc.values()}
	} else if !sc.MissingArg {
		a["list_id"] = sc.Cols[0].Value
	}
	if sc.Style.paged() {
		if sc.AllPages {
			a["_all_pages"] = true
		}
		if sc.ModelSize > 0 {
			a[sc.sizeParam()] = float64(sc.ModelSize)
		}
	}
	if sc.Fields {
		if sc.Style == styleObject {
			a["_fields"] = []any{"id", "total", "status"}
		} else if sc.Style.rows() {
			a["_fields"] = []any{"id", "n"}
		}
	}
	if f := sc.filter(); f != nil {
		a["_filter"] = f
	}
	if sc.Aggregate {
		agg := map[string]any{"metrics": []any{map[string]any{"op": "count"}, map[string]any{"op": "sum", "field": "n"},
			map[string]any{"op": "count_distinct", "field": "id"}}, "limit": 500}
		if sc.ForEach {
			agg["group_by"] = []any{"list_id"}
		}
		a["_aggregate"] = agg
	}
	return a
}

// filter is the call's _filter; nil without one.
func (sc scenario) filter() []any {
	if !sc.Filter {
		return nil
	}
	field := "k"
	if sc.FilterTypo {
		field = "statsu"
	}
	return []any{map[string]any{"field": field, "op": "eq", "value": "a"}}
}

// ---- the model ----

// hrow is one row of a collection, ordered by key.
type hrow struct {
	key int
	id  string
	k   string
}

func (r hrow) json() string {
	return fmt.Sprintf(`{"id":%q,"n":%d,"k":%q,"tags":["t%d","u"]}`, r.id, r.key, r.k, r.key%7)
}

// position is where a token points: after a key (keyset) or at an offset.
type position struct {
	keyset bool
	after  int // keyset: the last key sent; -1 the start
	offset int
}

// hcol is a collection's state on the server.
type hcol struct {
	spec collection
	rng  *rand.Rand
	rows []hrow
	used map[int]bool   // keys ever given
	keys map[string]int // id → key, deleted rows included

	reqs       int
	events     map[int][]event
	done       string // why the server said the collection was done; "" not yet
	refused    int    // a 401/403/404 answered; 0 none
	lastStatus int

	pages       int            // pages (or whole answers) delivered
	delivered   map[string]int // id → times delivered
	totals      []int          // totals sent, in order
	boundary    int            // rows[:boundary] were all delivered (server positions)
	nextStart   int            // where the next page starts, if the walk goes on as it should
	gapBehind   int            // inserts behind the delivered rows in the current gap
	garbage     int            // HTML bodies and JSON error objects answered with 200
	lastID      string         // the last id of the most recent non-empty page
	lastPage    int            // page style: the page number last delivered
	nextOffset  int            // offset style: where the next page starts
	issued      map[string]position
	lastToken   string // the token of the most recent delivered page
	gapDir      int    // +1 inserts, -1 deletes in the current gap
	mutations   int
	emptyPages  int
	emptyRun    int             // consecutive empty pages that said more
	firstToken  string          // the first token issued (a cycle hands it back)
	cycled      bool            // a token was handed back
	foreignSent bool            // a next URL on another origin was sent
	dups        int             // pages that repeated a row
	faults      int             // error statuses and garbage bodies answered
	lastLen     int             // rows on the last page delivered
	capped      bool            // a page was asked for more rows than the server serves
	changedAt   [4]int          // changes by where they hit (whereAny … whereTail)
	probes      int             // page style: pages delivered again (boundary probes)
	refusedAt   map[string]bool // the queries answered 401/403/404
	askedBefore map[string]bool // the queries asked before the server said done or refused
	lateAt      map[string]bool // the queries first asked after it did
	curPage     int             // page style: the page number the request being answered asks for
	pageAt      map[[2]int]bool // page style, fetching ahead: the pages delivered, by number and size
	highOffset  int             // offset style: where the furthest page delivered ends
	initial     map[string]bool // the rows before the walk's first request
	deleted     map[string]bool // rows deleted during the walk
}

// hostile is the model of one scenario's upstream.
type hostile struct {
	sc      scenario
	prefix  string // the path prefix routing its requests ("/c17")
	origin  string // scheme://host:port + prefix
	foreign string // another origin + prefix: a request there is a breach

	mu         sync.Mutex
	cols       map[string]*hcol
	requests   int
	violations []wireViolation
	transcript []string

	fmu       sync.Mutex     // guards flight and overlapped (not mu: taken before it)
	flight    map[string]int // requests of each value in flight at the server
	overlaps  int            // requests that arrived while another of their value was in flight
	overlapAt []string       // the first of them, for the violation
}

func newHostile(sc scenario, origin, foreign, prefix string) *hostile {
	h := &hostile{sc: sc, prefix: prefix, origin: origin + prefix, foreign: foreign + prefix, cols: map[string]*hcol{},
		flight: map[string]int{}}
	for i, spec := range sc.Cols {
		c := &hcol{spec: spec, rng: rand.New(rand.NewPCG(sc.Seed, uint64(i)+1)), used: map[int]bool{},
			keys: map[string]int{}, events: map[int][]event{}, delivered: map[string]int{},
			issued: map[string]position{}, refusedAt: map[string]bool{}, askedBefore: map[string]bool{}, lateAt: map[string]bool{}, pageAt: map[[2]int]bool{}}
		for j := range spec.Rows {
			c.addRow(len(c.rows), (j+1)*1000)
		}
		c.initial, c.deleted = map[string]bool{}, map[string]bool{}
		for _, r := range c.rows {
			c.initial[r.id] = true
		}
		for _, ev := range spec.Events {
			c.events[ev.At] = append(c.events[ev.At], ev)
		}
		h.cols[spec.Value] = c
	}
	return h
}

func (c *hcol) addRow(at, key int) {
	id := c.spec.Value + "-" + strconv.Itoa(key)
	c.rows = slices.Insert(c.rows, at, hrow{key: key, id: id, k: kOf(key)})
	c.used[key] = true
	c.keys[id] = key
}

// wireViolation is a breach the server saw on the wire.
type wireViolation struct{ rule, detail string }

func (h *hostile) violate(rule, format string, args ...any) {
	h.violations = append(h.violations, wireViolation{rule, fmt.Sprintf(format, args...)})
}

// ServeHTTP answers one request of the scenario's call.
func (h *hostile) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	value := ""
	if segs := strings.Split(strings.Trim(strings.TrimPrefix(r.URL.Path, h.prefix), "/"), "/"); len(segs) >= 2 {
		value = segs[1]
	}
	h.fmu.Lock()
	if h.flight[value]++; h.flight[value] > 1 {
		h.overlaps++
		if len(h.overlapAt) == 0 {
			h.overlapAt = append(h.overlapAt, r.URL.RequestURI())
		}
	}
	h.fmu.Unlock()
	// The request leaves the flight once its answer is decided, before a
	// byte of it is written: a walker that waits for each answer cannot
	// send the next one earlier.
	leave := sync.OnceFunc(func() {
		h.fmu.Lock()
		h.flight[value]--
		h.fmu.Unlock()
	})
	defer leave()
	w = flightWriter{w, leave}
	if h.sc.Latency > 0 {
		time.Sleep(time.Duration(rand.IntN(h.sc.Latency*1000+1)) * time.Microsecond)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.requests++
	path := strings.TrimPrefix(r.URL.Path, h.prefix)
	h.transcript = append(h.transcript, r.Method+" "+path+"?"+r.URL.RawQuery)
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if len(segs) < 2 {
		h.violate(ruleUnknownRequest, "request to an unknown path %s", path)
		http.NotFound(w, r)
		return
	}
	c := h.cols[segs[1]]
	if c == nil {
		h.violate(ruleUnknownRequest, "request for %q, which is not a value of the call", segs[1])
		http.NotFound(w, r)
		return
	}
	c.reqs++
	n := c.reqs
	if c.emptyRun >= 3 {
		h.violate(ruleEmptyPages, "%s: request %d after %d consecutive empty pages that said more", c.spec.Value, n, c.emptyRun)
	}
	query := r.URL.Query()
	if h.sc.Body {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil && r.ContentLength != 0 {
			h.violate(rulePosition, "%s: request %d has a body that is not JSON: %v", c.spec.Value, n, err)
		}
		for k, v := range body {
			query.Set(k, fmt.Sprint(v))
		}
		raw, _ := json.Marshal(body)
		h.transcript[len(h.transcript)-1] += " " + string(raw)
		if r.Method != http.MethodPost {
			h.violate(rulePosition, "%s: request %d is a %s, not the tool's POST", c.spec.Value, n, r.Method)
		}
	}
	// What the request asks, wherever its arguments are: the position
	// the rules below compare.
	at := query.Encode()
	if c.done != "" && !h.probeRequest(c, r) {
		// A walk fetching ahead may have sent its window's requests (and
		// their retries) before it read the answer that said done.
		if !c.askedBefore[at] {
			c.lateAt[at] = true
		}
		if !h.sc.fetchesAhead() || len(c.lateAt) > h.sc.late() {
			h.violate(ruleAfterDone, "%s: request %d after the server said the collection was done (%s)", c.spec.Value, n, c.done)
		}
	}
	if c.refused != 0 {
		// The same: never the refused request again, at most the window's
		// others.
		if !c.askedBefore[at] {
			c.lateAt[at] = true
		}
		if !h.sc.fetchesAhead() || len(c.lateAt) > h.sc.late() || c.refusedAt[at] {
			h.violate(ruleAfterRefusal, "%s: request %d after the server answered %d, which no retry can change", c.spec.Value, n, c.refused)
		}
	}
	if c.done == "" && c.refused == 0 {
		c.askedBefore[at] = true
	}
	pos, size, ok, probe := h.position(c, query, n)
	for _, ev := range c.events[n] {
		if ev.Kind == evMutate && h.sc.AllPages {
			h.mutate(c, ev)
		}
	}
	status, retryAfter := 0, 0
	if c.spec.FailFrom > 0 && n >= c.spec.FailFrom {
		status = c.spec.FailStatus
	}
	garbage, dup, emptyMore, foreign, cycle, cut, errObject := false, false, false, false, false, false, false
	for _, ev := range c.events[n] {
		switch ev.Kind {
		case evStatus:
			if status == 0 {
				status, retryAfter = ev.Status, ev.RetryAfter
			}
		case evGarbage:
			garbage = h.sc.declaresJSON()
		case evDup:
			dup = true
		case evEmptyMore:
			emptyMore = h.sc.Style.tokens() || h.sc.Style == styleLastID
		case evForeign:
			foreign = h.foreign != ""
		case evCycle:
			cycle = true
		case evCut:
			cut = status == 0
		case evErrorObject:
			errObject = true
		}
	}
	if !ok && status == 0 {
		status = http.StatusBadRequest
	}
	if status != 0 {
		c.faults++
		c.lastStatus = status
		switch status {
		case 401, 403, 404:
			c.refused = status
			c.refusedAt[at] = true
		}
		if status == 429 {
			w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"code":%d,"message":"the server says no"}}`, status)
		return
	}
	if cut {
		c.faults++ // not a status: lastStatus stays the last HTTP one
		leave()
		cutConnection(w)
		return
	}
	if garbage {
		c.faults++
		c.garbage++
		c.lastStatus = 200
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>Service temporarily unavailable</body></html>")
		return
	}
	c.lastStatus = 200
	if errObject {
		// A success status and an error object: no page, so neither rows
		// nor the end of the collection.
		c.faults++
		c.garbage++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"error":"list_temporarily_unavailable"}`)
		return
	}
	switch h.sc.Style {
	case styleObject:
		c.done = "the whole object was sent"
		c.pages++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, h.order(c))
		return
	case styleText:
		c.done = "the whole text was sent"
		c.pages++
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, h.listing(c))
		return
	case styleList:
		rows := c.rows
		if h.sc.Cap > 0 && len(rows) > h.sc.Cap {
			rows = rows[:h.sc.Cap] // the first rows only; the count says all
		}
		c.done = "the whole list was sent"
		h.deliverIDs(c, rows)
		c.pages++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"data":%s,"count":%d}`, rowsJSON(rows), len(c.rows))
		return
	}
	h.page(w, c, pos, size, pageQuirks{dup: dup, emptyMore: emptyMore, foreign: foreign, cycle: cycle, probe: probe, asked: h.askedSize(query)})
}

// pageQuirks are the ways one page lies or misleads.
type pageQuirks struct {
	dup, emptyMore, foreign, cycle bool
	asked                          int  // the page size asked (page style)
	probe                          bool // a page-number boundary probe: a page already delivered, read again
}

// probeRequest reports a request that only reads again a page already
// delivered (a page-number boundary probe), which may come after the
// server said the collection was done.
func (h *hostile) probeRequest(c *hcol, r *http.Request) bool {
	if h.sc.Style != stylePage {
		return false
	}
	page := 1
	if v := r.URL.Query().Get("page"); v != "" {
		var err error
		if page, err = strconv.Atoi(v); err != nil {
			return false
		}
	}
	return page >= 1 && page < c.lastPage
}

// flightWriter calls leave before the first byte of an answer is written.
type flightWriter struct {
	http.ResponseWriter
	leave func()
}

func (f flightWriter) WriteHeader(code int) {
	f.leave()
	f.ResponseWriter.WriteHeader(code)
}

func (f flightWriter) Write(b []byte) (int, error) {
	f.leave()
	return f.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (cutConnection).
func (f flightWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// cutConnection sends a response head and half a body, then drops the
// connection: a transport failure the HTTP client cannot retry by itself
// (it has read the head), so the walker's own retry is what counts.
func cutConnection(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"data\":[")
	buf.Flush()
	conn.Close()
}

// ServeForeign answers a request that reached the other origin: the walk
// followed a next URL it must not follow.
func (h *hostile) ServeForeign(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.requests++
	h.violate(ruleForeign, "a request went to another origin: %s", strings.TrimPrefix(r.URL.RequestURI(), h.prefix))
	h.mu.Unlock()
	http.NotFound(w, r)
}

// position reads where the request points, checking that it is a place
// the server pointed at (never a guessed cursor, never a skipped page).
//
// probe reports a page-number boundary probe: a page already delivered,
// read again.
func (h *hostile) position(c *hcol, q url.Values, n int) (pos position, size int, ok, probe bool) {
	sc := h.sc
	sizeName := sc.sizeParam()
	size = sc.Default
	if v := q.Get(sizeName); v != "" {
		s, err := strconv.Atoi(v)
		if err != nil || s < 1 {
			h.violate(rulePosition, "%s: request %d asks for %s=%q", c.spec.Value, n, sizeName, v)
			return position{}, 0, false, false
		}
		size = s
	}
	asked := size
	size = min(size, sc.Cap)
	c.capped = c.capped || asked > size
	start := position{keyset: sc.Keyset, after: -1}
	token := func(name string) (position, bool) {
		tok := q.Get(name)
		if tok == "" {
			if c.lastToken != "" {
				h.violate(rulePosition, "%s: request %d restarts the walk without the cursor the last page gave", c.spec.Value, n)
			}
			return start, true
		}
		p, ok := c.issued[tok]
		if !ok {
			h.violate(ruleGuessedCursor, "%s: request %d sends %s=%q, which the server never issued (a guessed cursor)", c.spec.Value, n, name, tok)
			return position{}, false
		}
		if tok != c.lastToken {
			h.violate(rulePosition, "%s: request %d sends %s=%q, not the cursor of the last page (%q)", c.spec.Value, n, name, tok, c.lastToken)
		}
		return p, true
	}
	switch sc.Style {
	case stylePage:
		page := 1
		if v := q.Get("page"); v != "" {
			page, _ = strconv.Atoi(v)
		}
		c.curPage = page
		probe := page >= 1 && page < c.lastPage // a boundary probe reads a page already delivered
		switch {
		case sc.fetchesAhead():
			// A walk with a total: no probes; the pages ahead, never one
			// delivered again at the same size.
			probe = false
			if page < 1 || page > c.lastPage+1+sc.ahead() || c.pageAt[[2]int{page, asked}] {
				h.violate(rulePosition, "%s: request %d asks for page %d (per_page %d) after page %d was delivered", c.spec.Value, n, page, asked, c.lastPage)
			}
		case page != c.lastPage+1 && !probe:
			h.violate(rulePosition, "%s: request %d asks for page %d after page %d was delivered", c.spec.Value, n, page, c.lastPage)
		}
		if page < 1 {
			return position{}, size, false, false
		}
		step := size
		if sc.AskedOffsets {
			step = asked
		}
		return position{offset: (page - 1) * step}, size, true, probe
	case styleOffset:
		off := 0
		if v := q.Get("offset"); v != "" {
			off, _ = strconv.Atoi(v)
		}
		// The next offset, or one row before it: an overlapping page or a
		// closing probe reads the last row delivered again.
		switch {
		case sc.fetchesAhead():
			// Pages ahead: within the window of where the furthest page
			// delivered ends.
			if off > c.highOffset+(sc.ahead()+1)*size {
				h.violate(rulePosition, "%s: request %d asks for offset %d; the pages delivered end at %d at most", c.spec.Value, n, off, c.highOffset)
			}
		case off != c.nextOffset && (off != c.nextOffset-1 || c.lastLen < 1):
			h.violate(rulePosition, "%s: request %d asks for offset %d; the pages delivered end at %d", c.spec.Value, n, off, c.nextOffset)
		}
		if off < 0 {
			return position{}, size, false, false
		}
		return position{offset: off}, size, true, false
	case styleLastID:
		sa := q.Get("starting_after")
		if sa != c.lastID {
			h.violate(ruleGuessedCursor, "%s: request %d sends starting_after=%q; the last item delivered is %q", c.spec.Value, n, sa, c.lastID)
		}
		if sa == "" {
			return start, size, true, false
		}
		key, ok := c.keys[sa]
		if !ok {
			return position{}, size, false, false
		}
		return position{keyset: true, after: key}, size, true, false
	case styleCursor:
		p, ok := token("cursor")
		return p, size, ok, false
	case styleNextURL:
		p, ok := token("after")
		return p, size, ok, false
	case styleLink:
		p, ok := token("page_token")
		return p, size, ok, false
	}
	return start, size, true, false
}

// askedSize is the page size a request asks for (the server's default
// when it asks none).
func (h *hostile) askedSize(q url.Values) int {
	if n, err := strconv.Atoi(q.Get(h.sc.sizeParam())); err == nil {
		return n
	}
	return h.sc.Default
}

// overlapped words the requests that arrived while another of their value
// was in flight ("" none), for a walk that must send one at a time.
func (h *hostile) overlapped() string {
	h.fmu.Lock()
	defer h.fmu.Unlock()
	if h.overlaps == 0 {
		return ""
	}
	return fmt.Sprintf("%d requests arrived while another of the same collection was in flight, the first %s", h.overlaps, h.overlapAt[0])
}

// startIndex is where pos falls in the rows as they stand.
func (c *hcol) startIndex(pos position) int {
	if pos.keyset {
		i, _ := slices.BinarySearchFunc(c.rows, pos.after+1, func(r hrow, k int) int { return r.key - k })
		return i
	}
	return min(pos.offset, len(c.rows))
}

// mutate makes ev.Ops changes the walk can notice, or that do it no harm.
func (h *hostile) mutate(c *hcol, ev event) {
	exact := h.sc.Total == totalExact
	keyset := h.sc.Keyset && !h.sc.Style.numeric()
	for range ev.Ops {
		dir := ev.Dir
		if dir == 0 {
			dir = []int{1, -1}[c.rng.IntN(2)]
		}
		if exact && c.gapDir != 0 {
			dir = c.gapDir // one direction per gap, so the total moves
		}
		b, next := c.boundary, c.nextStart
		if c.pages == 0 {
			b, next = 0, 0
		}
		lo, hi := 0, len(c.rows) // the indexes a change may touch
		if h.sc.Style.numeric() {
			// Anywhere: the walker computes its own positions and must
			// prove it saw every row.
			h.mutateAt(c, ev, dir)
			continue
		}
		if !exact {
			// Ahead of where the next page starts; behind it only an
			// insert, on an offset-positioned walk whose next page starts
			// right after the rows delivered (it then repeats a row). A
			// page-number walk past a short page starts beyond them: a
			// change there leaves no trace.
			lo = max(next, b) // an insert behind moves delivered rows past next
			if dir > 0 && !keyset && next == b-c.gapBehind {
				lo = 0
			}
		}
		if ev.Behind && lo < b {
			hi = b
		}
		if dir < 0 {
			hi = min(hi, len(c.rows)-1)
			if lo > hi || len(c.rows) == 0 {
				continue
			}
			i := lo + c.rng.IntN(hi-lo+1)
			if i >= len(c.rows) {
				continue
			}
			c.deleted[c.rows[i].id] = true
			c.rows = slices.Delete(c.rows, i, i+1)
			if i < c.boundary {
				c.boundary--
			}
		} else {
			if ev.Behind && lo < b {
				hi = b - 1
			}
			if lo > hi {
				continue
			}
			i := lo + c.rng.IntN(hi-lo+1)
			lowKey, highKey := 0, (len(c.rows)+2)*1000
			if i > 0 {
				lowKey = c.rows[i-1].key
			}
			if i < len(c.rows) {
				highKey = c.rows[i].key
			} else {
				highKey = max(highKey, lowKey+1000)
			}
			key := lowKey + 1 + c.rng.IntN(max(highKey-lowKey-1, 1))
			if key >= highKey || c.used[key] {
				continue
			}
			c.addRow(i, key)
			if i < c.boundary {
				c.boundary++
				c.gapBehind++
			}
		}
		c.mutations++
		if exact {
			c.gapDir = dir
		}
	}
}

// mutateAt makes one change to a page or offset collection where ev
// says (the head, the middle, the tail, or anywhere).
func (h *hostile) mutateAt(c *hcol, ev event, dir int) {
	n := len(c.rows)
	pick := func(hi int) int { // an index in [0, hi]
		switch ev.Where {
		case whereHead:
			return 0
		case whereMiddle:
			return hi / 2
		case whereTail:
			return hi
		}
		return c.rng.IntN(hi + 1)
	}
	if dir < 0 {
		if n == 0 {
			return
		}
		i := pick(n - 1)
		c.deleted[c.rows[i].id] = true
		c.rows = slices.Delete(c.rows, i, i+1)
		if i < c.boundary {
			c.boundary--
		}
	} else {
		i := pick(n)
		lowKey, highKey := 0, (n+2)*1000
		if i > 0 {
			lowKey = c.rows[i-1].key
		}
		if i < n {
			highKey = c.rows[i].key
		} else {
			highKey = max(highKey, lowKey+1000)
		}
		key := lowKey + 1 + c.rng.IntN(max(highKey-lowKey-1, 1))
		if key >= highKey || c.used[key] {
			return
		}
		c.addRow(i, key)
		if i < c.boundary {
			c.boundary++
			c.gapBehind++
		}
	}
	c.mutations++
	c.changedAt[ev.Where]++
	if h.sc.Total == totalExact {
		c.gapDir = dir
	}
}

// page delivers one page of a paged style.
func (h *hostile) page(w http.ResponseWriter, c *hcol, pos position, size int, qk pageQuirks) {
	dup, emptyMore := qk.dup, qk.emptyMore
	sc := h.sc
	// A page fetched ahead after the server said done is never read: what
	// it shows is no trace the walk could have seen.
	unread := sc.fetchesAhead() && c.done != ""
	start := c.startIndex(pos)
	end := min(start+size, len(c.rows))
	items := slices.Clone(c.rows[start:end])
	consumed := len(items)
	if emptyMore {
		items, consumed = nil, 0
	}
	if dup && len(items) > 0 {
		switch {
		case start > 0 && c.rows[start-1].id != c.lastID:
			// The page overlaps the last one. (Not when the row before it
			// is the last row delivered: an overlapping walker asks for
			// that row again itself, and would take the repeat for it.)
			items = append([]hrow{c.rows[start-1]}, items[:len(items)-1]...)
			consumed--
			c.dups += b2i(!unread)
		case len(items) >= 2:
			items[len(items)-1] = items[0]
			consumed--
			c.dups += b2i(!unread)
		}
	}
	more := emptyMore || start+consumed < len(c.rows)
	next := position{keyset: pos.keyset, after: pos.after, offset: start + consumed}
	if pos.keyset && consumed > 0 {
		next.after = c.rows[start+consumed-1].key
	}

	c.pages++
	h.deliverIDs(c, items)
	if qk.probe {
		// A page read again to check a boundary: the walk's position
		// does not move.
		c.probes++
		body := `{"data":` + rowsJSON(items)
		switch sc.Total {
		case totalExact:
			c.noteTotal(len(c.rows), unread)
			body += `,"total":` + strconv.Itoa(len(c.rows))
		case totalOver, totalUnder:
			c.noteTotal(sc.reported(len(c.rows)), unread)
			body += `,"total":` + strconv.Itoa(sc.reported(len(c.rows)))
		}
		if sc.MoreFlag {
			body += `,"has_more":` + strconv.FormatBool(more)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body+"}")
		return
	}
	c.gapDir, c.gapBehind = 0, 0
	c.boundary = max(c.boundary, start+consumed)
	c.lastLen = len(items)
	if len(items) > 0 {
		c.lastID = items[len(items)-1].id
	}
	if len(items) == 0 {
		c.emptyPages++
	}
	if len(items) == 0 && more {
		c.emptyRun++
	} else {
		c.emptyRun = 0
	}
	switch sc.Style {
	case stylePage:
		if sc.fetchesAhead() {
			c.lastPage = max(c.lastPage, c.curPage)
			c.pageAt[[2]int{c.curPage, qk.asked}] = true
		} else {
			c.lastPage++
		}
		c.nextStart = c.lastPage * size
	case styleOffset:
		c.nextOffset = start + len(items)
		c.nextStart = c.nextOffset
		c.highOffset = max(c.highOffset, c.nextOffset)
	default:
		c.nextStart = start + consumed
	}
	if !sc.AllPages {
		c.done = "the call asked for the first page only"
	}

	var tok string
	switch {
	case more && sc.Style.tokens() && qk.cycle && c.firstToken != "":
		tok = c.firstToken // a cursor already given: a cycle
		c.cycled = true
	case more && sc.Style.tokens():
		tok = fmt.Sprintf("t%s.%d.%d", c.spec.Value, c.pages, c.rng.IntN(1<<30))
		c.issued[tok] = next
		if c.firstToken == "" {
			c.firstToken = tok
		}
	}
	c.lastToken = tok

	var b strings.Builder
	extra := func(k, v string) { fmt.Fprintf(&b, ",%q:%s", k, v) }
	b.WriteString(`{"data":`)
	b.WriteString(rowsJSON(items))
	switch sc.Total {
	case totalExact:
		c.noteTotal(len(c.rows), unread)
		extra("total", strconv.Itoa(len(c.rows)))
	case totalOver, totalUnder:
		c.noteTotal(sc.reported(len(c.rows)), unread)
		extra("total", strconv.Itoa(sc.reported(len(c.rows))))
	}
	if sc.MoreFlag || sc.Style == styleLastID {
		extra("has_more", strconv.FormatBool(more))
		if !more {
			c.done = "has_more: false"
		}
	}
	nextURL := ""
	if tok != "" && sc.Style != styleCursor {
		q := url.Values{}
		if sc.Style == styleLink {
			q.Set("per_page", strconv.Itoa(size))
			q.Set("page_token", tok)
		} else {
			q.Set("limit", strconv.Itoa(size))
			q.Set("after", tok)
		}
		nextURL = h.origin + "/lists/" + c.spec.Value + "/items?" + q.Encode()
		if qk.foreign {
			nextURL = h.foreign + "/lists/" + c.spec.Value + "/items?" + q.Encode()
			c.foreignSent = true
		} else if sc.Relative {
			u, _ := url.Parse(nextURL)
			nextURL = u.RequestURI()
		}
	}
	end2 := func(key string) {
		switch sc.End {
		case endNull:
			extra(key, "null")
		case endEmpty:
			extra(key, `""`)
		}
	}
	switch sc.Style {
	case styleCursor:
		if tok != "" {
			extra("next_cursor", strconv.Quote(tok))
		} else {
			end2("next_cursor")
			c.done = "no next_cursor"
		}
	case styleNextURL:
		if nextURL != "" {
			extra("next", strconv.Quote(nextURL))
		} else {
			end2("next")
			c.done = "no next URL"
		}
	}
	b.WriteByte('}')
	w.Header().Set("Content-Type", "application/json")
	if sc.Style == styleLink {
		first := h.origin + "/lists/" + c.spec.Value + "/items?per_page=" + strconv.Itoa(size)
		link := fmt.Sprintf(`<%s>; rel="first"`, first)
		if nextURL != "" {
			link = fmt.Sprintf(`<%s>; rel="next", %s`, nextURL, link)
		} else {
			c.done = `no rel="next"`
		}
		w.Header().Set("Link", link)
		fmt.Fprint(w, rowsJSON(items))
		return
	}
	fmt.Fprint(w, b.String())
}

// noteTotal records a total sent, unless the walk cannot have read it.
func (c *hcol) noteTotal(total int, unread bool) {
	if !unread {
		c.totals = append(c.totals, total)
	}
}

func (h *hostile) deliverIDs(c *hcol, items []hrow) {
	for _, it := range items {
		c.delivered[it.id]++
	}
}

func rowsJSON(rows []hrow) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.json())
	}
	b.WriteByte(']')
	return b.String()
}

// order is the object style's body: an order whose line items are part of
// it, and whose money total is not a row count.
func (h *hostile) order(c *hcol) string {
	var b strings.Builder
	for i := range c.spec.Rows + 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sku":"sku_%d","qty":%d,"total":%d.5}`, i, i%4+1, i*3)
	}
	return fmt.Sprintf(`{"id":%q,"total":%s,"status":"paid","currency":"EUR","line_items":[%s]}`,
		orderID(c.spec.Value), orderTotal(c.spec), b.String())
}

func orderID(value string) string { return "ord_" + value }
func orderTotal(c collection) string {
	return strconv.Itoa(10*c.Rows+7) + ".25"
}

// listing is the text style's body: one line per entry.
func (h *hostile) listing(c *hcol) string {
	var b strings.Builder
	for i := range c.spec.Rows + 3 {
		fmt.Fprintf(&b, "file_%02d.txt\t%d bytes\n", i, 100*i+1)
	}
	return b.String()
}

// ---- what the model knows at the end ----

// finalIDs is a collection's rows as they stand at the end of the walk.
func (c *hcol) finalIDs(filter, typo bool) []string {
	var out []string
	if filter && typo {
		return nil // no row has the field
	}
	for _, r := range c.rows {
		if !filter || r.k == "a" {
			out = append(out, r.id)
		}
	}
	return out
}

// throughout is the rows that existed for the whole walk (there before
// its first request, never deleted), as the filter keeps them.
func (c *hcol) throughout(filter, typo bool) []string {
	if filter && typo {
		return nil // no row has the field
	}
	var out []string
	for id := range c.initial {
		if !c.deleted[id] && (!filter || kOf(c.keys[id]) == "a") {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// everHad reports a row the collection held at some time of the walk,
// and that the filter keeps.
func (c *hcol) everHad(id string, filter, typo bool) bool {
	key, ok := c.keys[id]
	return ok && !(filter && typo) && (!filter || kOf(key) == "a")
}

// kOf is a row's k from its key (addRow's rule).
func kOf(key int) string {
	if key%3 == 0 {
		return "b"
	}
	return "a"
}

// changed says why a walk of c cannot have been complete: a page that
// repeated a row the walk had (a trace it sees), a total that moved, a
// total that disagrees with the rows sent.
func (c *hcol) changed() string {
	if c.dups > 0 {
		return fmt.Sprintf("%s: the server repeated a row already sent in %d pages", c.spec.Value, c.dups)
	}
	for i := 1; i < len(c.totals); i++ {
		if c.totals[i] != c.totals[0] {
			return fmt.Sprintf("%s: the reported total moved from %d to %d", c.spec.Value, c.totals[0], c.totals[i])
		}
	}
	if len(c.totals) > 0 && c.totals[len(c.totals)-1] != len(c.delivered) {
		return fmt.Sprintf("%s: the reported total %d disagrees with the %d distinct rows sent", c.spec.Value, c.totals[len(c.totals)-1], len(c.delivered))
	}
	return ""
}

// goString renders sc as a Go literal, for the regression table.
func (sc scenario) goString() string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario{Seed: %d, Style: style%s", sc.Seed, goStyleName(sc.Style))
	field := func(name string, v any, zero any) {
		if v != zero {
			fmt.Fprintf(&b, ", %s: %v", name, v)
		}
	}
	field("Keyset", sc.Keyset, false)
	field("AllPages", sc.AllPages, false)
	field("ModelSize", sc.ModelSize, 0)
	field("SizeMax", sc.SizeMax, 0)
	field("Cap", sc.Cap, 0)
	field("Default", sc.Default, 0)
	field("Total", sc.Total, 0)
	field("Over", sc.Over, 0)
	field("WholePages", sc.WholePages, 0)
	field("MoreFlag", sc.MoreFlag, false)
	field("End", sc.End, 0)
	field("Relative", sc.Relative, false)
	field("Schema", sc.Schema, false)
	field("Body", sc.Body, false)
	field("AskedOffsets", sc.AskedOffsets, false)
	field("Fields", sc.Fields, false)
	field("Filter", sc.Filter, false)
	field("FilterTypo", sc.FilterTypo, false)
	field("MissingArg", sc.MissingArg, false)
	field("ForEach", sc.ForEach, false)
	field("DupValue", sc.DupValue, false)
	field("FanOut", sc.FanOut, 0)
	field("Aggregate", sc.Aggregate, false)
	field("Cached", sc.Cached, false)
	if sc.Budget != (paginate.Budget{}) {
		fmt.Fprintf(&b, ", Budget: paginate.Budget{Pages: %d, Requests: %d, Concurrency: %d}", sc.Budget.Pages, sc.Budget.Requests, sc.Budget.Concurrency)
	}
	field("Latency", sc.Latency, 0)
	b.WriteString(", Cols: []collection{")
	for i, c := range sc.Cols {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "{Value: %q, Rows: %d", c.Value, c.Rows)
		if len(c.Events) > 0 {
			b.WriteString(", Events: []event{")
			for j, ev := range c.Events {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "{At: %d, Kind: %s", ev.At, eventNames[ev.Kind])
				if ev.Status != 0 {
					fmt.Fprintf(&b, ", Status: %d", ev.Status)
				}
				if ev.RetryAfter != 0 {
					fmt.Fprintf(&b, ", RetryAfter: %d", ev.RetryAfter)
				}
				if ev.Ops != 0 {
					fmt.Fprintf(&b, ", Ops: %d", ev.Ops)
				}
				if ev.Dir != 0 {
					fmt.Fprintf(&b, ", Dir: %d", ev.Dir)
				}
				if ev.Behind {
					b.WriteString(", Behind: true")
				}
				b.WriteString("}")
			}
			b.WriteString("}")
		}
		if c.FailFrom != 0 {
			fmt.Fprintf(&b, ", FailFrom: %d, FailStatus: %d", c.FailFrom, c.FailStatus)
		}
		b.WriteString("}")
	}
	b.WriteString("}}")
	return b.String()
}

func goStyleName(s style) string {
	return [...]string{"Page", "Offset", "Cursor", "LastID", "NextURL", "Link", "List", "Object", "Text"}[s]
}
