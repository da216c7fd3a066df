package paginate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// Retry policy (DESIGN.md §6). Backoff doubles from transientBackoff; a
// 5xx carrying Retry-After waits what it asks instead.
const (
	maxTransientRetries = 2                      // per page, transport errors and 5xx
	maxRateLimitWaits   = 3                      // per page, 429s waited out
	transientBackoff    = 500 * time.Millisecond // first retry; then 1s
	defaultPageSize     = 100                    // asked when the schema declares no maximum
)

// failure is why a page could not be fetched.
type failure struct {
	reason  string
	why     string // words for Result.Uninspected
	status  int
	snippet string
	err     error
	detail  string // words for PageError
	unsure  bool   // a write was sent and not answered: its outcome is unknown
}

// short words the failure without naming a page: "status 500", "timed
// out", what was wrong with the body.
func (f *failure) short() string {
	switch {
	case f.status >= 300 || f.status > 0 && f.status < 200:
		return fmt.Sprintf("status %d%s", f.status, colon(f.snippet))
	case f.err != nil:
		return safeCause(f.err)
	case f.detail != "":
		return f.detail
	}
	return f.reason
}

func (f *failure) pageError(res *Result) *PageError {
	return &PageError{StoppedBy: f.reason, Status: f.status, Snippet: f.snippet, Retries: res.Retries,
		Requests: res.Requests, Err: f.err, Unsure: f.unsure, detail: f.detail}
}

