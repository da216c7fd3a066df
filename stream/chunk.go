package stream

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Chunk is one UI message stream chunk. The set is closed: the concrete
// types below are every chunk this package can put on the wire, and each
// marshals to exactly the AI SDK's JSON for its type — "type" first, the
// required fields always, optional fields only when set (never null), and
// nothing else.
//
// The fields offered are those that every client from ai@5.0.60 (whose zod
// schemas are strict and reject unknown keys) through the current 7.x line
// accepts. Fields that later versions added — finishReason on finish, reason
// on abort, title and toolMetadata on tool chunks, providerMetadata on tool
// outputs — are deliberately absent. providerMetadata and providerExecuted
// are absent as well: trawl executes every tool itself, and its model
// layer surfaces no provider metadata.
type Chunk interface {
	// Type is the chunk's "type" field, such as "text-delta" or
	// "data-tool-loop-progress".
	Type() string
	isChunk()
}

// Start opens the assistant message.
type Start struct {
	MessageID       string `json:"messageId,omitempty"`
	MessageMetadata any    `json:"messageMetadata,omitempty"` // any JSON value; nil is omitted
}

// StartStep opens one step (one model call and the tool calls it makes).
type StartStep struct{}

// TextStart opens the text part ID; its deltas and end carry the same ID.
type TextStart struct {
	ID string `json:"id"`
}

// TextDelta appends Delta to the text part ID.
type TextDelta struct {
	ID    string `json:"id"`
	Delta string `json:"delta"`
}

// TextEnd closes the text part ID.
type TextEnd struct {
	ID string `json:"id"`
}

// ReasoningStart opens the reasoning part ID.
type ReasoningStart struct {
	ID string `json:"id"`
}

// ReasoningDelta appends Delta to the reasoning part ID.
type ReasoningDelta struct {
	ID    string `json:"id"`
	Delta string `json:"delta"`
}

// ReasoningEnd closes the reasoning part ID.
type ReasoningEnd struct {
	ID string `json:"id"`
}

// ToolInputStart announces a tool call whose arguments will stream.
//
// Dynamic marks a tool the client does not know statically: the client
// keeps it as a "dynamic-tool" part rather than "tool-<name>". Every chunk of
// one call must carry the same Dynamic value, because clients look the
// call up among the parts of that kind.
type ToolInputStart struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Dynamic    bool   `json:"dynamic,omitempty"`
}

// ToolInputDelta appends a fragment of the call's JSON arguments.
type ToolInputDelta struct {
	ToolCallID     string `json:"toolCallId"`
	InputTextDelta string `json:"inputTextDelta"`
}

// ToolInputAvailable carries the call's complete, parsed arguments.
type ToolInputAvailable struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Input      any    `json:"input"` // any JSON value
	Dynamic    bool   `json:"dynamic,omitempty"`
}

// ToolInputError reports arguments that could not be used (not valid JSON,
// an unknown tool); Input is what the model sent.
type ToolInputError struct {
	ToolCallID string `json:"toolCallId"`
	ToolName   string `json:"toolName"`
	Input      any    `json:"input"` // any JSON value
	Dynamic    bool   `json:"dynamic,omitempty"`
	ErrorText  string `json:"errorText"`
}

// ToolOutputAvailable carries the call's result. It may only follow the
// call's input chunks.
type ToolOutputAvailable struct {
	ToolCallID  string `json:"toolCallId"`
	Output      any    `json:"output"` // any JSON value
	Dynamic     bool   `json:"dynamic,omitempty"`
	Preliminary bool   `json:"preliminary,omitempty"` // a later output of the same call replaces it
}

// ToolOutputError reports a failed tool call. A tool failure is this chunk,
// never [Error]: the model reads it and the turn goes on.
type ToolOutputError struct {
	ToolCallID string `json:"toolCallId"`
	ErrorText  string `json:"errorText"`
	Dynamic    bool   `json:"dynamic,omitempty"`
}

// ToolApprovalRequest asks the human to approve a tool call before it runs
// (the AI SDK's tool-approval protocol, ai >= 6). The turn ends after it;
// the client's next request carries the call's part in state
// approval-responded with {id: ApprovalID, approved, reason?}.
type ToolApprovalRequest struct {
	ApprovalID string `json:"approvalId"`
	ToolCallID string `json:"toolCallId"`
}

// ToolOutputDenied answers a call the human did not approve.
type ToolOutputDenied struct {
	ToolCallID string `json:"toolCallId"`
}

