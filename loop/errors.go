package loop

import (
	"errors"
	"fmt"
	"time"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// Codes of ToolError.
const (
	CodeInvalidArgument   = "invalid_argument"     // a tool argument (or _all_pages, _refresh) is wrong
	CodeInvalidFields     = "invalid_fields"       // _fields (or a fields argument) does not parse
	CodeInvalidFilter     = "invalid_filter"       // a _filter clause: unknown key, unknown op, wrong type
	CodeInvalidForEach    = "invalid_for_each"     // _for_each's shape or values
	CodeInvalidForEachKey = "invalid_for_each_key" // _for_each's key is missing or not a parameter
	CodeInvalidAggregate  = "invalid_aggregate"    // _aggregate (or an aggregate argument): unknown key, op, path or name
	CodeUpstream          = "upstream_error"
	// CodeRateLimited: the first request was not sent, because the
	// provider's rate limit would not let it go within the call's time
	// budget (a pause, a spent quota, every slot taken); nothing reached
	// the upstream. RetryAfter says when it may, when known.
	CodeRateLimited = "rate_limited"
	// CodeOutcomeUnknown: a write was sent and no answer came (a timeout,
	// a reset connection); it was not retried, and whether the change
	// happened must be checked.
	CodeOutcomeUnknown = "outcome_unknown"
	// CodeWriteArgument: a reserved argument a write does not take
	// (_all_pages, _refresh, _filter; _for_each without bulk).
	CodeWriteArgument = "not_for_writes"
)

// ToolError is a failed tool call the model (or the API caller) can act
// on. Its message is safe to show: it never holds a credential or URL.
// Error gives the code first ("invalid_filter: _filter clause 0 …"), so
// every place that shows the error — the tool error the model reads, the
// CLI's line — shows its code; an HTTP error carries Code and Message
// apart.
type ToolError struct {
	Code    string
	Message string
	// Status is the upstream HTTP status, when the failure was one.
	Status int
	// RetryAfter (CodeRateLimited) is how long the rate limit holds the
	// request back; zero when not known.
	RetryAfter time.Duration
}

func (e *ToolError) Error() string {
	if e.Code == "" {
		return e.Message
	}
	return e.Code + ": " + e.Message
}

// argError is a bad argument: code, and a message naming the argument.
func argError(code, name, msg string) *ToolError {
	return &ToolError{Code: code, Message: fmt.Sprintf("%s %s", name, msg)}
}

// upstreamError words a failed first page (or a bad argument the invoker
// caught) for the model.
func upstreamError(t *tools.Tool, err error) *ToolError {
	var te *ToolError
	if errors.As(err, &te) {
		return te
	}
	var re *tools.RefusedError
	if errors.As(err, &re) {
		return &ToolError{Code: re.Code, Message: fmt.Sprintf("%s: %s", t.Name, re.Msg)}
	}
	var ae *tools.ArgError
	if errors.As(err, &ae) {
		return &ToolError{Code: CodeInvalidArgument, Message: ae.Error()}
	}
	var pe *paginate.PageError
	if rl := (*tools.RateLimitError)(nil); errors.As(err, &pe) && pe.Requests == 0 && errors.As(err, &rl) {
		return &ToolError{Code: CodeRateLimited, RetryAfter: rl.Wait, Message: fmt.Sprintf("%s: %s", t.Name, pe.Error())}
	}
	if errors.As(err, &pe) && pe.Unsure {
		return &ToolError{Code: CodeOutcomeUnknown, Message: fmt.Sprintf(
			"%s: the request was sent but no answer came (%s). The change may or may not have happened: check its result (read it back) before trying again. It was not retried.",
			t.Name, pe.Error())}
	}
	if errors.As(err, &pe) {
		return &ToolError{Code: CodeUpstream, Status: pe.Status, Message: fmt.Sprintf("%s: %s", t.Name, pe.Error())}
	}
	var ce *tools.CallError
	if errors.As(err, &ce) {
		return &ToolError{Code: CodeUpstream, Message: fmt.Sprintf("%s: %s", t.Name, ce.Error())}
	}
	return &ToolError{Code: CodeUpstream, Message: fmt.Sprintf("%s: the call failed", t.Name)}
}