// fetch sends one page's request, retrying the same page after transport
// errors and 5xx (at most twice, when the request is safe to repeat) and
// waiting out 429s that fit the time budget. Every attempt is counted on
// the requests budget; a probe's first attempt spends the request the
// walk kept for it. err is non-nil only when ctx is cancelled.
//
// A request the walk sent ahead for this position (fetchAhead) is its
// first attempt: its answer is waited for, not sent again, and goes
// through the same rules; a retry is sent by the walk itself.
func (w *walker) fetch(ctx context.Context, req tools.Request, probe bool) (*tools.Response, *failure, error) {
	transient, waits := 0, 0
	var pre *prefetch
	var preKey aheadKey
	if len(w.ahead.pending) > 0 {
		if k, ok := w.keyOf(req.Args); ok {
			pre, preKey = w.ahead.take(k), k
		}
	}
	for attempt := 0; ; attempt++ {
		var out sent
		if attempt == 0 && pre != nil {
			var err error
			if out, err = pre.wait(ctx); err != nil {
				// Cancelled while its answer was awaited: the request was
				// sent, so it is counted with the ones the walk did not
				// read (drainAhead).
				w.ahead.pending[preKey] = pre
				return nil, nil, err
			}
			w.res.Requests++ // counted on the Meter when it was sent
		} else {
			if err := ctx.Err(); errors.Is(err, context.Canceled) {
				return nil, nil, err // cancelled before this request: it is not sent
			}
			now := w.clock.Now()
			if !now.Before(w.deadline) {
				return nil, w.budgetFailure(StopBudgetTime, "the time budget ran out"), nil
			}
			keep := w.keep
			if probe {
				keep = 0
			}
			if !w.meter.takeRequest(w.budget.Requests, w.lease, keep) {
				return nil, w.budgetFailure(StopBudgetRequests, "the request budget was spent"), nil
			}
			if probe && w.keep > 0 {
				w.keep--
			}
			w.res.Requests++
			if attempt > 0 {
				w.res.Retries++
			}
			req.Retry = attempt
			if w.o.Progress != nil {
				req.Progress = w.relay
			}
			out = w.send(ctx, req, now, nil, w.ahead.takeCur())
		}
		w.attempt = attempt
		resp, err, timedOut := out.resp, out.err, out.timedOut
		if err == nil {
			level, sentUnder := 0, 0
			if pre != nil && attempt == 0 {
				level, sentUnder = pre.level, pre.window
			}
			// An answer that says its quota is spent came at the rate
			// limit's pace too, whether or not it waited: the next ones
			// will wait for its reset.
			spent := tools.Learn(tools.Outcome{Status: resp.Status, Header: resp.Header}, w.clock.Now()).Remaining == 0
			w.ahead.learn(resp.Status, out.waited || spent, pre != nil && attempt == 0, level, sentUnder)
		}
		if attempt == 0 && pre != nil && pre.parsed {
			w.parsed = pre
		}
		if refused := argError(err); refused != nil {
			// Refused before any I/O (a required argument is missing): not
			// a request, and nothing a retry could change.
			w.meter.returnRequest()
			w.res.Requests--
			if attempt > 0 {
				w.res.Retries--
			}
			return nil, &failure{reason: StopHTTPError, err: err,
				why: fmt.Sprintf("page %d could not be requested (%s)", req.Page, refused.Error())}, nil
		}
		if err != nil {
			var limited *tools.RateLimitError
			switch {
			case errors.Is(ctx.Err(), context.Canceled):
				if attempt == 0 && pre != nil {
					// A request fetched ahead that failed as the cancel
					// landed: not read, so counted with the unused
					// (drainAhead), as one whose answer came after it.
					w.res.Requests--
					w.ahead.pending[preKey] = pre
				}
				return nil, nil, ctx.Err()
			case errors.As(err, &limited):
				// Not sent: waiting for the provider's rate limit would have
				// overrun the time budget.
				w.meter.returnRequest()
				w.res.Requests--
				if attempt > 0 {
					w.res.Retries--
				}
				f := w.budgetFailure(StopBudgetTime, "")
				f.why, f.err = limited.Error(), limited
				return nil, f, nil
			case ctx.Err() != nil || timedOut:
				f := w.budgetFailure(StopBudgetTime, "the time budget ran out while waiting for the upstream")
				f.unsure = !w.retryable
				return nil, f, nil
			}
			if w.retryable && transient < maxTransientRetries && !errors.Is(err, tools.ErrRefused) {
				transient++
				if ok, cerr := w.wait(ctx, backoff(transient)); cerr != nil {
					return nil, nil, cerr
				} else if ok {
					continue
				}
			}
			return nil, &failure{
				reason: StopHTTPError, err: err, unsure: !w.retryable && maybeSent(err),
				why: fmt.Sprintf("page %d could not be fetched (%s)", req.Page, safeCause(err)),
			}, nil
		}
		w.res.Bytes += int64(len(resp.Body)) // on the Meter since send
		w.res.Status = resp.Status
		switch code := resp.Status; {
		case code >= 200 && code < 300 && resp.Truncated:
			// A body cut at the invoker's cap cannot be read as a page (a
			// JSON document cut short is not one); handing it on as text
			// would only copy megabytes of it around.
			detail := fmt.Sprintf("the response was larger than the per-response cap (%d bytes were read) and was cut, so it could not be read", len(resp.Body))
			return nil, &failure{reason: StopBudgetBytes, status: code, detail: detail,
				why: fmt.Sprintf("page %d: %s", req.Page, detail)}, nil
		case code >= 200 && code < 300:
			return resp, nil, nil
		case code == http.StatusTooManyRequests:
			d, ok := tools.RetryAfter(resp.Header, w.clock.Now())
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
			d, ok := tools.RetryAfter(resp.Header, w.clock.Now())
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

// argError is err's *tools.ArgError (a request refused before any I/O),
// nil when it has none. Its target lives in here, so that a fetch whose
// error is nil allocates none.
func argError(err error) *tools.ArgError {
	if err == nil {
		return nil
	}
	var refused *tools.ArgError
	if errors.As(err, &refused) {
		return refused
	}
	return nil
}

// classify words an error response: a rejected cursor, or an HTTP error.
func (w *walker) classify(resp *tools.Response) *failure {
	f := &failure{reason: StopHTTPError, status: resp.Status, snippet: snippet(resp.Body, w.o.Scrub)}
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

// notJSON is a success status whose body is not the JSON the tool
// answers (an HTML error or login page in its place).
func (w *walker) notJSON(resp *tools.Response) *failure {
	ctype := resp.Header.Get("Content-Type")
	if ctype == "" {
		ctype = "no content type"
	}
	f := &failure{reason: StopHTTPError, status: resp.Status}
	f.detail = fmt.Sprintf("its body is not JSON (%s), so it is not an answer", ctype)
	f.why = fmt.Sprintf("page %d answered status %d with a body that is not JSON (%s)", w.res.Pages+1, resp.Status, ctype)
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
	if w.meter.room(w.budget.Requests, w.lease)-w.keep < 1 {
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

// maybeSent reports whether a transport failure may have come after the
// request reached the upstream: anything but a failure to connect (a
// refused connection, an unknown host) may.
func maybeSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return false
	}
	var dns *net.DNSError
	return !errors.As(err, &dns)
}

// retryable reports whether a page request may be sent again after an
// uncertain failure: when it reads.
func retryable(t *tools.Tool, p Plan) bool { return Effect(t, p, "") == tools.EffectRead }
