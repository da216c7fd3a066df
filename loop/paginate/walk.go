package paginate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Caller sends one upstream request of a tool; tools.Invoker implements
// it. A transport failure is a non-nil error; an HTTP error status is a
// Response carrying that status and a nil error. A Caller shared by
// concurrent walks must be safe for concurrent use.
type Caller interface {
	Call(ctx context.Context, req tools.Request) (*tools.Response, error)
}

// CallerFunc adapts a function to Caller.
type CallerFunc func(ctx context.Context, req tools.Request) (*tools.Response, error)

// Call calls f.
func (f CallerFunc) Call(ctx context.Context, req tools.Request) (*tools.Response, error) {
	return f(ctx, req)
}

// Why a walk ended: the `_stoppedBy` vocabulary of DESIGN.md §6. The
// complete_ reasons are the only ones after which Result.Complete is true.
const (
	StopCompleteNoNext       = "complete_no_next"        // no next token, next URL or rel="next"
	StopCompleteHasMoreFalse = "complete_has_more_false" // the more flag said done
	StopCompleteTotalReached = "complete_total_reached"  // offset+received reached the reported total
	StopCompleteEmptyPage    = "complete_empty_page"     // numeric walk without a signal: an empty page
	StopCompleteShortPage    = "complete_short_page"     // numeric walk without a signal: a short page
	StopBudgetPages          = "budget_pages"
	StopBudgetRequests       = "budget_requests"
	StopBudgetItems          = "budget_items"
	StopBudgetBytes          = "budget_bytes"
	StopBudgetTime           = "budget_time"
	StopRepeatedCursor       = "repeated_cursor"         // the server handed back a cursor or URL already followed
	StopCursorExpired        = "cursor_expired"          // the server rejected a cursor mid-walk
	StopRateLimited          = "rate_limited"            // a 429 whose wait does not fit the time budget
	StopHTTPError            = "http_error"              // an error status or transport failure, retries spent
	StopInconsistent         = "inconsistent_pagination" // continuation data that cannot be trusted
	StopForeignNextURL       = "foreign_next_url"        // a next URL on another origin, not followed
)

// IsComplete reports whether stoppedBy is one of the complete_ reasons.
func IsComplete(stoppedBy string) bool { return strings.HasPrefix(stoppedBy, "complete_") }

// Retry policy (DESIGN.md §6). Backoff doubles from transientBackoff; a
// 5xx carrying Retry-After waits what it asks instead.
const (
	maxTransientRetries = 2                      // per page, transport errors and 5xx
	maxRateLimitWaits   = 3                      // per page, 429s waited out
	transientBackoff    = 500 * time.Millisecond // first retry; then 1s
	defaultPageSize     = 100                    // asked when the schema declares no maximum
)

// Progress is reported after every page. Items and Requests count the
// whole tool call (the shared Meter); Page counts this walk's pages.
type Progress struct {
	Page        int
	PagesMax    int
	Items       int
	Requests    int
	RequestsMax int
	Elapsed     time.Duration
}

// WalkOptions says what to walk and under which bounds. Caller and Tool
// are required; every other zero value means a default.
type WalkOptions struct {
	Caller Caller
	// Clock reads time for budgets and sleeps for Retry-After and
	// backoff. Nil: SystemClock.
	Clock Clock
	Tool  *tools.Tool
	// Args are the tool's own arguments (reserved ones stripped). Walk
	// never modifies the map; it derives one per request.
	Args map[string]any
	// Plan is what detection found; the first response may refine it.
	Plan Plan
	// AllPages walks every page. False: one request, whose signals still
	// say whether more rows exist (Result.LikelyMore).
	AllPages bool
	// Meter is shared by every walk of one tool call. Nil: a Meter of
	// this walk alone, started now.
	Meter *Meter
	// Budget bounds the walk; zero fields mean the defaults. Pages is per
	// walk; requests, items, bytes and time are counted on Meter.
	Budget Budget
	// Credential and ThreadID are passed on in every tools.Request.
	Credential string
	ThreadID   string
	// Progress, when set, is called after every page, on the walk's
	// goroutine; it must not block for long.
	Progress func(Progress)
}

// Result is what a walk collected and why it stopped.
type Result struct {
	// FirstBody is the first page's raw body, to keep the payload's
	// envelope shape. Nil when no page was fetched.
	FirstBody []byte
	// Items are all items of every page, raw JSON, in order. Items that
	// repeat (same ItemID) are kept and counted in Duplicates.
	Items [][]byte
	// Complete is true only when the server said the collection ended
	// (StoppedBy is a complete_ reason).
	Complete bool
	// StoppedBy is why the walk ended (the Stop constants).
	StoppedBy string
	// LikelyMore is true when rows exist beyond what was fetched: every
	// stop that is not complete_ (the walk meant to go on).
	LikelyMore bool
	// TotalMismatch is set on a complete walk that began at the start of
	// the collection when the server's last reported Total differs from
	// the distinct items received: the collection changed during the
	// walk, or the total is approximate. Complete stays true — the
	// server's end signal wins — and the engine says so in its note.
	TotalMismatch bool

	Pages      int   // pages received
	Requests   int   // upstream requests sent by this walk, retries included
	Retries    int   // re-sends of a page (transport errors, 5xx, 429)
	Duplicates int   // items whose ItemID was already seen in this walk
	Bytes      int64 // raw upstream bytes received by this walk
	// Total is the server-reported item count from the last page that
	// carried one.
	Total *int
	// PageSize is the page size asked for (0 when the request set none).
	PageSize int
	// LastCursor is the continuation the walk did not follow (the resume
	// point) on a partial stop, else the last cursor or URL it sent;
	// raw — the engine masks it. Empty for page and offset walks.
	LastCursor string
	// Status is the HTTP status of the last response.
	Status int
	// Uninspected says in words what was not fetched ("" when complete).
	Uninspected string
	// Plan is the plan the walk followed, after refinement by the first
	// response.
	Plan Plan
}

