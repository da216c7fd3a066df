package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

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
	// process inherits trawl's environment; its stderr goes to the logger
	// at debug level.
	Command []string `json:"command,omitempty" yaml:"command,omitempty"`
	// URL is the server's streamable HTTP endpoint (http or https).
	URL string `json:"url,omitempty" yaml:"url,omitempty"`
	// RateLimit paces the tool calls sent to a URL server across the
	// deployment (see RateLimit); a command server takes none.
	RateLimit RateLimit `json:"rate_limit,omitzero" yaml:"rate_limit,omitempty"`
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
	if c.RateLimit != (RateLimit{}) && c.URL == "" {
		return fmt.Errorf("mcp server %q: rate_limit applies to a server over HTTP (url), not to a command", c.ID)
	}
	if err := c.RateLimit.Validate(); err != nil {
		return fmt.Errorf("mcp server %q: rate_limit: %w", c.ID, err)
	}
	return nil
}

// Secrets are the values of the URL's query (hosted MCP servers often
// take their key there): the deployment's scrubber masks them.
func (c MCPConfig) Secrets() []string {
	u, err := url.Parse(c.URL)
	if err != nil {
		return nil
	}
	var out []string
	for _, vs := range u.Query() {
		out = append(out, vs...)
	}
	return out
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
	// Limiter paces a URL server's tool calls (the config's RateLimit and
	// what its answers report), as the invoker paces HTTP tools. Nil:
	// not paced.
	Limiter RateLimiter
}

// Bounds of reading a server's tool list: a server that keeps handing out
// cursors is cut off rather than followed forever.
const (
	maxMCPListPages = 1000
	mcpCallMethod   = "MCP" // Activity.Method of an MCP tool call
)

// ErrMCPClosed is returned (wrapped) by calls on a source that was closed
// or whose server went away. Sources do not reconnect.
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

// MCPSource is one connected MCP server and the tools it lists, as trawl
// tools of Kind mcp. It is safe for concurrent use; Call may run from many
// goroutines at once while the list is being refreshed.
type MCPSource struct {
	id          string
	session     *mcp.ClientSession
	listTimeout time.Duration
	callTimeout time.Duration
	max         int64
	logger      *slog.Logger
	activity    *ActivityLog
	limiter     RateLimiter // nil: calls are not paced (a command server)
	limit       RateLimit
	onChange    func([]*Tool)
	changed     chan struct{} // list_changed signals, coalesced (capacity 1)
	done        chan struct{} // closed by Close
	refreshing  sync.WaitGroup
	watching    chan struct{} // closed when watch returns
	closeOnce   sync.Once
	closeErr    error

	mu     sync.RWMutex
	tools  []*Tool
	remote map[string]string // tool id → the server's own tool name
	gone   error             // set once the session ended
}

// ConnectMCP starts or reaches the server cfg describes, reads every page
// of its tool list and returns the source. ctx bounds only the connection
// (with opt.ConnectTimeout); the session lives until Close.
func ConnectMCP(ctx context.Context, cfg MCPConfig, opt MCPOptions) (*MCPSource, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &MCPSource{
		id:          cfg.ID,
		listTimeout: opt.ConnectTimeout,
		callTimeout: opt.CallTimeout,
		max:         opt.MaxResponseBytes,
		logger:      opt.Logger,
		activity:    opt.Log,
		onChange:    opt.OnChange,
		limit:       cfg.RateLimit,
		changed:     make(chan struct{}, 1),
		done:        make(chan struct{}),
		watching:    make(chan struct{}),
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
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	s.logger = s.logger.With("mcp_server", cfg.ID)

	client := mcp.NewClient(&mcp.Implementation{Name: "trawl", Version: "1"}, &mcp.ClientOptions{
		Logger: opt.Logger,
		// trawl serves no roots, sampling or elicitation.
		Capabilities: &mcp.ClientCapabilities{},
		// The SDK runs notification handlers in line with reading; the list
		// is read again on the refresher goroutine.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default: // a refresh is already pending
			}
		},
	})
	var transport mcp.Transport
	if len(cfg.Command) > 0 {
		cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
		cmd.Stderr = &stderrLogger{logger: s.logger}
		transport = &mcp.CommandTransport{Command: cmd}
	} else {
		client := RedirectSafe(opt.HTTPClient)
		if opt.Limiter != nil {
			s.limiter = opt.Limiter
			client = withOutcomeRecorder(client)
		}
		transport = &mcp.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client}
	}

	cctx, cancel := context.WithTimeout(ctx, s.listTimeout)
	defer cancel()
	session, err := client.Connect(cctx, transport, nil)
	if err != nil {
		return nil, s.fail("connecting", err)
	}
	s.session = session
	ts, remote, err := s.list(cctx)
	if err != nil {
		_ = session.Close()
		return nil, err
	}
	s.tools, s.remote = ts, remote
	s.logger.Info("mcp server connected", "tools", len(ts))

	s.refreshing.Add(1)
	go s.watch()
	go s.refresher(context.WithoutCancel(ctx))
	return s, nil
}

