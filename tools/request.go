package tools

import (
	"net/http"
	"time"
)

// Request is one upstream call of a tool.
type Request struct {
	Tool *Tool
	// Args are the tool's own arguments (reserved arguments already
	// stripped). Values are JSON-decoded (string, float64 or json.Number,
	// bool, []any, map[string]any).
	Args map[string]any
	// URL, when set, replaces the URL built from Tool and Args: it is a
	// continuation URL handed back by the server (a next link). Query
	// arguments are not added to it. One on another origin than the
	// tool's is refused unsent (a RefusedError, CodeForeignURL).
	URL string

	// Credential is the per-user runtime credential for this provider,
	// when the caller holds one; empty means the provider's organization
	// credential (if any) is used, and a provider that takes only runtime
	// credentials refuses the call (NeedsCredential).
	Credential string
	// Scope names the caller for the activity log (thread id).
	ThreadID string
	// Effect is the call's effect for the activity log; "" means the
	// tool's (DeriveEffect).
	Effect Effect

	// Page and Retry describe where this request stands in a walk, for
	// the activity log. Cursor is the raw cursor being sent (the log keeps
	// only its fingerprint).
	Page   int
	Retry  int
	Cursor string

	// Progress, when set, receives the progress the upstream reports
	// while this request runs (an MCP server's notifications/progress).
	// It is never called once Call has returned, and must not block for
	// long.
	Progress func(UpstreamProgress)
}

// UpstreamProgress is one progress report of the upstream, as it gave it:
// Progress grows while the request runs, Total is 0 when unknown.
type UpstreamProgress struct {
	Progress float64
	Total    float64
	Message  string
}

// Response is what the upstream answered. Body is capped at the invoker's
// byte limit; Truncated says the cap was hit.
type Response struct {
	Status    int
	Header    http.Header
	Body      []byte
	Truncated bool
	Duration  time.Duration
}

// EffectOf is the request's effect: Effect — the engine sets it on every
// request it sends, as paginate.Effect resolved it — else, for a request
// made outside the engine, the tool's own (DeriveEffect).
func (r Request) EffectOf() Effect {
	if r.Effect != "" {
		return r.Effect
	}
	if r.Tool == nil {
		return EffectWrite
	}
	return DeriveEffect(r.Tool)
}