// PageError is the failure of a walk's first page: nothing was collected,
// so the call fails. Its message is safe to show (no URL, no credential)
// and carries the status and a short snippet of the upstream error body.
type PageError struct {
	StoppedBy string // why: http_error, rate_limited, cursor_expired, budget_time, …
	Status    int    // HTTP status; 0 for a transport failure
	Snippet   string // sanitized start of the upstream error body
	Retries   int    // re-sends made before giving up
	Err       error  // the transport failure, when there was one
	detail    string
}

func (e *PageError) Error() string {
	var b strings.Builder
	switch {
	case e.Status > 0:
		fmt.Fprintf(&b, "upstream answered %d %s", e.Status, http.StatusText(e.Status))
	case e.Err != nil:
		fmt.Fprintf(&b, "upstream request failed: %s", safeCause(e.Err))
	default:
		b.WriteString("upstream request not completed")
	}
	if e.Retries > 0 {
		fmt.Fprintf(&b, " (after %d retries)", e.Retries)
	}
	if e.detail != "" {
		b.WriteString("; " + e.detail)
	}
	if e.Snippet != "" {
		b.WriteString(": " + e.Snippet)
	}
	return b.String()
}

func (e *PageError) Unwrap() error { return e.Err }

// Walk fetches the pages of one collection, sequentially, under the
// budget, following the server's own continuation signal, and reports
// why it stopped (DESIGN.md §6). Stop rules, in precedence:
//
//  1. the server says done (more flag false, next token or URL absent or
//     empty, no rel="next") → complete;
//  2. the server says more → follow it, even through a short or empty
//     page;
//  3. page and offset walks (and last-item cursors) without a signal:
//     offset+received ≥ total, an empty page, a short page → complete;
//     offsets advance by the items received;
//  4. a budget → partial. Budgets are checked only when another request
//     is needed, so a walk that ends exactly at a bound is complete.
//
// Guards: every cursor, URL and offset sent is remembered and a repeat
// stops the walk as repeated_cursor; duplicate item ids are counted; a
// next URL off the tool's origin is not followed; 429 waits Retry-After
// when it fits the time budget; transport errors and 5xx retry the same
// page at most twice (GET, or a POST that lists); 401/403 never retry; a
// rejected cursor is cursor_expired; a malformed continuation field stops
// the walk as inconsistent_pagination without advancing.
//
// The items budget is checked between pages: the page that reaches it is
// kept whole (never cut), so LastCursor is an exact resume point and at
// most one page more than the budget is held.
//
// The first response refines the plan (Refine). With AllPages and a size
// parameter the caller left unset, Walk asks for the schema's maximum
// (else 100, never above the item budget). A server that serves fewer
// than asked is walked by what it serves: the first page's count becomes
// the page size when a total says more exists, or when the size was the
// walker's own guess (no schema maximum) — then the next page decides,
// at the price of one request on collections smaller than the guess.
// Without AllPages the page budget is one: a first page that says more
// ends as budget_pages with LikelyMore.
//
// Walk returns an error only when the first page fails (a *PageError), on
// bad options, or when ctx is cancelled; any later failure ends the walk
// as a partial Result. A deadline on ctx counts as the time budget. A
// Meter already spent before the first request gives a Result with no
// page and the budget's reason.
func Walk(ctx context.Context, o WalkOptions) (*Result, error) {
	if o.Caller == nil {
		return nil, errors.New("paginate: WalkOptions.Caller is nil")
	}
	if o.Tool == nil {
		return nil, errors.New("paginate: WalkOptions.Tool is nil")
	}
	if err := o.Budget.Validate(); err != nil {
		return nil, fmt.Errorf("paginate: %w", err)
	}
	w := newWalker(o)
	return w.run(ctx)
}

// walker is the state of one Walk.
type walker struct {
	o        WalkOptions
	clock    Clock
	budget   Budget
	meter    *Meter
	deadline time.Time
	maxPages int
	plan     Plan

	retryable bool
	origin    string // scheme://host:port of the provider; "" unknown

	// The request about to be sent.
	args    map[string]any
	base    *url.URL // its URL (for resolving relative links); nil unknown
	page    int      // page number (PageNumber walks)
	offset  int      // offset (Offset walks)
	cursor  string   // cursor or URL it carries; "" none
	viaURL  bool     // it goes to a server-given URL (next_url, Link)
	posKnow bool     // the walk began at the start of the collection

	pageSize int  // size asked per page; 0 unknown
	chosen   bool // pageSize was chosen by the walker without a schema maximum
	effSize  int  // page size the server actually serves; 0 unknown

	attempt  int  // re-sends of the request above so far
	answered bool // the request above was answered with a page
	received int  // items on that page

	seen map[string]struct{} // cursors, URLs and offsets sent
	ids  idSet               // hashes of item ids received
	seed maphash.Seed
	buf  [][]byte
	res  *Result
}

