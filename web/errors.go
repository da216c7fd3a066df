package web

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/web/deploy"
)

// APIError is an error meant for an API client: a status, a stable code,
// a public message, and a private cause that is logged and never sent.
type APIError struct {
	Status  int
	Code    string
	Message string
	Cause   error
	// With are members sent beside "error" in the body (an approval
	// request with its approval_required); nil: none.
	With map[string]any
	// RetryAfter, when set, is sent as the Retry-After header (whole
	// seconds, at least one).
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

func (e *APIError) Unwrap() error { return e.Cause }

func apiErr(status int, code, msg string) *APIError {
	return &APIError{Status: status, Code: code, Message: msg}
}

func badRequest(msg string) *APIError { return apiErr(http.StatusBadRequest, "bad_request", msg) }
func notFound(msg string) *APIError   { return apiErr(http.StatusNotFound, "not_found", msg) }
func internal(cause error) *APIError {
	if errors.Is(cause, deploy.ErrStoreUnavailable) {
		// Redis is down or unreachable: a clear 503, never local state.
		return &APIError{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
			Message: "the deployment's shared store (Redis) is unavailable; retry shortly", Cause: cause}
	}
	return &APIError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error", Cause: cause}
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		// RequestID finds the request in the server's logs.
		RequestID string `json:"request_id,omitempty"`
	} `json:"error"`
}

// errorHandler is the one place errors become responses: {"error":{"code",
// "message","request_id"}} with the right status; causes are logged, never
// sent.
//
// draining reports that the server is shutting down, when its closing
// the connections cancels the requests still running: those are cut,
// not given up by their clients.
func errorHandler(log *slog.Logger, draining func() bool) echo.HTTPErrorHandler {
	return func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		if errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil && !draining() {
			// The client went away (it closed the connection, or gave up
			// waiting): there is no one to answer, and nothing failed
			// here. Logged and counted as nginx does, 499, not as a 5xx.
			c.Response().WriteHeader(statusClientClosed)
			return
		}
		var ae *APIError
		var he *echo.HTTPError
		switch {
		case errors.As(err, &ae):
		case errors.As(err, &he):
			ae = &APIError{Status: he.Code, Code: codeForStatus(he.Code), Message: http.StatusText(he.Code)}
			if m, ok := he.Message.(string); ok && he.Code < 500 {
				ae.Message = m
			}
			ae.Cause = he.Internal
		default:
			ae = internal(err)
		}
		if ae.Status >= 500 || ae.Cause != nil {
			log.ErrorContext(c.Request().Context(), "request failed", "method", c.Request().Method, "path", c.Path(),
				"status", ae.Status, "code", ae.Code, "cause", ae.Cause)
		}
		if ae.RetryAfter > 0 {
			c.Response().Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(ae.RetryAfter.Seconds())))))
		}
		var body errorBody
		body.Error.Code, body.Error.Message = ae.Code, ae.Message
		body.Error.RequestID = deploy.RequestID(c.Request().Context())
		if c.Request().Method == http.MethodHead {
			_ = c.NoContent(ae.Status)
			return
		}
		if len(ae.With) > 0 {
			with := map[string]any{"error": body.Error}
			for k, v := range ae.With {
				if k != "error" {
					with[k] = v
				}
			}
			_ = c.JSON(ae.Status, with)
			return
		}
		_ = c.JSON(ae.Status, body)
	}
}

// statusClientClosed is the status of a request whose client went away
// before its answer (nginx's 499).
const statusClientClosed = 499

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusUnauthorized:
		return "unauthorized"
	case http.StatusForbidden:
		return "forbidden"
	case http.StatusNotFound:
		return "not_found"
	case http.StatusMethodNotAllowed:
		return "method_not_allowed"
	case http.StatusRequestTimeout:
		return "timeout"
	case http.StatusConflict:
		return "conflict"
	case http.StatusRequestEntityTooLarge:
		return "too_large"
	case http.StatusTooManyRequests:
		return "rate_limited"
	case http.StatusServiceUnavailable:
		return "unavailable"
	}
	if status >= 500 {
		return "internal"
	}
	return "error"
}
