package paginate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// Caller sends one upstream request of a tool; tools.Invoker implements
// it. A transport failure is a non-nil error; an HTTP error status is a
// Response carrying that status and a nil error. A Caller that gives up
// before anything was sent (its context ended while it waited for the
// provider's rate limit) returns the context's error itself, unwrapped —
// tools.Invoker and the MCP servers' callers do — and the walk does not
// count that request; any failure once the request may have left is
// another error (or wraps it). A Caller shared by concurrent walks must
// be safe for concurrent use.
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
	// StopPageSizeNotHonoured: a page-number API served fewer rows than
	// the size asked on a page that was not the last, so its page numbers
	// count pages of another size, and the budget could not hold the walk
	// again at the size it serves.
	StopPageSizeNotHonoured = "page_size_not_honoured"
	// StopCancelled: the caller cancelled the call mid-walk (an MCP
	// client's notifications/cancelled, a stopped turn).
	StopCancelled = "cancelled"
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
	// InFlight counts the call's requests sent, or waiting for their
	// slot, and not yet answered (a walk fetching ahead has several).
	InFlight int
	// Waiting is set while a request of the call waits for its provider's
	// rate limit; nil otherwise.
	Waiting *RateLimitWait
	// Upstream is what the upstream reported of the request under way
	// (an MCP server's progress); nil on the report after a page.
	Upstream *tools.UpstreamProgress
}