func newWalker(o WalkOptions) *walker {
	w := &walker{o: o, clock: o.Clock, budget: o.Budget.Resolved(), meter: o.Meter, plan: o.Plan}
	if w.clock == nil {
		w.clock = SystemClock{}
	}
	if w.meter == nil {
		w.meter = NewMeter(w.clock.Now())
	}
	w.deadline = w.meter.start.Add(w.budget.Time)
	w.maxPages = w.budget.Pages
	if !o.AllPages {
		w.maxPages = 1
	}
	w.res = &Result{}
	w.seen = map[string]struct{}{}
	w.args = cloneArgs(o.Args)
	w.origin = originOf(o.Tool.Origin)
	w.base = requestURL(o.Tool, w.args)
	w.retryable = retryable(o.Tool, o.Plan)
	w.setup()
	return w
}

// setup prepares the first request from the plan and the caller's args.
func (w *walker) setup() {
	p, t := w.plan, w.o.Tool
	w.posKnow = true
	if p.SizeParam != "" {
		if n, ok := argInt(w.args, p.SizeParam); ok {
			w.pageSize = n
		} else if w.o.AllPages && p.Paginated() {
			w.pageSize, w.chosen = chooseSize(t, p.SizeParam, w.budget.Items)
			setArg(t, w.args, p.SizeParam, w.pageSize)
		}
	}
	switch p.Strategy {
	case PageNumber:
		base := pageBase(t, p.PageParam)
		w.page = base
		if n, ok := argInt(w.args, p.PageParam); ok {
			w.page = n
			w.posKnow = n <= base
		}
	case Offset:
		if n, ok := argInt(w.args, p.OffsetParam); ok {
			w.offset = n
		}
		w.posKnow = w.offset == 0
		w.seen["o:"+strconv.Itoa(w.offset)] = struct{}{}
	}
	// A cursor the caller sent resumes a walk; the first response may
	// also turn a plan with a cursor parameter into a cursor walk.
	if c, ok := argString(w.args, p.CursorParam); ok && c != "" {
		w.cursor = c
		w.posKnow = false
		w.seen["c:"+c] = struct{}{}
	}
}

func (w *walker) run(ctx context.Context) (*Result, error) {
	res := w.res
	if reason := w.sharedBudgetSpent(); reason != "" {
		return w.finish(reason, ""), nil
	}
	for {
		req := tools.Request{
			Tool: w.o.Tool, Args: w.args, Credential: w.o.Credential, ThreadID: w.o.ThreadID,
			Page: res.Pages + 1, Cursor: w.cursor,
		}
		if w.viaURL {
			req.URL = w.cursor
		}
		resp, fail, err := w.fetch(ctx, req)
		if err != nil {
			return nil, err
		}
		if fail != nil {
			if res.Pages == 0 {
				if res.Requests == 0 {
					return w.finish(fail.reason, ""), nil // the shared budget was spent
				}
				return nil, fail.pageError(res.Retries)
			}
			return w.finish(fail.reason, fail.why), nil
		}

		first := res.Pages == 0
		plan := w.plan
		if first {
			plan = Refine(plan, resp.Body, resp.Header)
		}
		sig, rerr := readPage(plan, resp.Body, resp.Header, w.base, w.buf)
		w.buf = sig.items[:0]
		if len(sig.items) == 0 && errorBodyOK(resp.Body) {
			// A success status whose body says it failed ({"ok": false, …}).
			f := w.classify(resp)
			if first {
				return nil, f.pageError(res.Retries)
			}
			return w.finish(f.reason, f.why), nil
		}
		w.plan = plan
		res.Pages++
		if first {
			res.FirstBody = resp.Body
		}
		w.received = len(sig.items)
		w.answered = true
		w.collect(sig.items)
		if sig.total >= 0 {
			t := sig.total
			res.Total = &t
		}
		w.report()

		d := w.decide(sig, len(sig.items), rerr)
		if d.stop != "" {
			return w.finish(d.stop, d.why), nil
		}
		if reason := w.guard(d); reason != "" {
			w.res.LastCursor = d.next
			return w.finish(reason, ""), nil
		}
		if reason := w.budgetBeforePage(); reason != "" {
			w.res.LastCursor = d.next
			return w.finish(reason, ""), nil
		}
		w.advance(d)
	}
}

// collect appends a page's items, counting duplicates and the meter.
func (w *walker) collect(items [][]byte) {
	res := w.res
	if res.Items == nil {
		// Room for the whole walk at this page size, within the budget.
		res.Items = make([][]byte, 0, min(len(items)*w.maxPages, w.budget.Items+len(items)))
		w.ids = newIDSet(cap(res.Items))
		w.seed = maphash.MakeSeed()
	}
	res.Items = append(res.Items, items...)
	w.meter.addItems(len(items))
	idPath := w.plan.ItemID
	if idPath == "" {
		idPath = "id"
	}
	for _, it := range items {
		if raw, ok := itemID(it, idPath); ok && string(raw) != "null" {
			if !w.ids.add(maphash.Bytes(w.seed, raw)) {
				res.Duplicates++
			}
		}
	}
}

