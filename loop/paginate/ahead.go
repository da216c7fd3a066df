package paginate

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Fetching ahead. A page-number or offset walk computes its own positions,
// so once it knows where the collection ends (a total on every page, a page
// count, a rel="last" link) it can send the requests of the next pages
// before the page it is reading has come back, with up to the budget's
// Concurrency requests in flight. Only the fetching overlaps: every page is
// still read, checked and counted in order by the walk's one goroutine,
// through the same stop rules, guards and proofs as a walk that fetches
// one page at a time. A page fetched ahead is used only when the walk
// reaches exactly its position (offset or page, and page size); any other
// — one past an end that moved, one at a position a short page shifted —
// is never read, and counts as a request made (Result.Unused).
//
// Why the proofs still hold: an offset walk's overlap check compares the
// row at each page boundary as two pages read it, and a closing probe
// checks the last row and what follows it. Neither argument needs the
// pages to be read in order of time: rows keep their relative order under
// inserts and deletes, so a boundary row found at the same position by
// both its pages bounds the rows between two boundaries, whenever each
// page was read. A page-number walk whose proof is a boundary probe
// (no total) does need its reads ordered — the probe must come after the
// page following the one it reads again — so it never fetches ahead.
// Without a known end a walk may fetch one page ahead at most.
//
// Cursor, next-URL and Link walks never fetch ahead: each page names the
// next.

// aheadKey is the position a request reads: an offset or a page number,
// at a page size. The rest of a walk's arguments never change.
type aheadKey struct{ pos, size int }

// sent is what one send of a request came to.
type sent struct {
	resp     *tools.Response
	err      error
	timedOut bool // the call's context ran out (the walk's time budget)
	waited   bool // the provider's rate limit made it wait
}

// prefetch is one request sent ahead of the walk.
type prefetch struct {
	done chan struct{}
	// state says whether the request still waits for its provider's rate
	// limit (aheadWaiting), when giveUpWaiting gives it up (cancel). With
	// byGrant (the Caller says when a request holds its slot: see ahead)
	// it waits from the start until its slot is granted, and one given up
	// first is never sent; without, it waits while the limiter says so.
	state   atomic.Int32
	byGrant bool
	cancel  context.CancelFunc
	// Set before done is closed: the answer, and for a page, what it says
	// (read on the fetching goroutine, so that pages are read in parallel
	// and the walk does not read them again) and whether the walk ends
	// there.
	out    sent
	parsed bool
	sig    signals
	// level is how many of the walk's requests were in flight when it
	// was sent, itself included; window, the walk's window then (learn).
	level, window int
	rerr          error
	ends          bool
}

// A request fetched ahead's state.
const (
	aheadIdle    int32 = iota // not waiting for its rate limit, as far as the walk knows
	aheadWaiting              // waiting for its turn or its slot: given up at a stop
	aheadGivenUp              // given up while it waited
	aheadSent                 // granted its slot and sent (byGrant): let finish
)

// wait waits for the request's answer; err is set when ctx is cancelled
// by then, whether or not the answer is back: a cancelled walk reads no
// answer of a request it fetched ahead, and the request is counted with
// the ones it did not read (drainAhead). (Which of the two is ready first
// decides nothing: a request sent under ctx ends with it, so its answer
// often comes back as the cancel lands — an error the walk would count
// as a request made and neither read nor count as unused.) A deadline on
// ctx is the walk's time budget: the request, sent under ctx, ends with
// it, and its answer (a timeout) is what the walk reads, as for a request
// it sent itself.
func (p *prefetch) wait(ctx context.Context) (sent, error) {
	select {
	case <-p.done:
	case <-ctx.Done():
	}
	if err := ctx.Err(); errors.Is(err, context.Canceled) {
		return sent{}, err
	}
	<-p.done
	return p.out, nil
}

