package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPConfig is one entry of the config's mcp_servers: a server trawl
// starts as a command and speaks to over stdio, or one it reaches over
// the streamable HTTP transport. Exactly one of Command and URL is set.
type MCPConfig struct {
	// ID names the server: it is the Provider of its tools and the prefix
	// of their ids. 1-64 letters, digits, '_' or '-'.
	ID string `json:"id" yaml:"id"`
	// Command is the program and its arguments, run without a shell. The
	// process gets a minimal environment (PATH, HOME, the locale and the
	// few more the MCP SDKs pass: see Environ) plus Env, nothing else of
	// trawl's; its stderr goes to the logger at debug level.
	Command []string `json:"command,omitempty" yaml:"command,omitempty"`
	// Env is the command server's own environment, by name: a plain value
	// is a secret (masked wherever it appears, like every credential
	// trawl holds); {value: …, secret: false} is not. Values may use
	// ${ENV} like any config value.
	Env map[string]MCPEnvValue `json:"env,omitempty" yaml:"env,omitempty"`
	// URL is the server's streamable HTTP endpoint (http or https).
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
	// RateLimit paces the tool calls sent to a URL server across the
	// deployment (see RateLimit); a command server takes none.
	RateLimit RateLimit `json:"rate_limit,omitzero" yaml:"rate_limit,omitempty"`
	// Auth is a URL server's OAuth 2.0 client for the organization (type
	// oauth2, flow client_credentials; see oauth_mcp.go). Zero: none.
	Auth AuthSpec `json:"auth,omitzero" yaml:"auth,omitempty"`
}

// Validate checks the entry: a valid id and exactly one transport.
func (c MCPConfig) Validate() error {
	if !ValidName(c.ID) {
		return fmt.Errorf("mcp server %q: id must be 1-64 letters, digits, '_' or '-'", c.ID)
	}
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return fmt.Errorf("mcp server %q: set command or url, not both", c.ID)
	case len(c.Command) > 0:
		if strings.TrimSpace(c.Command[0]) == "" {
			return fmt.Errorf("mcp server %q: command has an empty program name", c.ID)
		}
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp server %q: url must be an absolute http(s) URL", c.ID)
		}
		if u.User != nil {
			return fmt.Errorf("mcp server %q: url must not carry user information (user:password@)", c.ID)
		}
	default:
		return fmt.Errorf("mcp server %q: command or url is required", c.ID)
	}
	if err := c.validateAuth(); err != nil {
		return fmt.Errorf("mcp server %q: auth: %w", c.ID, err)
	}
	if c.RateLimit != (RateLimit{}) && c.URL == "" {
		return fmt.Errorf("mcp server %q: rate_limit applies to a server over HTTP (url), not to a command", c.ID)
	}
	if err := c.RateLimit.Validate(); err != nil {
		return fmt.Errorf("mcp server %q: rate_limit: %w", c.ID, err)
	}
	return c.checkEnv()
}