// SourceURL cites a web page.
type SourceURL struct {
	SourceID string `json:"sourceId"`
	URL      string `json:"url"`
	Title    string `json:"title,omitempty"`
}

// SourceDocument cites a document.
type SourceDocument struct {
	SourceID  string `json:"sourceId"`
	MediaType string `json:"mediaType"`
	Title     string `json:"title"`
	Filename  string `json:"filename,omitempty"`
}

// File attaches a file by URL (which may be a data: URL).
type File struct {
	URL       string `json:"url"`
	MediaType string `json:"mediaType"`
}

// Data is a custom data part: its type on the wire is "data-" + Name.
// Chunks with the same Name and ID replace each other in the client's
// message, which is how one progress line updates in place. A Transient
// chunk reaches the client's onData callback but is not kept in the message.
type Data struct {
	Name      string `json:"-"` // required; the type suffix, e.g. "tool-loop-progress"
	ID        string `json:"id,omitempty"`
	Data      any    `json:"data"` // any JSON value
	Transient bool   `json:"transient,omitempty"`
}

// FinishStep closes the current step.
type FinishStep struct{}

// Finish closes the assistant message. It has no finishReason: ai@5.0.60
// rejects that field (it arrived in 5.0.92).
type Finish struct {
	MessageMetadata any `json:"messageMetadata,omitempty"` // any JSON value; nil is omitted
}

// Abort says the run was stopped before it finished.
type Abort struct{}

// Error ends the stream with an error the client shows as the chat's error.
// It is for failures of the run itself, never for a failed tool call (that
// is [ToolOutputError]).
type Error struct {
	ErrorText string `json:"errorText"`
}

// MessageMetadata updates the assistant message's metadata mid-stream.
type MessageMetadata struct {
	MessageMetadata any `json:"messageMetadata"` // any JSON value
}

// Type returns the chunk's "type" field.
func (Start) Type() string               { return "start" }
func (StartStep) Type() string           { return "start-step" }
func (TextStart) Type() string           { return "text-start" }
func (TextDelta) Type() string           { return "text-delta" }
func (TextEnd) Type() string             { return "text-end" }
func (ReasoningStart) Type() string      { return "reasoning-start" }
func (ReasoningDelta) Type() string      { return "reasoning-delta" }
func (ReasoningEnd) Type() string        { return "reasoning-end" }
func (ToolInputStart) Type() string      { return "tool-input-start" }
func (ToolInputDelta) Type() string      { return "tool-input-delta" }
func (ToolInputAvailable) Type() string  { return "tool-input-available" }
func (ToolInputError) Type() string      { return "tool-input-error" }
func (ToolOutputAvailable) Type() string { return "tool-output-available" }
func (ToolOutputError) Type() string     { return "tool-output-error" }
func (ToolApprovalRequest) Type() string { return "tool-approval-request" }
func (ToolOutputDenied) Type() string    { return "tool-output-denied" }
func (SourceURL) Type() string           { return "source-url" }
func (SourceDocument) Type() string      { return "source-document" }
func (File) Type() string                { return "file" }
func (c Data) Type() string              { return dataPrefix + c.Name }
func (FinishStep) Type() string          { return "finish-step" }
func (Finish) Type() string              { return "finish" }
func (Abort) Type() string               { return "abort" }
func (Error) Type() string               { return "error" }
func (MessageMetadata) Type() string     { return "message-metadata" }

func (Start) isChunk()               {}
func (StartStep) isChunk()           {}
func (TextStart) isChunk()           {}
func (TextDelta) isChunk()           {}
func (TextEnd) isChunk()             {}
func (ReasoningStart) isChunk()      {}
func (ReasoningDelta) isChunk()      {}
func (ReasoningEnd) isChunk()        {}
func (ToolInputStart) isChunk()      {}
func (ToolInputDelta) isChunk()      {}
func (ToolInputAvailable) isChunk()  {}
func (ToolInputError) isChunk()      {}
func (ToolOutputAvailable) isChunk() {}
func (ToolOutputError) isChunk()     {}
func (ToolApprovalRequest) isChunk() {}
func (ToolOutputDenied) isChunk()    {}
func (SourceURL) isChunk()           {}
func (SourceDocument) isChunk()      {}
func (File) isChunk()                {}
func (Data) isChunk()                {}
func (FinishStep) isChunk()          {}
func (Finish) isChunk()              {}
func (Abort) isChunk()               {}
func (Error) isChunk()               {}
func (MessageMetadata) isChunk()     {}

// MarshalJSON writes the chunk as the AI SDK expects it: "type" first, then
// the fields. Each method converts to a method-less copy so as not to recurse.