// ID is the server id (the Provider of its tools).
func (s *MCPSource) ID() string { return s.id }

// Tools returns the server's current tools. The slice is the caller's;
// the tools are shared and must not be modified.
func (s *MCPSource) Tools() []*Tool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.tools)
}

// mcpCloseTimeout bounds how long Close waits for the session to end: a
// server that never answers the closing request (or never lets go of an
// abandoned call) must not hold up a shutdown.
const mcpCloseTimeout = 5 * time.Second

// Ping asks the server to answer a ping within ctx: nil when it does,
// else why not (the session ended, no answer in time).
func (s *MCPSource) Ping(ctx context.Context) error {
	s.mu.RLock()
	gone := s.gone
	s.mu.RUnlock()
	if gone != nil {
		return gone
	}
	return s.session.Ping(ctx, nil)
}

// Close ends the session (and stops a command server) and waits, at most
// a few seconds, for it to end. It is idempotent; calls made afterwards
// fail with ErrMCPClosed.
func (s *MCPSource) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		if s.gone == nil {
			s.gone = fmt.Errorf("mcp server %q: %w", s.id, ErrMCPClosed)
		}
		s.mu.Unlock()
		close(s.done)
		s.refreshing.Wait()
		closed := make(chan error, 1)
		go func() { closed <- s.session.Close() }()
		select {
		case s.closeErr = <-closed:
			<-s.watching
		case <-time.After(mcpCloseTimeout):
			s.closeErr = fmt.Errorf("mcp server %q: closing: no answer within %s", s.id, mcpCloseTimeout)
		}
	})
	return s.closeErr
}

// watch notes when the session ends on its own (the process exited, the
// HTTP session was lost), so that later calls fail plainly.
func (s *MCPSource) watch() {
	defer close(s.watching)
	err := s.session.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone != nil {
		return // closed by us
	}
	s.gone = fmt.Errorf("mcp server %q: the server ended the session: %w", s.id, ErrMCPClosed)
	s.logger.Warn("mcp session ended", "error", err)
}

// refresher reads the list again after each list_changed notification.
// Notifications that arrive during a read are coalesced into one more.
func (s *MCPSource) refresher(ctx context.Context) {
	defer s.refreshing.Done()
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
		case <-s.changed:
		}
		lctx, lcancel := context.WithTimeout(ctx, s.listTimeout)
		ts, remote, err := s.list(lctx)
		lcancel()
		if err != nil {
			if ctx.Err() == nil {
				s.logger.Warn("mcp tool list refresh failed; keeping the previous list", "error", err)
			}
			continue
		}
		s.mu.Lock()
		same := reflect.DeepEqual(ts, s.tools)
		s.tools, s.remote = ts, remote
		s.mu.Unlock()
		if same {
			continue
		}
		s.logger.Info("mcp tool list changed", "tools", len(ts))
		if s.onChange != nil {
			s.onChange(slices.Clone(ts))
		}
	}
}

// list reads every page of tools/list and maps the tools.
func (s *MCPSource) list(ctx context.Context) ([]*Tool, map[string]string, error) {
	var all []*mcp.Tool
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for page := 1; ; page++ {
		res, err := s.session.ListTools(ctx, params)
		if err != nil {
			return nil, nil, s.fail("listing tools", err)
		}
		all = append(all, res.Tools...)
		next := res.NextCursor
		switch {
		case next == "":
			ts, remote := mapMCPTools(s.id, all, s.logger)
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
