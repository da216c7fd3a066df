package tools

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProviderAuth is how credentials are put on a provider's requests:
// Org is the organization-level credential from config; Runtime says how
// a per-user runtime credential (Request.Credential) is applied. A
// runtime credential, when present, replaces the organization one.
type ProviderAuth struct {
	Org     AuthSpec
	Runtime AuthSpec // zero Type with a runtime credential means bearer
}

// InvokerOptions configures an Invoker. The zero value is usable.
type InvokerOptions struct {
	// Client sends the requests. Zero: a client of its own with pooled
	// keep-alive connections and no overall timeout (Timeout applies).
	Client *http.Client
	// Timeout bounds one request, response body included. Zero: 30s.
	Timeout time.Duration
	// MaxResponseBytes caps one response body; more is cut and the
	// Response says Truncated. Zero: 24 MiB.
	MaxResponseBytes int64
	// Log records every upstream call. Nil: nothing is recorded.
	Log *ActivityLog
	// UserAgent is sent on every request. Zero: "trawl".
	UserAgent string
	// MaxInFlightBytes caps the bytes held by upstream bodies being read
	// at once, across every call; a call waits for room, bounded by its
	// context. Zero: 8 × MaxResponseBytes.
	MaxInFlightBytes int64
	// Secrets are values besides the providers' credentials that no byte
	// coming back from an upstream may hold (the model's API key, the
	// admin key). More can be added with AddSecrets.
	Secrets []string
	// Limiter paces every request by its provider's limits (SetRateLimit)
	// and what the upstreams report. Nil: requests are not paced.
	Limiter RateLimiter
	// ScopeKey keys the fingerprints of runtime credentials the limiter
	// sees (HMAC-SHA256), so its store's reader cannot test guessed
	// tokens. Nil: a fixed key.
	ScopeKey []byte
}

// Invoker turns tool calls into upstream HTTP requests, injecting
// credentials at request time. It is the credential boundary: it follows
// redirects only within the request's origin (see RedirectSafe), refuses
// a call whose provider needs the caller's credential when there is none,
// and masks every secret it holds — every provider's credential, the
// Secrets it was given, the call's runtime credential — in every byte it
// returns: bodies, kept headers, error text. It is safe for concurrent
// use.
type Invoker struct {
	client  *http.Client
	timeout time.Duration
	max     int64
	log     *ActivityLog
	ua      string
	bodies  *bodyReader
	limiter RateLimiter
	fpKey   []byte

	mu      sync.RWMutex
	auth    map[string]ProviderAuth // by provider id
	limits  map[string]RateLimit    // by provider id
	secrets []string                // besides the providers' credentials
	scrub   *Scrubber               // nil: rebuild from auth and secrets
	perCall map[string]*Scrubber    // scrub.With(a runtime credential), bounded
	// oauth are the client-credentials tokens of oauth2 providers, and
	// oauthTokens each one's current and previous token (scrubbed).
	oauth       map[string]*orgToken
	oauthTokens map[string][2]string
}

// maxPerCallScrubbers bounds the invoker's cache of per-credential
// scrubbers; when full it starts afresh.
const maxPerCallScrubbers = 256

// NewInvoker returns an Invoker with opt's settings.
func NewInvoker(opt InvokerOptions) *Invoker {
	inv := &Invoker{
		client:  opt.Client,
		timeout: opt.Timeout,
		max:     opt.MaxResponseBytes,
		log:     opt.Log,
		ua:      opt.UserAgent,
		limiter: opt.Limiter,
		fpKey:   opt.ScopeKey,
		auth:    map[string]ProviderAuth{},
		limits:  map[string]RateLimit{},
		secrets: slices.Clone(opt.Secrets),
	}
	if inv.client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConnsPerHost = 16
		inv.client = &http.Client{Transport: tr}
	}
	inv.client = RedirectSafe(inv.client)
	if inv.timeout <= 0 {
		inv.timeout = 30 * time.Second
	}
	if inv.max <= 0 {
		inv.max = 24 << 20
	}
	if inv.ua == "" {
		inv.ua = "trawl"
	}
	total := opt.MaxInFlightBytes
	if total <= 0 {
		total = 8 * inv.max
	}
	inv.bodies = newBodyReader(inv.max, total)
	return inv
}