// ahead is a walk's requests sent ahead. It is used by the walk's
// goroutine only; the fetching goroutines write their prefetch's out and
// close done.
type ahead struct {
	window  int // requests in flight the walk allows now (its current request included)
	max     int // what the window may grow to
	ceiling int // below the level an upstream answered 429 at (0: none yet)
	adapt   bool
	pending map[aheadKey]*prefetch
	wg      sync.WaitGroup
	live    atomic.Int32 // prefetches sent and not yet answered

	// Slots in walk order. A provider's rate limit grants its slots to
	// whichever request asks first, so requests sent at once could take
	// every slot before the page the walk needs next (the one it is
	// about to send, or an earlier one fetched ahead), which would then
	// wait until they are answered. So each request fetched ahead asks
	// for its slot only once the request before it in walk order (the
	// current one first) holds its own, or has ended: then the page the
	// walk reads next always has its slot before any page after it. That
	// needs the Caller to say when a request holds its slot
	// (tools.LimitGranted); grants is set once it does (the first page
	// tells, before anything is fetched ahead), and without it nothing
	// waits: a Caller that does not say is taken to pace nothing.
	grants atomic.Bool
	last   chan struct{} // the latest request's turn: closed once it holds its slot or has ended
	cur    *turn         // the current request's turn, reserved before the requests fetched after it
}

// turn is one request's place in the walk's order of slots.
type turn struct {
	after <-chan struct{} // the turn before it; nil: none to wait for
	mine  chan struct{}
	once  sync.Once
}

// done says the request holds its slot, or has ended without one.
func (t *turn) done() { t.once.Do(func() { close(t.mine) }) }

// nextTurn is the turn of the next request sent ahead, after the latest
// one; first, for the request the walk sends itself, waits for none. Nil
// when the Caller does not say when a request holds its slot.
func (a *ahead) nextTurn(first bool) *turn {
	if !a.grants.Load() {
		return nil
	}
	t := &turn{after: a.last, mine: make(chan struct{})}
	if first {
		t.after = nil
	}
	a.last = t.mine
	return t
}

// takeCur is the current request's turn, when one was reserved for it.
func (a *ahead) takeCur() *turn {
	t := a.cur
	a.cur = nil
	return t
}

func newAhead(concurrency int) ahead {
	switch {
	case concurrency == 0:
		return ahead{window: adaptiveStart, max: adaptiveMax, adapt: true}
	default:
		return ahead{window: concurrency, max: concurrency}
	}
}

// take removes and returns the request sent ahead for k, if any.
func (a *ahead) take(k aheadKey) *prefetch {
	p := a.pending[k]
	if p != nil {
		delete(a.pending, k)
	}
	return p
}

// halted reports an answer already back to a request sent ahead that
// says to send no more until the walk has read it: a refusal (401, 403,
// 404, 410) or a 429. The walk reads it when it gets there.
func (a *ahead) halted() bool {
	for _, p := range a.pending {
		select {
		case <-p.done:
			if p.ends {
				return true
			}
			if r := p.out.resp; r != nil {
				switch r.Status {
				case 401, 403, 404, 410, 429:
					return true
				}
			}
		default:
		}
	}
	return false
}

// learn moves the adaptive window after an answer to a request sent at
// level (requests of the walk in flight then, itself included; 0 when not
// known) under window sent (the walk's window then). A 429 halves the
// window, and the walk never grows it back to the level the upstream
// refused: its ceiling is one below. A page that came back without
// waiting for the provider's rate limit (nor saying its quota is spent:
// the caller folds that into waited), from a walk that was fetching
// ahead, grows the window by one — once per window: only an answer to a
// request sent under the window as it is now grows it, so the answers to
// requests sent before it grew (in flight together, read in walk order)
// do not grow it again before the larger window has been answered once.
// Read in walk order, answers reach learn after later requests have
// been sent; growing once per window keeps what it sends past an
// upstream's limit to the requests of one window (the provider's
// limiter, which learns each 429 as it arrives, holds the rest back).
func (a *ahead) learn(status int, waited, fetchedAhead bool, level, sent int) {
	if !a.adapt {
		return
	}
	switch {
	case status == 429:
		if level == 0 {
			level = a.window
		}
		if c := max(1, level-1); a.ceiling == 0 || c < a.ceiling {
			a.ceiling = c
		}
		a.window = max(1, min(a.window/2, a.ceiling))
	case status >= 200 && status < 300 && fetchedAhead && !waited && a.window < a.max &&
		sent == a.window && (a.ceiling == 0 || a.window < a.ceiling):
		a.window++
	}
}

// keyOf is the position a request with args reads, for a walk that may
// fetch ahead.
func (w *walker) keyOf(args map[string]any) (aheadKey, bool) {
	p := w.plan
	var k aheadKey
	switch p.Strategy {
	case Offset:
		k.pos, _ = argInt(args, p.OffsetParam)
	case PageNumber:
		n, ok := argInt(args, p.PageParam)
		if !ok {
			n = pageBase(w.o.Tool, p.PageParam)
		}
		k.pos = n
	default:
		return k, false
	}
	k.size, _ = argInt(args, p.SizeParam)
	return k, true
}