// Secrets are what the deployment's scrubber must mask for this server:
// the values of the URL's query (hosted MCP servers often take their key
// there), decoded and as written in the URL (the spelling the server
// receives, and may echo base64-encoded), and the Env values that are
// secrets.
func (c MCPConfig) Secrets() []string {
	out := oauthSecrets(c.Auth.OAuth2)
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		if v := c.Env[k]; v.Secret {
			out = append(out, v.Value)
		}
	}
	u, err := url.Parse(c.URL)
	if err != nil || c.URL == "" {
		return out
	}
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	for _, kv := range strings.Split(u.RawQuery, "&") {
		if _, v, ok := strings.Cut(kv, "="); ok && v != "" {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// MCPOptions configures an MCPSource. The zero value is usable.
type MCPOptions struct {
	// OnChange is called with the server's new tool list after the server
	// announced a change (notifications/tools/list_changed) and the list
	// was read again, when it differs from the previous one. Calls come
	// from one goroutine, one at a time, in order. OnChange must not call
	// Close. Nil: changes only update Tools.
	OnChange func(tools []*Tool)
	// Logger receives connection events, failed refreshes and a command
	// server's stderr (debug level). Nil: nothing is logged.
	Logger *slog.Logger
	// ConnectTimeout bounds connecting plus reading the first tool list,
	// and each later re-read of the list. Zero: 30s.
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call. Zero: 30s.
	CallTimeout time.Duration
	// MaxResponseBytes caps the rendered body of one call; more is cut
	// and the Response says Truncated. Zero: 24 MiB.
	MaxResponseBytes int64
	// HTTPClient sends the requests of a URL server; its redirect policy
	// is replaced by trawl's (same origin only, see RedirectSafe). Nil: a
	// client on http.DefaultTransport.
	HTTPClient *http.Client
	// Log records every tool call (method "MCP", path the server's tool
	// name). Nil: nothing is recorded.
	Log *ActivityLog
	// Scrub is the deployment's scrubber (Invoker.Scrubber): what the
	// server lists — tool names, descriptions, schemas — passes through it
	// before anyone sees it, like its answers (which the Router scrubs).
	// Nil: nothing is masked.
	Scrub func(runtime ...string) *Scrubber
	// Limiter paces a URL server's tool calls (the config's RateLimit and
	// what its answers report), as the invoker paces HTTP tools. Nil:
	// not paced.
	Limiter RateLimiter
	// Degraded: a server that does not answer at start is no error — the
	// source starts without tools (Connected false, calls fail with
	// ErrMCPClosed) and connects in the background, then calls OnChange
	// with its tools. Zero: ConnectMCP fails.
	Degraded bool
	// ReconnectMin and ReconnectMax bound the wait between two attempts
	// to reach the server again (after a session ended, or a degraded
	// start): it doubles from the first to the second, with jitter. Zero:
	// 1 s and 1 min.
	ReconnectMin, ReconnectMax time.Duration
	// OnToken is told each OAuth access token the source obtains for the
	// server (Invoker.RememberToken keeps it in the scrubber). Nil: none.
	OnToken func(token string)
}

// Bounds of reading a server's tool list: a server that keeps handing out
// cursors is cut off rather than followed forever.
const (
	maxMCPListPages = 1000
	mcpCallMethod   = "MCP" // Activity.Method of an MCP tool call
)

// ErrMCPClosed is returned (wrapped) by calls on a source that was closed
// or whose server is not reached right now (it went away, or did not
// answer at start): the source reconnects in the background.
var ErrMCPClosed = errors.New("mcp session closed")

// MCPError is a failure talking to an MCP server: connecting, listing its
// tools or calling one without getting an answer. Its text names the
// server by id and never carries the server's URL query or credentials.
type MCPError struct {
	Server string // server id
	Op     string // what was being done: "connecting", "listing tools", "calling tool x"
	Err    error  // the cause
	msg    string // the cause in safe words
}

func (e *MCPError) Error() string {
	return fmt.Sprintf("mcp server %q: %s: %s", e.Server, e.Op, e.msg)
}

// Unwrap returns ErrUpstream (no answer was had) and the cause.
func (e *MCPError) Unwrap() []error { return []error{ErrUpstream, e.Err} }

// MCPSource is one MCP server and the tools it lists, as trawl tools of
// Kind mcp. It keeps its session up: when the session ends (a stdio server
// exits, a remote one restarts and forgets the session) it connects
// again with backoff, a new process or a new session, and reads the tool
// list anew. It is safe for concurrent use; Call may run from many
// goroutines at once while the list is being refreshed.
type MCPSource struct {
	id          string
	client      *mcp.Client
	transport   func() mcp.Transport // a new one per connection
	listTimeout time.Duration
	callTimeout time.Duration
	max         int64
	logger      *slog.Logger
	activity    *ActivityLog
	scrub       func(runtime ...string) *Scrubber // nil: none
	limiter     RateLimiter                       // nil: calls are not paced (a command server)
	limit       RateLimit
	onChange    func([]*Tool)
	backoffMin  time.Duration
	backoffMax  time.Duration
	changed     chan struct{} // list_changed signals, coalesced (capacity 1)
	lost        chan struct{} // the session ended or never began (capacity 1)
	done        chan struct{} // closed by Close
	maintaining sync.WaitGroup
	watchers    sync.WaitGroup
	closeOnce   sync.Once
	closeErr    error

	// progress is the calls that asked for the server's progress, by
	// their progress token; a report is delivered under the read lock,
	// so none is once a call has taken its entry out.
	progressMu sync.RWMutex
	progress   map[string]func(UpstreamProgress)
	progressN  uint64

	mu      sync.RWMutex
	session *mcp.ClientSession // nil until the first connection
	tools   []*Tool
	remote  map[string]string // tool id → the server's own tool name
	gone    error             // why no session serves calls now; nil while one does
	closed  bool

	perUser bool // a user's session (MCPUserSource): its tools are PerUser
}

// ConnectMCP starts or reaches the server cfg describes, reads every page
// of its tool list and returns the source. ctx bounds only the connection
// (with opt.ConnectTimeout); the session lives until Close, and is made
// again whenever it ends.
func ConnectMCP(ctx context.Context, cfg MCPConfig, opt MCPOptions) (*MCPSource, error) {
	if cfg.PerUser() {
		return nil, fmt.Errorf("mcp server %q: each user connects it (flow authorization_code): use NewMCPUserSource", cfg.ID)
	}
	return connectMCP(ctx, cfg, opt, nil)
}

// connectMCP is ConnectMCP; user, when not nil, is the OAuth handler of
// one user's session (MCPUserSource).
func connectMCP(ctx context.Context, cfg MCPConfig, opt MCPOptions, user *userMCPAuth) (*MCPSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &MCPSource{
		perUser:     user != nil,
		id:          cfg.ID,
		listTimeout: opt.ConnectTimeout,
		callTimeout: opt.CallTimeout,
		max:         opt.MaxResponseBytes,
		logger:      opt.Logger,
		activity:    opt.Log,
		scrub:       opt.Scrub,
		onChange:    opt.OnChange,
		limit:       cfg.RateLimit,
		backoffMin:  opt.ReconnectMin,
		backoffMax:  opt.ReconnectMax,
		changed:     make(chan struct{}, 1),
		lost:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	if s.listTimeout <= 0 {
		s.listTimeout = 30 * time.Second
	}
	if s.callTimeout <= 0 {
		s.callTimeout = 30 * time.Second
	}
	if s.max <= 0 {
		s.max = 24 << 20
	}
	if s.backoffMin <= 0 {
		s.backoffMin = time.Second
	}
	if s.backoffMax < s.backoffMin {
		s.backoffMax = max(time.Minute, s.backoffMin)
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.logger = s.logger.With("mcp_server", cfg.ID)

	s.client = mcp.NewClient(&mcp.Implementation{Name: "trawl", Version: "1"}, &mcp.ClientOptions{
		Logger: opt.Logger,
		// trawl serves no roots, sampling or elicitation.
		Capabilities: &mcp.ClientCapabilities{},
		// The SDK runs notification handlers in line with reading; the list
		// is read again on the maintaining goroutine.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default: // a refresh is already pending
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			s.relayProgress(req.Params)
		},
	})
	if len(cfg.Command) > 0 {
		s.transport = func() mcp.Transport {
			cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
			cmd.Env = cfg.Environ(os.Environ())
			cmd.Stderr = &stderrLogger{logger: s.logger}
			return &mcp.CommandTransport{Command: cmd}
		}
	} else {
		client := RedirectSafe(opt.HTTPClient)
		if opt.Limiter != nil {
			s.limiter = opt.Limiter
			client = withOutcomeRecorder(client)
		}
		var handler auth.OAuthHandler
		if user != nil {
			handler = user
		} else if h := newMCPOAuth(cfg, client, opt.OnToken); h != nil {
			handler = h
		}
		s.transport = func() mcp.Transport {
			return &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, OAuthHandler: handler}
		}
	}

	if err := s.connect(ctx); err != nil {
		if !opt.Degraded {
			return nil, err
		}
		s.gone = fmt.Errorf("mcp server %q is not reachable (%s); trawl keeps trying: %w", s.id, safeMCPCause(err), ErrMCPClosed)
		s.lost <- struct{}{}
	} else {
		s.logger.Info("mcp server connected", "tools", len(s.tools))
	}
	s.maintaining.Add(1)
	go s.maintain(context.WithoutCancel(ctx))
	return s, nil
}

// connect opens a session, reads its tool list and makes it the one
// calls use.
func (s *MCPSource) connect(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, s.listTimeout)
	defer cancel()
	session, err := s.client.Connect(cctx, s.transport(), nil)
	if err != nil {
		return s.fail("connecting", err)
	}
	ts, remote, err := s.listOn(cctx, session)
	if err != nil {
		_ = session.Close()
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = session.Close()
		return fmt.Errorf("mcp server %q: %w", s.id, ErrMCPClosed)
	}
	s.session, s.tools, s.remote, s.gone = session, ts, remote, nil
	s.mu.Unlock()
	s.watchers.Add(1)
	go s.watch(session)
	return nil
}

// ID is the server id (the Provider of its tools).
func (s *MCPSource) ID() string { return s.id }

// Connected reports whether a session serves calls now.
func (s *MCPSource) Connected() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.gone == nil
}