// SetAuth sets how provider's requests are authenticated.
func (inv *Invoker) SetAuth(provider string, a ProviderAuth) {
	inv.mu.Lock()
	inv.auth[provider] = a
	inv.scrub, inv.perCall = nil, nil
	inv.mu.Unlock()
}

// SetRateLimit sets provider's configured limits (see RateLimit); they
// apply when the invoker has a Limiter.
func (inv *Invoker) SetRateLimit(provider string, rl RateLimit) {
	inv.mu.Lock()
	inv.limits[provider] = rl
	inv.mu.Unlock()
}

// limitScope is what a request of provider with the runtime credential
// cred counts against.
func (inv *Invoker) limitScope(provider, cred string) LimitScope {
	inv.mu.RLock()
	rl := inv.limits[provider]
	inv.mu.RUnlock()
	return LimitScope{Provider: provider, Credential: LimitFingerprint(inv.fpKey, cred), Limit: rl}
}

// AddSecrets adds values no byte coming back from an upstream may hold.
func (inv *Invoker) AddSecrets(secrets ...string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	n := len(inv.secrets)
	for _, v := range secrets {
		if !slices.Contains(inv.secrets, v) {
			inv.secrets = append(inv.secrets, v)
		}
	}
	if len(inv.secrets) > n {
		inv.scrub, inv.perCall = nil, nil
	}
}

// Scrubber is the deployment's scrubber: every provider's credential and
// every secret the invoker was given. With runtime credentials it also
// masks those (as they are sent: a basic one's password and base64 form
// too). Scrubbers for runtime credentials are cached.
func (inv *Invoker) Scrubber(runtime ...string) *Scrubber {
	runtime = slices.DeleteFunc(slices.Clone(runtime), func(c string) bool { return c == "" })
	key := strings.Join(runtime, "\x00")
	inv.mu.RLock()
	base, per := inv.scrub, inv.perCall[key]
	inv.mu.RUnlock()
	if base != nil && (key == "" || per != nil) {
		if key == "" {
			return base
		}
		return per
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if inv.scrub == nil {
		all := slices.Clone(inv.secrets)
		for _, a := range inv.auth {
			all = append(all, specSecrets(a.Org)...)
		}
		for _, toks := range inv.oauthTokens {
			all = append(all, toks[0], toks[1])
		}
		inv.scrub = NewScrubber(all...)
	}
	if key == "" {
		return inv.scrub
	}
	if s := inv.perCall[key]; s != nil {
		return s
	}
	if inv.perCall == nil || len(inv.perCall) >= maxPerCallScrubbers {
		inv.perCall = map[string]*Scrubber{}
	}
	var forms []string
	for _, c := range runtime {
		forms = append(forms, runtimeSecrets(c)...)
	}
	s := inv.scrub.With(forms...)
	inv.perCall[key] = s
	return s
}

// specSecrets are the secret values of an organization credential as
// they go on the wire.
func specSecrets(a AuthSpec) []string {
	switch a.Type {
	case AuthBasic:
		if a.Username == "" && a.Password == "" {
			return nil
		}
		return []string{a.Password, a.Username + ":" + a.Password, basicToken(a.Username, a.Password)}
	case AuthBearer, AuthAPIKey:
		return []string{a.Token}
	case AuthOAuth2:
		return oauthSecrets(a.OAuth2)
	}
	return nil
}

// runtimeSecrets are the forms of a runtime credential as it may go on
// the wire: itself, and when it reads as user:password, the password and
// the basic token.
func runtimeSecrets(cred string) []string {
	out := []string{cred}
	if user, pass, ok := strings.Cut(cred, ":"); ok {
		out = append(out, pass, basicToken(user, pass))
	}
	return out
}

func basicToken(user, pass string) string {
	return base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
}

// ArgError is a problem with one argument of a call: the model (or the
// API caller) can fix it.
type ArgError struct {
	Arg string
	Msg string
}

func (e *ArgError) Error() string { return fmt.Sprintf("argument %q: %s", e.Arg, e.Msg) }

// ErrUpstream marks transport failures (no HTTP response at all).
var ErrUpstream = errors.New("upstream unreachable")

// CallError is a transport failure, described without the request URL
// (which may carry credentials) and with every secret masked.
type CallError struct {
	Method, Path string // Path is redacted
	Err          error  // the cause, never containing the URL
	cause        string // safeCause(Err), scrubbed
}

func (e *CallError) Error() string {
	cause := e.cause
	if cause == "" {
		cause = safeCause(e.Err)
	}
	return fmt.Sprintf("%s %s: %s", e.Method, e.Path, cause)
}
func (e *CallError) Unwrap() []error { return []error{ErrUpstream, e.Err} }

// safeCause words a transport error without any URL in it.
func safeCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var op *net.OpError
	if errors.As(err, &op) {
		return op.Op + ": " + safeCause(op.Err)
	}
	msg := err.Error()
	if strings.Contains(msg, "://") {
		return "request failed"
	}
	return msg
}

