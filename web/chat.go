package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/web/deploy"
	"github.com/trawl-dev/trawl/web/runlease"
)

// chatRequest is the AI SDK's request body (DefaultChatTransport). Fields
// a client adds of its own are ignored.
type chatRequest struct {
	ID        string            `json:"id"`
	Messages  []agent.UIMessage `json:"messages"`
	Trigger   string            `json:"trigger"`
	MessageID string            `json:"messageId"`
	// Replace stops a turn running on the chat and sends this message
	// in its place, instead of answering 409 (a transport's body:
	// {replace: true}).
	Replace bool `json:"replace"`
}

// chat runs one turn and streams it. The run is detached from the
// request: a client that disconnects can resume; only stop or the
// deadline ends it.
func (s *Server) chat(c echo.Context) error {
	p := principalOf(c)
	agentID := c.Param("id")
	if _, ok := s.agents.Get(agentID); !ok {
		return notFound("no agent " + strconv.Quote(agentID))
	}
	var req chatRequest
	if err := json.NewDecoder(c.Request().Body).Decode(&req); err != nil {
		return badRequest("invalid JSON body: " + err.Error())
	}
	if req.ID == "" || len(req.ID) > 200 {
		return badRequest("id (the chat id) is required, at most 200 characters")
	}
	ctx := c.Request().Context()
	key := agent.ThreadKey(p.UserID, agentID, req.ID)
	// The run ends with its deadline, a stop, or the end of the shutdown
	// grace, never with the request.
	runID := "run_" + randomHex(16)
	run, err := s.runs.Claim(ctx, key, runID)
	if errors.Is(err, runlease.ErrHeld) && req.Replace {
		// Stop and replace: the running turn ends (its thread saved with
		// what it did), then this message starts the next one.
		if _, _, err := s.runs.Stop(ctx, key); err != nil {
			return internal(err)
		}
		run, err = s.runs.Claim(ctx, key, runID)
	}
	if errors.Is(err, runlease.ErrHeld) {
		return turnRunning(agentID, req.ID, req.Replace)
	} else if err != nil {
		return internal(err)
	}
	started := false
	defer func() {
		if !started {
			s.runs.Drop(run)
		}
	}()
	thread, err := s.threads.GetThread(ctx, key)
	switch {
	case errors.Is(err, agent.ErrNotFound):
		now := s.now().UTC()
		thread = &agent.Thread{Key: key, ChatID: req.ID, AgentID: agentID, UserID: p.UserID, Created: now}
	case err != nil:
		return internal(err)
	}
	if err := applyRequest(thread, req); err != nil {
		if errors.Is(err, agent.ErrApproval) {
			return apiErr(http.StatusBadRequest, "approval_refused", err.Error())
		}
		return badRequest(err.Error())
	}
	// The user's message is saved before the turn starts, and the thread
	// again after every step, so a crash loses at most the step in flight.
	thread.Updated = s.now().UTC()
	if err := s.threads.PutThread(ctx, thread); err != nil {
		return internal(err)
	}
	if err := s.events.Open(ctx, run.ID()); err != nil {
		return internal(err)
	}
	spec, err := s.turnSpec(run.ID(), thread, p)
	if err != nil {
		return internal(err)
	}
	// From here the turn outlives this process: another replica, or this
	// one after a restart, continues it from its last checkpoint.
	if err := s.runs.Record(ctx, run, deploy.KindTurn, spec); err != nil {
		return internal(err)
	}
	started = true
	s.runs.Start(run, func(ctx context.Context) { s.runTurn(ctx, run, thread, p, nil) })
	return s.serveRun(c, key, run.ID())
}

// turnSpec is what a turn's record keeps to continue it elsewhere: the
// chat and the session it acts for, the session's runtime credentials
// sealed with the deployment's key.
type turnSpec struct {
	AgentID    string `json:"agentId"`
	ChatID     string `json:"chatId"`
	UserID     string `json:"userId,omitempty"`
	CacheScope string `json:"cacheScope,omitempty"`
	Session    string `json:"session,omitempty"`
	Sealed     []byte `json:"sealed,omitempty"`
}

func (s *Server) turnSpec(runID string, thread *agent.Thread, p principal) (turnSpec, error) {
	spec := turnSpec{AgentID: thread.AgentID, ChatID: thread.ChatID, UserID: p.UserID, CacheScope: p.CacheScope, Session: p.Session}
	if len(p.Credentials) > 0 {
		plain, err := json.Marshal(p.Credentials)
		if err != nil {
			return spec, err
		}
		if spec.Sealed, err = s.dep.SealRun(runID, plain); err != nil {
			return spec, err
		}
	}
	return spec, nil
}

