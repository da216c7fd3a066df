package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

// UIMessage is a message of a thread in the AI SDK's UIMessage shape, so a
// chat UI can render a stored thread as it renders a live one.
type UIMessage struct {
	ID       string          `json:"id"`
	Role     Role            `json:"role"` // system, user or assistant
	Metadata json.RawMessage `json:"metadata,omitempty"`
	Parts    []Part          `json:"parts"`
}

// Part is one part of a UIMessage. Type is "text", "reasoning",
// "step-start", "dynamic-tool", "file", "data-…" or "tool-<name>"; the
// other fields apply per type and are omitted when empty.
type Part struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// State: text and reasoning "done"; tools "input-available",
	// "output-available" or "output-error".
	State      string          `json:"state,omitempty"`
	ToolCallID string          `json:"toolCallId,omitempty"`
	ToolName   string          `json:"toolName,omitempty"` // dynamic-tool only
	Input      json.RawMessage `json:"input,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	ErrorText  string          `json:"errorText,omitempty"`
	// Approval is a tool part's approval (states approval-requested,
	// approval-responded, output-denied).
	Approval *PartApproval `json:"approval,omitempty"`
	// Effect is a tool part's effect (read, write, destructive), kept
	// with the thread so that what a turn changed can be told.
	Effect string `json:"effect,omitempty"`
	// File parts.
	MediaType string `json:"mediaType,omitempty"`
	URL       string `json:"url,omitempty"`
	// Data parts.
	ID   string          `json:"id,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
}

// IsTool reports whether p is a tool call part.
func (p Part) IsTool() bool { return p.Type == "dynamic-tool" || strings.HasPrefix(p.Type, "tool-") }

// Name is the tool name of a tool part.
func (p Part) Name() string {
	if p.Type == "dynamic-tool" {
		return p.ToolName
	}
	return strings.TrimPrefix(p.Type, "tool-")
}

// Text joins the text parts of m.
func (m UIMessage) Text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p.Type == "text" {
			if b.Len() > 0 {
				b.WriteString("\n")
			}
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// ValidateIncoming checks a message sent by a client: a user message with
// at least one text part, of bounded size.
func ValidateIncoming(m UIMessage) error {
	if m.Role != RoleUser {
		return fmt.Errorf("the new message must have role user, not %q", m.Role)
	}
	if strings.TrimSpace(m.Text()) == "" {
		return fmt.Errorf("the new message has no text part")
	}
	if len(m.Text()) > 100_000 {
		return fmt.Errorf("the new message is longer than 100,000 characters")
	}
	return nil
}

// ModelMessages converts a thread to the model's messages: a user message
// per user turn; per assistant step (split at step-start parts) one
// assistant message with its text and tool calls, then one tool message
// per call with its output (or error).
func ModelMessages(thread []UIMessage) []Message {
	var out []Message
	for _, m := range thread {
		switch m.Role {
		case RoleUser:
			out = append(out, Message{Role: RoleUser, Content: m.Text()})
		case RoleSystem:
			out = append(out, Message{Role: RoleSystem, Content: m.Text()})
		case RoleAssistant:
			out = append(out, assistantMessages(m.Parts)...)
		}
	}
	return out
}

func assistantMessages(parts []Part) []Message {
	var out []Message
	var cur *Message
	var results []Message
	flush := func() {
		if cur != nil && (cur.Content != "" || len(cur.ToolCalls) > 0) {
			out = append(out, *cur)
			out = append(out, results...)
		}
		cur, results = nil, nil
	}
	for _, p := range parts {
		if p.Type == "step-start" {
			flush()
			continue
		}
		if cur == nil {
			cur = &Message{Role: RoleAssistant}
		}
		switch {
		case p.Type == "text":
			if cur.Content != "" {
				cur.Content += "\n"
			}
			cur.Content += p.Text
		case p.IsTool():
			args := string(p.Input)
			if args == "" {
				args = "{}"
			}
			cur.ToolCalls = append(cur.ToolCalls, ToolCall{ID: p.ToolCallID, Name: p.Name(), Arguments: args})
			results = append(results, Message{Role: RoleTool, ToolCallID: p.ToolCallID, Content: toolResultText(p)})
		}
	}
	flush()
	return out
}

// toolResultText is what the model reads of a finished (or failed) call.
func toolResultText(p Part) string {
	switch p.State {
	case "output-available":
		return string(p.Output)
	case "output-error":
		b, _ := json.Marshal(map[string]string{"error": p.ErrorText})
		return string(b)
	case StateOutputDenied:
		m := map[string]string{"error": "the user did not approve this call; it was not run"}
		if p.Approval != nil && p.Approval.Reason != "" {
			m["reason"] = p.Approval.Reason
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	return `{"error":"the call did not complete"}`
}