// Call sends req upstream and returns what the server answered. An HTTP
// error status is a Response, not an error; an error means no response
// (a bad argument, a refusal, a transport failure, a cancelled context).
// Every byte of the Response and of the error's text has been scrubbed.
//
// A provider whose credential is an OAuth 2.0 token gets one more try
// when it answers 401 for an expired token: with the organization's
// client-credentials token fetched anew, or with the user's refreshed
// (WithTokenRefresh).
func (inv *Invoker) Call(ctx context.Context, req Request) (*Response, error) {
	var used string
	resp, err := inv.call(ctx, req, &used)
	if err != nil || resp.Status != http.StatusUnauthorized {
		return resp, err
	}
	cred, retry, err := inv.reauthorize(ctx, req, resp, used)
	if err != nil {
		return nil, scrubError(inv.callScrubber(ctx, req.Credential), err)
	}
	if !retry {
		return resp, nil
	}
	if cred != "" {
		req.Credential = cred
	}
	return inv.call(ctx, req, nil)
}

// call is one try of Call; used gets the credential it sent.
func (inv *Invoker) call(ctx context.Context, req Request, used *string) (*Response, error) {
	hreq, secrets, err := inv.build(ctx, req)
	scrub := inv.callScrubber(ctx, req.Credential)
	if err != nil {
		return nil, scrubError(scrub, err)
	}
	if used != nil && len(secrets) > 0 {
		*used = secrets[0]
	}
	// The wait for the provider's rate limit is bounded by the caller's
	// deadline (the walk's time budget); the request's own timeout starts
	// once it may go.
	var waited time.Duration
	var outcome Outcome // what the upstream answered, for the permit
	if inv.limiter != nil {
		p, err := inv.limiter.Acquire(ctx, inv.limitScope(req.Tool.Provider, req.Credential))
		if err != nil {
			var rle *RateLimitError
			if errors.As(err, &rle) || ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("%s: %w", req.Tool.Provider, err)
		}
		waited = p.Waited()
		defer func() { p.Release(outcome) }()
	}
	if err := LimitGranted(ctx); err != nil {
		return nil, err // given up as it got its slot: not sent
	}
	// hreq's context carries a query credential for same-origin redirects.
	ctx, cancel := context.WithTimeout(hreq.Context(), inv.timeout)
	defer cancel()
	hreq = hreq.WithContext(ctx)

	start := time.Now()
	act := Activity{
		Time: start.UTC(), ThreadID: req.ThreadID, CallID: CallIDFrom(ctx), Tool: req.Tool.ID, Method: hreq.Method,
		// A cursor is kept only as its fingerprint, never in the path.
		Path: RedactURL(hreq.URL, inv.queryAuthNames(req.Tool.Provider), append(secrets, req.Cursor)...),
		Page: req.Page, Cursor: Fingerprint(req.Cursor), Retry: req.Retry,
		Effect: req.EffectOf(), Writes: req.EffectOf().Writes(), WaitMs: waited.Milliseconds(),
	}
	act.Path = scrub.String(act.Path)
	if err := passWriteGate(ctx, req); err != nil {
		return nil, err
	}
	resp, err := inv.client.Do(hreq)
	if err != nil {
		act.DurationMs = time.Since(start).Milliseconds()
		var refused *RefusedError
		if errors.As(err, &refused) {
			act.Error = scrub.String(refused.Msg)
			inv.record(ctx, act)
			return nil, &RefusedError{Code: refused.Code, Msg: act.Error}
		}
		cause := scrub.String(safeCause(err))
		act.Error = cause
		inv.record(ctx, act)
		return nil, &CallError{Method: hreq.Method, Path: act.Path, Err: err, cause: cause}
	}
	defer resp.Body.Close()
	outcome = Outcome{Status: resp.StatusCode, Header: resp.Header}
	body, truncated, err := inv.bodies.read(ctx, resp.Body, resp.ContentLength, scrub)
	out := &Response{Status: resp.StatusCode, Header: scrub.Header(resp.Header), Body: body, Truncated: truncated, Duration: time.Since(start)}
	act.Status, act.Bytes, act.DurationMs = resp.StatusCode, int64(len(body)), out.Duration.Milliseconds()
	if err != nil {
		cause := scrub.String(safeCause(err))
		act.Error = cause
		inv.record(ctx, act)
		return nil, &CallError{Method: hreq.Method, Path: act.Path, Err: err, cause: cause}
	}
	inv.record(ctx, act)
	return out, nil
}