// knownEnd is where the collection ends, as far as the walk knows: for an
// offset walk the row count, for a page-number walk the last page number.
func (w *walker) knownEnd() (end int, ok bool) {
	res := w.res
	switch w.plan.Strategy {
	case Offset:
		if res.Total != nil && w.totalEvery && w.posKnow {
			return *res.Total, true
		}
	case PageNumber:
		base := pageBase(w.o.Tool, w.plan.PageParam)
		switch {
		case w.lastLink >= base:
			return w.lastLink, true
		case w.totalPages >= 0 && w.posKnow:
			return base + w.totalPages - 1, true
		case res.Total != nil && w.totalEvery && w.posKnow && w.pageSize > 0:
			return base + (*res.Total+w.pageSize-1)/w.pageSize - 1, true
		}
	}
	return 0, false
}

// mayFetchAhead reports whether the walk may send requests ahead of the
// one it is about to send.
func (w *walker) mayFetchAhead() bool {
	p := w.plan
	switch {
	case w.ahead.max < 2 || !w.o.AllPages || w.res.Pages < 1 || w.probeFor != "":
		return false // one at a time; one page; before the plan is refined; a closing probe
	case p.Strategy != Offset && p.Strategy != PageNumber:
		return false // each page names the next
	case w.proof == proofProbe:
		return false // its boundary probes need their reads in order
	case w.pageSize < 1 || !w.fullSeen || w.oversize:
		return false // no size the server is known to honour
	case w.proof == proofOverlap && w.pageSize < 2:
		return false
	}
	return true
}

// predict lists the positions the walk reads after the current request if
// every page comes back full, at most n of them, and whether each is a
// page (false: the closing probe). Without a known end it predicts one
// position at most.
func (w *walker) predict(n int) (keys []aheadKey, pages []bool) {
	end, known := w.knownEnd()
	if !known {
		n = min(n, 1)
	}
	s := w.pageSize
	count := w.res.Pages + 1 // the page the current request reads
	switch w.plan.Strategy {
	case Offset:
		step := s
		if w.proof == proofOverlap {
			step = s - 1
		}
		for p := w.offset; len(keys) < n; {
			if known && p+s >= end {
				// p is the last page; the closing probe reads its last row
				// again (closingProbe), unless the pages carry a signal that
				// will say so.
				if w.proof == proofOverlap && count >= 2 && end-1 > p && !w.saysEnd {
					keys, pages = append(keys, aheadKey{end - 1, s}), append(pages, false)
				}
				break
			}
			p += step
			if count++; count > w.maxPages {
				break
			}
			keys, pages = append(keys, aheadKey{p, s}), append(pages, true)
		}
	case PageNumber:
		for p := w.page; len(keys) < n; {
			if known && p >= end {
				break
			}
			p++
			if count++; count > w.maxPages {
				break
			}
			keys, pages = append(keys, aheadKey{p, s}), append(pages, true)
		}
	}
	return keys, pages
}

