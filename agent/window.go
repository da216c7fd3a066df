package agent

import (
	"strings"
)

// ContextConfig is an agent's context budget (config key "context"):
// what one step may send the model. Every field is optional.
type ContextConfig struct {
	// MaxTokens bounds a step's prompt in tokens. Zero: the model's
	// context window less room for the completion (see ContextWindow).
	MaxTokens int `json:"max_tokens,omitempty" yaml:"max_tokens"`
	// MaxChars bounds a step's prompt in characters (UTF-8 bytes), as
	// well as the token bound. Zero: no character bound of its own.
	MaxChars int `json:"max_chars,omitempty" yaml:"max_chars"`
	// KeepRecentSteps is how many of the newest steps before the current
	// turn keep their tool results whole while they fit; older results
	// are sent as their verdicts. Nil: DefaultKeepRecentSteps.
	KeepRecentSteps *int `json:"keep_recent_steps,omitempty" yaml:"keep_recent_steps"`
}

// DefaultKeepRecentSteps is how many steps before the current turn keep
// their tool results whole when the agent does not say.
const DefaultKeepRecentSteps = 2

func (c *ContextConfig) validate() error {
	if c == nil {
		return nil
	}
	switch {
	case c.MaxTokens < 0:
		return &FieldError{Field: "context.max_tokens", Msg: "must not be negative"}
	case c.MaxChars < 0:
		return &FieldError{Field: "context.max_chars", Msg: "must not be negative"}
	case c.KeepRecentSteps != nil && (*c.KeepRecentSteps < 0 || *c.KeepRecentSteps > 1000):
		return &FieldError{Field: "context.keep_recent_steps", Msg: "must be between 0 and 1000"}
	}
	return nil
}

// Window is a model's context window and the part of it kept free for the
// completion, in tokens.
type Window struct {
	Tokens     int
	Completion int
}

// Prompt is what a prompt may take: the window less the completion's room.
func (w Window) Prompt() int { return w.Tokens - w.Completion }

// UnknownWindow is assumed for a model name the table does not know: small
// enough for most servers that run open models, which is why an agent on
// such a model should set context.max_tokens.
var UnknownWindow = Window{Tokens: 32_768, Completion: 4_096}

// windows are known context windows by model name. A name matches the
// longest key it contains (after any "provider/" prefix, case folded);
// keys marked prefix match only at the start, since they are short.
var windows = []struct {
	key    string
	prefix bool
	w      Window
}{
	// OpenAI.
	{"gpt-3.5-turbo", false, Window{16_385, 4_096}},
	{"gpt-4", false, Window{8_192, 2_048}},
	{"gpt-4-32k", false, Window{32_768, 4_096}},
	{"gpt-4-turbo", false, Window{128_000, 4_096}},
	{"gpt-4-1106", false, Window{128_000, 4_096}},
	{"gpt-4-0125", false, Window{128_000, 4_096}},
	{"gpt-4o", false, Window{128_000, 16_384}},
	{"gpt-4o-mini", false, Window{128_000, 16_384}},
	{"chatgpt-4o", false, Window{128_000, 16_384}},
	{"gpt-4.1", false, Window{1_047_576, 32_768}},
	{"gpt-4.5", false, Window{128_000, 16_384}},
	{"gpt-5", false, Window{400_000, 128_000}},
	{"gpt-oss", false, Window{131_072, 16_384}},
	{"o1", true, Window{200_000, 100_000}},
	{"o1-mini", true, Window{128_000, 65_536}},
	{"o1-preview", true, Window{128_000, 32_768}},
	{"o3", true, Window{200_000, 100_000}},
	{"o3-mini", true, Window{200_000, 100_000}},
	{"o4-mini", true, Window{200_000, 100_000}},
	// Anthropic, Google and others behind OpenAI-compatible endpoints.
	{"claude", false, Window{200_000, 16_384}},
	{"gemini", false, Window{1_048_576, 16_384}},
	{"deepseek", false, Window{65_536, 8_192}},
	// Open models as Ollama, vLLM, llama.cpp or LM Studio name them.
	{"llama3", false, Window{8_192, 2_048}},
	{"llama-3", false, Window{8_192, 2_048}},
	{"llama3.1", false, Window{131_072, 8_192}},
	{"llama3.2", false, Window{131_072, 8_192}},
	{"llama3.3", false, Window{131_072, 8_192}},
	{"llama-3.1", false, Window{131_072, 8_192}},
	{"llama-3.2", false, Window{131_072, 8_192}},
	{"llama-3.3", false, Window{131_072, 8_192}},
	{"llama4", false, Window{131_072, 8_192}},
	{"llama-4", false, Window{131_072, 8_192}},
	{"qwen", false, Window{32_768, 4_096}},
	{"qwq", false, Window{32_768, 8_192}},
	{"mistral", false, Window{32_768, 4_096}},
	{"mistral-large", false, Window{131_072, 8_192}},
	{"mistral-medium", false, Window{131_072, 8_192}},
	{"mistral-nemo", false, Window{131_072, 8_192}},
	{"mixtral", false, Window{32_768, 4_096}},
	{"codestral", false, Window{32_768, 4_096}},
	{"gemma", false, Window{8_192, 2_048}},
	{"gemma3", false, Window{131_072, 8_192}},
	{"gemma-3", false, Window{131_072, 8_192}},
	{"phi3", false, Window{4_096, 1_024}},
	{"phi-3", false, Window{4_096, 1_024}},
	{"phi4", false, Window{16_384, 4_096}},
	{"phi-4", false, Window{16_384, 4_096}},
}

// ContextWindow returns the known window of a model name and whether the
// name was known; an unknown name gets UnknownWindow.
func ContextWindow(model string) (Window, bool) {
	name := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	best, found := -1, false
	var w Window
	for _, e := range windows {
		ok := strings.HasPrefix(name, e.key)
		if !e.prefix && !ok {
			ok = strings.Contains(name, e.key)
		}
		if ok && len(e.key) > best {
			best, w, found = len(e.key), e.w, true
		}
	}
	if !found {
		return UnknownWindow, false
	}
	return w, true
}
