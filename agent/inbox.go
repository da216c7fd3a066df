package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The approvals inbox.
//
// A chat answers its approvals inside the chat (the AI SDK's approval
// parts, see approval.go). Every other door — the invoke API with
// agent_id, `trawl call --agent`, MCP clients — has no message to answer
// in, so its approvals wait in one inbox: a request is issued with the
// same single-use, argument-bound id a chat's is (issueApproval), a human
// answers it (approve or deny) with its evidence in view, and the call
// that comes back with the id runs once, with the arguments it was
// issued for, before the request expires. The inbox knows nothing of
// HTTP: a door asks (Request), a human answers (Answer), the door takes
// the answer (Take).

// ApprovalStatus is where an inbox request stands.
type ApprovalStatus string

const (
	ApprovalPending  ApprovalStatus = "pending"  // waits for a human
	ApprovalApproved ApprovalStatus = "approved" // may run once, until it expires
	ApprovalDenied   ApprovalStatus = "denied"   // will not run
	ApprovalUsed     ApprovalStatus = "used"     // ran (or began to) under this approval
)

// PendingApproval is one request in the inbox.
type PendingApproval struct {
	// ID, the call it was issued for and the hash of its arguments, as
	// a chat's IssuedApproval; Used mirrors Status used.
	IssuedApproval
	Status ApprovalStatus `json:"status"`
	// Source is the door that asked: "invoke", "cli", "mcp".
	Source  string `json:"source"`
	AgentID string `json:"agentId"`
	ToolID  string `json:"toolId"`
	Effect  string `json:"effect"`
	// Evidence is what the human sees before answering: the call's
	// arguments, what it would do, and the verdicts of the reads made
	// before it (when the door has any).
	Evidence ApprovalEvidence `json:"evidence"`
	Created  time.Time        `json:"createdAt"`
	Expires  time.Time        `json:"expiresAt"`
	Answered time.Time        `json:"answeredAt,omitzero"`
	// Reason is the human's, with a denial (or an approval).
	Reason string `json:"reason,omitempty"`
}

// ApprovalStore keeps the inbox's requests: the embedded store
// (NewBoltApprovals), Redis (agent/redisstore) for replicas, or memory
// (NewMemoryApprovals) for one process that keeps nothing. A request is
// gone once now passes its Expires. Implementations are safe for
// concurrent use, and Swap is atomic across every process sharing the
// store.
type ApprovalStore interface {
	// AddApproval stores a new request.
	AddApproval(ctx context.Context, a PendingApproval) error
	// GetApproval returns the request id; ok is false when there is none
	// live at now.
	GetApproval(ctx context.Context, id string, now time.Time) (a PendingApproval, ok bool, err error)
	// ListApprovals returns the requests live at now, oldest first.
	ListApprovals(ctx context.Context, now time.Time) ([]PendingApproval, error)
	// SwapApproval replaces request a.ID with a only while it is live at
	// now and its status is from; swapped is false otherwise. Of two
	// concurrent swaps from the same status, exactly one succeeds.
	SwapApproval(ctx context.Context, from ApprovalStatus, a PendingApproval, now time.Time) (swapped bool, err error)
}

// Errors of the inbox. ErrApprovalNotFound, ErrApprovalDenied and every
// ErrApproval name why a call may not run; ErrApprovalPending that it
// still waits.
var (
	ErrApprovalNotFound = fmt.Errorf("%w: no such approval request (never issued, or expired)", ErrApproval)
	ErrApprovalPending  = errors.New("the approval request waits for an answer")
	ErrApprovalDenied   = errors.New("the call was denied")
	// ErrApprovalAnswered: Answer on a request already answered.
	ErrApprovalAnswered = errors.New("the approval request was already answered")
	// ErrInboxFull: Request while the inbox holds its bound of pending
	// requests.
	ErrInboxFull = errors.New("the approvals inbox is full")
)

// Inbox defaults.
const (
	// DefaultApprovalTTL is how long a request waits for an answer, and
	// how long an approved one may then be used.
	DefaultApprovalTTL = time.Hour
	// DefaultInboxMax bounds the requests pending at once.
	DefaultInboxMax = 1000
)