// continueTurn continues a turn from its record (deploy.Continuer): the
// thread as saved with its last checkpoint, the session it acted for.
func (s *Server) continueTurn(ctx context.Context, run *deploy.Run, rec deploy.RunRecord, how deploy.Continuation) (func(context.Context), error) {
	var spec turnSpec
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return nil, fmt.Errorf("turn record: %w", err)
	}
	p := principal{UserID: spec.UserID, CacheScope: spec.CacheScope, Session: spec.Session, Admin: spec.UserID == ""}
	if len(spec.Sealed) > 0 {
		plain, err := s.dep.OpenRun(rec.RunID, spec.Sealed)
		if err != nil {
			return nil, fmt.Errorf("turn record: opening the session's credentials: %w", err)
		}
		if err := json.Unmarshal(plain, &p.Credentials); err != nil {
			return nil, fmt.Errorf("turn record: %w", err)
		}
	}
	if _, ok := s.agents.Get(spec.AgentID); !ok {
		return nil, fmt.Errorf("turn record: no agent %q", spec.AgentID)
	}
	thread, err := s.threads.GetThread(ctx, rec.Key)
	if err != nil {
		return nil, fmt.Errorf("turn record: the thread: %w", err)
	}
	var resume *agent.Resume
	if len(rec.State) > 0 {
		var cp agent.Checkpoint
		if err := json.Unmarshal(rec.State, &cp); err != nil {
			return nil, fmt.Errorf("turn record: %w", err)
		}
		resume = &agent.Resume{Checkpoint: cp, Tail: how.Tail, By: how.By, Reason: how.Reason, Count: how.Count}
	}
	return func(ctx context.Context) { s.runTurn(ctx, run, thread, p, resume) }, nil
}

// turnJournal keeps a turn's checkpoints in its run's record.
type turnJournal struct {
	runs *deploy.RunHost
	run  *deploy.Run
}

func (j turnJournal) Save(ctx context.Context, cp agent.Checkpoint) error {
	return j.runs.Checkpoint(ctx, j.run, cp, cp.Idle())
}

// turnRunning is the 409 for a message sent while a turn runs on the
// chat: it says how to follow, stop or replace that turn, and where.
func turnRunning(agentID, chatID string, replaced bool) error {
	base := "/v1/agents/" + url.PathEscape(agentID) + "/chat/" + url.PathEscape(chatID)
	msg := "a turn is already running on this chat: follow it (GET " + base + "/stream), stop it (POST " + base +
		"/stop), or send this message again with \"replace\": true to stop it and send this one in its place"
	if replaced {
		msg = "a turn is still running on this chat: it was asked to stop but another turn took the chat first; follow it (GET " +
			base + "/stream) or stop it (POST " + base + "/stop)"
	}
	return &APIError{Status: http.StatusConflict, Code: "conflict", Message: msg,
		With: map[string]any{"running": map[string]string{"stream": base + "/stream", "stop": base + "/stop"}}}
}

// applyRequest applies the request to the thread the way the AI SDK's
// useChat changes its own list, so that both stay the same list: a new
// user message is added; regenerate ("regenerate-message") drops the
// thread from messageId on when it names an assistant message, or after
// it when it names a user message (without messageId: the last message,
// so a trailing answer is dropped); a user message sent with a messageId
// (sendMessage({text, messageId}): an edit) replaces that message and
// drops everything after it. The server's copy of the thread is the
// truth: earlier messages in the request are not read.
func applyRequest(t *agent.Thread, req chatRequest) error {
	if req.Trigger == "regenerate-message" {
		if req.MessageID == "" {
			for len(t.Msgs) > 0 && t.Msgs[len(t.Msgs)-1].Role == agent.RoleAssistant {
				t.Msgs = t.Msgs[:len(t.Msgs)-1]
			}
		} else {
			i := messageIndex(t.Msgs, req.MessageID)
			if i < 0 {
				return fmt.Errorf("nothing to regenerate: message %q is not in the chat", req.MessageID)
			}
			if t.Msgs[i].Role == agent.RoleUser {
				i++
			}
			t.Msgs = t.Msgs[:i]
		}
		if len(t.Msgs) == 0 || t.Msgs[len(t.Msgs)-1].Role != agent.RoleUser {
			return errors.New("nothing to regenerate: no user message comes before it")
		}
		return nil
	}
	if len(req.Messages) == 0 {
		return errors.New("messages must hold the new user message")
	}
	last := req.Messages[len(req.Messages)-1]
	if req.MessageID != "" && last.Role == agent.RoleUser {
		// An edit: the message keeps its id and its place; what came
		// after it goes.
		i := messageIndex(t.Msgs, req.MessageID)
		if i < 0 {
			return fmt.Errorf("message %q is not in the chat, so it cannot be replaced", req.MessageID)
		}
		if t.Msgs[i].Role != agent.RoleUser {
			return fmt.Errorf("message %q is the assistant's; only a user message can be edited (regenerate an answer instead)", req.MessageID)
		}
		if err := agent.ValidateIncoming(last); err != nil {
			return err
		}
		last.ID = req.MessageID
		t.Msgs = append(t.Msgs[:i], last)
		return nil
	}
	if last.Role == agent.RoleAssistant {
		// The AI SDK's tool approval (ai >= 6): the client sends the
		// assistant message back with its calls approval-responded.
		n, err := agent.ApplyApprovals(t, last)
		if err != nil {
			return err
		}
		if n == 0 {
			return errors.New("the last message is the assistant's but answers no approval")
		}
		return nil
	}
	for i, m := range t.Msgs {
		if m.ID == "" || m.ID != last.ID {
			continue
		}
		// The same message again (a client retrying after a lost
		// response): answer it anew if it is the latest user message.
		for _, later := range t.Msgs[i+1:] {
			if later.Role == agent.RoleUser {
				return fmt.Errorf("message %q is already in the chat and is not its latest user message", last.ID)
			}
		}
		t.Msgs = t.Msgs[:i+1]
		return nil
	}
	if err := agent.ValidateIncoming(last); err != nil {
		return err
	}
	if last.ID == "" {
		last.ID = "msg_" + randomHex(12)
	}
	t.Msgs = append(t.Msgs, last)
	return nil
}