// idSet holds the hashes of the item ids a walk received. Ids are
// compared by their raw JSON (1 and "1" differ) through a 64-bit hash: a
// false duplicate needs a collision, about 1 in 10^12 for 5,000 items.
// Open addressing over a flat slice keeps each check to one or two cache
// lines, several times cheaper than a map for this one job.
type idSet struct {
	slots []uint64 // 0 is an empty slot; a zero hash is stored as 1
	n     int
}

func newIDSet(expected int) idSet {
	size := 16
	for size < 2*expected {
		size <<= 1
	}
	return idSet{slots: make([]uint64, size)}
}

// add stores h and reports whether it was new.
func (s *idSet) add(h uint64) bool {
	if h == 0 {
		h = 1
	}
	if 2*(s.n+1) > len(s.slots) {
		s.grow()
	}
	mask := uint64(len(s.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case 0:
			s.slots[i] = h
			s.n++
			return true
		case h:
			return false
		}
	}
}

func (s *idSet) grow() {
	old := s.slots
	s.slots, s.n = make([]uint64, max(16, 2*len(old))), 0
	for _, h := range old {
		if h != 0 {
			s.add(h)
		}
	}
}

func (w *walker) report() {
	if w.o.Progress == nil {
		return
	}
	u := w.meter.Usage()
	w.o.Progress(Progress{
		Page: w.res.Pages, PagesMax: w.maxPages, Items: u.Items,
		Requests: u.Requests, RequestsMax: w.budget.Requests, Elapsed: w.clock.Now().Sub(u.Start),
	})
}

// decision is what one page says to do next: stop (stop != "") or
// continue, with the cursor or URL to send when the strategy needs one.
type decision struct {
	stop string
	why  string // for inconsistent stops: what was wrong
	next string // cursor or URL to send next
}

func done(reason string) decision { return decision{stop: reason} }

func inconsistent(why string) decision { return decision{stop: StopInconsistent, why: why} }

// decide applies the stop rules to one page.
func (w *walker) decide(s signals, received int, rerr error) decision {
	if rerr != nil {
		return inconsistent(strings.TrimPrefix(rerr.Error(), errInconsistent.Error()+": "))
	}
	p := w.plan

	// Rules 1 and 2: what the server says explicitly.
	explicit, next := w.explicit(s)
	switch {
	case s.flag == moreNo:
		return done(StopCompleteHasMoreFalse)
	case s.flag == moreUnknown && explicit == moreNo:
		return done(StopCompleteNoNext)
	}
	says := s.flag
	if says == moreUnknown {
		says = explicit
	}
	if says == moreYes && !p.ItemsFound {
		return inconsistent("the server says more pages exist, but the response's item array is unknown, so pages cannot be merged")
	}
	if says == moreYes {
		switch {
		case next != "":
			return decision{next: next}
		case p.Strategy == PageNumber:
			return decision{}
		case p.Strategy == Offset:
			if received == 0 {
				return inconsistent("the server says more items exist but sent none, so the offset cannot advance")
			}
			return decision{}
		case p.Strategy == Cursor && p.CursorFromItem != "":
			return w.fromLastItem(s.items)
		case p.Strategy == None || p.Strategy == "":
			return inconsistent("the server says more pages exist, but the operation's pagination is unknown")
		default:
			return inconsistent(fmt.Sprintf("the server says more pages exist but sent no %s to reach them", continuationName(p)))
		}
	}

	// No explicit signal at all.
	switch {
	case p.Strategy == PageNumber || p.Strategy == Offset:
	case p.Strategy == Cursor && p.CursorFromItem != "" && p.NextToken == "":
	default:
		// Not paginated, or a token/URL strategy whose response carried
		// none of its fields: nothing says there is more.
		return done(StopCompleteNoNext)
	}
	return w.numeric(s, received)
}

// explicit reads the strategy's own continuation field: moreYes with the
// cursor or URL to send, moreNo when the field says done, moreUnknown
// when the plan names no such field.
func (w *walker) explicit(s signals) (more, string) {
	p := w.plan
	switch p.Strategy {
	case Cursor:
		if p.NextToken != "" {
			if s.hasToken {
				return moreYes, s.token
			}
			return moreNo, ""
		}
		if s.link.present { // a cursor API that also speaks Link
			return linkMore(s.link)
		}
		return moreUnknown, ""
	case NextURL:
		if p.NextURLField != "" {
			if s.hasURL {
				return moreYes, s.nextURL
			}
			return moreNo, ""
		}
		if s.link.present {
			return linkMore(s.link)
		}
		return moreUnknown, ""
	case LinkHeader:
		return linkMore(s.link)
	default:
		// Page, offset, or none: a Link header or a next field, when the
		// response has one, is the server's word; the walk still
		// advances by its own numbers.
		switch {
		case s.link.present:
			m, _ := linkMore(s.link)
			return m, ""
		case p.NextURLField != "":
			if s.hasURL {
				return moreYes, ""
			}
			return moreNo, ""
		case p.NextToken != "":
			if s.hasToken {
				return moreYes, ""
			}
			return moreNo, ""
		}
		return moreUnknown, ""
	}
}