func (inv *Invoker) record(ctx context.Context, a Activity) {
	if inv.log != nil {
		_ = inv.log.Record(ctx, a) // the call's outcome does not depend on the log
	}
}

func (inv *Invoker) providerAuth(provider string) ProviderAuth {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.auth[provider]
}

func (inv *Invoker) queryAuthNames(provider string) []string {
	a := inv.providerAuth(provider)
	var out []string
	for _, s := range []AuthSpec{a.Org, a.Runtime} {
		if s.Query != "" {
			out = append(out, s.Query)
		}
	}
	return out
}

// build makes the HTTP request for req and returns the secrets it holds
// (for redaction).
func (inv *Invoker) build(ctx context.Context, req Request) (*http.Request, []string, error) {
	t := req.Tool
	if t == nil {
		return nil, nil, errors.New("no tool")
	}
	req.Args = withIdempotency(ctx, req)
	method := strings.ToUpper(t.Method)
	if method == "" {
		method = http.MethodGet
	}
	var u *url.URL
	var err error
	if req.URL != "" {
		u, err = resolveNext(t.Origin, req.URL)
		if err != nil {
			return nil, nil, err
		}
		if u.User == nil && OriginOf(t.Origin) != Origin(u) {
			return nil, nil, &RefusedError{Code: CodeForeignURL, Msg: fmt.Sprintf(
				"the continuation URL is on another origin (%s) than the provider's (%s); it was not requested", Origin(u), OriginOf(t.Origin))}
		}
	} else {
		u, err = RequestURL(t, req.Args)
		if err != nil {
			return nil, nil, err
		}
	}
	if u.User != nil {
		return nil, nil, userInfoRefused()
	}
	if a := inv.providerAuth(t.Provider); req.Credential == "" && needsRuntime(a) {
		return nil, nil, NeedsCredential(t)
	}
	var body io.Reader
	header := http.Header{}
	if req.URL == "" {
		b, ctype, err := buildBody(t, req.Args)
		if err != nil {
			return nil, nil, err
		}
		if b != nil {
			body = bytes.NewReader(b)
			header.Set("Content-Type", ctype)
		}
		for _, p := range t.Params {
			if p.In != InHeader {
				continue
			}
			if v, ok := req.Args[p.Name]; ok && v != nil {
				header.Set(p.WireName(), scalarString(v))
			}
		}
	}
	hreq, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, nil, fmt.Errorf("building request for %s: %w", t.ID, err)
	}
	for k, v := range header {
		hreq.Header[k] = v
	}
	hreq.Header.Set("User-Agent", inv.ua)
	hreq.Header.Set("Accept", "application/json")
	secrets, query, err := inv.authorize(ctx, hreq, t.Provider, req.Credential)
	if err != nil {
		return nil, nil, err
	}
	if query != "" {
		// A same-origin redirect gets the query credential back.
		hreq = hreq.WithContext(withQueryCredential(hreq.Context(), query, secrets[0]))
	}
	return hreq, secrets, nil
}

