package stream

// ContextName is the name of the data chunk that reports what one step
// sent to the model: its type on the wire is "data-context".
const ContextName = "context"

// ContextReport is what one step of a turn put in front of the model,
// against the agent's context budget. The runner sends one per step,
// before the model answers; every field but the omitempty ones is always
// sent. Clients may ignore it (the AI SDK keeps it as a data part).
//
// Characters are counted as UTF-8 bytes: one per character of Latin
// text, more for other scripts, whose tokens hold more bytes too.
type ContextReport struct {
	// Step is the step of the turn, from 0.
	Step int `json:"step"`
	// Model is the model the budget was derived for.
	Model string `json:"model,omitempty"`
	// Chars is what the step sends: messages, tool calls and the tool
	// definitions.
	Chars int `json:"chars"`
	// Tokens is Chars in tokens: counted by the model's tokenizer when
	// Counted (a model family trawl knows), else by CharsPerToken.
	Tokens  int  `json:"tokens"`
	Counted bool `json:"counted,omitempty"`
	// CharsPerToken is the estimate used: the model server's reported
	// usage of an earlier step when Calibrated, a fixed default otherwise.
	CharsPerToken float64 `json:"charsPerToken"`
	Calibrated    bool    `json:"calibrated"`
	// BudgetTokens is the prompt budget in tokens (the agent's, or the
	// model's window less room for the answer); BudgetChars is the limit
	// in characters the step was fitted to: BudgetTokens by the estimate,
	// or the agent's character budget when that is smaller.
	BudgetTokens int `json:"budgetTokens,omitempty"`
	BudgetChars  int `json:"budgetChars"`
	// Messages counts the messages sent.
	Messages int `json:"messages"`
	// Compacted counts the older tool results sent as their verdicts
	// only; CompactedChars is what those results hold in the thread.
	Compacted      int `json:"compacted"`
	CompactedChars int `json:"compactedChars"`
	// CompactedCalls are the tool call ids of the newest compacted
	// results (at most 50).
	CompactedCalls []string `json:"compactedCalls,omitempty"`
	// Shortened counts older texts cut short; DroppedTurns counts the
	// oldest turns left out entirely.
	Shortened    int `json:"shortened"`
	DroppedTurns int `json:"droppedTurns"`
	// ReportedPromptTokens is the prompt tokens the model server reported
	// for the previous step, when it reported any.
	ReportedPromptTokens int `json:"reportedPromptTokens,omitempty"`
}

// Chunk is the report as a data chunk with the ID "context", so that
// each step's report replaces the previous one in the client's message.
func (c ContextReport) Chunk() Data {
	return Data{Name: ContextName, ID: ContextName, Data: c}
}
