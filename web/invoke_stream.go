package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
)

// invokeScope is where an invoke's results are kept: the thread_id, or
// with agent_id and chat_id that chat's thread (so the Studio can query a
// result a chat turn stored).
func (s *Server) invokeScope(req invokeRequest) (loop.Scope, error) {
	scope := loop.Scope{Org: s.cfg.Org, Thread: req.ThreadID}
	if req.ChatID != "" {
		if req.AgentID == "" || req.ThreadID != "" {
			return scope, badRequest("chat_id needs agent_id, and replaces thread_id")
		}
		scope.Thread = agent.ThreadKey("", req.AgentID, req.ChatID)
	}
	return scope, nil
}

// invokeBinding is the binding an invoke runs under: the agent's binding
// of the tool with agent_id, else looping as loop_responses says (on by
// default).
func (s *Server) invokeBinding(req invokeRequest, t *tools.Tool) (loop.Binding, error) {
	if req.AgentID == "" {
		return loop.Binding{LoopResponses: req.LoopResponses == nil || *req.LoopResponses, Bulk: req.Bulk}, nil
	}
	if req.LoopResponses != nil {
		return loop.Binding{}, badRequest("loop_responses and agent_id exclude each other: agent_id applies the agent's binding")
	}
	def, ok := s.agents.Get(req.AgentID)
	if !ok {
		return loop.Binding{}, notFound("no agent " + strconv.Quote(req.AgentID))
	}
	b, bound, err := agent.LoopBinding(def, s.catalog, t.ID)
	if err != nil {
		return loop.Binding{}, internal(err)
	}
	if !bound {
		return loop.Binding{}, apiErr(http.StatusBadRequest, "not_bound", "agent "+strconv.Quote(req.AgentID)+" does not bind "+strconv.Quote(t.ID))
	}
	return b, nil
}

// wantsEventStream reports whether the client asked for a stream.
func wantsEventStream(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
			return true
		}
	}
	return false
}

// invokeProgressInterval is the least time between two progress chunks of
// a streamed invoke: a person watches it, no model context is spent.
const invokeProgressInterval = 250 * time.Millisecond

// invokeStream runs call and streams it in the chat stream's vocabulary:
// start, tool-input-available, data-tool-loop-progress (throttled),
// then tool-output-available with the envelope (or tool-output-error),
// finish and [DONE]. The walk runs on the request's context: a client
// that goes away (Stop in the Studio) ends it.
func (s *Server) invokeStream(c echo.Context, call loop.Call) error {
	w := c.Response()
	stream.SetHeaders(w.Header())
	w.WriteHeader(http.StatusOK)
	sw := stream.NewWriter(w, 30*time.Second)
	var mu sync.Mutex
	seq := int64(0)
	emit := func(ch stream.Chunk) error {
		data, err := stream.Encode(ch)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		seq++
		return sw.WriteEvent(stream.Event{Seq: seq, Data: data})
	}
	callID := "invoke_" + randomHex(8)
	name := call.Tool.Name
	if err := emit(stream.Start{}); err != nil {
		return nil
	}
	_ = emit(stream.StartStep{})
	_ = emit(stream.ToolInputAvailable{ToolCallID: callID, ToolName: name, Input: call.Args, Dynamic: true})
	throttle := stream.NewThrottle(stream.ThrottleOptions{Interval: invokeProgressInterval})
	start := time.Now()
	call.Progress = func(p loop.Progress) {
		if !throttle.Allow(callID) {
			return
		}
		_ = emit(agent.ProgressChunk(callID, name, p, time.Since(start)))
	}
	ctx := tools.WithCallID(c.Request().Context(), callID)
	out, err := s.engine.Call(ctx, call)
	if ctx.Err() != nil {
		_ = emit(stream.Abort{})
		return nil
	}
	if err != nil {
		// The same words the JSON answer would carry, with its code.
		msg := "internal error"
		var ae *APIError
		if errors.As(toolError(err), &ae) && ae.Status != http.StatusInternalServerError {
			msg = ae.Message + " (" + ae.Code + ")"
		} else {
			s.log.Error("streamed invoke", "tool", call.Tool.ID, "err", err)
		}
		_ = emit(stream.ToolOutputError{ToolCallID: callID, ErrorText: msg, Dynamic: true})
	} else {
		_ = emit(stream.ToolOutputAvailable{ToolCallID: callID, Output: json.RawMessage(out.View), Dynamic: true})
	}
	_ = emit(stream.FinishStep{})
	_ = emit(stream.Finish{})
	mu.Lock()
	defer mu.Unlock()
	_ = sw.WriteDone()
	return nil
}