// needsRuntime reports whether a provider's calls need the caller's own
// credential: it takes runtime credentials and has no organization one.
func needsRuntime(a ProviderAuth) bool {
	if a.Org.Type == AuthOAuth2 && a.Org.Flow == FlowClientCredentials {
		return false
	}
	switch a.Runtime.Type {
	case "", AuthNone:
		return false
	}
	return !hasOrg(a.Org)
}

// authorize puts the credential on hreq and returns the secret values
// and, for a credential sent in the query, the parameter's name.
func (inv *Invoker) authorize(ctx context.Context, hreq *http.Request, provider, runtime string) (secrets []string, query string, err error) {
	a := inv.providerAuth(provider)
	spec, secret := a.Org, a.Org.Token
	if runtime != "" {
		spec, secret = a.Runtime, runtime
		if spec.Type == "" {
			spec.Type = "bearer"
		}
	} else if spec.Type == AuthOAuth2 {
		if secret, err = inv.orgOAuthToken(ctx, provider, ""); err != nil {
			return nil, "", err
		}
	}
	if spec.Type == AuthOAuth2 {
		spec.Type = AuthBearer // an OAuth access token goes as a bearer token
	}
	switch spec.Type {
	case "", "none":
		return nil, "", nil
	case "bearer":
		if secret == "" {
			return nil, "", nil
		}
		hreq.Header.Set("Authorization", "Bearer "+secret)
		return []string{secret}, "", nil
	case "api_key":
		if secret == "" {
			return nil, "", nil
		}
		switch {
		case spec.Query != "":
			q := hreq.URL.Query()
			q.Set(spec.Query, secret)
			hreq.URL.RawQuery = q.Encode()
			return []string{secret}, spec.Query, nil
		case spec.Header != "":
			hreq.Header.Set(spec.Header, secret)
		default:
			hreq.Header.Set("X-Api-Key", secret)
		}
		return []string{secret}, "", nil
	case "basic":
		user, pass := spec.Username, spec.Password
		if runtime != "" {
			user, pass, _ = strings.Cut(runtime, ":")
		}
		hreq.SetBasicAuth(user, pass)
		return []string{pass, basicToken(user, pass)}, "", nil
	default:
		return nil, "", fmt.Errorf("provider %q: unknown auth type %q", provider, spec.Type)
	}
}

// resolveNext resolves a continuation URL handed back by the server
// against the tool's origin.
func resolveNext(origin, next string) (*url.URL, error) {
	base, err := url.Parse(origin)
	if err != nil {
		return nil, fmt.Errorf("origin: %w", err)
	}
	ref, err := url.Parse(next)
	if err != nil {
		return nil, &ArgError{Arg: "next", Msg: "the server's next URL does not parse"}
	}
	return base.ResolveReference(ref), nil
}

// RequestURL is the URL a call of t with args requests: the origin, the
// path with its parameters filled in (escaped), and the query parameters
// (arrays repeated, objects as name[key]). An *ArgError names a path
// parameter that is missing or empty. The invoker sends it; pagination
// resolves a server's relative next links against it.
func RequestURL(t *Tool, args map[string]any) (*url.URL, error) {
	path := t.Path
	q := url.Values{}
	for _, p := range t.Params {
		v, ok := args[p.Name]
		if !ok || v == nil {
			if p.Required && p.In == InPath {
				return nil, &ArgError{Arg: p.Name, Msg: "is required"}
			}
			continue
		}
		switch p.In {
		case InPath:
			s := scalarString(v)
			if s == "" {
				return nil, &ArgError{Arg: p.Name, Msg: "must not be empty"}
			}
			path = strings.ReplaceAll(path, "{"+p.WireName()+"}", url.PathEscape(s))
		case InQuery:
			addQuery(q, p.WireName(), v)
		}
	}
	if t.OpenArgs == InQuery {
		for _, k := range t.Undeclared(args) {
			if v := args[k]; v != nil {
				addQuery(q, k, v)
			}
		}
	}
	if i := strings.IndexByte(path, '{'); i >= 0 {
		name := path[i+1:]
		if j := strings.IndexByte(name, '}'); j >= 0 {
			name = name[:j]
		}
		return nil, &ArgError{Arg: name, Msg: "is required (path parameter)"}
	}
	base := strings.TrimRight(t.Origin, "/")
	u, err := url.Parse(base + path)
	if err != nil {
		return nil, fmt.Errorf("tool %s: bad URL: %w", t.ID, err)
	}
	if len(q) > 0 {
		merged := u.Query()
		for k, vs := range q {
			merged[k] = append(merged[k], vs...)
		}
		u.RawQuery = merged.Encode()
	}
	return u, nil
}

