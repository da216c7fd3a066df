package loop

import (
	"errors"
	"fmt"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// Codes of ToolError.
const (
	CodeInvalidArgument   = "invalid_argument"
	CodeInvalidForEachKey = "invalid_for_each_key"
	CodeUpstream          = "upstream_error"
)

// ToolError is a failed tool call the model (or the API caller) can act
// on. Its message is safe to show: it never holds a credential or URL.
type ToolError struct {
	Code    string
	Message string
	// Status is the upstream HTTP status, when the failure was one.
	Status int
}

func (e *ToolError) Error() string { return e.Message }

func invalidArg(name, msg string) *ToolError {
	return &ToolError{Code: CodeInvalidArgument, Message: fmt.Sprintf("%s %s", name, msg)}
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
	if errors.As(err, &pe) {
		return &ToolError{Code: CodeUpstream, Status: pe.Status, Message: fmt.Sprintf("%s: %s", t.Name, pe.Error())}
	}
	var ce *tools.CallError
	if errors.As(err, &ce) {
		return &ToolError{Code: CodeUpstream, Message: fmt.Sprintf("%s: %s", t.Name, ce.Error())}
	}
	return &ToolError{Code: CodeUpstream, Message: fmt.Sprintf("%s: the call failed", t.Name)}
}