// fetchAhead sends the requests of the positions after the current one,
// up to the window, each within the budgets the walk would spend on it:
// the requests (never the one kept for a probe, and one left for the
// current request), the pages, the items and bytes at this walk's rate,
// the time.
func (w *walker) fetchAhead(ctx context.Context) {
	if !w.mayFetchAhead() {
		return
	}
	cur := aheadKey{w.page, w.pageSize}
	if w.plan.Strategy == Offset {
		cur.pos = w.offset
	}
	pre, curPaid := w.ahead.pending[cur]
	need := 0 // the current request, when it is not sent already
	if !curPaid {
		need = 1
	} else {
		select {
		case <-pre.done:
			return // its answer is back: read it first, it may say where the walk ends
		default:
		}
	}
	keys, pages := w.predict(w.ahead.window - 1)
	if len(keys) == 0 || w.ahead.halted() {
		return
	}
	u := w.meter.Usage()
	step := w.pageSize
	if w.proof == proofOverlap {
		step--
	}
	avgBytes := int64(0)
	if w.res.Pages > 0 {
		avgBytes = w.res.Bytes / int64(w.res.Pages)
	}
	now := w.clock.Now()
	if !now.Before(w.deadline) || ctx.Err() != nil {
		return
	}
	plan, base, size := w.plan, w.base, w.pageSize // as the goroutines read them
	if need == 1 && w.ahead.cur == nil {
		// The current request takes its slot before any request sent
		// ahead of it.
		w.ahead.cur = w.ahead.nextTurn(true)
	}
	for j, k := range keys {
		if _, ok := w.ahead.pending[k]; ok {
			continue
		}
		if int(w.ahead.live.Load())+need >= w.ahead.window {
			break
		}
		ahead := int64(j + 1) // pages between the current one and this one, this one included
		if pages[j] && (u.Items+int(ahead)*step >= w.budget.Items || u.Bytes+ahead*avgBytes >= w.budget.Bytes) {
			break // the walk would stop at that budget before reading it
		}
		if w.meter.room(w.budget.Requests, w.lease)-w.keep-need < 1 ||
			!w.meter.takeRequest(w.budget.Requests, w.lease, w.keep+need) {
			break
		}
		req := w.requestAt(k, pages[j])
		pctx, cancel := context.WithCancel(ctx)
		p := &prefetch{done: make(chan struct{}), cancel: cancel,
			level: int(w.ahead.live.Load()) + need + 1, window: w.ahead.window}
		t := w.ahead.nextTurn(false)
		if t != nil {
			// It waits for its turn, then its slot (send): given up at a
			// stop until it has it.
			p.byGrant = true
			p.state.Store(aheadWaiting)
		}
		if w.ahead.pending == nil {
			w.ahead.pending = map[aheadKey]*prefetch{}
		}
		w.ahead.pending[k] = p
		w.ahead.live.Add(1)
		w.ahead.wg.Add(1)
		go func() {
			defer w.ahead.wg.Done()
			defer cancel()
			p.out = w.send(pctx, req, now, p, t)
			w.ahead.live.Add(-1)
			if r := p.out.resp; p.out.err == nil && r.Status >= 200 && r.Status < 300 && !r.Truncated {
				p.sig, p.rerr = readPage(plan, r.Body, r.Header, base, nil, w.o.Pass)
				p.parsed = true
				// An end the walk will stop at (or a page it cannot read):
				// nothing after it is sent until the walk has read it.
				p.ends = p.rerr != nil || p.sig.flag == moreNo || len(p.sig.items) < size
			}
			close(p.done)
		}()
	}
}

// requestAt is the request for position k, built as the walk would build
// it when it gets there.
func (w *walker) requestAt(k aheadKey, page bool) tools.Request {
	t, p := w.o.Tool, w.plan
	args := cloneArgs(w.args)
	n := w.res.Pages + 1
	switch p.Strategy {
	case Offset:
		setArg(t, args, p.OffsetParam, k.pos)
	case PageNumber:
		setArg(t, args, p.PageParam, k.pos)
	}
	if p.SizeParam != "" {
		setArg(t, args, p.SizeParam, k.size)
	}
	if page {
		n++ // a page after the current one (an estimate for the activity log)
	}
	r := tools.Request{Tool: t, Args: args, Credential: w.o.Credential, ThreadID: w.o.ThreadID,
		Page: n, Effect: w.effect}
	if w.o.Progress != nil {
		r.Progress = w.relay
	}
	return r
}

// send sends req once under the walk's time budget and reports its rate
// limit's waits to the progress line; p, when not nil, is the request
// fetched ahead it sends, whose state says whether it waits. With a turn
// (nextTurn) it first waits for the turn before it, and ends its own once
// it holds its slot (or has ended). A request fetched ahead given up
// while it waited is never sent (the Caller answers context.Canceled).
// It touches only what is safe from any goroutine (the Meter, the
// options, the clock, the turns and p's state).
func (w *walker) send(ctx context.Context, req tools.Request, now time.Time, p *prefetch, t *turn) sent {
	callCtx, cancel := context.WithTimeout(ctx, w.deadline.Sub(now))
	defer cancel()
	if t != nil {
		defer t.done()
		if t.after != nil {
			select {
			case <-t.after:
			case <-callCtx.Done():
			}
			switch err := callCtx.Err(); {
			case err == context.DeadlineExceeded:
				// Its turn did not come within the time budget: the rate
				// limit's wait did not fit, as a wait for a slot that
				// outlasts the deadline (tools.RateLimitError).
				return sent{err: &tools.RateLimitError{Provider: req.Tool.Provider, Cause: "concurrency"}}
			case err != nil:
				return sent{err: err}
			}
		}
	}
	callCtx = tools.WithLimitGrant(callCtx, func() error {
		w.ahead.grants.Store(true)
		if p != nil && p.byGrant && !p.state.CompareAndSwap(aheadWaiting, aheadSent) && p.state.Load() != aheadSent {
			return context.Canceled // given up (giveUpWaiting) before its slot came
		}
		if t != nil {
			t.done()
		}
		return nil
	})
	var waited atomic.Bool
	callCtx = tools.WithLimitWait(callCtx, func(lw tools.LimitWait) func() {
		waited.Store(true)
		if p != nil && !p.byGrant {
			p.state.CompareAndSwap(aheadIdle, aheadWaiting)
		}
		end := w.observeWait(lw)
		return func() {
			if p != nil && !p.byGrant {
				p.state.CompareAndSwap(aheadWaiting, aheadIdle)
			}
			end()
		}
	})
	return w.call(callCtx, req, &waited)
}