// WalkOptions says what to walk and under which bounds. Caller and Tool
// are required; every other zero value means a default.
type WalkOptions struct {
	Caller Caller
	// Clock reads time for budgets and sleeps for Retry-After and
	// backoff. Nil: the system clock.
	Clock Clock
	Tool  *tools.Tool
	// Args are the tool's own arguments (reserved ones stripped). Walk
	// never modifies the map; it derives one per request.
	Args map[string]any
	// Plan is what detection found; the first response may refine it.
	Plan Plan
	// Effect is the call's effect (a binding may override the tool's);
	// "" means Effect(Tool, Plan, ""). Only a read is sent again after a
	// transport failure or a 5xx.
	Effect tools.Effect
	// AllPages walks every page. False: one request, whose signals still
	// say whether more rows exist (Result.LikelyMore).
	AllPages bool
	// Meter is shared by every walk of one tool call. Nil: a Meter of
	// this walk alone, started now.
	Meter *Meter
	// Lease holds requests of Meter set aside for this walk (a fan-out
	// value started with what it needs); the walk spends them first and
	// its caller releases what is left. Nil: none.
	Lease *Lease
	// Budget bounds the walk; zero fields mean the defaults. Pages is per
	// walk; requests, items, bytes and time are counted on Meter.
	Budget Budget
	// Credential and ThreadID are passed on in every tools.Request.
	Credential string
	ThreadID   string
	// Scrub is the Caller's scrubber for Credential. What the walker
	// renders from an answer — an error body's message, read decoded from
	// its JSON escapes — passes through it, so that no decoding undoes the
	// Caller's masking. Nil: nothing more is masked.
	Scrub *tools.Scrubber
	// Progress, when set, is called after every page, and when a request
	// starts waiting for its provider's rate limit, again while it waits,
	// and when it stops. Calls never overlap, but may come from the
	// goroutine of a request fetched ahead; it must not block for long.
	Progress func(Progress)
	// Pass, when set, filters and projects each page's rows the moment
	// the page is checked, while its bytes are in cache; Result.Worked
	// holds that work, for query.RunPages. Nil: rows are only checked.
	Pass *query.Pass
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
	// Worked is what WalkOptions.Pass made of the rows of each page the
	// walk read (a probe's too), in walk order: query.RunPages finds
	// Items' rows in it. Nil without a Pass.
	Worked []*query.Page
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
	// Shifted is set when a position-based walk saw rows move across a
	// page boundary: an overlapping offset page that did not begin with
	// the row the page before ended on, or a page-number walk's probe of a
	// boundary that found another row there. A row was added or removed
	// earlier in the collection between two reads, so rows may be missing.
	Shifted bool
	// Unproven says, on a complete walk, why it could not prove that it
	// saw every row ("" when it could, or needed no proof: a cursor, a
	// next URL, a keyset or a snapshot): a page boundary no overlap, total
	// or probe could check.
	Unproven string
	// Probes counts the requests made only to check a walk (a page-number
	// boundary probe, an offset walk's closing probe); they are in
	// Requests, not in Pages.
	Probes int
	// Unused counts the requests fetched ahead whose page the walk never
	// read (past an end that moved, or at a position a short page
	// shifted); they are in Requests, not in Pages.
	Unused int
	// ResumeAt names the argument a partial page or offset walk resumes
	// at ("page=3", "offset=40"); "" for other walks (LastCursor holds a
	// cursor walk's resume point).
	ResumeAt string

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
	var limited *tools.RateLimitError
	switch {
	case errors.As(e.Err, &limited):
		b.WriteString("upstream request not sent: " + limited.Error())
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

// Walk fetches the pages of one collection under the budget, following
// the server's own continuation signal, and reports why it stopped
// (DESIGN.md §6). Pages are read and checked one after the other; a
// page-number or offset walk that knows its end also sends the requests
// of the next pages before the current one has come back (Budget.Concurrency;
// see ahead.go), and uses each only when it reaches its position. Stop
// rules, in precedence:
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
	defer w.releaseLease()
	res, err := w.run(ctx)
	// Once the walk has stopped, a request fetched ahead that still waits
	// for its provider's rate limit is given up: it is never sent. Those
	// already sent are let finish (their pages are not read), so that
	// every request counted is one the upstream answered.
	w.giveUpWaiting()
	w.drainAhead() // res is w.res: the requests fetched ahead are counted in it
	w.ids.release()
	return res, err
}

// proofMode is how a walk that computes its own positions (an offset, a
// page number) proves that it saw every row of a collection that may
// change while it reads: a row added or removed before the position it
// reads next shifts every row after it across the page boundary, which
// de-duplication never sees.
type proofMode uint8

const (
	// proofNone: nothing to prove — one page, or the server hands the next
	// position over (a cursor, a next URL, a keyset), or the API documents
	// that its pages come from a snapshot (Plan.Snapshot).
	proofNone proofMode = iota
	// proofOverlap: each offset page starts on the last row of the page
	// before, which must be the row the walk received there; an end the
	// walk inferred (a total reached, a short page of a vouched size) is
	// confirmed by a closing probe, one more overlapping request.
	proofOverlap
	// proofTotal: a page-number walk whose server reports a total on every
	// page: the total must not move and must equal the distinct rows.
	proofTotal
	// proofProbe: a page-number walk without a total: once the page after
	// a full page is read, the full page is read again and must hold the
	// same rows in the same order. Its last row alone would show a shift
	// between the two first reads, but a change the other way before the
	// probe could hide it; the whole page cannot be restored so.
	proofProbe
)

// pageEnd is a full page of a page-number walk, whose boundary is probed
// once the page after it has been read.
type pageEnd struct {
	page int      // its page number
	size int      // the page size it was read at (0: the server's own)
	keys [][]byte // its rows' keys (rowKey), in order
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

	// Requests: lease is what the walk holds (WalkOptions.Lease, or its
	// own, empty one); keep of it is kept for a probe, so pages cannot
	// spend it.
	lease    *Lease
	ownLease bool
	keep     int

	// The request about to be sent.
	args    map[string]any
	base    *url.URL // its URL (for resolving relative links); nil unknown
	page    int      // page number (PageNumber walks)
	offset  int      // offset (Offset walks)
	cursor  string   // cursor or URL it carries; "" none
	viaURL  bool     // it goes to a server-given URL (next_url, Link)
	posKnow bool     // the walk began at the start of the collection
	overlap bool     // it starts on the last row received (expect)
	expect  []byte   // that row's key
	// probeFor is set while the request is an offset walk's closing
	// probe: the complete_ reason it confirms.
	probeFor string

	pageSize int  // size asked per page; 0 unknown
	ownSize  bool // pageSize was chosen by the walker (within any declared maximum)
	fullSeen bool // a page came back holding pageSize items
	oversize bool // a page came back holding more than pageSize items
	rewalked bool // the walk started again at the page size the server serves
	hint     bool // the last page's signals say more rows exist
	said     bool // ... and the server said so (a more flag, a next token or URL, a total)
	empties  int  // consecutive empty pages that said more
	repeats  int  // consecutive pages of rows already received, after rows shifted

	attempt  int    // re-sends of the request above so far
	answered bool   // the request above was answered with a page
	received int    // items on that page
	fresh    int    // ... of which the walk did not have yet
	lastKey  []byte // the key of that page's last row (nil: it was empty)

	// Proof (proofMode).
	proof      proofMode
	totalEvery bool     // every page so far carried a total
	unverified string   // a page boundary nothing checked, in words; "" none
	pending    *pageEnd // proofProbe: the full page read before the last one

	seen     map[string]struct{} // cursors, URLs and offsets sent
	pageKeys map[string]bool     // the first page's members, when it was an object (notAPage)
	lastPage [][]byte            // the last page's items; empty none
	ids      idSet               // hashes of item ids received
	hashes   []uint64            // collect's id hashes of one page, reused
	seed     maphash.Seed
	buf      [][]byte
	res      *Result

	// Fetching ahead (ahead.go): the requests sent ahead, and what the
	// latest page said of where the collection ends.
	ahead      ahead
	totalPages int       // the page count the latest page reported; -1 none
	lastLink   int       // the page number of the latest page's rel="last" link; -1 none
	saysEnd    bool      // the latest page carried a more flag or a next link: the last one will say it is
	parsed     *prefetch // the request fetched ahead whose answer fetch returned, read already

	progMu   sync.Mutex // serialises Progress calls
	lastProg Progress   // the latest page's report (progMu)
}

func newWalker(o WalkOptions) *walker {
	w := &walker{o: o, clock: o.Clock, budget: o.Budget.Resolved(), meter: o.Meter, plan: o.Plan, totalEvery: true,
		totalPages: -1, lastLink: -1}
	if w.clock == nil {
		w.clock = tools.SystemClock()
	}
	if w.meter == nil {
		w.meter = NewMeter(w.clock.Now())
	}
	w.lease = o.Lease
	if w.lease == nil {
		w.lease, w.ownLease = &Lease{m: w.meter}, true
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
	// The base for resolving relative next URLs: the first request's URL
	// (the invoker's own), without its query; none without an origin.
	if u, err := tools.RequestURL(o.Tool, w.args); err == nil && u.Host != "" {
		u.RawQuery = ""
		w.base = u
	}
	effect := o.Effect
	if effect == "" {
		effect = Effect(o.Tool, o.Plan, "")
	}
	w.effect = effect
	w.retryable = effect == tools.EffectRead
	w.ahead = newAhead(w.budget.Concurrency)
	if !w.retryable {
		w.ahead = newAhead(1) // a write is sent once, never ahead
	}
	w.setup()
	return w
}

// releaseLease gives back the requests the walk kept and did not spend:
// all of its own lease, and the probe it kept in its caller's.
func (w *walker) releaseLease() {
	if w.ownLease {
		w.lease.Release()
		return
	}
	w.dropKeep()
}

// keepProbe keeps one request for a probe, when the walk keeps none yet
// and one is free beside the next page's; false when none can be kept.
func (w *walker) keepProbe() bool {
	if w.keep > 0 {
		return true
	}
	if w.meter.room(w.budget.Requests, w.lease) < 2 || !w.meter.grow(w.budget.Requests, w.lease) {
		return false
	}
	w.keep = 1
	return true
}

// dropKeep gives a kept probe request back to the Meter.
func (w *walker) dropKeep() {
	if w.keep == 0 {
		return
	}
	w.meter.mu.Lock()
	n := min(w.keep, w.lease.n)
	w.lease.n -= n
	w.meter.held -= n
	w.meter.mu.Unlock()
	w.keep = 0
}

// positional reports a plan whose walk computes its own positions and
// must prove it saw every row (proofMode), as far as the plan alone
// tells.
func (w *walker) positional() bool {
	p := w.plan
	return w.o.AllPages && !p.Snapshot && (p.Strategy == Offset || p.Strategy == PageNumber)
}

// setup prepares the first request from the plan and the caller's args.
func (w *walker) setup() {
	p, t := w.plan, w.o.Tool
	w.posKnow = true
	// A size parameter counts as a page size only on a tool that pages: a
	// search's "count" is the caller's own argument, not a page.
	if p.SizeParam != "" && p.Paginated() {
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

// chooseProof decides, on the first page, how the walk proves it saw
// every row (proofMode).
func (w *walker) chooseProof(first signals) {
	p := w.plan
	switch {
	case !w.positional() || p.Stream || (p.Strategy != Offset && p.Strategy != PageNumber):
		w.proof = proofNone
	case p.Strategy == Offset:
		w.proof = proofOverlap
	case first.total >= 0:
		w.proof = proofTotal
	default:
		w.proof = proofProbe
	}
	if w.proof != proofOverlap {
		w.dropKeep()
	}
}

func (w *walker) run(ctx context.Context) (*Result, error) {
	res := w.res
	if reason := w.sharedBudgetSpent(); reason != "" {
		return w.finish(reason, ""), nil
	}
	if w.positional() {
		// The probe that may close the walk is kept from the start; a
		// budget without room for it beside the first page walks without.
		w.keepProbe()
	}
	for {
		probing := w.probeFor != ""
		req := tools.Request{
			Tool: w.o.Tool, Args: w.args, Credential: w.o.Credential, ThreadID: w.o.ThreadID,
			Page: res.Pages + 1, Cursor: w.cursor, Effect: w.effect,
		}
		if w.viaURL {
			req.URL = w.cursor
		}
		w.fetchAhead(ctx)
		resp, fail, err := w.fetch(ctx, req, probing)
		if t := w.ahead.takeCur(); t != nil {
			t.done() // fetch stopped before sending it: the requests after it need not wait
		}
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
			if probing {
				return w.probeFailed(fail.short()), nil
			}
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
		var top *rawShape // the first page's shape, read once by refine
		if first {
			top = &rawShape{b: bytes.TrimSpace(resp.Body)}
			plan = refine(plan, top, resp.Header)
		}
		var sig signals
		var rerr error
		if p := w.parsed; p != nil && p.out.resp == resp && !first {
			sig, rerr = p.sig, p.rerr // read while it came back (fetchAhead)
		} else {
			sig, rerr = readPage(plan, resp.Body, resp.Header, w.base, w.buf, w.o.Pass)
		}
		w.parsed = nil
		w.buf = sig.items[:0]
		// A paginated page was validated by readPage (rerr); a declared
		// single response is checked here.
		expectJSON := plan.Paginated() || w.o.Tool.Response != nil
		if expectJSON && (rerr != nil || !plan.Paginated()) && !json.Valid(resp.Body) {
			// A tool that answers JSON sent something else with a success
			// status (a proxy's or a login page): an error, not an answer.
			f := w.notJSON(resp)
			switch {
			case probing:
				return w.probeFailed(f.short()), nil
			case first:
				return nil, f.pageError(res)
			}
			return w.finish(f.reason, f.why), nil
		}
		if len(sig.items) == 0 && errorBodyOK(resp.Body) {
			// A success status whose body says it failed ({"ok": false, …}).
			f := w.classify(resp)
			switch {
			case probing:
				return w.probeFailed(f.short()), nil
			case first:
				return nil, f.pageError(res)
			}
			return w.finish(f.reason, f.why), nil
		}
		if why := w.firstNotAPage(plan, resp.Body, sig.items, first); why != "" {
			// The first page is none of this list's pages (an error object
			// answered with a success status): an error, as an HTML page
			// is — not a single response, and no row of a fan-out.
			f := &failure{reason: StopInconsistent, status: resp.Status, detail: why}
			return nil, f.pageError(res)
		}
		if why := w.notAPage(plan, resp.Body, sig.items, res.Pages+1); why != "" {
			// A success status whose body is none of this API's pages (an
			// error object): neither rows nor an end.
			if probing {
				return w.probeFailed(why), nil
			}
			return w.finish(StopInconsistent, why), nil
		}
		w.plan = plan
		if first {
			res.FirstBody = resp.Body
			w.pageKeys = top.memberSet()
			w.chooseProof(sig)
		}
		w.received = len(sig.items)
		w.answered = true
		before := len(res.Items)
		dups, withID, kept := w.collect(sig.items)
		if sig.page != nil {
			res.Worked = append(res.Worked, sig.page)
		}
		if probing {
			stop := w.probeFor
			w.probeFor = ""
			if w.fresh == 0 {
				// Nothing past the end the walk inferred: it stands
				// (Shifted says whether the last row was still in place).
				res.Probes++
				return w.finish(stop, ""), nil
			}
			// Rows past that end: the probe was one more page.
		}
		res.Pages++
		if same := w.samePage(sig.items, !first && withID == 0); same {
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
		} else {
			w.totalEvery = false
		}
		w.totalPages = sig.totalPages
		w.lastLink = w.lastPageOf(sig.link)
		explicit, _ := w.explicit(sig)
		w.saysEnd = sig.flag != moreUnknown || explicit != moreUnknown
		w.report()

		d := w.decide(sig, resp.Body, len(sig.items), rerr)
		if w.pageSize > 0 && w.received == w.pageSize {
			w.fullSeen = true // whatever decided the page (a more flag, a next link, the numbers)
		}
		if IsComplete(d.stop) && !w.plan.EndConfirmed(sig) {
			d = inconsistent(unconfirmedEnd(w.plan))
		}
		if w.sizeNotHonoured(d) {
			if stop, why := w.rewalk(sig, before); stop != "" {
				return w.finish(stop, why), nil
			}
			continue
		}
		if d.stop != "" && !IsComplete(d.stop) {
			return w.finish(d.stop, d.why), nil
		}
		if d.stop == "" {
			if kept == 0 {
				w.empties++
			} else {
				w.empties = 0
			}
			if w.empties >= maxEmptyPages {
				return w.finish(StopInconsistent, fmt.Sprintf(
					"%d consecutive pages were empty while the server still said more exist", w.empties)), nil
			}
			if !first && withID > 0 && withID == kept && dups == withID {
				// The server answered this page with rows already received,
				// every one of them: it is ignoring the paging parameter, and
				// following it would only repeat them until a budget ends —
				// unless rows shifted under an overlapping walk (rows added
				// before its position), once.
				if !res.Shifted || w.repeats > 0 {
					return w.finish(StopInconsistent, fmt.Sprintf(
						"page %d held only rows already received, so the server seems to ignore the paging parameter", res.Pages)), nil
				}
				w.repeats++
			} else {
				w.repeats = 0
			}
			if reason := w.guard(d); reason != "" {
				w.res.LastCursor = d.next
				return w.finish(reason, ""), nil
			}
		}
		if w.proof == proofProbe {
			refused, err := w.probeBoundary(ctx)
			if err != nil {
				return nil, err
			}
			if refused != nil && d.stop == "" {
				// The page read again was refused: the next one would be too.
				return w.finish(refused.reason, refused.why), nil
			}
			if w.received > 0 && (w.pageSize == 0 || w.received >= w.pageSize) {
				w.pending = &pageEnd{page: w.page, size: w.pageSize, keys: w.keysOf(sig.items)}
			}
		}
		if d.stop != "" {
			if w.closingProbe(d.stop) {
				continue
			}
			return w.finish(d.stop, d.why), nil
		}
		if reason := w.budgetBeforePage(); reason != "" {
			w.res.LastCursor = d.next
			return w.finish(reason, ""), nil
		}
		w.advance(d)
	}
}

// rowKey is what identifies a row across two reads: its id (Plan.ItemID,
// else "id") as raw JSON, else the whole row.
func (w *walker) rowKey(item []byte) []byte {
	idPath := w.plan.ItemID
	if idPath == "" {
		idPath = "id"
	}
	if raw, ok := itemID(item, idPath); ok && string(raw) != "null" {
		return raw
	}
	return item
}

// collect appends a page's items that were not received before,
// counting duplicates and the meter. An overlapping page's first row,
// when it is the row the walk expected there, is the walk's own re-read:
// not kept again, not a duplicate; any other first row means rows
// shifted (Result.Shifted). It returns how many of the page's other
// items (kept of them, in all) had an id, and how many of those had been
// received before.
func (w *walker) collect(items [][]byte) (dups, withID, kept int) {
	res := w.res
	if res.Items == nil {
		// Room for the whole walk at this page size, within the budget.
		res.Items = make([][]byte, 0, min(len(items)*w.maxPages, w.budget.Items+len(items)))
		w.ids = newIDSet(cap(res.Items))
		w.seed = maphash.MakeSeed()
	}
	w.lastKey = nil
	if len(items) > 0 {
		w.lastKey = w.rowKey(items[len(items)-1])
	}
	if w.overlap {
		w.overlap = false
		if len(items) > 0 && bytes.Equal(w.rowKey(items[0]), w.expect) {
			items = items[1:]
		} else {
			// The row the walk ended on is no longer where it was: a row
			// was added or removed earlier in the collection.
			res.Shifted = true
		}
	}
	w.meter.addItems(len(items))
	idPath := w.plan.ItemID
	if idPath == "" {
		idPath = "id"
	}
	w.fresh = 0
	plain := plainID(idPath)
	// The page's id hashes first (0: no id), then the table's slots for
	// all of them at once (warm), then the checks, which find those slots
	// in cache.
	hs := w.hashes[:0]
	for _, it := range items {
		var h uint64
		if raw, ok := readID(it, idPath, plain); ok && string(raw) != "null" {
			h = idHash(maphash.Bytes(w.seed, raw))
		}
		hs = append(hs, h)
	}
	w.hashes = hs
	w.ids.warm(hs)
	for k, it := range items {
		if h := hs[k]; h != 0 {
			withID++
			if !w.ids.add(h) {
				res.Duplicates++
				dups++
				continue
			}
		}
		res.Items = append(res.Items, it)
		w.fresh++
	}
	return dups, withID, len(items)
}

// rebuildIDs makes the id set hold the ids of the items kept, after some
// were dropped (a page read again at another size).
func (w *walker) rebuildIDs() {
	w.ids.release()
	w.ids = newIDSet(cap(w.res.Items))
	idPath := w.plan.ItemID
	if idPath == "" {
		idPath = "id"
	}
	plain := plainID(idPath)
	for _, it := range w.res.Items {
		if raw, ok := readID(it, idPath, plain); ok && string(raw) != "null" {
			w.ids.add(maphash.Bytes(w.seed, raw))
		}
	}
}

// samePage reports, when asked to compare, whether a non-empty page
// holds exactly the items of the page before it, and remembers this one.
// The rows of the page before are kept as they were received (their
// bytes stay alive in the pages anyway), so the check reads no byte of a
// page that differs from its predecessor past the first difference.
//
// items is kept itself, not copied: the slice readPage filled becomes
// lastPage, and the one lastPage held becomes the buffer the next page
// is read into (w.buf), so the two never share an array.
func (w *walker) samePage(items [][]byte, compare bool) bool {
	same := compare && len(items) > 0 && slices.EqualFunc(items, w.lastPage, bytes.Equal)
	w.lastPage, w.buf = items, w.lastPage[:0]
	return same
}

// report tells Progress where the walk stands after a page.
func (w *walker) report() {
	if w.o.Progress == nil {
		return
	}
	total := 0
	if w.res.Total != nil {
		total = *w.res.Total
	}
	w.progMu.Lock()
	defer w.progMu.Unlock()
	w.lastProg = Progress{Page: w.res.Pages, PagesMax: w.maxPages, RequestsMax: w.budget.Requests, Total: total}
	w.o.Progress(w.usage(w.lastProg))
}

// reportAgain repeats the latest report with the call's counters as they
// stand now (a request started or stopped waiting for its rate limit).
// It is safe from any goroutine.
func (w *walker) reportAgain() { w.again(nil) }

// relay passes on the upstream's progress of a request under way (the
// caller calls it while that request runs: the walk's, or one fetched
// ahead beside it).
func (w *walker) relay(up tools.UpstreamProgress) { w.again(&up) }

// again repeats the latest report, counters as they stand now, with what
// the upstream reported of a request under way (nil: nothing).
func (w *walker) again(up *tools.UpstreamProgress) {
	if w.o.Progress == nil {
		return
	}
	w.progMu.Lock()
	defer w.progMu.Unlock()
	p := w.lastProg
	if p.PagesMax == 0 {
		p = Progress{PagesMax: w.maxPages, RequestsMax: w.budget.Requests} // before the first page
	}
	p = w.usage(p)
	p.Upstream = up
	w.o.Progress(p)
}

// usage fills p's call-wide counters from the Meter.
func (w *walker) usage(p Progress) Progress {
	u := w.meter.Usage()
	now := w.clock.Now()
	p.Items, p.Requests, p.Elapsed, p.InFlight = u.Items, u.Requests, now.Sub(u.Start), u.InFlight
	p.Waiting = w.meter.Waiting(now)
	return p
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
		res.Unproven = w.unproven()
		return res
	}
	res.Uninspected = w.uninspected(reason, why)
	if res.Pages > 0 {
		switch page, offset := w.resumePosition(); w.plan.Strategy {
		case PageNumber:
			res.ResumeAt = fmt.Sprintf("%s=%d", w.plan.PageParam, page)
		case Offset:
			res.ResumeAt = fmt.Sprintf("%s=%d", w.plan.OffsetParam, offset)
		}
	}
	return res
}

// resumePosition is the page and offset a partial walk resumes at.
func (w *walker) resumePosition() (page, offset int) {
	page, offset = w.page, w.offset
	switch {
	case w.answered:
		page, offset = page+1, offset+w.received
	case w.overlap:
		offset++ // the request not sent began on the last row received
	}
	return page, offset
}

// unproven says why a complete position-based walk could not prove that
// it saw every row ("" when it could): a page boundary that no overlap or
// probe checked, and no total that held still and equals the rows to
// vouch for it instead.
func (w *walker) unproven() string {
	res := w.res
	if res.Shifted {
		return "" // the walk saw rows move: that is what it says
	}
	totalHolds := w.totalEvery && res.Total != nil && !res.TotalMoved && !res.TotalMismatch
	switch w.proof {
	case proofOverlap, proofProbe:
		if w.unverified != "" && !totalHolds {
			return w.unverified
		}
	case proofTotal:
		if w.unverified != "" {
			return w.unverified // the closing probe, the total's own check, failed or had no room
		}
		if !w.totalEvery && res.Pages > 1 {
			return "a page-number walk cannot overlap its pages, and the server's total, its only check, was missing from some pages"
		}
	}
	return ""
}

// probeFailed ends a walk whose closing probe could not be read: the end
// it inferred stands, unproven.
func (w *walker) probeFailed(why string) *Result {
	stop := w.probeFor
	w.probeFor, w.overlap = "", false
	w.unverified = "the closing probe, which checks that no row moved after the last page was read, failed: " + why
	return w.finish(stop, "")
}

// closingProbe starts a walk's closing probe when it inferred its end
// from its own count. An offset walk probes after a total reached or a
// short page of a size it vouches for, after more than one page (or
// after one full page that reached the total): one more request,
// overlapping the last row, must find that row where it was and nothing
// after it. A page-number walk whose total held still probes when that
// total was reached on a full page: the page after it must hold no new
// row — a total below the truth by whole pages is shown by no other
// response (a call for the first page only makes its one request: its
// total stands). An end the server said itself (a more flag, no next
// link) or that was read (a page past the end, a short page) needs none.
func (w *walker) closingProbe(stop string) bool {
	full := w.pageSize > 0 && w.received >= w.pageSize
	switch {
	case w.proof == proofOverlap && w.received >= 1 &&
		(stop == StopCompleteTotalReached && (w.res.Pages >= 2 || full) || stop == StopCompleteShortPage && w.res.Pages >= 2):
		_, fetched := w.ahead.pending[aheadKey{w.offset + w.received - 1, w.pageSize}]
		if !w.probeRoom(fetched) {
			return false
		}
		w.probeFor = stop
		w.args = cloneArgs(w.args)
		w.answered = false
		w.offset += w.received - 1
		w.overlap, w.expect = true, w.lastKey
		setArg(w.o.Tool, w.args, w.plan.OffsetParam, w.offset)
		return true
	case w.proof == proofTotal && stop == StopCompleteTotalReached && full:
		_, fetched := w.ahead.pending[aheadKey{w.page + 1, w.pageSize}]
		if !w.probeRoom(fetched) {
			return false
		}
		w.probeFor = stop
		w.args = cloneArgs(w.args)
		w.answered = false
		w.page++
		setArg(w.o.Tool, w.args, w.plan.PageParam, w.page)
		return true
	}
	return false
}

// probeRoom reports whether the closing probe fits the request budget
// (or was sent ahead already); when it does not, the end stands,
// unverified.
func (w *walker) probeRoom(fetched bool) bool {
	if !fetched && w.meter.room(w.budget.Requests, w.lease) < 1 {
		w.unverified = "the request budget left no room for the closing probe, which checks that no row moved after the last page was read"
		return false
	}
	return true
}

// sizeNotHonoured reports a page-number page that came back with fewer
// rows than the size asked, before any page came back full at that size
// (or above it: a server that ignores the size both ways numbers its own
// pages, and a page overlapping another shows as duplicates), on a walk
// that goes on (a page that is provably the last — the server
// said so, the total was reached — ends it instead): the server serves
// pages of another size, and whether it numbers them by that size or by
// the size asked cannot be told, so going on at the old size may skip
// rows.
func (w *walker) sizeNotHonoured(d decision) bool {
	return d.stop == "" && w.plan.Strategy == PageNumber && w.o.AllPages && w.plan.SizeParam != "" &&
		w.pageSize > 0 && w.received > 0 && w.received < w.pageSize && !w.fullSeen && !w.oversize
}

// rewalk walks again at the page size the server served, from where the
// walk began: on the collection's first page the rows received are that
// page at the served size, so the walk goes on at page 2; elsewhere it
// reads that position again. When the budget cannot hold the walk at the
// served size, it stops page_size_not_honoured.
func (w *walker) rewalk(sig signals, before int) (stop, why string) {
	t, p := w.o.Tool, w.plan
	served, asked := w.received, w.pageSize
	base := pageBase(t, p.PageParam)
	start := (w.page - base) * asked // the first row the page asked for
	keep := w.page == base
	lead := fmt.Sprintf("page %d held %d rows for the %d asked and was not the last, so the server serves pages of %d and its page numbers may count pages of either size", w.page, served, asked, served)
	switch {
	case w.rewalked:
		return StopPageSizeNotHonoured, fmt.Sprintf("%s, after the walk had already started again at %d a page; no size the server honours is known", lead, asked)
	case !keep && start%served != 0:
		return StopPageSizeNotHonoured, fmt.Sprintf("%s; the walk began at row %d, which is no page boundary at %d a page", lead, start, served)
	}
	next := base + start/served
	from := start
	if keep {
		next++
		from += served
	}
	need := 1
	if sig.total >= 0 && w.posKnow {
		need = (max(sig.total-from, 0) + served - 1) / served
	}
	pages := need
	if keep && w.proof == proofProbe && need > 0 {
		need++ // the probe of the first page's boundary
	}
	pagesLeft := w.maxPages - w.res.Pages
	if !keep {
		pagesLeft++ // the page read again replaces this one
	}
	if room := w.meter.room(w.budget.Requests, w.lease) - w.keep; pages > 0 && (room < need || pagesLeft < pages) {
		return StopPageSizeNotHonoured, fmt.Sprintf("%s; walking on at %d a page needs about %d request%s, more than the budget has left", lead, served, need, plural(need))
	}
	if reason := w.sharedBudgetSpent(); reason != "" && pages > 0 {
		return StopPageSizeNotHonoured, fmt.Sprintf("%s; the budget has nothing left to walk on at %d a page", lead, served)
	}
	if !keep {
		w.res.Items = w.res.Items[:before]
		w.rebuildIDs()
	}
	w.rewalked = true
	w.pageSize, w.ownSize, w.fullSeen = served, true, keep
	w.args = cloneArgs(w.args)
	setArg(t, w.args, p.SizeParam, served)
	w.page = next
	setArg(t, w.args, p.PageParam, next)
	w.answered = false
	if keep && w.proof == proofProbe {
		w.pending = &pageEnd{page: base, size: served, keys: w.keysOf(sig.items)}
		w.keepProbe()
	}
	if keep && pages == 0 {
		// The total says the served page held every row.
		return StopCompleteTotalReached, ""
	}
	return "", ""
}

// probeBoundary reads again the full page before the page just read
// (proofProbe) — the very request the walk sent for it — and compares its
// rows with the rows the walk received there: other rows, or in another
// order, mean rows shifted across the boundary between the reads (or
// changed within the page: the walk cannot tell, and says rows may be
// missing).
//
// refused is set when the probe was answered with a status no retry
// changes (401, 403, 404, 410): the walk cannot go on.
func (w *walker) probeBoundary(ctx context.Context) (refused *failure, err error) {
	pe := w.pending
	if pe == nil {
		return nil, nil
	}
	w.pending = nil
	t, p := w.o.Tool, w.plan
	args := cloneArgs(w.args)
	setArg(t, args, p.PageParam, pe.page)
	if pe.size > 0 && p.SizeParam != "" {
		setArg(t, args, p.SizeParam, pe.size)
	}
	items, fail, err := w.probe(ctx, args)
	if err != nil {
		return nil, err
	}
	if fail != nil {
		w.unverified = fmt.Sprintf("the probe of page %d, which checks that no row moved across its boundary, failed: %s", pe.page, fail.short())
		switch fail.status {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
			f := *fail
			f.reason = StopHTTPError
			f.why = fmt.Sprintf("page %d, read again to check its boundary, was refused (%s); no retry can change that", pe.page, fail.short())
			return &f, nil
		}
		return nil, nil
	}
	if !slices.EqualFunc(w.keysOf(items), pe.keys, bytes.Equal) {
		w.res.Shifted = true
	}
	return nil, nil
}

// notAPage says why a later page's body is none of this API's pages, ""
// when it may be one. The pages of an API whose rows sit in a member are
// objects; a body that is not one, or an object holding members of which
// the first page had none (an error object answered with a success
// status: {"error": "internal"}), carries neither rows nor an end, and
// reading it as an empty last page would end the walk "complete". An
// empty object is an empty page (proto3 JSON omits empty members), and an
// empty body is left to the rules of empty bodies (a 204).
func (w *walker) notAPage(p Plan, body []byte, items [][]byte, page int) string {
	if page < 2 || w.pageKeys == nil || !p.ItemsFound || p.Items == "" || len(items) > 0 {
		return ""
	}
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return ""
	}
	if query.FirstByte(b) != '{' {
		return fmt.Sprintf("page %d is not an object like page 1 but %s", page, snippet(b, w.o.Scrub))
	}
	keys, err := query.Keys(b)
	if err != nil || len(keys) == 0 {
		return ""
	}
	for _, k := range keys {
		if w.pageKeys[k] {
			return ""
		}
	}
	return fmt.Sprintf("page %d holds none of the members of page 1, so it is not a page of this collection: %s", page, snippet(b, w.o.Scrub))
}

// firstNotAPage is notAPage for the first page, which has no page before
// it to compare with: the members the plan reads (the items, the next
// token or link, the more flag, the totals) stand for it. An object
// holding any array is left to detection (its rows may sit under a name
// the plan did not expect), and an empty object or body is an empty page.
func (w *walker) firstNotAPage(p Plan, body []byte, items [][]byte, first bool) string {
	if !first || len(items) > 0 || !p.Paginated() || !p.ItemsFound || p.Items == "" {
		return ""
	}
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return ""
	}
	switch query.FirstByte(b) {
	case '[':
		return "" // rows, maybe, where the plan expected an envelope
	case '{':
	default:
		return "its body is not an object like this list's pages but " + snippet(b, w.o.Scrub)
	}
	known := map[string]bool{}
	for _, path := range []string{p.Items, p.NextToken, p.NextURLField, p.MoreFlag, p.Total, p.TotalPages} {
		if keys, err := query.SplitPath(path); err == nil && len(keys) > 0 {
			known[keys[0]] = true
		}
	}
	members, page := 0, false
	err := query.EachMember(b, func(_ []byte, name string, value []byte) {
		members++
		// A member the plan reads (a page, maybe empty), or an array.
		page = page || known[name] || query.FirstByte(value) == '['
	})
	if err != nil || members == 0 || page {
		return ""
	}
	return "its body holds no rows and none of this list's members (" + p.Items + "), so it is not a page of the list: " + snippet(b, w.o.Scrub)
}

// memberSet is the names of the shape's top-level members; nil when it
// is not an object, or not valid JSON.
func (r *rawShape) memberSet() map[string]bool {
	if r.kind() != shapeObject {
		return nil
	}
	fields := r.fields()
	if r.bad {
		return nil
	}
	set := make(map[string]bool, len(fields))
	for _, f := range fields {
		set[f.name] = true
	}
	return set
}

// keysOf is the rows' keys (rowKey), in order.
func (w *walker) keysOf(items [][]byte) [][]byte {
	keys := make([][]byte, len(items))
	for i, it := range items {
		keys[i] = w.rowKey(it)
	}
	return keys
}

// probe sends one probe request and returns its rows; fail is set when
// it could not be read.
func (w *walker) probe(ctx context.Context, args map[string]any) (items [][]byte, fail *failure, err error) {
	req := tools.Request{Tool: w.o.Tool, Args: args, Credential: w.o.Credential, ThreadID: w.o.ThreadID,
		Page: w.res.Pages, Effect: w.effect}
	resp, fail, err := w.fetch(ctx, req, true)
	if err != nil || fail != nil {
		return nil, fail, err
	}
	w.res.Probes++
	sig, rerr := readPage(w.plan, resp.Body, resp.Header, w.base, nil, nil)
	if rerr != nil {
		return nil, &failure{reason: StopInconsistent, detail: strings.TrimPrefix(rerr.Error(), errInconsistent.Error()+": ")}, nil
	}
	if why := w.notAPage(w.plan, resp.Body, sig.items, req.Page); why != "" {
		return nil, &failure{reason: StopInconsistent, detail: why}, nil
	}
	if t := w.res.Total; sig.total >= 0 && t != nil && *t != sig.total {
		w.res.TotalMoved = true // the probe saw the total move too
	}
	return sig.items, nil, nil
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
		if why != "" { // the rate limit's wait that did not fit
			b.WriteString(": " + why)
		}
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
