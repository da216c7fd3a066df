package agent

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
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
	// Media are the pictures and sounds a tool part's call returned
	// beside its output (an MCP tool's images), which names them
	// ("attached": true) without their data.
	Media []tools.Media `json:"media,omitempty"`
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
	var one *Part
	for i := range m.Parts {
		if m.Parts[i].Type == "text" {
			if one != nil {
				one = nil
				break
			}
			one = &m.Parts[i]
		}
	}
	if one != nil {
		return one.Text // the common case, without a copy
	}
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
// per call with its output (or error). A step that a data-turn-resumed
// part marks interrupted (it was asked again) is left out.
func ModelMessages(thread []UIMessage) []Message { return modelMessages(thread, false) }

// modelMessages is ModelMessages, with compact the rows of tool results
// in the compact layout (an agent's rows: compact).
func modelMessages(thread []UIMessage, compact bool) []Message {
	c := converter{compact: compact}
	for i := range thread {
		c.add(&thread[i])
	}
	return c.out
}

// converter builds model messages from UI messages (see ModelMessages),
// appending to out.
type converter struct {
	out []Message
	// deferred leaves a tool message's Content empty and records its
	// part at the same index in parts (nil for every other message), so
	// that a caller deciding what to send reads a large output only if it
	// sends it whole.
	deferred bool
	parts    []*Part
	// compact writes tool results' rows in the compact layout (an
	// agent's rows: compact).
	compact bool
	calls   []ToolCall // the tool calls of every message, carved per message
	results []*Part    // scratch: the current step's tool parts
}

func (c *converter) push(msg Message, p *Part) {
	c.out = append(c.out, msg)
	if c.deferred {
		c.parts = append(c.parts, p)
	}
}

// add appends m's model messages.
func (c *converter) add(m *UIMessage) {
	switch m.Role {
	case RoleUser:
		c.push(Message{Role: RoleUser, Content: m.Text()}, nil)
		return
	case RoleSystem:
		c.push(Message{Role: RoleSystem, Content: m.Text()}, nil)
		return
	case RoleAssistant:
	default:
		return
	}
	var cur Message
	open := false
	first := len(c.calls) // cur's calls are c.calls[first:]
	flush := func() {
		if n := len(c.calls); n > first {
			cur.ToolCalls = c.calls[first:n:n]
		}
		if open && (cur.Content != "" || len(cur.ToolCalls) > 0) {
			c.push(cur, nil)
			for _, p := range c.results {
				msg := Message{Role: RoleTool, ToolCallID: p.ToolCallID, Images: images(p)}
				if !c.deferred {
					msg.Content = toolResultText(*p, c.compact)
				}
				c.push(msg, p)
			}
		}
		cur, open, c.results, first = Message{}, false, c.results[:0], len(c.calls)
	}
	for i := range m.Parts {
		p := &m.Parts[i]
		if p.Type == "step-start" {
			flush()
			continue
		}
		if p.Type == resumedPart && interruptedStep(p) {
			// The step was asked again after its server died: what it
			// had shown stays in the thread, the model is not shown it.
			c.calls, c.results = c.calls[:first], c.results[:0]
			cur, open = Message{}, false
			continue
		}
		if !open {
			cur, open = Message{Role: RoleAssistant}, true
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
			c.calls = append(c.calls, ToolCall{ID: p.ToolCallID, Name: p.Name(), Arguments: args})
			c.results = append(c.results, p)
		}
	}
	flush()
}

// toolResultLen is len(toolResultText(p, compact)), without building the
// text when the layout is the stored one.
func toolResultLen(p *Part, compact bool) int {
	if p.State == "output-available" && !(compact && compactable(p)) {
		return len(p.Output)
	}
	return len(toolResultText(*p, compact)) // an error: short
}

// compactable reports a tool output the compact row layout may rewrite:
// any but fetchToolResult's, which slices the stored text as it is.
func compactable(p *Part) bool {
	return p.Name() != loop.FetchToolResult && len(p.Output) > 0 && p.Output[0] == '{'
}

// toolResultText is what the model reads of a finished (or failed) call;
// with compact (the agent's rows: compact), its rows in the compact
// layout (loop.CompactRows).
func toolResultText(p Part, compact bool) string {
	switch p.State {
	case "output-available":
		if compact && compactable(&p) {
			if out, ok := loop.CompactRows(p.Output); ok {
				return string(out)
			}
		}
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

// interruptedStep reports whether a data-turn-resumed part says the step
// it ends was interrupted and asked again.
func interruptedStep(p *Part) bool {
	var r struct {
		Interrupted bool `json:"interrupted"`
	}
	return json.Unmarshal(p.Data, &r) == nil && r.Interrupted
}

// images are the pictures of a finished tool part, for the model.
func images(p *Part) []tools.Media {
	if p.State != "output-available" {
		return nil
	}
	var out []tools.Media
	for _, m := range p.Media {
		if m.Type == "image" {
			out = append(out, m)
		}
	}
	return out
}