// call hands req to the Caller under callCtx; waited is what callCtx's
// rate-limit observer sets when the request waited.
func (w *walker) call(callCtx context.Context, req tools.Request, waited *atomic.Bool) sent {
	w.meter.addInFlight(1)
	resp, err := w.o.Caller.Call(callCtx, req)
	w.meter.addInFlight(-1)
	out := sent{resp: resp, err: err, timedOut: callCtx.Err() != nil, waited: waited.Load()}
	if err == nil && resp == nil {
		out.err = errors.New("the caller returned no response")
	}
	if out.err == nil {
		w.meter.addBytes(int64(len(resp.Body)))
	}
	return out
}

// giveUpWaiting gives up the requests fetched ahead that still wait for
// their provider's rate limit, once the walk has stopped.
func (w *walker) giveUpWaiting() {
	for _, p := range w.ahead.pending {
		if p.state.CompareAndSwap(aheadWaiting, aheadGivenUp) {
			p.cancel()
		}
	}
}

// drainAhead waits for the requests sent ahead that the walk did not use
// (those still waiting for their rate limit when it stopped were given
// up), and counts each
// as a request made (Result.Unused): the upstream received it. One its
// rate limit refused before it was sent, or that was given up before it
// left (the Caller answered the context's own error: see Caller), is
// given back.
func (w *walker) drainAhead() {
	w.ahead.wg.Wait()
	for k, p := range w.ahead.pending {
		delete(w.ahead.pending, k)
		var refused *tools.ArgError
		var limited *tools.RateLimitError
		err := p.out.err
		givenUp := p.byGrant && p.state.Load() == aheadGivenUp // before its slot: never sent
		if givenUp || errors.As(err, &refused) || errors.As(err, &limited) || err == context.Canceled || err == context.DeadlineExceeded {
			w.meter.returnRequest()
			continue
		}
		w.res.Requests++
		w.res.Unused++
		if p.out.resp != nil {
			w.res.Bytes += int64(len(p.out.resp.Body))
		}
	}
}

// waitReportEvery is how often the progress line is told again that a
// request still waits for its rate limit (the stream lets one report
// through per interval, so the first may be held back).
const waitReportEvery = 500 * time.Millisecond

// observeWait records a request of the walk waiting for its provider's
// rate limit and reports it on the progress line, again while the wait
// lasts, and once more when it ends. The reports run on real time: they
// only tell a person watching.
func (w *walker) observeWait(lw tools.LimitWait) (end func()) {
	done := w.meter.waitStarted(lw, w.clock.Now())
	if w.o.Progress == nil {
		return done
	}
	w.reportAgain()
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	var tick func()
	tick = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		w.reportAgain()
		t = time.AfterFunc(waitReportEvery, tick)
	}
	mu.Lock()
	t = time.AfterFunc(waitReportEvery, tick)
	mu.Unlock()
	return func() {
		done()
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		w.reportAgain()
	}
}

// lastPageOf is the page number a rel="last" link names in the walk's
// page parameter; -1 when there is none (or the walk is no page-number
// walk).
func (w *walker) lastPageOf(l linkSignal) int {
	if l.last == "" || w.plan.Strategy != PageNumber || w.plan.PageParam == "" {
		return -1
	}
	u, err := url.Parse(l.last)
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(u.Query().Get(w.plan.PageParam))
	if err != nil || n < 0 {
		return -1
	}
	return n
}