// Tools returns the server's current tools (the last it listed while a
// session is being made again). The slice is the caller's; the tools are
// shared and must not be modified.
func (s *MCPSource) Tools() []*Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.tools)
}

// current is the session serving calls, or why none does.
func (s *MCPSource) current() (*mcp.ClientSession, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.gone != nil {
		return nil, s.gone
	}
	return s.session, nil
}

// mcpCloseTimeout bounds how long Close waits for the session to end: a
// server that never answers the closing request (or never lets go of an
// abandoned call) must not hold up a shutdown.
const mcpCloseTimeout = 5 * time.Second

// Ping asks the server to answer a ping within ctx: nil when it does,
// else why not (no session now, no answer in time).
func (s *MCPSource) Ping(ctx context.Context) error {
	session, err := s.current()
	if err != nil {
		return err
	}
	return session.Ping(ctx, nil)
}

// Close ends the session (and stops a command server) and waits, at most
// a few seconds, for it to end; it stops reconnecting. It is idempotent;
// calls made afterwards fail with ErrMCPClosed.
func (s *MCPSource) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.gone = fmt.Errorf("mcp server %q: %w", s.id, ErrMCPClosed)
		session := s.session
		s.mu.Unlock()
		close(s.done)
		s.maintaining.Wait()
		if session == nil {
			return
		}
		closed := make(chan error, 1)
		go func() {
			err := session.Close()
			s.watchers.Wait()
			closed <- err
		}()
		select {
		case s.closeErr = <-closed:
		case <-time.After(mcpCloseTimeout):
			s.closeErr = fmt.Errorf("mcp server %q: closing: no answer within %s", s.id, mcpCloseTimeout)
		}
	})
	return s.closeErr
}

