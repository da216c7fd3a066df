package web

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/deploy"
)

// The HTTP half of the deployment's run host (deploy.RunHost): a run's
// stream served to its followers, a conflict, a stop's answer.

// errConflict is the answer to a run claimed while another holds its key.
func errConflict(what string) error {
	return apiErr(http.StatusConflict, "conflict", what)
}

// serveActive streams the run holding key from the client's
// Last-Event-ID, wherever it runs — or the one about to be continued,
// whose replica died or handed it off: 204 when none is active.
func (s *Server) serveActive(c echo.Context, key string) error {
	runID, err := s.runs.Resumable(c.Request().Context(), key)
	if err != nil {
		return internal(err)
	}
	if runID == "" {
		return c.NoContent(http.StatusNoContent)
	}
	return s.serveRun(c, key, runID)
}

// errReleased ends the streams of a server that handed its runs off.
var errReleased = errors.New("this server handed its runs off")

// orphanedText tells a follower that the run it follows is gone.
const orphanedText = "the server running this run stopped without ending its stream; what it saved is kept"

// serveRun streams runID, claimed under key (its claim already checked).
// On a registry whose claims lapse, the stream checks now and then that
// the run still holds its claim or has ended its log: a run that has
// done neither for a while (its replica died and so did the one that
// was ending it, or the store refused its end) ends every follower's
// stream with an error chunk, rather than pings for a day.
func (s *Server) serveRun(c echo.Context, key, runID string) error {
	ctx, cancel := context.WithCancelCause(c.Request().Context())
	defer cancel(nil)
	stop := s.runs.WatchOrphan(ctx, cancel, key, runID)
	defer stop()
	go func() {
		select {
		case <-s.runs.Released():
			cancel(errReleased) // the run goes on elsewhere: the client resumes there
		case <-ctx.Done():
		}
	}()
	readError := func(err error) string {
		switch {
		case errors.Is(context.Cause(ctx), deploy.ErrOrphaned):
			return orphanedText
		case ctx.Err() != nil:
			return "" // the client went away, or the server handed the run off
		}
		return streamReadError(err)
	}
	err := stream.Serve(c.Response(), c.Request().WithContext(ctx), s.events, runID, stream.ServeOptions{ReadError: readError})
	switch {
	case err == nil, c.Response().Committed:
		return nil
	case errors.Is(err, stream.ErrRunNotFound):
		return c.NoContent(http.StatusNoContent)
	case errors.Is(err, stream.ErrUnknownEventID):
		return badRequest("Last-Event-ID is not an event of this run")
	case c.Request().Context().Err() != nil:
		return nil
	}
	return internal(err)
}

// streamReadError is what a client is told when its stream's log fails
// to read mid-stream, instead of a stream that just stops.
func streamReadError(err error) string {
	switch {
	case errors.Is(err, deploy.ErrStoreUnavailable):
		return "lost the connection to the deployment's store; resume this stream shortly to follow the run"
	case errors.Is(err, stream.ErrRunNotFound):
		return "this run's stream is no longer in the deployment's store (it was cleared or expired); what the run saved is kept"
	}
	return "reading this run's stream failed"
}

// stopAnswer is the body of a stop: ended is false when the run was asked
// to stop but had not ended within the wait.
func stopAnswer(stopped, ended bool) map[string]bool {
	if !stopped {
		return map[string]bool{"stopped": false}
	}
	return map[string]bool{"stopped": true, "ended": ended}
}

// requireModel answers 503 when no model is configured.
func (s *Server) requireModel(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.model == nil {
			return apiErr(http.StatusServiceUnavailable, "no_model",
				"no model is configured: set model.api_key (or OPENAI_API_KEY) or model.provider: replay")
		}
		return next(c)
	}
}