func (c Start) MarshalJSON() ([]byte, error) {
	type plain Start
	return withType(c, plain(c))
}

func (c StartStep) MarshalJSON() ([]byte, error) {
	type plain StartStep
	return withType(c, plain(c))
}

func (c TextStart) MarshalJSON() ([]byte, error) {
	type plain TextStart
	return withType(c, plain(c))
}

func (c TextDelta) MarshalJSON() ([]byte, error) {
	type plain TextDelta
	return withType(c, plain(c))
}

func (c TextEnd) MarshalJSON() ([]byte, error) {
	type plain TextEnd
	return withType(c, plain(c))
}

func (c ReasoningStart) MarshalJSON() ([]byte, error) {
	type plain ReasoningStart
	return withType(c, plain(c))
}

func (c ReasoningDelta) MarshalJSON() ([]byte, error) {
	type plain ReasoningDelta
	return withType(c, plain(c))
}

func (c ReasoningEnd) MarshalJSON() ([]byte, error) {
	type plain ReasoningEnd
	return withType(c, plain(c))
}

func (c ToolInputStart) MarshalJSON() ([]byte, error) {
	type plain ToolInputStart
	return withType(c, plain(c))
}

func (c ToolInputDelta) MarshalJSON() ([]byte, error) {
	type plain ToolInputDelta
	return withType(c, plain(c))
}

func (c ToolInputAvailable) MarshalJSON() ([]byte, error) {
	type plain ToolInputAvailable
	return withType(c, plain(c))
}

func (c ToolInputError) MarshalJSON() ([]byte, error) {
	type plain ToolInputError
	return withType(c, plain(c))
}

func (c ToolOutputAvailable) MarshalJSON() ([]byte, error) {
	type plain ToolOutputAvailable
	return withType(c, plain(c))
}

func (c ToolOutputError) MarshalJSON() ([]byte, error) {
	type plain ToolOutputError
	return withType(c, plain(c))
}

func (c ToolApprovalRequest) MarshalJSON() ([]byte, error) {
	type plain ToolApprovalRequest
	return withType(c, plain(c))
}

func (c ToolOutputDenied) MarshalJSON() ([]byte, error) {
	type plain ToolOutputDenied
	return withType(c, plain(c))
}

func (c SourceURL) MarshalJSON() ([]byte, error) {
	type plain SourceURL
	return withType(c, plain(c))
}

func (c SourceDocument) MarshalJSON() ([]byte, error) {
	type plain SourceDocument
	return withType(c, plain(c))
}

func (c File) MarshalJSON() ([]byte, error) {
	type plain File
	return withType(c, plain(c))
}

func (c Data) MarshalJSON() ([]byte, error) {
	if c.Name == "" {
		return nil, errors.New(`data chunk without a name (its type would be "data-")`)
	}
	type plain Data
	return withType(c, plain(c))
}

func (c FinishStep) MarshalJSON() ([]byte, error) {
	type plain FinishStep
	return withType(c, plain(c))
}

func (c Finish) MarshalJSON() ([]byte, error) {
	type plain Finish
	return withType(c, plain(c))
}

func (c Abort) MarshalJSON() ([]byte, error) {
	type plain Abort
	return withType(c, plain(c))
}

func (c Error) MarshalJSON() ([]byte, error) {
	type plain Error
	return withType(c, plain(c))
}

func (c MessageMetadata) MarshalJSON() ([]byte, error) {
	type plain MessageMetadata
	return withType(c, plain(c))
}

const dataPrefix = "data-"

// withType marshals fields (a method-less copy of c, so that this does not
// recurse) and puts c's "type" in front of them.
func withType(c Chunk, fields any) ([]byte, error) {
	typ, err := json.Marshal(c.Type())
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, fmt.Errorf("encoding %s chunk: %w", c.Type(), err)
	}
	out := make([]byte, 0, len(`{"type":,`)+len(typ)+len(body))
	out = append(out, `{"type":`...)
	out = append(out, typ...)
	if len(body) > len("{}") {
		out = append(out, ',')
		return append(out, body[1:]...), nil
	}
	return append(out, '}'), nil
}

// Encode returns c's JSON, the data of its SSE event.
func Encode(c Chunk) ([]byte, error) {
	if c == nil {
		return nil, errors.New("encoding a nil chunk")
	}
	return json.Marshal(c)
}

// isData reports whether typ names a data chunk.
func isData(typ string) bool { return strings.HasPrefix(typ, dataPrefix) && len(typ) > len(dataPrefix) }