func linkMore(l linkSignal) (more, string) {
	if l.next != "" {
		return moreYes, l.next
	}
	return moreNo, ""
}

// fromLastItem continues a cursor walk from the last item's field
// (Stripe's starting_after = last id).
func (w *walker) fromLastItem(items [][]byte) decision {
	if len(items) == 0 {
		return inconsistent("the server says more items exist but sent none, so there is no last item to continue from")
	}
	c, ok := itemField(items[len(items)-1], w.plan.CursorFromItem)
	if !ok {
		return inconsistent(fmt.Sprintf("the last item has no %q to continue from", w.plan.CursorFromItem))
	}
	return decision{next: c}
}

// numeric applies rule 3: no signal from the server, so totals, empty
// pages and short pages decide.
func (w *walker) numeric(s signals, received int) decision {
	p := w.plan
	collected := len(w.res.Items)
	pos, posOK := collected, w.posKnow
	if p.Strategy == Offset {
		pos, posOK = w.offset+received, true // offsets are absolute
	}
	if s.total >= 0 && posOK && pos >= s.total {
		return done(StopCompleteTotalReached)
	}
	if p.Strategy == PageNumber && s.totalPages >= 0 && w.posKnow {
		if n := w.page - pageBase(w.o.Tool, p.PageParam) + 1; n >= s.totalPages {
			return done(StopCompleteTotalReached)
		}
	}
	if received == 0 {
		return done(StopCompleteEmptyPage)
	}
	next := decision{}
	if p.Strategy == Cursor {
		next = w.fromLastItem(s.items)
		if next.stop != "" {
			return next
		}
	}
	firstPage := w.res.Pages == 1
	totalSaysMore := s.total >= 0 && posOK || s.totalPages >= 0 && p.Strategy == PageNumber && w.posKnow
	size := w.effSize
	if size == 0 {
		size = w.pageSize
	}
	switch {
	case size == 0:
		// Nothing was asked and nothing is known: the first page shows
		// what the server serves.
		w.effSize = received
	case received > size:
		// The server ignores the size asked and serves more.
		w.effSize = received
	case received < size && firstPage && (totalSaysMore || w.chosen):
		// A cap below what was asked. The reported total says more
		// exists, or the walker chose the size itself without a schema
		// maximum and cannot tell a cap from the end: take the received
		// count as the page size and let the next page decide.
		w.effSize = received
	case received < size && !totalSaysMore:
		return done(StopCompleteShortPage)
	}
	return next
}

// guard checks the next cursor, URL or offset before it is followed.
func (w *walker) guard(d decision) string {
	var key string
	switch {
	case d.next != "" && w.followsURL():
		if w.origin == "" || originOf(d.next) != w.origin {
			return StopForeignNextURL
		}
		key = "u:" + d.next
	case d.next != "":
		key = "c:" + d.next
	case w.plan.Strategy == Offset:
		key = "o:" + strconv.Itoa(w.offset+w.received)
	default:
		return ""
	}
	if _, ok := w.seen[key]; ok {
		return StopRepeatedCursor
	}
	return ""
}

// followsURL reports whether d.next is a URL to request rather than a
// cursor to send in a parameter.
func (w *walker) followsURL() bool {
	switch w.plan.Strategy {
	case NextURL, LinkHeader:
		return true
	case Cursor:
		// A cursor plan whose response carried only a Link header.
		return w.plan.NextToken == "" && w.plan.CursorFromItem == ""
	}
	return false
}

// sharedBudgetSpent reports a shared budget already spent by earlier
// walks of the same tool call.
func (w *walker) sharedBudgetSpent() string {
	u := w.meter.Usage()
	switch {
	case u.Items >= w.budget.Items:
		return StopBudgetItems
	case u.Bytes >= w.budget.Bytes:
		return StopBudgetBytes
	case u.Requests >= w.budget.Requests:
		return StopBudgetRequests
	case !w.clock.Now().Before(w.deadline):
		return StopBudgetTime
	}
	return ""
}

// budgetBeforePage checks the budgets before another page is requested
// (requests and time are checked again before every attempt).
func (w *walker) budgetBeforePage() string {
	if w.res.Pages >= w.maxPages {
		return StopBudgetPages
	}
	return w.sharedBudgetSpent()
}

// advance prepares the next page's request.
func (w *walker) advance(d decision) {
	p, t := w.plan, w.o.Tool
	w.args = cloneArgs(w.args)
	w.answered = false
	switch {
	case d.next != "" && w.followsURL():
		w.cursor, w.viaURL = d.next, true
		if u, err := url.Parse(d.next); err == nil {
			w.base = u
		}
		w.seen["u:"+d.next] = struct{}{}
	case d.next != "":
		w.cursor = d.next
		setArg(t, w.args, p.CursorParam, d.next)
		w.seen["c:"+d.next] = struct{}{}
	case p.Strategy == PageNumber:
		w.page++
		setArg(t, w.args, p.PageParam, w.page)
	case p.Strategy == Offset:
		w.offset += w.received
		setArg(t, w.args, p.OffsetParam, w.offset)
		w.seen["o:"+strconv.Itoa(w.offset)] = struct{}{}
	}
}

