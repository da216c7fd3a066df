package stream

import (
	"encoding/json"
	"sync"
	"time"
)

// ProgressName is the name of the data chunk that reports a looping tool
// call's progress: its type on the wire is "data-tool-loop-progress".
const ProgressName = "tool-loop-progress"

// ProgressInterval is the least time between two progress chunks of one
// tool call.
const ProgressInterval = 750 * time.Millisecond

// Progress is where a looping tool call stands. Every field but Total,
// ForEach, RateLimit and Upstream is always sent.
type Progress struct {
	ToolCallID  string `json:"toolCallId"`
	ToolName    string `json:"toolName"`
	Page        int    `json:"page"`        // pages fetched so far (of the current fan-out value)
	PagesMax    int    `json:"pagesMax"`    // the pages budget per collection
	Items       int    `json:"items"`       // items gathered so far, over all values
	Requests    int    `json:"requests"`    // upstream requests so far, retries included
	RequestsMax int    `json:"requestsMax"` // the requests budget of the call
	ElapsedMs   int64  `json:"elapsedMs"`   // since the call started
	// Total is the item count the server reported for the collection
	// being walked; omitted when it reported none.
	Total   int              `json:"total,omitempty"`
	ForEach *ForEachProgress `json:"forEach,omitempty"`
	// InFlight counts the call's upstream requests sent (or waiting for
	// their slot) and not yet answered: a walk fetching pages ahead has
	// several.
	InFlight int `json:"inFlight"`
	// RateLimit is set while a request of the call waits for its
	// provider's rate limit.
	RateLimit *RateLimitWait `json:"rateLimit,omitempty"`
	// Upstream is the progress the upstream reported of the request under
	// way (an MCP server's notifications/progress), relayed as it came;
	// omitted on the reports after a page.
	Upstream *UpstreamProgress `json:"upstream,omitempty"`
}

// RateLimitWait is a request waiting for its provider's rate limit: the
// progress line's "waiting for acme's rate limit (2 s)".
type RateLimitWait struct {
	Provider string `json:"provider"`
	// Cause is "rate" (the configured or learned pace), "paused" (a
	// Retry-After, or a quota spent until its reset) or "concurrency"
	// (every slot taken).
	Cause string `json:"cause"`
	// WaitMs is how much longer the wait is expected to last; omitted
	// when it cannot be told (a concurrency slot comes back when a
	// request ends).
	WaitMs int64 `json:"waitMs,omitempty"`
}

// UpstreamProgress is one progress report of the upstream, as it gave it.
type UpstreamProgress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"` // omitted when unknown
	Message  string  `json:"message,omitempty"`
}

// ForEachProgress is where a _for_each fan-out stands.
type ForEachProgress struct {
	Key   string `json:"key"`   // the argument the values go into
	Value any    `json:"value"` // the value being fetched (a JSON string or number)
	Index int    `json:"index"` // its position among the values, from 0
	Total int    `json:"total"` // how many values there are
}

// Chunk is the progress as a data chunk whose ID is the tool call's, so
// that each one replaces the previous in the client's message.
func (p Progress) Chunk() Data {
	return Data{Name: ProgressName, ID: p.ToolCallID, Data: p}
}

// Throttle lets at most one event per interval through for each key (a
// tool call id), so that a walk reporting every page does not flood the
// stream. It is safe for concurrent use: the parallel tool calls of a step
// share one.
//
// It remembers one time per key; call Forget when a call ends, or use one
// Throttle per run and drop it with the run.
type Throttle struct {
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	last map[string]time.Time
}

// ThrottleOptions configures a [Throttle]. The zero value means every
// default.
type ThrottleOptions struct {
	// Interval is the least time between two events of one key. Zero means
	// ProgressInterval.
	Interval time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// NewThrottle returns a Throttle that has let nothing through yet.
func NewThrottle(opts ThrottleOptions) *Throttle {
	t := &Throttle{interval: opts.Interval, now: opts.Now, last: map[string]time.Time{}}
	if t.interval <= 0 {
		t.interval = ProgressInterval
	}
	if t.now == nil {
		t.now = time.Now
	}
	return t
}

// Allow reports whether an event for key may go now: true for the key's
// first event and for any event at least the interval after the last one
// allowed; when it answers true it counts the event as sent.
func (t *Throttle) Allow(key string) bool {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if last, ok := t.last[key]; ok && now.Sub(last) < t.interval {
		return false
	}
	t.last[key] = now
	return true
}

// Forget drops what the Throttle knows of key.
func (t *Throttle) Forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.last, key)
}

// ProgressOf is the progress a data-tool-loop-progress chunk carries —
// as Progress.Chunk made it, or as ParseChunk read it off the wire — and
// false for any other data chunk, or one whose data is not a progress.
func ProgressOf(d Data) (Progress, bool) {
	if d.Name != ProgressName {
		return Progress{}, false
	}
	if p, ok := d.Data.(Progress); ok {
		return p, true
	}
	b, err := json.Marshal(d.Data)
	if err != nil {
		return Progress{}, false
	}
	var p Progress
	if json.Unmarshal(b, &p) != nil {
		return Progress{}, false
	}
	return p, true
}
