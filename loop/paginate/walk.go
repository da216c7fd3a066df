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
	StopFirstPage            = "first_page_only"         // only one page was asked for (no AllPages)
	StopCancelled            = "cancelled"               // the caller cancelled the call mid-walk (an MCP client's notifications/cancelled, a stopped turn)
)

// maxEmptyPages is how many consecutive empty pages a walk follows while
// the server still says more exists; the next one would be a guess.
const maxEmptyPages = 3

// IsComplete reports whether stoppedBy is one of the complete_ reasons.
func IsComplete(stoppedBy string) bool { return strings.HasPrefix(stoppedBy, "complete_") }

// Progress is reported after every page. Items and Requests count the
// whole tool call (the shared Meter); Page counts this walk's pages.
type Progress struct {
	Page        int
	PagesMax    int
	Items       int
	Requests    int
	RequestsMax int
	Elapsed     time.Duration
	// Total is the item count the server reported on its latest page
	// (of this collection); 0 when it reported none.
	Total int
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
	// Effect is the call's effect (a binding may override the tool's);
	// "" means EffectOf(Tool, Plan). Only a read is sent again after a
	// transport failure or a 5xx.
	Effect tools.Effect
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
	// Items are the distinct items of every page, raw JSON, in order:
	// an item whose id (Plan.ItemID, else "id") was already received is
	// counted in Duplicates and not kept again. Items without an id are
	// all kept.
	Items [][]byte
	// Complete is true only when the server said the collection ended
	// (StoppedBy is a complete_ reason).
	Complete bool
	// StoppedBy is why the walk ended (the Stop constants).
	StoppedBy string
	// LikelyMore is true when rows exist beyond what was fetched: every
	// stop that is not complete_ (the walk meant to go on), except
	// first_page_only, where it is what the first page's signals say (a
	// more flag, a next token, a total above what was received, a full
	// page).
	LikelyMore bool
	// MoreSaid: for a first page only, the server itself said more rows
	// exist (LikelyMore without it means they may).
	MoreSaid bool
	// TotalMismatch is set on a complete walk that began at the start of
	// the collection when the server's last reported Total differs from
	// the distinct items received: the collection changed during the
	// walk, or the total is approximate. Complete stays true — the
	// server's end signal wins — and the engine calls the walk unstable.
	TotalMismatch bool
	// Resumed is set when the walk began past the start of the
	// collection (a cursor the caller sent, an offset above 0, a page
	// past the first): a complete walk holds the rows from there on.
	Resumed bool
	// TotalMoved is set when the reported total changed between pages:
	// the collection changed during the walk.
	TotalMoved bool

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
	// Uninspected says in words what was not fetched ("" when complete):
	// what was left, then Cause.
	Uninspected string
	// Cause says in words why a partial walk stopped (the bound reached,
	// or what was wrong with the server's paging data); "" when complete.
	Cause string
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
	Requests  int    // upstream requests sent, retries included (0: refused before any)
	Err       error  // the transport failure, when there was one
	// Unsure reports a change whose outcome is unknown: a request of a
	// write that was sent but got no answer (a timeout, a connection
	// reset). It was not retried; whether it took effect must be checked.
	Unsure bool
	detail string
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
//     offset+received ≥ total, an empty page, or a short page whose size
//     Walk can vouch for (it chose the size itself, within any declared
//     maximum, and an earlier page came back full at that size, none
//     above it) →
//     complete; any other short page is a reason to fetch one more page,
//     never the end by itself; offsets advance by the items received;
//  4. a budget → partial. Budgets are checked only when another request
//     is needed, so a walk that ends exactly at a bound is complete.
//
// Guards: every cursor, URL and offset sent is remembered and a repeat
// stops the walk as repeated_cursor; duplicate item ids are counted and
// dropped; a total that moves between pages is reported (TotalMoved); at
// most maxEmptyPages consecutive empty pages are followed while the
// server still says more, then inconsistent_pagination; a
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
// than asked (a silent cap) is walked on until it says done or sends an
// empty page, at the price of one request more on collections that end
// on a short page trawl cannot vouch for. Without AllPages one page is
// fetched: a first page that does not end the collection stops as
// first_page_only, LikelyMore saying what its signals say.
//
// A caller that refuses a request before sending it (a *tools.ArgError:
// a required argument missing) fails the walk at once: no retry, and
// the request is not counted.
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
	effect    tools.Effect
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
	ownSize  bool // pageSize was chosen by the walker (within any declared maximum)
	fullSeen bool // a page came back holding pageSize items
	oversize bool // a page came back holding more than pageSize items
	hint     bool // the last page's signals say more rows exist
	said     bool // ... and the server said so (a more flag, a next token or URL, a total)
	empties  int  // consecutive empty pages that said more

	attempt  int  // re-sends of the request above so far
	answered bool // the request above was answered with a page
	received int  // items on that page

	seen     map[string]struct{} // cursors, URLs and offsets sent
	lastPage uint64              // hash of the last non-empty page's items; 0 none
	ids      idSet               // hashes of item ids received
	seed     maphash.Seed
	buf      [][]byte
	res      *Result
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
	effect := o.Effect
	if effect == "" {
		effect = EffectOf(o.Tool, o.Plan)
	}
	w.effect = effect
	w.retryable = effect == tools.EffectRead
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
			w.pageSize, _ = chooseSize(t, p.SizeParam, w.budget.Items)
			w.ownSize = true
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
			Page: res.Pages + 1, Cursor: w.cursor, Effect: w.effect,
		}
		if w.viaURL {
			req.URL = w.cursor
		}
		resp, fail, err := w.fetch(ctx, req)
		if err != nil {
			if errors.Is(err, context.Canceled) && res.Pages > 0 {
				// The caller cancelled mid-walk: what was fetched is a
				// partial result (kept and stored), and no further
				// request is sent.
				return w.finish(StopCancelled, ""), nil
			}
			return nil, err
		}
		if fail != nil {
			if res.Pages == 0 {
				if res.Requests == 0 && fail.err == nil {
					return w.finish(fail.reason, ""), nil // the shared budget was spent
				}
				return nil, fail.pageError(res)
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
		// A paginated page was validated by readPage (rerr); a declared
		// single response is checked here.
		expectJSON := plan.Paginated() || w.o.Tool.Response != nil
		if expectJSON && (rerr != nil || !plan.Paginated()) && !json.Valid(resp.Body) {
			// A tool that answers JSON sent something else with a success
			// status (a proxy's or a login page): an error, not an answer.
			f := w.notJSON(resp)
			if first {
				return nil, f.pageError(res)
			}
			return w.finish(f.reason, f.why), nil
		}
		if len(sig.items) == 0 && errorBodyOK(resp.Body) {
			// A success status whose body says it failed ({"ok": false, …}).
			f := w.classify(resp)
			if first {
				return nil, f.pageError(res)
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
		before := len(res.Items)
		dups, withID := w.collect(sig.items)
		if same := w.samePage(sig.items); !first && same && withID == 0 {
			// Rows without ids, the very rows of the page before: the
			// server ignores the paging parameter; keep them once.
			res.Items = res.Items[:before]
			return w.finish(StopInconsistent, fmt.Sprintf(
				"page %d held the same rows as page %d, so the server seems to ignore the paging parameter", res.Pages, res.Pages-1)), nil
		}
		if sig.total >= 0 {
			if res.Total != nil && *res.Total != sig.total && plan.Paginated() {
				res.TotalMoved = true
			}
			t := sig.total
			res.Total = &t
		}
		w.report()

		d := w.decide(sig, len(sig.items), rerr)
		if IsComplete(d.stop) && !w.plan.EndConfirmed(sig) {
			d = inconsistent(unconfirmedEnd(w.plan))
		}
		if d.stop != "" {
			return w.finish(d.stop, d.why), nil
		}
		if w.received == 0 {
			w.empties++
		} else {
			w.empties = 0
		}
		if w.empties >= maxEmptyPages {
			return w.finish(StopInconsistent, fmt.Sprintf(
				"%d consecutive pages were empty while the server still said more exist", w.empties)), nil
		}
		if !first && withID > 0 && withID == w.received && dups == withID {
			// The server answered this page with rows already received,
			// every one of them: it is ignoring the paging parameter, and
			// following it would only repeat them until a budget ends.
			return w.finish(StopInconsistent, fmt.Sprintf(
				"page %d held only rows already received, so the server seems to ignore the paging parameter", res.Pages)), nil
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

// collect appends a page's items that were not received before,
// counting duplicates and the meter. It returns how many of the page's
// items had an id, and how many of those had been received before.
func (w *walker) collect(items [][]byte) (dups, withID int) {
	res := w.res
	if res.Items == nil {
		// Room for the whole walk at this page size, within the budget.
		res.Items = make([][]byte, 0, min(len(items)*w.maxPages, w.budget.Items+len(items)))
		w.ids = newIDSet(cap(res.Items))
		w.seed = maphash.MakeSeed()
	}
	w.meter.addItems(len(items))
	idPath := w.plan.ItemID
	if idPath == "" {
		idPath = "id"
	}
	for _, it := range items {
		if raw, ok := itemID(it, idPath); ok && string(raw) != "null" {
			withID++
			if !w.ids.add(maphash.Bytes(w.seed, raw)) {
				res.Duplicates++
				dups++
				continue
			}
		}
		res.Items = append(res.Items, it)
	}
	return dups, withID
}

// samePage reports whether a non-empty page holds exactly the items of
// the page before it, and remembers this one.
func (w *walker) samePage(items [][]byte) bool {
	if len(items) == 0 {
		w.lastPage = 0
		return false
	}
	var h maphash.Hash
	h.SetSeed(w.seed)
	for _, it := range items {
		h.Write(it)
		h.WriteByte(0)
	}
	sum := h.Sum64()
	same := sum == w.lastPage
	w.lastPage = sum
	return same
}

func (w *walker) report() {
	if w.o.Progress == nil {
		return
	}
	u := w.meter.Usage()
	total := 0
	if w.res.Total != nil {
		total = *w.res.Total
	}
	w.o.Progress(Progress{
		Page: w.res.Pages, PagesMax: w.maxPages, Items: u.Items,
		Requests: u.Requests, RequestsMax: w.budget.Requests, Elapsed: w.clock.Now().Sub(u.Start),
		Total: total,
	})
}

// finish records why the walk stopped and returns the result.
func (w *walker) finish(reason, why string) *Result {
	res := w.res
	res.StoppedBy = reason
	res.Complete = IsComplete(reason)
	res.LikelyMore = !res.Complete
	if reason == StopFirstPage {
		res.LikelyMore, res.MoreSaid = w.hint, w.said
	}
	res.PageSize = w.pageSize
	res.Plan = w.plan
	res.Resumed = !w.posKnow && w.plan.Paginated()
	if res.LastCursor == "" && (w.plan.Strategy != PageNumber && w.plan.Strategy != Offset) {
		res.LastCursor = w.cursor
	}
	if res.Complete {
		if res.Total != nil && w.posKnow && w.plan.Paginated() {
			res.TotalMismatch = len(res.Items) != *res.Total
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
	start := b.Len()
	switch reason {
	case StopBudgetPages:
		fmt.Fprintf(&b, "the page budget (%d per collection) was reached", w.maxPages)
	case StopFirstPage:
		b.WriteString("only the first page was requested")
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
	case StopCancelled:
		b.WriteString("the caller cancelled the call")
	default:
		b.WriteString(why)
	}
	res.Cause = b.String()[start:]
	if res.Total != nil && *res.Total > len(res.Items) {
		fmt.Fprintf(&b, "; the server reports %d items, %d were received", *res.Total, len(res.Items))
	}
	return b.String()
}