// finish records why the walk stopped and returns the result.
func (w *walker) finish(reason, why string) *Result {
	res := w.res
	res.StoppedBy = reason
	res.Complete = IsComplete(reason)
	res.LikelyMore = !res.Complete
	res.PageSize = w.pageSize
	res.Plan = w.plan
	if res.LastCursor == "" && (w.plan.Strategy != PageNumber && w.plan.Strategy != Offset) {
		res.LastCursor = w.cursor
	}
	if res.Complete {
		if res.Total != nil && w.posKnow {
			res.TotalMismatch = len(res.Items)-res.Duplicates != *res.Total
		}
		return res
	}
	res.Uninspected = w.uninspected(reason, why)
	return res
}

// uninspected words what the walk did not fetch.
func (w *walker) uninspected(reason, why string) string {
	res := w.res
	var b strings.Builder
	if res.Pages == 0 {
		b.WriteString("the whole collection")
	} else {
		fmt.Fprintf(&b, "everything after page %d", res.Pages)
		page, offset := w.page, w.offset
		if w.answered {
			page, offset = page+1, offset+w.received
		}
		switch w.plan.Strategy {
		case PageNumber:
			fmt.Fprintf(&b, " (it resumes at %s=%d)", w.plan.PageParam, page)
		case Offset:
			fmt.Fprintf(&b, " (it resumes at %s=%d)", w.plan.OffsetParam, offset)
		}
	}
	b.WriteString(": ")
	switch reason {
	case StopBudgetPages:
		if w.o.AllPages {
			fmt.Fprintf(&b, "the page budget (%d per collection) was reached", w.maxPages)
		} else {
			b.WriteString("only one page was requested")
		}
	case StopBudgetRequests:
		fmt.Fprintf(&b, "the request budget (%d per call, retries included) was spent", w.budget.Requests)
	case StopBudgetItems:
		fmt.Fprintf(&b, "the item budget (%d per call) was reached", w.budget.Items)
	case StopBudgetBytes:
		fmt.Fprintf(&b, "the byte budget (%d bytes per call) was reached", w.budget.Bytes)
	case StopBudgetTime:
		fmt.Fprintf(&b, "the time budget (%s per call) ran out", w.budget.Time)
	case StopRepeatedCursor:
		b.WriteString("the server handed back a cursor it had already given (a cycle), so the walk stopped rather than loop")
	case StopForeignNextURL:
		b.WriteString("the next page's URL is on another origin than the provider's and was not followed")
	default:
		b.WriteString(why)
	}
	if res.Total != nil && *res.Total > len(res.Items) {
		fmt.Fprintf(&b, "; the server reports %d items, %d were received", *res.Total, len(res.Items))
	}
	return b.String()
}

// failure is why a page could not be fetched.
type failure struct {
	reason  string
	why     string // words for Result.Uninspected
	status  int
	snippet string
	err     error
	detail  string // words for PageError
}

func (f *failure) pageError(retries int) *PageError {
	return &PageError{StoppedBy: f.reason, Status: f.status, Snippet: f.snippet, Retries: retries, Err: f.err, detail: f.detail}
}

// fetch sends one page's request, retrying the same page after transport
// errors and 5xx (at most twice, when the request is safe to repeat) and
// waiting out 429s that fit the time budget. Every attempt is counted on
// the requests budget. err is non-nil only when ctx is cancelled.
func (w *walker) fetch(ctx context.Context, req tools.Request) (*tools.Response, *failure, error) {
	transient, waits := 0, 0
	for attempt := 0; ; attempt++ {
		now := w.clock.Now()
		if !now.Before(w.deadline) {
			return nil, w.budgetFailure(StopBudgetTime, "the time budget ran out"), nil
		}
		if !w.meter.takeRequest(w.budget.Requests) {
			return nil, w.budgetFailure(StopBudgetRequests, "the request budget was spent"), nil
		}
		w.res.Requests++
		if attempt > 0 {
			w.res.Retries++
		}
		req.Retry, w.attempt = attempt, attempt
		callCtx, cancel := context.WithTimeout(ctx, w.deadline.Sub(now))
		resp, err := w.o.Caller.Call(callCtx, req)
		timedOut := callCtx.Err() != nil
		cancel()
		if err == nil && resp == nil {
			err = errors.New("the caller returned no response")
		}
		if err != nil {
			switch {
			case errors.Is(ctx.Err(), context.Canceled):
				return nil, nil, ctx.Err()
			case ctx.Err() != nil || timedOut:
				return nil, w.budgetFailure(StopBudgetTime, "the time budget ran out while waiting for the upstream"), nil
			}
			if w.retryable && transient < maxTransientRetries {
				transient++
				if ok, cerr := w.wait(ctx, backoff(transient)); cerr != nil {
					return nil, nil, cerr
				} else if ok {
					continue
				}
			}
			return nil, &failure{
				reason: StopHTTPError, err: err,
				why: fmt.Sprintf("page %d could not be fetched (%s)", req.Page, safeCause(err)),
			}, nil
		}
		w.meter.addBytes(int64(len(resp.Body)))
		w.res.Bytes += int64(len(resp.Body))
		w.res.Status = resp.Status
		switch code := resp.Status; {
		case code >= 200 && code < 300:
			return resp, nil, nil
		case code == http.StatusTooManyRequests:
			d, ok := retryAfter(resp.Header, w.clock.Now())
			if !ok {
				d = backoff(waits + 1)
			}
			if waits < maxRateLimitWaits {
				waits++
				if ok, cerr := w.wait(ctx, d); cerr != nil {
					return nil, nil, cerr
				} else if ok {
					continue
				}
			}
			f := w.classify(resp)
			f.reason = StopRateLimited
			f.detail = fmt.Sprintf("the rate limit's wait (%s) does not fit the time budget", d.Round(time.Second))
			if waits >= maxRateLimitWaits {
				f.detail = fmt.Sprintf("still rate limited after %d waits", waits)
			}
			f.why = fmt.Sprintf("page %d was rate limited (%s)", req.Page, f.detail)
			return nil, f, nil
		case code >= 500 && w.retryable && transient < maxTransientRetries:
			transient++
			d, ok := retryAfter(resp.Header, w.clock.Now())
			if !ok {
				d = backoff(transient)
			}
			if ok, cerr := w.wait(ctx, d); cerr != nil {
				return nil, nil, cerr
			} else if ok {
				continue
			}
			return nil, w.classify(resp), nil
		default:
			return nil, w.classify(resp), nil
		}
	}
}