// InboxOptions configures an Inbox. Store is required.
type InboxOptions struct {
	Store ApprovalStore
	// TTL is how long a request waits, and how long an approval lasts
	// once given. Zero: DefaultApprovalTTL.
	TTL time.Duration
	// Max bounds the pending requests (as counted when one is added, so
	// replicas adding at once may pass it by a few). Zero:
	// DefaultInboxMax.
	Max int
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Inbox is the approvals inbox. It is safe for concurrent use.
type Inbox struct {
	store ApprovalStore
	ttl   time.Duration
	max   int
	now   func() time.Time
}

// NewInbox returns an inbox on opt.Store.
func NewInbox(opt InboxOptions) *Inbox {
	in := &Inbox{store: opt.Store, ttl: opt.TTL, max: opt.Max, now: opt.Now}
	if in.ttl <= 0 {
		in.ttl = DefaultApprovalTTL
	}
	if in.max <= 0 {
		in.max = DefaultInboxMax
	}
	if in.now == nil {
		in.now = time.Now
	}
	return in
}

// ApprovalRequest is what a door asks the inbox to approve: one call of
// a bound tool that needs a human's yes.
type ApprovalRequest struct {
	Source  string
	AgentID string
	ToolID  string
	// ToolCallID names the call at its door ("" : one is made).
	ToolCallID string
	ToolName   string
	Effect     string
	Input      json.RawMessage
	// Action says what the call would do ("POST /messages/{id}/trash").
	Action string
	// Reads are verdicts of the reads made before it, when the door made
	// any (as a chat's evidence holds).
	Reads []string
}

// Request puts a new request in the inbox and returns it, pending.
func (in *Inbox) Request(ctx context.Context, r ApprovalRequest) (PendingApproval, error) {
	pending, err := in.List(ctx, ApprovalPending)
	if err != nil {
		return PendingApproval{}, err
	}
	if len(pending) >= in.max {
		return PendingApproval{}, fmt.Errorf("%w: %d requests wait for an answer; answer some first", ErrInboxFull, len(pending))
	}
	callID := r.ToolCallID
	if callID == "" {
		callID = "call_" + randomHex(8)
	}
	input := r.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	issued, err := issueApproval(callID, r.ToolName, input)
	if err != nil {
		return PendingApproval{}, err
	}
	now := in.now().UTC()
	a := PendingApproval{IssuedApproval: issued, Status: ApprovalPending, Source: r.Source, AgentID: r.AgentID,
		ToolID: r.ToolID, Effect: r.Effect, Created: now, Expires: now.Add(in.ttl),
		Evidence: ApprovalEvidence{ApprovalID: issued.ID, ToolCallID: callID, ToolName: r.ToolName, Effect: r.Effect,
			Input: input, Action: r.Action, Reads: append([]string{}, r.Reads...)}}
	if err := in.store.AddApproval(ctx, a); err != nil {
		return PendingApproval{}, fmt.Errorf("approvals inbox: %w", err)
	}
	return a, nil
}

// Get returns request id while it lives.
func (in *Inbox) Get(ctx context.Context, id string) (PendingApproval, error) {
	a, ok, err := in.store.GetApproval(ctx, id, in.now())
	switch {
	case err != nil:
		return a, fmt.Errorf("approvals inbox: %w", err)
	case !ok:
		return a, ErrApprovalNotFound
	}
	return a, nil
}

// List returns the live requests, oldest first: those of the statuses
// given, or all.
func (in *Inbox) List(ctx context.Context, statuses ...ApprovalStatus) ([]PendingApproval, error) {
	all, err := in.store.ListApprovals(ctx, in.now())
	if err != nil {
		return nil, fmt.Errorf("approvals inbox: %w", err)
	}
	if len(statuses) == 0 {
		return all, nil
	}
	out := all[:0:0]
	for _, a := range all {
		for _, s := range statuses {
			if a.Status == s {
				out = append(out, a)
				break
			}
		}
	}
	return out, nil
}

// Answer records a human's answer to a pending request: approved, it may
// run once until it expires (a new TTL from now); denied, it never runs.
// Of two answers given at once, one is taken and the other gets
// ErrApprovalAnswered.
func (in *Inbox) Answer(ctx context.Context, id string, approve bool, reason string) (PendingApproval, error) {
	a, err := in.Get(ctx, id)
	if err != nil {
		return a, err
	}
	if a.Status != ApprovalPending {
		return a, fmt.Errorf("%w (it is %s)", ErrApprovalAnswered, a.Status)
	}
	now := in.now().UTC()
	a.Answered, a.Reason, a.Status = now, reason, ApprovalDenied
	if approve {
		a.Status, a.Expires = ApprovalApproved, now.Add(in.ttl)
	}
	ok, err := in.store.SwapApproval(ctx, ApprovalPending, a, now)
	if err != nil {
		return a, fmt.Errorf("approvals inbox: %w", err)
	}
	if !ok {
		cur, gerr := in.Get(ctx, id)
		if gerr != nil {
			return cur, gerr
		}
		return cur, fmt.Errorf("%w (it is %s)", ErrApprovalAnswered, cur.Status)
	}
	return a, nil
}

// Take spends an approved request on the call that came back with it: the
// same agent, tool and arguments. It succeeds once; it fails with
// ErrApprovalPending while the request waits, ErrApprovalDenied once
// denied, and ErrApproval (ErrApprovalNotFound included) when the id does
// not fit the call or was used.
func (in *Inbox) Take(ctx context.Context, id, agentID, toolID string, input json.RawMessage) (PendingApproval, error) {
	a, err := in.Get(ctx, id)
	if err != nil {
		return a, err
	}
	if a.AgentID != agentID || a.ToolID != toolID {
		return a, fmt.Errorf("%w: approval %q was issued for %s of agent %q, not this call", ErrApproval, id, a.ToolID, a.AgentID)
	}
	switch a.Status {
	case ApprovalPending:
		return a, ErrApprovalPending
	case ApprovalDenied:
		return a, ErrApprovalDenied
	case ApprovalUsed:
		a.Used = true
	}
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := a.admit(input); err != nil {
		return a, err
	}
	a.Status, a.Used = ApprovalUsed, true
	ok, err := in.store.SwapApproval(ctx, ApprovalApproved, a, in.now())
	if err != nil {
		return a, fmt.Errorf("approvals inbox: %w", err)
	}
	if !ok {
		return a, fmt.Errorf("%w: approval %q was already used", ErrApproval, id)
	}
	return a, nil
}
