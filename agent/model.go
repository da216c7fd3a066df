package agent

import (
	"context"
	"encoding/json"
	"iter"

	"github.com/trawl-dev/trawl/tools"
)

// Model is a chat model that streams. Implementations: OpenAI (any
// OpenAI-compatible server, through go-openai) and Replay (a recorded
// conversation played back step by step while the tools run live).
//
// Stream is called once per step. The sequence ends after a single
// EventFinish (or with an error); it is cancelled with ctx. Stream must be
// safe for concurrent use by different turns.
type Model interface {
	Stream(ctx context.Context, req ModelRequest) iter.Seq2[ModelEvent, error]
}

// ModelRequest is one step's input.
type ModelRequest struct {
	// Model names the model; "" means the implementation's default.
	Model    string
	Messages []Message
	Tools    []ToolSpec
	// ToolChoice is ToolChoiceRequired when the step must call one of
	// Tools (a retrieval-only step); "" lets the model choose. A model
	// that cannot require it answers as it likes, and the runner checks.
	ToolChoice string
}

// ToolChoiceRequired asks the model for a tool call, not a text answer
// (OpenAI's tool_choice "required").
const ToolChoiceRequired = "required"

// Role of a message.
type Role string

const (
	RoleSystem    Role = "system"
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of the conversation as the model sees it.
type Message struct {
	Role    Role
	Content string
	// ToolCalls are the calls an assistant message made.
	ToolCalls []ToolCall
	// ToolCallID names the call a tool message answers.
	ToolCallID string
	// Images are the pictures a tool message's call returned beside its
	// Content (which names them): a model that takes pictures is shown
	// them after the step's tool results.
	Images []tools.Media
}

// ToolCall is one function call made by the model.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text, as the model wrote it
}

// ToolSpec is one function offered to the model.
type ToolSpec struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the arguments
}

// EventKind says what a ModelEvent carries.
type EventKind int

const (
	// EventTextDelta: Text is the next piece of the answer.
	EventTextDelta EventKind = iota + 1
	// EventReasoningDelta: Text is the next piece of the model's
	// reasoning, when the server streams it.
	EventReasoningDelta
	// EventToolCallStart: a call at Index begins, with ToolCallID and
	// ToolName.
	EventToolCallStart
	// EventToolCallDelta: ArgsDelta is the next piece of the arguments of
	// the call at Index.
	EventToolCallDelta
	// EventFinish: the step ended, with FinishReason and Usage.
	EventFinish
)

// ModelEvent is one streamed event of a step.
type ModelEvent struct {
	Kind         EventKind
	Text         string
	Index        int // tool call index within the step
	ToolCallID   string
	ToolName     string
	ArgsDelta    string
	FinishReason string // "stop", "tool_calls", "length", …
	Usage        Usage
}

// Usage counts tokens, when the server reports them.
type Usage struct {
	PromptTokens     int `json:"promptTokens,omitempty"`
	CompletionTokens int `json:"completionTokens,omitempty"`
}