// classify words an error response: a rejected cursor, or an HTTP error.
func (w *walker) classify(resp *tools.Response) *failure {
	f := &failure{reason: StopHTTPError, status: resp.Status, snippet: snippet(resp.Body, w.o.Credential)}
	page := w.res.Pages + 1
	sendingCursor := w.cursor != "" // a cursor parameter or a server-given URL
	rejected := false
	switch resp.Status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusGone, http.StatusUnprocessableEntity:
		rejected = sendingCursor && w.res.Pages > 0
	}
	if sendingCursor && !rejected {
		rejected = resp.Status < 500 && cursorRejected(resp.Body)
	}
	if rejected {
		f.reason = StopCursorExpired
		f.detail = "the upstream rejected the continuation cursor"
		f.why = fmt.Sprintf("the server rejected the cursor of page %d (status %d%s); no cursor was guessed", page, resp.Status, colon(f.snippet))
		return f
	}
	switch resp.Status {
	case http.StatusUnauthorized, http.StatusForbidden:
		f.why = fmt.Sprintf("page %d was refused (status %d%s); authorization errors are not retried", page, resp.Status, colon(f.snippet))
	default:
		f.why = fmt.Sprintf("page %d failed (status %d%s)", page, resp.Status, colon(f.snippet))
		if w.attempt > 0 {
			f.why += fmt.Sprintf(" after %d retries", w.attempt)
		}
	}
	return f
}

func colon(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// budgetFailure is a budget that stops the walk before a request.
func (w *walker) budgetFailure(reason, detail string) *failure {
	return &failure{reason: reason, detail: detail, status: w.res.Status}
}

// wait sleeps d when it fits in what is left of the time budget (and of
// ctx's deadline). ok is false when it does not fit; err is ctx's error.
//
// A retry the request budget cannot pay for is not waited for either:
// ok is true without sleeping, and the next attempt stops the walk as
// budget_requests.
func (w *walker) wait(ctx context.Context, d time.Duration) (ok bool, err error) {
	if d < 0 {
		d = 0
	}
	if w.meter.Usage().Requests >= w.budget.Requests {
		return true, nil
	}
	if !w.clock.Now().Add(d).Before(w.deadline) {
		return false, nil
	}
	if dl, has := ctx.Deadline(); has && time.Until(dl) <= d {
		return false, nil
	}
	if err := w.clock.Sleep(ctx, d); err != nil {
		if errors.Is(err, context.Canceled) {
			return false, err
		}
		return false, nil
	}
	return true, nil
}

// backoff is the wait before the n-th retry (n ≥ 1): 500ms, 1s, 2s…
func backoff(n int) time.Duration {
	return transientBackoff << (n - 1)
}

// retryable reports whether a page request may be sent again after an
// uncertain failure: GET and HEAD, or a POST that reads (a paginated
// operation, or one named for searching or listing).
func retryable(t *tools.Tool, p Plan) bool {
	switch strings.ToUpper(t.Method) {
	case http.MethodGet, http.MethodHead:
		return true
	case http.MethodPost:
		if p.Paginated() {
			return true
		}
		words := strings.ToLower(t.Name + " " + t.OperationID + " " + t.Path)
		for _, w := range []string{"search", "list", "query", "find", "lookup"} {
			if strings.Contains(words, w) {
				return true
			}
		}
	}
	return false
}

// continuationName names what the plan follows to the next page, for
// messages.
func continuationName(p Plan) string {
	switch {
	case p.Strategy == Cursor && p.NextToken != "":
		return lastKey(p.NextToken)
	case p.Strategy == NextURL && p.NextURLField != "":
		return lastKey(p.NextURLField)
	case p.Strategy == LinkHeader:
		return `rel="next" link`
	}
	return "continuation"
}

func lastKey(path string) string {
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[i+1:]
	}
	return path
}

