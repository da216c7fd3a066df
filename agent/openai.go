package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"
	"github.com/trawl-dev/trawl/tools"
)

// OpenAIOptions configures an OpenAI model. Every field is optional.
type OpenAIOptions struct {
	// BaseURL is the API root of any OpenAI-compatible server, the part
	// before /chat/completions: https://api.openai.com/v1 (the zero
	// value), http://localhost:11434/v1 (Ollama), http://localhost:8000/v1
	// (vLLM), http://localhost:8080/v1 (llama.cpp server),
	// http://localhost:1234/v1 (LM Studio), or an Azure OpenAI resource.
	// For Azure, https://<resource>.openai.azure.com/openai/v1 is the
	// OpenAI-compatible endpoint; the bare https://<resource>.openai.azure.com
	// selects the deployment-style API, where Model names the deployment
	// and an api-version query parameter on BaseURL overrides the default
	// (2024-10-21).
	BaseURL string
	// APIKey is sent as a bearer token (the api-key header for Azure
	// deployments). Empty: no credential is sent, as local servers expect.
	// It never appears in an error.
	APIKey string
	// NoPictures: the model takes text only, so the pictures tool calls
	// return are not sent (their results still name them). Zero: they
	// follow the step's tool results as image_url parts.
	NoPictures bool
	// Scrub masks secrets in the text of every error (the server's
	// message, a connection error): a deployment passes its scrubber,
	// which holds APIKey among every other secret. Nil: a scrubber of
	// APIKey alone. The model's output is the runner's to scrub
	// (RunnerOptions.Scrub), whatever the model.
	Scrub *tools.Scrubber
	// Model is the model when a request names none.
	Model string
	// HTTPClient sends the requests. Nil: a client without an overall
	// timeout; a Timeout here would cut long answers mid-stream, so bound
	// a step with its context instead.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of a step that failed before its
	// first event: 429 and 5xx answers (also 408 and 409), connection
	// errors, and streams that broke before any output. Zero: 3. Negative:
	// no retries.
	MaxRetries int
	// Backoff is the wait before the first retry; it doubles for each
	// further retry, plus up to a quarter of random jitter. A Retry-After
	// (or retry-after-ms) header on the answer replaces it. Zero: 500ms.
	Backoff time.Duration
	// MaxRetryWait is the longest wait a retry may need: a server asking
	// for a longer one gets its error surfaced at once. Zero: 30s.
	MaxRetryWait time.Duration
	// StreamUsage says whether to ask for a final usage chunk
	// (stream_options.include_usage), which calibrates the context
	// budget's token estimate. The zero value asks every server except
	// Azure deployment URLs of an api-version older than the field; a
	// server that rejects the field (a 400 naming it) is asked again at
	// once without it, and never with it again.
	StreamUsage StreamUsage
	// Now reads the time, to turn an HTTP-date Retry-After into a wait.
	// Nil: time.Now.
	Now func() time.Time
	// Sleep waits for d or until ctx is done, returning ctx's error in the
	// second case. Nil: a timer. Tests inject one that does not sleep.
	Sleep func(ctx context.Context, d time.Duration) error
}

// StreamUsage selects whether an OpenAI model asks for token usage.
type StreamUsage int

const (
	// StreamUsageAuto asks, unless the server is known not to take it or
	// rejected it once.
	StreamUsageAuto StreamUsage = iota
	// StreamUsageOn always asks (vLLM, Ollama, LM Studio accept it).
	StreamUsageOn
	// StreamUsageOff never asks.
	StreamUsageOff
)

// ErrStreamIncomplete reports a model stream that ended without a finish
// reason: the connection closed early, so the answer may be cut short.
var ErrStreamIncomplete = errors.New("model stream ended without a finish reason")

