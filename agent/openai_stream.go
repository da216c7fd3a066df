package agent

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"

	openai "github.com/sashabaranov/go-openai"
)

// oaiChunk is one chunk of a chat completion stream, decoded here rather
// than by go-openai so that the "reasoning" field (Ollama, OpenRouter,
// recent vLLM) is read beside "reasoning_content" (DeepSeek, llama.cpp,
// LM Studio).
type oaiChunk struct {
	Choices []oaiChoice   `json:"choices"`
	Usage   *openai.Usage `json:"usage"`
}

type oaiChoice struct {
	Index        int            `json:"index"`
	Delta        oaiChoiceDelta `json:"delta"`
	FinishReason string         `json:"finish_reason"`
}

type oaiChoiceDelta struct {
	Content          string             `json:"content"`
	Refusal          string             `json:"refusal"`
	ReasoningContent string             `json:"reasoning_content"`
	Reasoning        string             `json:"reasoning"`
	ToolCalls        []oaiToolCallDelta `json:"tool_calls"`
}

// oaiToolCallDelta is one entry of a delta's tool_calls. Index is nil
// when the server omits it.
type oaiToolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Function struct {
		Name      string       `json:"name"`
		Arguments oaiArguments `json:"arguments"`
	} `json:"function"`
}

// oaiArguments is a piece of a call's arguments: a JSON string, as the
// API defines it, or — from servers that send them parsed — an object,
// taken as its JSON text.
type oaiArguments string

func (a *oaiArguments) UnmarshalJSON(b []byte) error {
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = oaiArguments(s)
	case string(b) == "null":
		*a = ""
	default:
		*a = oaiArguments(b)
	}
	return nil
}

// oaiDecoder turns the chunks of one answer into ModelEvents. Servers
// disagree on tool call deltas, and it accepts them all:
//
//   - the standard: index on every delta, id and name on the first;
//   - no index (calls told apart by id, or by a new name, else the delta
//     continues the latest call);
//   - the same index reused with a new id for each call (older Ollama);
//   - the whole arguments in one delta, or ids on every delta.
//
// A call starts (EventToolCallStart) when its name is known; arguments
// that came earlier are held until then.
type oaiDecoder struct {
	calls   []*oaiCall       // in order of appearance
	started int              // calls started: the next event index
	byIndex map[int]*oaiCall // the server's index → its latest call
	reason  string           // the last finish_reason
	usage   Usage
	out     []ModelEvent
}

type oaiCall struct {
	index    int // the event index, set at the start
	serverID string
	id       string
	name     string
	started  bool
	pending  strings.Builder // arguments before the start
	argBytes int             // arguments emitted
}

// feed returns the events of one chunk; the slice is reused by the next
// call.
func (d *oaiDecoder) feed(c *oaiChunk) []ModelEvent {
	d.out = d.out[:0]
	if c.Usage != nil {
		d.usage = Usage{PromptTokens: c.Usage.PromptTokens, CompletionTokens: c.Usage.CompletionTokens}
	}
	for i := range c.Choices {
		ch := &c.Choices[i]
		if ch.Index != 0 {
			continue // only one choice is asked for
		}
		reasoning := ch.Delta.ReasoningContent
		if reasoning == "" {
			reasoning = ch.Delta.Reasoning
		}
		if reasoning != "" {
			d.out = append(d.out, ModelEvent{Kind: EventReasoningDelta, Text: reasoning})
		}
		if ch.Delta.Content != "" {
			d.out = append(d.out, ModelEvent{Kind: EventTextDelta, Text: ch.Delta.Content})
		}
		if ch.Delta.Refusal != "" {
			d.out = append(d.out, ModelEvent{Kind: EventTextDelta, Text: ch.Delta.Refusal})
		}
		for j := range ch.Delta.ToolCalls {
			d.toolDelta(&ch.Delta.ToolCalls[j])
		}
		if ch.FinishReason != "" {
			d.reason = ch.FinishReason
		}
	}
	return d.out
}

func (d *oaiDecoder) toolDelta(tc *oaiToolCallDelta) {
	c := d.route(tc)
	if c.serverID == "" && tc.ID != "" {
		c.serverID = tc.ID
	}
	if c.name == "" && tc.Function.Name != "" {
		c.name = tc.Function.Name
	}
	args := string(tc.Function.Arguments)
	if !c.started {
		c.pending.WriteString(args)
		if c.name != "" {
			d.start(c)
		}
		return
	}
	if args != "" {
		c.argBytes += len(args)
		d.out = append(d.out, ModelEvent{Kind: EventToolCallDelta, Index: c.index, ArgsDelta: args})
	}
}

// route finds the call a tool call delta belongs to, or opens one.
func (d *oaiDecoder) route(tc *oaiToolCallDelta) *oaiCall {
	if tc.Index != nil {
		c := d.byIndex[*tc.Index]
		if c == nil || tc.ID != "" && c.serverID != "" && tc.ID != c.serverID {
			c = d.open()
			if d.byIndex == nil {
				d.byIndex = map[int]*oaiCall{}
			}
			d.byIndex[*tc.Index] = c
		}
		return c
	}
	var last *oaiCall
	if n := len(d.calls); n > 0 {
		last = d.calls[n-1]
	}
	switch {
	case tc.ID != "":
		for _, c := range d.calls {
			if c.serverID == tc.ID {
				return c
			}
		}
		if last != nil && last.serverID == "" && tc.Function.Name == "" {
			return last // the id came after the call began
		}
		return d.open()
	case tc.Function.Name != "" && last != nil && last.name != "":
		return d.open() // a second call, without index or id
	case last != nil:
		return last
	}
	return d.open()
}

func (d *oaiDecoder) open() *oaiCall {
	c := &oaiCall{}
	d.calls = append(d.calls, c)
	return c
}

func (d *oaiDecoder) start(c *oaiCall) {
	c.started = true
	c.index = d.started
	d.started++
	c.id = c.serverID
	if c.id == "" {
		c.id = oaiNewCallID()
	}
	d.out = append(d.out, ModelEvent{Kind: EventToolCallStart, Index: c.index, ToolCallID: c.id, ToolName: c.name})
	if c.pending.Len() > 0 {
		c.argBytes += c.pending.Len()
		d.out = append(d.out, ModelEvent{Kind: EventToolCallDelta, Index: c.index, ArgsDelta: c.pending.String()})
		c.pending.Reset()
	}
}

// end returns the last events, at the end of the stream: starts of
// calls whose name never came (the runner reports an unknown tool to the
// model), "{}" for calls without arguments, and the EventFinish.
func (d *oaiDecoder) end() ([]ModelEvent, error) {
	if d.reason == "" {
		return nil, ErrStreamIncomplete
	}
	d.out = d.out[:0]
	for _, c := range d.calls {
		if !c.started {
			d.start(c)
		}
		if c.argBytes == 0 {
			c.argBytes = 2
			d.out = append(d.out, ModelEvent{Kind: EventToolCallDelta, Index: c.index, ArgsDelta: "{}"})
		}
	}
	reason := d.reason
	if len(d.calls) > 0 && reason == "stop" {
		reason = "tool_calls" // Ollama and others say stop after calls
	}
	d.out = append(d.out, ModelEvent{Kind: EventFinish, FinishReason: reason, Usage: d.usage})
	return d.out, nil
}

// oaiNewCallID names a call the server left unnamed.
func oaiNewCallID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "call_" + hex.EncodeToString(b[:])
}