// chooseSize is the page size a walk asks for when the caller set none:
// the schema's maximum, else defaultPageSize, never above the item
// budget nor below the schema's minimum. guessed is true when the schema
// declares no maximum (a server cap cannot be ruled out).
func chooseSize(t *tools.Tool, name string, items int) (size int, guessed bool) {
	size, guessed = defaultPageSize, true
	s := paramSchema(t, name)
	if s != nil && s.Maximum != nil && *s.Maximum >= 1 {
		size, guessed = int(*s.Maximum), false
	}
	if size > items {
		size = items
	}
	if s != nil && s.Minimum != nil && float64(size) < *s.Minimum {
		size = int(*s.Minimum)
	}
	return size, guessed
}

// pageBase is the first page's number: the schema's default or minimum
// when it says 0, else 1.
func pageBase(t *tools.Tool, name string) int {
	s := paramSchema(t, name)
	if s == nil {
		return 1
	}
	if n, ok := numberOf(s.Default); ok && (n == 0 || n == 1) {
		return n
	}
	if s.Minimum != nil && *s.Minimum == 0 {
		return 0
	}
	return 1
}

// paramSchema is the schema of the walk parameter name: a parameter of
// t, or a property one level down in a body parameter ("body.cursor",
// as detection names it). Nil when unknown.
func paramSchema(t *tools.Tool, name string) *tools.Schema {
	if p, ok := t.Param(name); ok {
		return p.Schema
	}
	root, prop, nested := strings.Cut(name, ".")
	if !nested {
		return nil
	}
	if p, ok := t.Param(root); ok && p.Schema != nil {
		return p.Schema.Properties[prop]
	}
	return nil
}

// cloneArgs copies the top level of args (nested maps are copied when
// written, by setArg).
func cloneArgs(args map[string]any) map[string]any {
	out := make(map[string]any, len(args)+2)
	for k, v := range args {
		out[k] = v
	}
	return out
}

// setArg sets the walk parameter name in args. A name that is not a
// parameter of t but names a property one level down in a body parameter
// ("body.cursor") sets that property in a copy of the parameter's object. Integers are sent as the
// parameter's declared type (a string when it says string).
func setArg(t *tools.Tool, args map[string]any, name string, v any) {
	if n, ok := v.(int); ok {
		v = json.Number(strconv.Itoa(n))
		if s := paramSchema(t, name); s != nil && s.Type == "string" {
			v = strconv.Itoa(n)
		}
	}
	root, rest, nested := strings.Cut(name, ".")
	if _, ok := t.Param(name); ok || !nested {
		args[name] = v
		return
	}
	inner := map[string]any{}
	if m, ok := args[root].(map[string]any); ok {
		for k, x := range m {
			inner[k] = x
		}
	}
	inner[rest] = v
	args[root] = inner
}

// lookupArg finds the value of name in args, following setArg's rule.
func lookupArg(args map[string]any, name string) (any, bool) {
	if v, ok := args[name]; ok {
		return v, v != nil
	}
	root, rest, nested := strings.Cut(name, ".")
	if !nested {
		return nil, false
	}
	m, ok := args[root].(map[string]any)
	if !ok {
		return nil, false
	}
	v, ok := m[rest]
	return v, ok && v != nil
}

func argInt(args map[string]any, name string) (int, bool) {
	if name == "" {
		return 0, false
	}
	v, ok := lookupArg(args, name)
	if !ok {
		return 0, false
	}
	return numberOf(v)
}

func argString(args map[string]any, name string) (string, bool) {
	if name == "" {
		return "", false
	}
	v, ok := lookupArg(args, name)
	if !ok {
		return "", false
	}
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	if n, ok := numberOf(v); ok {
		return strconv.Itoa(n), true
	}
	return "", false
}

// numberOf reads an integer from a JSON-decoded value.
func numberOf(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		if x == float64(int(x)) {
			return int(x), true
		}
	case json.Number:
		if n, err := strconv.Atoi(x.String()); err == nil {
			return n, true
		}
	case string:
		if n, err := strconv.Atoi(strings.TrimSpace(x)); err == nil {
			return n, true
		}
	}
	return 0, false
}

// requestURL is the URL of the walk's first request without its query:
// the base for resolving relative next URLs. Nil when the tool has no
// usable origin.
func requestURL(t *tools.Tool, args map[string]any) *url.URL {
	if t.Origin == "" {
		return nil
	}
	path := t.Path
	for _, p := range t.Params {
		if p.In != tools.InPath {
			continue
		}
		if v, ok := argString(args, p.Name); ok && v != "" {
			path = strings.ReplaceAll(path, "{"+p.WireName()+"}", url.PathEscape(v))
		}
	}
	u, err := url.Parse(strings.TrimRight(t.Origin, "/") + path)
	if err != nil || u.Host == "" {
		return nil
	}
	return u
}

// originOf is the scheme://host:port of a URL, lower-cased, with the
// scheme's default port made explicit; "" when it has no host.
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}