// addQuery encodes v as query parameter name: arrays repeat the key
// (form style, exploded), objects use deepObject style name[key]=value.
func addQuery(q url.Values, name string, v any) {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			q.Add(name, scalarString(e))
		}
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			addQuery(q, name+"["+k+"]", x[k])
		}
	default:
		q.Add(name, scalarString(v))
	}
}

// buildBody encodes the body arguments as the tool's content type:
// JSON (the default), form-urlencoded (arrays repeat the key, objects use
// name[key]) or multipart form fields.
func buildBody(t *Tool, args map[string]any) ([]byte, string, error) {
	var whole any
	obj := map[string]any{}
	hasBody := false
	for _, p := range t.Params {
		if p.In != InBody {
			continue
		}
		v, ok := args[p.Name]
		if !ok {
			continue
		}
		hasBody = true
		if p.Wire == "" && p.Name == "body" {
			whole = v
			continue
		}
		obj[p.WireName()] = v
	}
	if t.OpenArgs == InBody {
		// Arguments the body admits beyond its properties go as they are.
		for _, k := range t.Undeclared(args) {
			if _, taken := obj[k]; !taken {
				obj[k], hasBody = args[k], true
			}
		}
	}
	if !hasBody {
		return nil, "", nil
	}
	if whole != nil {
		if m, ok := whole.(map[string]any); ok {
			for k, v := range obj {
				m[k] = v
			}
			obj = m
		} else if len(obj) > 0 {
			return nil, "", &ArgError{Arg: "body", Msg: "must be an object when other body arguments are given"}
		}
	}
	mediaType, _, _ := mime.ParseMediaType(t.ContentType)
	switch mediaType {
	case "application/x-www-form-urlencoded", "multipart/form-data":
		form := url.Values{}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			addQuery(form, k, obj[k])
		}
		if mediaType == "application/x-www-form-urlencoded" {
			return []byte(form.Encode()), mediaType, nil
		}
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, k := range keys {
			for _, v := range form[k] {
				if err := mw.WriteField(k, v); err != nil {
					return nil, "", err
				}
			}
		}
		if err := mw.Close(); err != nil {
			return nil, "", err
		}
		return buf.Bytes(), mw.FormDataContentType(), nil
	}
	var b []byte
	var err error
	if whole != nil && len(obj) == 0 {
		b, err = json.Marshal(whole)
	} else {
		b, err = json.Marshal(obj)
	}
	return b, "application/json", err
}

// scalarString renders a JSON-decoded scalar for a URL or header.
func scalarString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case float32:
		return strconv.FormatFloat(float64(x), 'f', -1, 32)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// HasOrgCredential reports whether provider's requests carry an
// organization credential (so its users need not connect their own).
func (inv *Invoker) HasOrgCredential(provider string) bool {
	return hasOrg(inv.providerAuth(provider).Org)
}

func hasOrg(a AuthSpec) bool {
	switch a.Type {
	case AuthBasic:
		return a.Username != "" || a.Password != ""
	case AuthBearer, AuthAPIKey:
		return a.Token != ""
	case AuthOAuth2:
		return a.Flow == FlowClientCredentials
	}
	return false
}
