package web

import (
	"errors"
	"net/http"
	"strings"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
)

// toolErrorStatus is the one table from a tool error's code to the HTTP
// status that answers it: what the caller can fix is a 4xx, what the
// upstream did (an error, no answer, a redirect off its origin, a next
// link elsewhere) a 502. README's "Tool errors" table shows it; a test
// keeps every code the packages declare in it.
var toolErrorStatus = map[string]int{
	loop.CodeInvalidArgument:   http.StatusBadRequest,
	loop.CodeInvalidFields:     http.StatusBadRequest,
	loop.CodeInvalidFilter:     http.StatusBadRequest,
	loop.CodeInvalidForEach:    http.StatusBadRequest,
	loop.CodeInvalidForEachKey: http.StatusBadRequest,
	loop.CodeInvalidAggregate:  http.StatusBadRequest,
	loop.CodeWriteArgument:     http.StatusBadRequest,
	tools.CodeNotConnected:     http.StatusForbidden,
	tools.CodeConnectionBroken: http.StatusForbidden,
	// The provider's authorization server is not reached: nobody's
	// fault the caller can fix, and not the upstream's answer either.
	tools.CodeProviderUnavailable: http.StatusServiceUnavailable,
	loop.CodeUpstream:             http.StatusBadGateway,
	// Held back by the provider's rate limit, nothing sent: a 429 with
	// Retry-After, as a gateway enforcing a quota answers.
	loop.CodeRateLimited:    http.StatusTooManyRequests,
	loop.CodeOutcomeUnknown: http.StatusBadGateway,
	// The upstream's doing, never the caller's: it redirected off its
	// origin, in circles, to a URL with user information, or handed back
	// a next link on another origin.
	tools.CodeCrossOriginRedirect: http.StatusBadGateway,
	tools.CodeTooManyRedirects:    http.StatusBadGateway,
	tools.CodeUserInfoURL:         http.StatusBadGateway,
	tools.CodeForeignURL:          http.StatusBadGateway,
	// A write whose record in the turn's outcome ledger could not be
	// saved was not sent: the deployment's store failed.
	tools.CodeNotSent: http.StatusServiceUnavailable,
	// Approvals (invoke with agent_id).
	agent.CodeApprovalRequired: http.StatusConflict,
	agent.CodeApprovalDenied:   http.StatusForbidden,
	agent.CodeApprovalRefused:  http.StatusBadRequest,
}

// toolStatus is the status of a tool error code; a code the table lacks
// is the server's own failure.
func toolStatus(code string) int {
	if s, ok := toolErrorStatus[code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// toolError renders an engine error with its code and the status the
// table gives it; an error without a code is internal.
func toolError(err error) error {
	var te *loop.ToolError
	if !errors.As(err, &te) {
		return internal(err)
	}
	status := toolStatus(te.Code)
	if status == http.StatusInternalServerError {
		return &APIError{Status: status, Code: "internal", Message: "internal error", Cause: err}
	}
	ae := apiErr(status, te.Code, te.Message)
	ae.RetryAfter = te.RetryAfter
	return ae
}

// retrievalError renders a queryToolResult/fetchToolResult error: its
// argument codes are the tool error codes, a missing or expired result
// is 404.
func retrievalError(err error) error {
	var ae *loop.RetrievalArgError
	switch {
	case errors.As(err, &ae):
		return apiErr(toolStatus(ae.ErrorCode()), ae.ErrorCode(), strings.TrimPrefix(ae.Error(), ae.ErrorCode()+": "))
	case errors.Is(err, loop.ErrResultNotFound), errors.Is(err, loop.ErrResultExpired):
		return apiErr(http.StatusNotFound, "not_found", err.Error())
	}
	return internal(err)
}