// watch notes when a session ends on its own (the process exited, the
// HTTP session was lost): calls then fail plainly, and the source
// connects again.
func (s *MCPSource) watch(session *mcp.ClientSession) {
	defer s.watchers.Done()
	s.lose(session, session.Wait())
}

// lose marks session as ended (by the server, or found dead by a call)
// and has the source connect again — once, whoever notices first.
func (s *MCPSource) lose(session *mcp.ClientSession, cause error) {
	s.mu.Lock()
	if s.closed || s.session != session || s.gone != nil {
		s.mu.Unlock()
		return // closed by us, replaced, or already noticed
	}
	s.gone = fmt.Errorf("mcp server %q: the server ended the session; trawl is connecting again: %w", s.id, ErrMCPClosed)
	s.mu.Unlock()
	s.logger.Warn("mcp session ended; connecting again", "error", cause)
	select {
	case s.lost <- struct{}{}:
	default:
	}
}

// maintain keeps the source up until Close: it reads the list again
// after each list_changed notification (those that arrive meanwhile are
// coalesced into one more), and connects again, with backoff, when the
// session ended. OnChange is called from here only, one call at a time.
func (s *MCPSource) maintain(ctx context.Context) {
	defer s.maintaining.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-s.done
		cancel()
	}()
	for {
		select {
		case <-s.done:
			return
		case <-s.lost:
			s.reconnect(ctx)
		case <-s.changed:
			s.refresh(ctx)
		}
	}
}

// reconnect tries to reach the server until it answers or the source is
// closed, waiting longer between attempts (doubling, with jitter, up to
// the maximum).
func (s *MCPSource) reconnect(ctx context.Context) {
	delay := s.backoffMin
	for attempt := 1; ; attempt++ {
		before := s.Tools()
		err := s.connect(ctx)
		if err == nil {
			s.logger.Info("mcp server connected again", "attempt", attempt, "tools", len(s.Tools()))
			if ts := s.Tools(); s.onChange != nil && !reflect.DeepEqual(before, ts) {
				s.onChange(ts)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		if !s.closed {
			s.gone = fmt.Errorf("mcp server %q is not reachable (%s); trawl keeps trying: %w", s.id, safeMCPCause(err), ErrMCPClosed)
		}
		s.mu.Unlock()
		wait := delay/2 + time.Duration(rand.Int64N(int64(delay)))
		s.logger.Warn("mcp server unreachable; trying again", "attempt", attempt, "in", wait.Round(time.Millisecond), "error", err)
		select {
		case <-s.done:
			return
		case <-time.After(wait):
		}
		delay = min(2*delay, s.backoffMax)
	}
}

// refresh reads the tool list again and tells OnChange when it differs.
func (s *MCPSource) refresh(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, s.listTimeout)
	defer cancel()
	ts, remote, err := s.list(lctx)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Warn("mcp tool list refresh failed; keeping the previous list", "error", err)
		}
		return
	}
	s.mu.Lock()
	same := reflect.DeepEqual(ts, s.tools)
	s.tools, s.remote = ts, remote
	s.mu.Unlock()
	if same {
		return
	}
	s.logger.Info("mcp tool list changed", "tools", len(ts))
	if s.onChange != nil {
		s.onChange(slices.Clone(ts))
	}
}

