package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// PartApproval is a tool part's approval, as the AI SDK (ai >= 6) keeps it:
// {id} while requested, {id, approved, reason?} once answered.
type PartApproval struct {
	ID       string `json:"id"`
	Approved *bool  `json:"approved,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// Tool part states of the approval protocol.
const (
	StateApprovalRequested = "approval-requested"
	StateApprovalResponded = "approval-responded"
	StateOutputDenied      = "output-denied"
)

// IssuedApproval is an approval request the server issued, kept with the
// thread: an answer is taken only for this id, this call and these
// arguments, and only once.
type IssuedApproval struct {
	ID         string `json:"id"`
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	ArgsHash   string `json:"argsHash"`
	Used       bool   `json:"used,omitempty"`
}

// ApprovalEvidence is what the human sees before approving a call: its
// arguments and the verdict of every read made earlier in the turn.
type ApprovalEvidence struct {
	ApprovalID string          `json:"approvalId"`
	ToolCallID string          `json:"toolCallId"`
	ToolName   string          `json:"toolName"`
	Effect     string          `json:"effect"`
	Input      json.RawMessage `json:"input"`
	// Action says what the call would do, when the door knows it
	// ("POST /messages/{messageId}/trash").
	Action string `json:"action,omitempty"`
	// Reads are the turn's earlier reads: "list_items: partial: 10 of 50
	// rows, 1 request, stopped by budget_pages".
	Reads []string `json:"reads"`
}

// argsHash fingerprints a call's arguments: their canonical JSON (keys
// sorted), so the same arguments in any key order hash the same.
func argsHash(input json.RawMessage) (string, error) {
	var v any
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if err := json.Unmarshal(input, &v); err != nil {
		return "", fmt.Errorf("the call's input is not JSON: %w", err)
	}
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// ErrApproval is wrapped by every refused approval answer.
var ErrApproval = errors.New("approval refused")

// Codes of the approval errors, as API errors and tool errors carry them.
const (
	// CodeApprovalRequired: the call waits for a human's approval; it was
	// not run.
	CodeApprovalRequired = "approval_required"
	// CodeApprovalDenied: a human denied the call; it was not run.
	CodeApprovalDenied = "approval_denied"
	// CodeApprovalRefused: the answer or approval id given does not fit
	// the call (another call, changed arguments, used, unknown, expired).
	CodeApprovalRefused = "approval_refused"
)

// issueApproval issues an approval for one call: a new id from
// crypto/rand, bound to the call and the hash of its arguments. Chat
// keeps it with the thread; the approvals inbox keeps it in its store.
func issueApproval(toolCallID, toolName string, input json.RawMessage) (IssuedApproval, error) {
	h, err := argsHash(input)
	if err != nil {
		return IssuedApproval{}, err
	}
	return IssuedApproval{ID: "apr_" + randomHex(16), ToolCallID: toolCallID, ToolName: toolName, ArgsHash: h}, nil
}

// admit checks that input may be run under a: not used yet, and the
// arguments it was issued for, unchanged. Chat's answers and the inbox's
// approvals are checked by it alike.
func (a *IssuedApproval) admit(input json.RawMessage) error {
	if a.Used {
		return fmt.Errorf("%w: approval %q was already used", ErrApproval, a.ID)
	}
	h, err := argsHash(input)
	if err != nil || h != a.ArgsHash {
		return fmt.Errorf("%w: the arguments changed since approval %q was asked", ErrApproval, a.ID)
	}
	return nil
}

// ApplyApprovals takes the client's answers to the approvals the thread
// waits for: msg is the last assistant message as the client holds it,
// whose tool parts in state approval-responded carry {id, approved,
// reason}. Each answer must name an approval the server issued for that
// call, not yet used, with the call's arguments unchanged; then the
// stored part takes the answer, and the next turn runs or denies the
// call. It returns how many answers were taken.
func ApplyApprovals(t *Thread, msg UIMessage) (int, error) {
	if len(t.Msgs) == 0 || t.Msgs[len(t.Msgs)-1].Role != RoleAssistant || t.Msgs[len(t.Msgs)-1].ID != msg.ID {
		return 0, fmt.Errorf("%w: message %q is not the chat's last assistant message", ErrApproval, msg.ID)
	}
	stored := &t.Msgs[len(t.Msgs)-1]
	taken := 0
	for _, p := range msg.Parts {
		if !p.IsTool() || p.State != StateApprovalResponded {
			continue
		}
		if p.Approval == nil || p.Approval.ID == "" || p.Approval.Approved == nil {
			return 0, fmt.Errorf("%w: tool call %q is approval-responded without {id, approved}", ErrApproval, p.ToolCallID)
		}
		var issued *IssuedApproval
		for i := range t.Approvals {
			if t.Approvals[i].ID == p.Approval.ID {
				issued = &t.Approvals[i]
			}
		}
		switch {
		case issued == nil:
			return 0, fmt.Errorf("%w: approval %q was not issued for this chat", ErrApproval, p.Approval.ID)
		case issued.Used:
			return 0, fmt.Errorf("%w: approval %q was already answered", ErrApproval, p.Approval.ID)
		case issued.ToolCallID != p.ToolCallID:
			return 0, fmt.Errorf("%w: approval %q is for another tool call", ErrApproval, p.Approval.ID)
		}
		if err := issued.admit(p.Input); err != nil {
			return 0, fmt.Errorf("tool call %q: %w", p.ToolCallID, err)
		}
		found := false
		for i := range stored.Parts {
			sp := &stored.Parts[i]
			if sp.IsTool() && sp.ToolCallID == p.ToolCallID && sp.State == StateApprovalRequested {
				a := *p.Approval
				sp.State, sp.Approval = StateApprovalResponded, &a
				found = true
			}
		}
		if !found {
			return 0, fmt.Errorf("%w: tool call %q does not wait for approval", ErrApproval, p.ToolCallID)
		}
		issued.Used = true
		taken++
	}
	return taken, nil
}
