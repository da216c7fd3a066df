package paginate

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/trawl-dev/trawl/loop/query"
)

// decision is what one page says to do next: stop (stop != "") or
// continue, with the cursor or URL to send when the strategy needs one.
type decision struct {
	stop string
	why  string // for inconsistent stops: what was wrong
	next string // cursor or URL to send next
}

func done(reason string) decision { return decision{stop: reason} }

func inconsistent(why string) decision { return decision{stop: StopInconsistent, why: why} }

// decide applies the stop rules to one page (body is its raw body).
func (w *walker) decide(s signals, body []byte, received int, rerr error) decision {
	p := w.plan
	if rerr != nil && !p.Paginated() {
		// Nothing to walk: a field that does not read as a count (an
		// order's money "total") is part of the object, not a paging
		// signal.
		return done(StopCompleteNoNext)
	}
	if rerr != nil {
		return inconsistent(strings.TrimPrefix(rerr.Error(), errInconsistent.Error()+": "))
	}

	if !p.Paginated() && p.ItemsFound && s.total > received && !ownID(body) {
		// A list the server counts beyond what it sent, from an operation
		// whose pagination is unknown: more rows exist, and nothing here
		// can reach them — whatever else the answer says (a declared next
		// token left out reads as "no more" only where there is a walk to
		// end). An object with its own id is a record, whose "total" is
		// its own, such as an order's.
		return inconsistent(fmt.Sprintf("the server reports %d rows but sent %d, and the operation's pagination is unknown", s.total, received))
	}

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
	w.hint = says == moreYes
	w.said = w.hint
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
	if received == 0 || w.proof == proofOverlap && w.fresh == 0 && w.res.Pages > 1 && received == 1 {
		// An empty page, or an overlapping page that held only the row
		// the walk already had: nothing after the last row.
		return done(StopCompleteEmptyPage)
	}
	next := decision{}
	if p.Strategy == Cursor {
		next = w.fromLastItem(s.items)
		if next.stop != "" {
			return next
		}
	}
	totalSaysMore := s.total >= 0 && posOK || s.totalPages >= 0 && p.Strategy == PageNumber && w.posKnow
	short := w.pageSize > 0 && received < w.pageSize
	if w.pageSize > 0 && received > w.pageSize {
		// More rows than asked: the server does not honour the size, so
		// no later short page can be vouched for.
		w.oversize = true
	}
	if short && !totalSaysMore && w.ownSize && w.fullSeen && !w.oversize {
		// A short page whose size trawl vouches for: it chose the size
		// and an earlier page came back full at it, none above it.
		return done(StopCompleteShortPage)
	}
	// Any other short page (a size the caller chose, a silent cap, no
	// full page yet, a server that sent more than asked) is a reason to
	// fetch one more page, not the end.
	if w.pageSize > 0 && received == w.pageSize {
		w.fullSeen = true
	}
	// More rows may exist unless the page proves the end: a short page
	// says nothing when nobody can vouch for its size, and a page of a
	// size nobody set says nothing either way.
	w.hint = totalSaysMore || !short || !(w.ownSize && w.fullSeen)
	w.said = totalSaysMore
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
		next, _ := w.nextOffset()
		key = "o:" + strconv.Itoa(next)
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
func (w *walker) sharedBudgetSpent() string { return w.budgetSpent(false) }

// budgetSpent is sharedBudgetSpent for a next request that may already
// be sent (paid: fetched ahead), which needs no request of the budget.
func (w *walker) budgetSpent(paid bool) string {
	u := w.meter.Usage()
	switch {
	case u.Items >= w.budget.Items:
		return StopBudgetItems
	case u.Bytes >= w.budget.Bytes:
		return StopBudgetBytes
	case !paid && w.meter.room(w.budget.Requests, w.lease)-w.keep < 1:
		return StopBudgetRequests
	case !w.clock.Now().Before(w.deadline):
		return StopBudgetTime
	}
	return ""
}

// budgetBeforePage checks the budgets before another page is requested
// (requests and time are checked again before every attempt). A walk
// that must probe after the next page (an offset walk's closing probe, a
// page-number walk's boundary probe) keeps a request for it first: a page
// it could not prove is not read.
func (w *walker) budgetBeforePage() string {
	if w.res.Pages >= w.maxPages {
		if !w.o.AllPages {
			return StopFirstPage
		}
		return StopBudgetPages
	}
	paid := w.nextFetched()
	if w.proof == proofOverlap || w.proof == proofProbe && w.pending != nil {
		if !w.keepProbe() && !paid {
			return StopBudgetRequests
		}
	}
	return w.budgetSpent(paid)
}

// nextFetched reports whether the request of the page after this one was
// sent ahead already.
func (w *walker) nextFetched() bool {
	if len(w.ahead.pending) == 0 {
		return false
	}
	k := aheadKey{w.page + 1, w.pageSize}
	if w.plan.Strategy == Offset {
		k.pos, _ = w.nextOffset()
	}
	_, ok := w.ahead.pending[k]
	return ok
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
		next, overlap := w.nextOffset()
		if w.proof == proofOverlap && !overlap {
			w.unverified = fmt.Sprintf("page %d held %d row, too few for the next page to overlap it, so the walk could not check that no row moved across that boundary", w.res.Pages, w.received)
		}
		w.offset = next
		w.overlap, w.expect = overlap, w.lastKey
		setArg(t, w.args, p.OffsetParam, w.offset)
		w.seen["o:"+strconv.Itoa(w.offset)] = struct{}{}
	}
}

// nextOffset is where an offset walk's next page starts: one row before
// the last page ended, when the walk proves itself by overlapping pages
// and the page held at least two rows (so the walk still advances), else
// right after it.
func (w *walker) nextOffset() (offset int, overlap bool) {
	if w.proof == proofOverlap && w.received >= 2 {
		return w.offset + w.received - 1, true
	}
	return w.offset + w.received, false
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

// ownID reports whether body is an object with its own "id": a record
// (an order with its line items), not a list's envelope.
func ownID(body []byte) bool {
	_, ok := query.Get(body, "id")
	return ok
}