// list reads every page of tools/list on the current session.
func (s *MCPSource) list(ctx context.Context) ([]*Tool, map[string]string, error) {
	session, err := s.current()
	if err != nil {
		return nil, nil, err
	}
	return s.listOn(ctx, session)
}

// listOn reads every page of tools/list on session and maps the tools.
func (s *MCPSource) listOn(ctx context.Context, session *mcp.ClientSession) ([]*Tool, map[string]string, error) {
	var all []*mcp.Tool
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := session.ListTools(ctx, params)
		if err != nil {
			return nil, nil, s.fail("listing tools", err)
		}
		all = append(all, res.Tools...)
		next := res.NextCursor
		switch {
		case next == "":
			var orig map[string]string
			if s.scrub != nil {
				all, orig = scrubMCPTools(s.scrub(), all, s.logger)
			}
			ts, remote := mapMCPTools(s.id, all, s.logger)
			for _, t := range ts {
				t.PerUser = s.perUser
			}
			for id, name := range remote {
				if o, ok := orig[name]; ok {
					remote[id] = o // calls use the server's own name
				}
			}
			return ts, remote, nil
		case seen[next]:
			return nil, nil, s.fail("listing tools", fmt.Errorf("page %d repeats an earlier cursor", page))
		case page >= maxMCPListPages:
			return nil, nil, s.fail("listing tools", fmt.Errorf("more than %d pages", maxMCPListPages))
		}
		seen[next] = true
		params = &mcp.ListToolsParams{Cursor: next}
	}
}

// scrubMCPTools masks secrets in a tool list as the server sent it (a
// server may write its URL key into a description), and maps each masked
// name back to the server's own. A tool whose masked listing no longer
// reads is left out, with a warning.
func scrubMCPTools(scrub *Scrubber, list []*mcp.Tool, logger *slog.Logger) ([]*mcp.Tool, map[string]string) {
	if scrub.Empty() {
		return list, nil
	}
	out := make([]*mcp.Tool, 0, len(list))
	orig := map[string]string{}
	for _, t := range list {
		if t == nil {
			continue
		}
		b, err := json.Marshal(t)
		if err != nil {
			logger.Warn("mcp tool cannot be read; left out", "tool", scrub.String(t.Name), "error", err)
			continue
		}
		c := scrub.Bytes(b)
		if bytes.Equal(b, c) {
			out = append(out, t)
			continue
		}
		var masked mcp.Tool
		if err := json.Unmarshal(c, &masked); err != nil {
			logger.Warn("mcp tool listing holds a secret and does not read once masked; left out", "tool", scrub.String(t.Name))
			continue
		}
		orig[masked.Name] = t.Name
		out = append(out, &masked)
	}
	return out, orig
}

func (s *MCPSource) fail(op string, err error) *MCPError {
	return &MCPError{Server: s.id, Op: op, Err: err, msg: safeMCPCause(err)}
}

var urlInText = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>]+`)

// safeMCPCause words err for people and models: timeouts plainly, and any
// URL reduced to its scheme, host and path (no credentials, no query).
func safeMCPCause(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, ErrMCPClosed):
		return "connection closed"
	}
	var refused *RefusedError
	if errors.As(err, &refused) {
		return refused.Msg
	}
	return urlInText.ReplaceAllStringFunc(err.Error(), func(raw string) string {
		u, perr := url.Parse(strings.TrimRight(raw, ".,;:)"))
		if perr != nil || u.Host == "" {
			return "(url)"
		}
		return u.Scheme + "://" + u.Host + u.EscapedPath()
	})
}

// stderrLogger writes a command server's stderr to the logger, a line at
// a time, at debug level (a server's log may hold what it was given).
type stderrLogger struct {
	logger *slog.Logger
	buf    []byte
}

const maxStderrLine = 4096

func (w *stderrLogger) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			if len(w.buf) > maxStderrLine {
				w.emit(w.buf)
				w.buf = w.buf[:0]
			}
			return len(p), nil
		}
		w.emit(w.buf[:i])
		w.buf = w.buf[i+1:]
	}
}

func (w *stderrLogger) emit(line []byte) {
	line = bytes.TrimRight(line, "\r")
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	if len(line) > 0 {
		w.logger.Debug("mcp server stderr", "line", string(line))
	}
}