// messageIndex is the index of the message with id in msgs, or -1.
func messageIndex(msgs []agent.UIMessage, id string) int {
	for i, m := range msgs {
		if m.ID == id {
			return i
		}
	}
	return -1
}

// runTurn runs a turn to its end and saves the thread (the run host
// then closes its log); resume continues one from its checkpoint. A turn
// handed off leaves both to whoever continues it.
func (s *Server) runTurn(ctx context.Context, run *deploy.Run, thread *agent.Thread, p principal, resume *agent.Resume) {
	agentID := thread.AgentID
	key, runID := run.Key(), run.ID()
	// A run saves only while it holds the chat's claim: a replica that
	// was cut off (or paused) past its lease must not write its stale
	// thread over a turn another replica ran meanwhile.
	save := func(ctx context.Context, t *agent.Thread) error { return s.dep.SaveHeldThread(ctx, key, runID, t) }
	s.dep.PrimeUserMCPsFor(ctx, p.UserID)
	err := s.runner.Run(ctx, &agent.Turn{
		Agent: func() (agent.Definition, bool) {
			// An edit on another replica applies from the next step.
			if err := s.agents.Sync(ctx); err != nil {
				s.log.WarnContext(ctx, "reading agent definitions: using the last known", "err", err)
			}
			return s.agents.Get(agentID)
		},
		Thread: thread, Org: s.cfg.Org, User: p.UserID, CacheScope: p.CacheScope, Credentials: p.Credentials,
		Connections: userConnections{s: s, user: p.UserID, session: p.Credentials, sessionHash: p.Session},
		Emit:        func(ch stream.Chunk) error { return s.runs.Emit(context.WithoutCancel(ctx), run, ch) },
		Checkpoint:  save,
		Journal:     turnJournal{runs: s.runs, run: run},
		Resume:      resume,
	})
	if errors.Is(err, agent.ErrHandOff) {
		return
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		s.log.InfoContext(ctx, "turn ended with an error", "thread", key, "err", err)
	}
	// A store failing for a moment (an outage, a full Redis) is waited
	// out, so the thread is saved and the stream's followers learn why
	// the turn ended (its own error chunk may be what the store refused).
	var last stream.Chunk
	if errors.Is(err, deploy.ErrStoreUnavailable) {
		last = stream.Error{ErrorText: storeFailedText}
	}
	s.runs.EndRun(ctx, key, runID, "thread", last, func(ctx context.Context) error { return save(ctx, thread) })
}

// storeFailedText ends a turn that the deployment's store failed.
const storeFailedText = "the deployment's store failed during this turn; what was saved before is kept — send the message again to continue"

// resume streams the active run of a chat, on whichever replica it runs:
// 204 when none is active.
func (s *Server) resume(c echo.Context) error {
	return s.serveActive(c, agent.ThreadKey(principalOf(c).UserID, c.Param("id"), c.Param("chatId")))
}

// stop ends the active run of a chat, wherever it runs.
func (s *Server) stop(c echo.Context) error {
	key := agent.ThreadKey(principalOf(c).UserID, c.Param("id"), c.Param("chatId"))
	stopped, ended, err := s.runs.Stop(c.Request().Context(), key)
	if err != nil {
		return internal(err)
	}
	return c.JSON(http.StatusOK, stopAnswer(stopped, ended))
}

// getChat returns a thread as AI SDK UIMessage[].
func (s *Server) getChat(c echo.Context) error {
	key := agent.ThreadKey(principalOf(c).UserID, c.Param("id"), c.Param("chatId"))
	t, err := s.threads.GetThread(c.Request().Context(), key)
	if errors.Is(err, agent.ErrNotFound) {
		return notFound("no such chat")
	}
	if err != nil {
		return internal(err)
	}
	msgs := t.Msgs
	if msgs == nil {
		msgs = []agent.UIMessage{}
	}
	return c.JSON(http.StatusOK, msgs)
}