// OpenAIError is a failed step of an OpenAI model: an error answer, a
// connection error, or an error inside the stream. Its text never holds
// the API key.
type OpenAIError struct {
	// StatusCode is the HTTP status of an error answer; 0 when no answer
	// arrived (a connection error) or the stream failed after a 200.
	StatusCode int
	// Type and Code are the server's error type and code, when it sent
	// them (e.g. "rate_limit_exceeded", "insufficient_quota").
	Type, Code string
	// Attempts counts the requests made, retries included.
	Attempts int
	// Message is the server's message or the connection error, scrubbed
	// (OpenAIOptions.Scrub) and with long bodies cut.
	Message string

	err error // the cause, when its text holds no secret
}

func (e *OpenAIError) Error() string {
	var b strings.Builder
	b.WriteString("openai: ")
	if e.StatusCode != 0 {
		b.WriteString(strconv.Itoa(e.StatusCode))
		if t := http.StatusText(e.StatusCode); t != "" {
			b.WriteString(" " + t)
		}
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	if e.Code != "" {
		b.WriteString(" (" + e.Code + ")")
	}
	if e.Attempts > 1 {
		fmt.Fprintf(&b, " [after %d attempts]", e.Attempts)
	}
	return b.String()
}

// Unwrap returns the cause: go-openai's *openai.APIError or
// *openai.RequestError, a connection error, or ErrStreamIncomplete. It is
// nil when the cause's text held a secret.
func (e *OpenAIError) Unwrap() error { return e.err }

// OpenAI is a Model served by any OpenAI-compatible chat completions API,
// through go-openai's streaming client. It is safe for concurrent use.
//
// Stream's sequence, when it ends without an error, ends with exactly one
// EventFinish and nothing after it; when it ends with an error, no
// EventFinish came before. An EventToolCallStart (with the call's id and
// name) precedes every EventToolCallDelta of its call; calls are indexed
// 0, 1, … in the order they start, whatever indices the server used. A
// call whose arguments stayed empty gets "{}". The finish reason is the
// server's, except that a step with tool calls finishes with "tool_calls"
// where a server said "stop".
//
// A request with ToolChoiceRequired sends tool_choice "required"; a
// server that rejects the field (a 400 or 422 naming it) is asked again at
// once without it, and never with it again — the runner then checks the
// answer itself (see Runner.step).
//
// A failed request is retried (see OpenAIOptions.MaxRetries) only while
// nothing has been yielded; once output has started an error ends the
// sequence, since a retry would repeat text the consumer already showed.
type OpenAI struct {
	client       *openai.Client
	model        string
	scrub        *tools.Scrubber
	includeUsage bool
	noPictures   bool
	usageAuto    bool        // includeUsage may be dropped when a server rejects it
	usageOff     atomic.Bool // the server rejected stream_options
	choiceOff    atomic.Bool // the server rejected tool_choice "required"
	maxRetries   int
	backoff      time.Duration
	maxWait      time.Duration
	now          func() time.Time
	sleep        func(ctx context.Context, d time.Duration) error
	configErr    error
}

// NewOpenAI returns an OpenAI model. A malformed BaseURL is reported by
// every Stream.
func NewOpenAI(opt OpenAIOptions) *OpenAI {
	o := &OpenAI{
		noPictures: opt.NoPictures,
		model:      opt.Model,
		scrub:      opt.Scrub,
		maxRetries: opt.MaxRetries,
		backoff:    opt.Backoff,
		maxWait:    opt.MaxRetryWait,
		now:        opt.Now,
		sleep:      opt.Sleep,
	}
	if o.maxRetries == 0 {
		o.maxRetries = 3
	} else if o.maxRetries < 0 {
		o.maxRetries = 0
	}
	if o.backoff <= 0 {
		o.backoff = 500 * time.Millisecond
	}
	if o.maxWait <= 0 {
		o.maxWait = 30 * time.Second
	}
	if o.now == nil {
		o.now = time.Now
	}
	if o.scrub == nil {
		o.scrub = tools.NewScrubber(opt.APIKey)
	}
	if o.sleep == nil {
		o.sleep = oaiSleep
	}
	hc := opt.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	cfg, usageAuto, err := oaiConfig(opt.BaseURL, opt.APIKey)
	if err != nil {
		o.configErr = &OpenAIError{Message: o.scrub.String(err.Error())}
	}
	cfg.HTTPClient = oaiDoer{hc}
	o.client = openai.NewClientWithConfig(cfg)
	switch opt.StreamUsage {
	case StreamUsageOn:
		o.includeUsage = true
	case StreamUsageAuto:
		o.includeUsage, o.usageAuto = usageAuto, true
	}
	return o
}

// oaiAzureAPIVersion is the api-version for Azure deployment-style URLs:
// the first GA version with tool calls and stream_options.
const oaiAzureAPIVersion = "2024-10-21"

// oaiConfig builds go-openai's config for baseURL and says whether the
// server is known to accept stream_options.
func oaiConfig(baseURL, key string) (openai.ClientConfig, bool, error) {
	if baseURL == "" {
		baseURL = "https://api.openai.com/v1"
	}
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = strings.TrimRight(baseURL, "/")
	u, err := url.Parse(baseURL)
	if err != nil {
		return cfg, false, fmt.Errorf("base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return cfg, false, fmt.Errorf("base URL %q: want http(s)://host/…", baseURL)
	}
	host := strings.ToLower(u.Hostname())
	switch {
	case host == "api.openai.com":
		return cfg, true, nil
	case strings.HasSuffix(host, ".openai.azure.com") || strings.HasSuffix(host, ".cognitiveservices.azure.com"):
		if strings.Contains(u.Path, "/openai/v1") {
			return cfg, true, nil // the OpenAI-compatible v1 endpoint takes a bearer key
		}
		version := u.Query().Get("api-version")
		if version == "" {
			version = oaiAzureAPIVersion
		}
		u.RawQuery = ""
		cfg = openai.DefaultAzureConfig(key, strings.TrimRight(u.String(), "/"))
		cfg.APIVersion = version
		// The configured model name is the deployment's name, verbatim.
		cfg.AzureModelMapperFunc = func(model string) string { return model }
		// stream_options arrived in 2024-09-01-preview.
		return cfg, version >= "2024-09-01", nil
	}
	return cfg, true, nil // a server that rejects it is asked again without
}

// Stream implements Model.
func (o *OpenAI) Stream(ctx context.Context, req ModelRequest) iter.Seq2[ModelEvent, error] {
	return func(yield func(ModelEvent, error) bool) {
		if o.configErr != nil {
			yield(ModelEvent{}, o.configErr)
			return
		}
		creq, err := o.chatRequest(req)
		if err != nil {
			yield(ModelEvent{}, err)
			return
		}
		if o.usageOff.Load() {
			creq.StreamOptions = nil
		}
		if o.choiceOff.Load() {
			creq.ToolChoice = nil
		}
		for attempt := 1; ; attempt++ {
			yielded, stopped, fail := o.attempt(ctx, creq, yield)
			if fail == nil || stopped {
				return
			}
			if !yielded && creq.StreamOptions != nil && o.usageAuto && oaiRejectsUsage(fail.err) {
				o.usageOff.Store(true)
				creq.StreamOptions = nil
				attempt--
				continue
			}
			if !yielded && creq.ToolChoice != nil && oaiRejectsToolChoice(fail.err) {
				// Asked again at once without it, and never with it again:
				// the runner checks that a retrieval-only step called.
				o.choiceOff.Store(true)
				creq.ToolChoice = nil
				attempt--
				continue
			}
			if ctx.Err() != nil {
				yield(ModelEvent{}, fmt.Errorf("openai: %w", ctx.Err()))
				return
			}
			fail.err.Attempts = attempt
			wait, retry := o.retryWait(ctx, fail, attempt)
			if yielded || !retry {
				yield(ModelEvent{}, fail.err)
				return
			}
			if err := o.sleep(ctx, wait); err != nil {
				yield(ModelEvent{}, fmt.Errorf("openai: waiting to retry: %w", err))
				return
			}
		}
	}
}

// oaiRejectsUsage reports an error answer that refuses the
// stream_options field.
func oaiRejectsUsage(e *OpenAIError) bool {
	if e.StatusCode != http.StatusBadRequest && e.StatusCode != http.StatusUnprocessableEntity {
		return false
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "stream_options") || strings.Contains(m, "include_usage")
}

// oaiRejectsToolChoice reports an error answer that refuses the
// tool_choice field (or its value "required").
func oaiRejectsToolChoice(e *OpenAIError) bool {
	if e.StatusCode != http.StatusBadRequest && e.StatusCode != http.StatusUnprocessableEntity {
		return false
	}
	m := strings.ToLower(e.Message)
	return strings.Contains(m, "tool_choice") || strings.Contains(m, "tool choice")
}

// oaiFailure is one failed attempt and what decides its retry.
type oaiFailure struct {
	err       *OpenAIError
	retryable bool
	header    http.Header // the error answer's headers, if any
}

// retryWait says whether fail may be retried after attempt, and after how
// long.
func (o *OpenAI) retryWait(ctx context.Context, fail *oaiFailure, attempt int) (time.Duration, bool) {
	if !fail.retryable || attempt > o.maxRetries {
		return 0, false
	}
	wait, ok := oaiRetryAfter(fail.header, o.now())
	switch {
	case ok && wait > o.maxWait:
		return 0, false // the server wants a longer pause than a step should take
	case !ok:
		wait = o.backoff
		for range attempt - 1 {
			wait = min(2*wait, o.maxWait)
		}
		wait = min(wait+mrand.N(wait/4+1), o.maxWait)
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
		return 0, false // the step would end while waiting: report the cause instead
	}
	return wait, true
}

// oaiRetryAfter reads retry-after-ms (OpenAI, Azure) or Retry-After
// (seconds or an HTTP date).
func oaiRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if d, ok := oaiSeconds(h.Get("Retry-After-Ms"), time.Millisecond); ok {
		return d, true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if d, ok := oaiSeconds(v, time.Second); ok {
		return d, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// oaiSeconds parses a non-negative count of unit; huge counts saturate.
func oaiSeconds(v string, unit time.Duration) (time.Duration, bool) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(n) || n < 0 {
		return 0, false
	}
	if n >= float64(math.MaxInt64)/float64(unit) {
		return math.MaxInt64, true
	}
	return time.Duration(n * float64(unit)), true
}

// attempt makes one request and yields its events. It reports whether
// anything was yielded, whether the consumer stopped, and the failure.
func (o *OpenAI) attempt(ctx context.Context, creq openai.ChatCompletionRequest, yield func(ModelEvent, error) bool) (yielded, stopped bool, fail *oaiFailure) {
	ex := &oaiExchange{}
	stream, err := o.client.CreateChatCompletionStream(context.WithValue(ctx, oaiExchangeKey{}, ex), creq)
	if err != nil {
		return false, false, o.requestFailure(err, ex)
	}
	defer stream.Close()

	dec := oaiDecoder{}
	emit := func(evs []ModelEvent) bool {
		for _, ev := range evs {
			yielded = true
			if !yield(ev, nil) {
				return false
			}
		}
		return true
	}
	for {
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			evs, err := dec.end()
			if err != nil {
				return yielded, false, &oaiFailure{err: &OpenAIError{Message: err.Error(), err: err}, retryable: true}
			}
			return yielded, !emit(evs), nil
		}
		if err != nil {
			return yielded, false, o.streamFailure(err)
		}
		var c oaiChunk
		if err := json.Unmarshal(raw, &c); err != nil {
			return yielded, false, &oaiFailure{err: &OpenAIError{Message: "malformed stream chunk: " + o.scrub.String(err.Error())}}
		}
		if !emit(dec.feed(&c)) {
			return yielded, true, nil
		}
	}
}

// requestFailure describes an error of CreateChatCompletionStream: an
// error answer, a connection error, or a request that could not be built.
func (o *OpenAI) requestFailure(err error, ex *oaiExchange) *oaiFailure {
	f := &oaiFailure{header: ex.header}
	var apiErr *openai.APIError
	var reqErr *openai.RequestError
	switch {
	case errors.As(err, &apiErr):
		f.err = &OpenAIError{StatusCode: apiErr.HTTPStatusCode, Type: apiErr.Type, Code: oaiCode(apiErr.Code), Message: o.scrub.String(apiErr.Message)}
		f.retryable = oaiRetryableStatus(apiErr.HTTPStatusCode, ex.header) && f.err.Code != "insufficient_quota"
	case errors.As(err, &reqErr):
		f.err = &OpenAIError{StatusCode: reqErr.HTTPStatusCode, Message: o.scrub.String(oaiSnippet(reqErr.Body))}
		f.retryable = oaiRetryableStatus(reqErr.HTTPStatusCode, ex.header)
	case ex.called:
		// The HTTP client failed: no answer (refused, reset, timeout).
		f.err = &OpenAIError{Message: o.scrub.String(err.Error())}
		f.retryable = true
	default:
		f.err = &OpenAIError{Message: "building the request: " + o.scrub.String(err.Error())}
	}
	if f.err.Message == "" {
		f.err.Message = "no error message"
	}
	if o.scrub.String(err.Error()) == err.Error() {
		f.err.err = err
	}
	return f
}

// streamFailure describes an error met while reading a 200 answer: an
// error event in the stream, or a broken connection.
func (o *OpenAI) streamFailure(err error) *oaiFailure {
	f := &oaiFailure{err: &OpenAIError{Message: o.scrub.String(err.Error())}}
	var apiErr *openai.APIError
	if errors.As(err, &apiErr) {
		f.err.Type, f.err.Code, f.err.Message = apiErr.Type, oaiCode(apiErr.Code), o.scrub.String(apiErr.Message)
		f.retryable = apiErr.Type == "server_error" || apiErr.Type == "overloaded_error"
	} else {
		f.retryable = !errors.Is(err, openai.ErrTooManyEmptyStreamMessages)
		f.err.Message = "reading the stream: " + f.err.Message
	}
	if o.scrub.String(err.Error()) == err.Error() {
		f.err.err = err
	}
	return f
}

// oaiRetryableStatus follows OpenAI's own clients: an x-should-retry
// header decides; otherwise 408, 409, 429 and 5xx are retried.
func oaiRetryableStatus(code int, h http.Header) bool {
	switch h.Get("X-Should-Retry") {
	case "true":
		return true
	case "false":
		return false
	}
	return code == http.StatusRequestTimeout || code == http.StatusConflict ||
		code == http.StatusTooManyRequests || code >= 500
}

func oaiCode(code any) string {
	switch c := code.(type) {
	case nil:
		return ""
	case string:
		return c
	default:
		return fmt.Sprint(c)
	}
}

// oaiSnippet is the start of an error body, on one line.
func oaiSnippet(body []byte) string {
	const limit = 300
	s := strings.Join(strings.Fields(string(body)), " ")
	if len(s) > limit {
		s = strings.ToValidUTF8(s[:limit], "") + "…"
	}
	return s
}

func oaiSleep(ctx context.Context, d time.Duration) error {
	return tools.SystemClock().Sleep(ctx, d)
}

// oaiExchange records what the HTTP client saw for one attempt, since
// go-openai's errors carry neither the headers (Retry-After) nor whether
// the request was sent at all.
type oaiExchange struct {
	called bool
	header http.Header
}

type oaiExchangeKey struct{}

// oaiDoer is the go-openai HTTP client: it records each answer's headers
// into the attempt's oaiExchange.
type oaiDoer struct{ c *http.Client }

func (d oaiDoer) Do(req *http.Request) (*http.Response, error) {
	resp, err := d.c.Do(req)
	if ex, ok := req.Context().Value(oaiExchangeKey{}).(*oaiExchange); ok {
		ex.called = true
		if resp != nil {
			ex.header = resp.Header
		}
	}
	return resp, err
}

// chatRequest maps a ModelRequest to go-openai's request.
func (o *OpenAI) chatRequest(req ModelRequest) (openai.ChatCompletionRequest, error) {
	creq := openai.ChatCompletionRequest{Model: req.Model, Stream: true}
	if creq.Model == "" {
		creq.Model = o.model
	}
	if o.includeUsage {
		creq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	creq.Messages = make([]openai.ChatCompletionMessage, 0, len(req.Messages))
	var pictures []openai.ChatMessagePart // of the tool messages since the last other message
	for i, m := range req.Messages {
		cm := openai.ChatCompletionMessage{Role: string(m.Role), Content: m.Content}
		switch m.Role {
		case RoleSystem, RoleUser:
		case RoleAssistant:
			for _, c := range m.ToolCalls {
				args := c.Arguments
				if strings.TrimSpace(args) == "" {
					args = "{}" // servers that re-parse the history reject ""
				}
				cm.ToolCalls = append(cm.ToolCalls, openai.ToolCall{
					ID: c.ID, Type: openai.ToolTypeFunction,
					Function: openai.FunctionCall{Name: c.Name, Arguments: args},
				})
			}
		case RoleTool:
			if m.ToolCallID == "" {
				return creq, fmt.Errorf("openai: message %d: a tool message needs the id of the call it answers", i)
			}
			cm.ToolCallID = m.ToolCallID
			if !o.noPictures {
				pictures = append(pictures, imageParts(m)...)
			}
		default:
			return creq, fmt.Errorf("openai: message %d: unknown role %q", i, m.Role)
		}
		creq.Messages = append(creq.Messages, cm)
		if len(pictures) > 0 && (i+1 == len(req.Messages) || req.Messages[i+1].Role != RoleTool) {
			// A tool message holds text only: the pictures the calls
			// returned follow the step's results, in a user message.
			creq.Messages = append(creq.Messages, openai.ChatCompletionMessage{Role: string(RoleUser),
				MultiContent: append([]openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: picturesIntro}}, pictures...)})
			pictures = nil
		}
	}
	for _, t := range req.Tools {
		params := t.Parameters
		if len(params) == 0 || string(params) == "null" {
			params = json.RawMessage(`{"type":"object","properties":{}}`)
		} else if !json.Valid(params) {
			return creq, fmt.Errorf("openai: tool %q: parameters are not valid JSON", t.Name)
		}
		creq.Tools = append(creq.Tools, openai.Tool{
			Type:     openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{Name: t.Name, Description: t.Description, Parameters: params},
		})
	}
	if req.ToolChoice == ToolChoiceRequired && len(creq.Tools) > 0 {
		creq.ToolChoice = ToolChoiceRequired
	}
	return creq, nil
}

// picturesIntro introduces the pictures of a step's tool results.
const picturesIntro = "The pictures the tool calls above returned (their results name each as attached), in order:"

// imageParts are a tool message's pictures as image_url parts (data URLs),
// each after a line naming the call it came from.
func imageParts(m Message) []openai.ChatMessagePart {
	var out []openai.ChatMessagePart
	for _, img := range m.Images {
		out = append(out,
			openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: "From call " + m.ToolCallID + " (" + img.MIMEType + "):"},
			openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{
				URL: "data:" + img.MIMEType + ";base64," + base64.StdEncoding.EncodeToString(img.Data)}})
	}
	return out
}
