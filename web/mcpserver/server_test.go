package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/stream"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/web/deploy"
)

// fixture is a demo deployment served over MCP by a real HTTP server.
type fixture struct {
	dep *deploy.Deployment
	srv *Server
	url string
	// caller is who the test HTTP server authenticates every request as.
	mu     sync.Mutex
	caller Caller
}

func newFixture(t *testing.T, opt Options, edit func(*deploy.Config)) *fixture {
	t.Helper()
	cfg := deploy.DemoConfig()
	cfg.DataDir = t.TempDir()
	if edit != nil {
		edit(cfg)
	}
	d, err := deploy.Open(context.Background(), cfg, deploy.Options{Stdout: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dep: d, srv: New(d, opt)}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		c := f.caller
		f.mu.Unlock()
		f.srv.ServeHTTP(w, r.WithContext(WithRequest(r.Context(), "demo", c)))
	}))
	t.Cleanup(func() {
		hs.Close()
		f.srv.Close()
		d.Close()
	})
	f.url = hs.URL
	return f
}

// bearer adds an Authorization header (the SDK's bearer check wants one;
// the fixture's caller is who it authenticates as).
type bearer struct{ rt http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer test")
	return b.rt.RoundTrip(r)
}

// connect opens a Go SDK client session at protocol version v ("" : the
// SDK's newest, 2026-07-28).
func (f *fixture) connect(t *testing.T, v string, opt *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "trawl-test", Version: "v0"}, opt)
	tr := &mcp.StreamableClientTransport{Endpoint: f.url, HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: v})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func listAll(t *testing.T, cs *mcp.ClientSession) []*mcp.Tool {
	t.Helper()
	var out []*mcp.Tool
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tool)
	}
	return out
}

func structured(t *testing.T, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool error: %v", text(res))
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent is not an object: %s", b)
	}
	return m
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// The tools a client lists are the agent's tools as a chat step offers
// them, over both revisions: reserved arguments on looping tools, the
// effect as annotations, the envelope's output schema, the view budget
// in _meta, search_tools/load_tool for the pooled toolkits.
func TestListTools(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			cs := f.connect(t, v, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s, want %s", got, v)
			}
			if !strings.Contains(cs.InitializeResult().Instructions, "_all_pages") {
				t.Errorf("instructions lack the looping guidance: %q", cs.InitializeResult().Instructions)
			}
			byName := map[string]*mcp.Tool{}
			var names []string
			for _, tool := range listAll(t, cs) {
				byName[tool.Name] = tool
				names = append(names, tool.Name)
			}
			for _, want := range []string{"list_orders", "search_tools", "load_tool", "queryToolResult", "fetchToolResult"} {
				if byName[want] == nil {
					t.Errorf("tools/list lacks %s: %v", want, names)
				}
			}
			orders := byName["list_orders"]
			if orders == nil {
				return
			}
			props := orders.InputSchema.(map[string]any)["properties"].(map[string]any)
			for _, arg := range []string{"_all_pages", "_fields", "_for_each", "_refresh", "_thread", "_max_chars", "status"} {
				if props[arg] == nil {
					t.Errorf("list_orders lacks %s: %v", arg, slices.Sorted(mapsKeys(props)))
				}
			}
			if a := orders.Annotations; a == nil || !a.ReadOnlyHint || !a.IdempotentHint || a.DestructiveHint == nil || *a.DestructiveHint || a.OpenWorldHint == nil || !*a.OpenWorldHint {
				t.Errorf("list_orders annotations = %+v", a)
			}
			if orders.OutputSchema == nil || !strings.Contains(orders.Description, "_all_pages") {
				t.Errorf("a looping tool has no output schema or no looping line: %q", orders.Description)
			}
			if got := orders.Meta[MetaMaxResultSize]; got != 32000.0 {
				t.Errorf("maxResultSizeChars = %v, want the view budget 32000", got)
			}
		})
	}
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// A walk over MCP is the engine's walk: the same verdict and rows as a
// direct call of the engine, as structuredContent and as text.
func TestCallWalksLikeChat(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	args := map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id", "total"}}
	direct, err := f.dep.CallTool(context.Background(), "acme.list_orders", args, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(direct.View, &want); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			cs := f.connect(t, v, nil)
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "list_orders", Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			got := structured(t, res)
			b := got["_boundary"].(map[string]any)
			if got["_pagingComplete"] != true || b["completion"] != "complete" || b["records"] != want["_boundary"].(map[string]any)["records"] {
				t.Errorf("verdict = %v %v", got["_pagingComplete"], b)
			}
			if diff := cmp.Diff(want["data"], got["data"]); diff != "" {
				t.Errorf("rows differ from a direct call (-direct +mcp):\n%s", diff)
			}
			var fromText map[string]any
			if err := json.Unmarshal([]byte(text(res)), &fromText); err != nil || fromText["_note"] != got["_note"] {
				t.Errorf("text content is not the envelope: %v", err)
			}
			if res.Meta[MetaThread] != DefaultThread {
				t.Errorf("_meta = %v", res.Meta)
			}
		})
	}
}

// tools/list pages with nextCursor when the list is longer than a page;
// the SDK's client follows it; a forged cursor is a protocol error.
func TestListToolsPaginates(t *testing.T) {
	f := newFixture(t, Options{PageSize: 3}, nil)
	cs := f.connect(t, "", nil)
	first, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Tools) != 3 || first.NextCursor == "" {
		t.Fatalf("first page: %d tools, cursor %q", len(first.Tools), first.NextCursor)
	}
	all := listAll(t, cs)
	seen := map[string]bool{}
	for _, tool := range all {
		if seen[tool.Name] {
			t.Errorf("%s listed twice", tool.Name)
		}
		seen[tool.Name] = true
	}
	if len(all) <= 3 || !seen["list_orders"] || !seen["fetchToolResult"] {
		t.Errorf("all pages: %d tools", len(all))
	}
	if _, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: "bogus"}); err == nil || !strings.Contains(err.Error(), "invalid cursor") {
		t.Errorf("a forged cursor: %v", err)
	}
}

// search_tools finds a pooled tool, load_tool makes it callable in that
// conversation and the client hears notifications/tools/list_changed (a
// 2025-11-25 session on its stream, a 2026-07-28 client through its
// subscription); the loaded tool is then listed and called.
func TestSearchAndLoadTool(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			changed := make(chan struct{}, 8)
			cs := f.connect(t, v, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				changed <- struct{}{}
			}})
			thread := "load-" + v
			names := func() map[string]bool {
				out := map[string]bool{}
				res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Meta: mcp.Meta{MetaThread: thread}})
				if err != nil {
					t.Fatal(err)
				}
				for _, tool := range res.Tools {
					out[tool.Name] = true
				}
				return out
			}
			if names()["MAIL_SEND_EMAIL"] {
				t.Fatal("a pooled tool is listed before load_tool")
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_tools",
				Arguments: map[string]any{"query": "send an email", "_thread": thread}})
			if err != nil || res.IsError || !strings.Contains(text(res), "MAIL_SEND_EMAIL") {
				t.Fatalf("search_tools: %v %s", err, text(res))
			}
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_tool",
				Arguments: map[string]any{"toolName": "MAIL_SEND_EMAIL", "_thread": thread}})
			if err != nil || res.IsError {
				t.Fatalf("load_tool: %v %s", err, text(res))
			}
			select {
			case <-changed:
			case <-time.After(10 * time.Second):
				t.Fatal("no notifications/tools/list_changed after load_tool")
			}
			if !names()["MAIL_SEND_EMAIL"] {
				t.Fatal("the loaded tool is not listed in its conversation")
			}
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "MAIL_SEND_EMAIL", Arguments: map[string]any{
				"to": []any{"a@example.com"}, "subject": "hi", "messageBody": "hello", "_thread": thread}})
			if err != nil || res.IsError {
				t.Fatalf("calling the loaded tool: %v %s", err, text(res))
			}
			// Another conversation has not loaded it.
			res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "MAIL_SEND_EMAIL", Arguments: map[string]any{
				"to": []any{"a@example.com"}, "subject": "hi", "messageBody": "hello"}})
			if err != nil || !res.IsError || !strings.Contains(text(res), `call load_tool {"toolName": "MAIL_SEND_EMAIL"} first`) ||
				!strings.Contains(text(res), `_thread is "default"`) {
				t.Errorf("the default conversation called a tool it never loaded: %v %s", err, text(res))
			}
		})
	}
}

// A call that carries a progress token hears the walk's progress as
// notifications/progress (items so far, the server's total, a message
// "page 1 · 100 of 364 items · 1 request"), at both revisions, with the
// demo upstream's latency.
func TestProgressNotifications(t *testing.T) {
	f := newFixture(t, Options{}, func(c *deploy.Config) { c.SetDemoLatency(300) })
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			var got []*mcp.ProgressNotificationParams
			cs := f.connect(t, v, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, r.Params)
				mu.Unlock()
			}})
			p := &mcp.CallToolParams{Name: "list_orders", Arguments: map[string]any{"status": "open", "_all_pages": true, "_fields": []any{"id"}, "_refresh": true}}
			p.SetProgressToken("walk-" + v)
			res, err := cs.CallTool(context.Background(), p)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %s", err, text(res))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(got) == 0 {
				t.Fatal("no progress notification")
			}
			last := -1.0
			for _, n := range got {
				if n.ProgressToken != "walk-"+v || n.Progress <= last || n.Total != 364 ||
					!progressRE.MatchString(n.Message) {
					t.Errorf("progress %+v", n)
				}
				last = n.Progress
			}
		})
	}
}

var progressRE = regexp.MustCompile(`^page \d+ · [\d,]+ of 364 items · \d+ requests?$`)

func TestProgressMessage(t *testing.T) {
	for _, tc := range []struct {
		p    stream.Progress
		want string
	}{
		{stream.Progress{Page: 3, Items: 750, Total: 2000, Requests: 3}, "page 3 · 750 of 2,000 items · 3 requests"},
		{stream.Progress{Page: 1, Items: 1, Requests: 1}, "page 1 · 1 item · 1 request"},
		{stream.Progress{Page: 2, Items: 1234567, Requests: 40, ForEach: &stream.ForEachProgress{Key: "property_id", Index: 1, Total: 5}},
			"property_id 2 of 5 · page 2 · 1,234,567 items in all · 40 requests"},
		{stream.Progress{Page: 1, Items: 135, Total: 61, Requests: 5, ForEach: &stream.ForEachProgress{Key: "property_id", Index: 2, Total: 8}},
			"property_id 3 of 8 · page 1 of 61 items · 135 items in all · 5 requests"},
	} {
		if got := ProgressMessage(tc.p); got != tc.want {
			t.Errorf("ProgressMessage(%+v) = %q, want %q", tc.p, got, tc.want)
		}
	}
}

// notifications/cancelled ends a walk at once: no upstream request after
// it, no response to the cancelled call; the partial verdict is in the
// activity log and its rows are stored, and the conversation's next call
// says so, with the _resultId queryToolResult reads.
func TestCancelMidWalk(t *testing.T) {
	f := newFixture(t, Options{}, func(c *deploy.Config) { c.SetDemoLatency(150) })
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			thread := "cancel-" + strings.ReplaceAll(v, "-", "")
			started := make(chan struct{}, 64)
			cs := f.connect(t, v, &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
				started <- struct{}{}
			}})
			ctx, cancel := context.WithCancel(context.Background())
			p := &mcp.CallToolParams{Name: "list_orders", Arguments: map[string]any{"_all_pages": true, "_fields": []any{"id"}, "_thread": thread}}
			p.SetProgressToken("c")
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, p)
				done <- err
			}()
			<-started // the first page is in
			cancel()
			if err := <-done; err == nil {
				t.Fatal("the cancelled call answered")
			}
			key := agent.ConversationKey("", "demo", thread)
			verdict := waitVerdict(t, f, key)
			if !strings.Contains(verdict.Verdict, "partial") || !strings.Contains(verdict.Verdict, "cancelled") {
				t.Errorf("verdict record = %+v", verdict)
			}
			requests := func() int {
				acts, _ := f.dep.Activity().List(context.Background(), key, 1000)
				n := 0
				for _, a := range acts {
					if a.CallID == verdict.CallID && a.Method != "" {
						n++
					}
				}
				return n
			}
			n := requests()
			if n == 0 || n >= 24 {
				t.Errorf("%d upstream requests for the cancelled walk (24 pages in all)", n)
			}
			// The next call hears what the cancelled one fetched.
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_stats", Arguments: map[string]any{"_thread": thread}})
			if err != nil || res.IsError {
				t.Fatalf("next call: %v %s", err, text(res))
			}
			if !strings.Contains(text(res), "was cancelled before it finished") {
				t.Errorf("the next call does not say what the cancelled one fetched: %s", text(res))
			}
			b, _ := json.Marshal(res.Meta[MetaInterrupted])
			var earlier []agent.InterruptedCall
			if err := json.Unmarshal(b, &earlier); err != nil || len(earlier) != 1 || earlier[0].ResultID == "" {
				t.Fatalf("_meta %s: %v", b, err)
			}
			q, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "queryToolResult",
				Arguments: map[string]any{"resultId": earlier[0].ResultID, "limit": 3, "_thread": thread}})
			if err != nil || q.IsError {
				t.Errorf("queryToolResult on the cancelled walk's rows: %v %s", err, text(q))
			}
			if requests() != n {
				t.Errorf("upstream requests went on after the cancellation: %d, then %d", n, requests())
			}
			// Said once.
			again, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_stats", Arguments: map[string]any{"_thread": thread}})
			if again == nil || strings.Contains(text(again), "was cancelled") {
				t.Errorf("the cancellation is reported twice")
			}
		})
	}
}

// waitVerdict waits for the activity record that ends a cancelled call
// in the conversation key (the server writes it as the walk stops).
func waitVerdict(t *testing.T, f *fixture, key string) tools.Activity {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		acts, _ := f.dep.Activity().List(context.Background(), key, 1000)
		for _, a := range acts {
			if a.Verdict != "" {
				return a
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no verdict record for the cancelled call")
	return tools.Activity{}
}

// On 2026-07-28 every request is a POST of its own, so a client that
// posts notifications/cancelled (rather than closing the call's stream)
// still ends the walk it names; the call's stream ends with no result.
func TestStatelessCancelledNotification(t *testing.T) {
	f := newFixture(t, Options{}, func(c *deploy.Config) { c.SetDemoLatency(150) })
	post := func(ctx context.Context, method, name, body string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "POST", f.url, strings.NewReader(body))
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer test")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	resp := post(context.Background(), "tools/call", "list_orders", `{"jsonrpc":"2.0","id":"walk-1","method":"tools/call","params":{"name":"list_orders",`+
		`"arguments":{"_all_pages":true,"_fields":["id"],"_thread":"posted-cancel"},"_meta":{"progressToken":"p",`+meta+`}}}`)
	defer resp.Body.Close()
	events := make(chan string, 64)
	go func() {
		defer close(events)
		b := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(b)
			if n > 0 {
				events <- string(b[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	if first := <-events; !strings.Contains(first, "notifications/progress") {
		t.Fatalf("first event: %s", first)
	}
	c := post(context.Background(), "notifications/cancelled", "", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"walk-1","reason":"user",`+
		`"_meta":{`+meta+`}}}`)
	c.Body.Close()
	var rest strings.Builder
	for e := range events {
		rest.WriteString(e)
	}
	if strings.Contains(rest.String(), `"result"`) {
		t.Errorf("the cancelled call answered: %s", rest.String())
	}
	v := waitVerdict(t, f, agent.ConversationKey("", "demo", "posted-cancel"))
	if !strings.Contains(v.Verdict, "stopped by cancelled") {
		t.Errorf("verdict = %q", v.Verdict)
	}
}

// On 2026-07-28 a call without a progress token is answered with one
// JSON body (nothing else is sent about it), the same call with one as
// events, its progress before its result; the result is the same: the
// envelope as structuredContent and as the text the client's model reads.
func TestStatelessAnswerFraming(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	call := func(id, progress string) (string, []byte) {
		m := meta
		if progress != "" {
			m = `"progressToken":"` + progress + `",` + meta
		}
		body := `{"jsonrpc":"2.0","id":"` + id + `","method":"tools/call","params":{"name":"list_orders",` +
			`"arguments":{"_all_pages":true,"_fields":["id"],"_thread":"framing"},"_meta":{` + m + `}}}`
		req, _ := http.NewRequest("POST", f.url, strings.NewReader(body))
		for k, v := range map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "list_orders", "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Authorization": "Bearer test", "Mcp-Protocol-Version": "2026-07-28"} {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", id, resp.StatusCode, b)
		}
		return resp.Header.Get("Content-Type"), b
	}
	type answer struct {
		ID     string `json:"id"`
		Result struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			StructuredContent map[string]any `json:"structuredContent"`
			Meta              map[string]any `json:"_meta"`
			ResultType        string         `json:"resultType"`
		} `json:"result"`
	}
	check := func(id string, a answer) {
		t.Helper()
		if a.ID != id || len(a.Result.Content) == 0 || a.Result.Content[0].Type != "text" {
			t.Fatalf("%s: %+v", id, a)
		}
		var text map[string]any
		if err := json.Unmarshal([]byte(a.Result.Content[0].Text), &text); err != nil {
			t.Fatalf("%s: the text is not the envelope: %v", id, err)
		}
		if text["_note"] == nil || text["_boundary"] == nil || text["data"] == nil {
			t.Errorf("%s: the text lacks the rows, the verdict or the boundary: %.300s", id, a.Result.Content[0].Text)
		}
		if a.Result.StructuredContent["_boundary"] == nil || a.Result.StructuredContent["_note"] != text["_note"] {
			t.Errorf("%s: structuredContent %.300v is not the envelope of the text", id, a.Result.StructuredContent)
		}
		// What the SDK adds to a result after the door's middleware.
		if a.Result.ResultType != "complete" || a.Result.Meta[MetaThread] != "framing" || a.Result.Meta["io.modelcontextprotocol/serverInfo"] == nil {
			t.Errorf("%s: resultType %q, _meta %v: want complete, the thread and the server's info", id, a.Result.ResultType, a.Result.Meta)
		}
	}

	ct, b := call("plain", "")
	if !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("without a progress token: Content-Type %q, want application/json", ct)
	}
	var plain answer
	if err := json.Unmarshal(b, &plain); err != nil {
		t.Fatalf("without a progress token the body is not one JSON-RPC response: %v: %.300s", err, b)
	}
	check("plain", plain)

	ct, b = call("tracked", "p1")
	if !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("with a progress token: Content-Type %q, want text/event-stream", ct)
	}
	var progress int
	var tracked answer
	for line := range strings.SplitSeq(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch {
		case strings.Contains(data, `"notifications/progress"`):
			if tracked.ID != "" {
				t.Errorf("progress after the result: %s", data)
			}
			progress++
		case strings.Contains(data, `"result"`):
			if err := json.Unmarshal([]byte(data), &tracked); err != nil {
				t.Fatal(err)
			}
		}
	}
	if progress == 0 {
		t.Errorf("with a progress token: no notifications/progress in %.500s", b)
	}
	check("tracked", tracked)
}

// requireWriteApproval makes the demo agent wait for a human's yes
// before every write.
func requireWriteApproval(t *testing.T, f *fixture) {
	t.Helper()
	def, _ := f.dep.Agents().Get("demo")
	def.Approval = &agent.ApprovalPolicy{Write: agent.ApprovalRequired}
	if err := f.dep.Agents().Put(context.Background(), def); err != nil {
		t.Fatal(err)
	}
}

// sentTo counts the activity records of CHAT_SEND_MESSAGE requests in a
// conversation: what the upstream received.
func sentTo(t *testing.T, f *fixture, thread string) int {
	t.Helper()
	acts, _ := f.dep.Activity().List(context.Background(), agent.ConversationKey("", "demo", thread), 1000)
	n := 0
	for _, a := range acts {
		if a.Tool == "chat.CHAT_SEND_MESSAGE" && a.Method != "" {
			n++
		}
	}
	return n
}

// A write that needs approval asks the client through elicitation when
// it declared the capability (an input request at 2026-07-28,
// elicitation/create at 2025-11-25), with the evidence; accept runs it
// once, decline denies it — and the inbox holds the answer either way.
func TestWriteApprovalByElicitation(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	requireWriteApproval(t, f)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		for _, approve := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/approve=%v", v, approve), func(t *testing.T) {
				thread := fmt.Sprintf("elicit-%s-%v", strings.ReplaceAll(v, "-", ""), approve)
				var asked []*mcp.ElicitParams
				cs := f.connect(t, v, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked = append(asked, r.Params)
					if !approve {
						return &mcp.ElicitResult{Action: "decline"}, nil
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true}}, nil
				}})
				// A read first: the evidence shows its verdict.
				if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "CHAT_LIST_CONVERSATIONS", Arguments: map[string]any{"_thread": thread}}); err != nil || res.IsError {
					t.Fatalf("read: %v %s", err, text(res))
				}
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "CHAT_SEND_MESSAGE",
					Arguments: map[string]any{"conversation_id": "conv_01", "text": "hello", "_thread": thread}})
				if err != nil {
					t.Fatal(err)
				}
				if len(asked) != 1 || !strings.Contains(asked[0].Message, "POST /conversations/{conversation_id}/messages") ||
					!strings.Contains(asked[0].Message, "- CHAT_LIST_CONVERSATIONS: ") {
					t.Fatalf("elicitations: %d, %q", len(asked), asked[len(asked)-1].Message)
				}
				id, _ := res.Meta[MetaApproval].(map[string]any)["id"].(string)
				a, err := f.dep.Inbox().Get(context.Background(), id)
				if err != nil {
					t.Fatalf("the inbox has no request %q: %v", id, err)
				}
				if approve {
					if res.IsError || sentTo(t, f, thread) != 1 || a.Status != agent.ApprovalUsed {
						t.Errorf("approved: error %v (%s), %d requests sent, inbox %s", res.IsError, text(res), sentTo(t, f, thread), a.Status)
					}
				} else if !res.IsError || !strings.HasPrefix(text(res), agent.CodeApprovalDenied) || sentTo(t, f, thread) != 0 || a.Status != agent.ApprovalDenied {
					t.Errorf("declined: %s, %d requests sent, inbox %s", text(res), sentTo(t, f, thread), a.Status)
				}
			})
		}
	}
}

// A client without elicitation gets approval_required naming the request
// in the approvals inbox; the upstream is not called until a person
// approves it there and the client makes the same call again — which
// then runs once.
func TestWriteApprovalThroughTheInbox(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	requireWriteApproval(t, f)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			thread := "inbox-" + strings.ReplaceAll(v, "-", "")
			cs := f.connect(t, v, nil)
			send := func(text string) *mcp.CallToolResult {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "CHAT_SEND_MESSAGE",
					Arguments: map[string]any{"conversation_id": "conv_01", "text": text, "_thread": thread}})
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			res := send("hello")
			if !res.IsError || !strings.HasPrefix(text(res), agent.CodeApprovalRequired) {
				t.Fatalf("first call: %s", text(res))
			}
			id, _ := res.Meta[MetaApproval].(map[string]any)["id"].(string)
			if !strings.Contains(text(res), id) || sentTo(t, f, thread) != 0 {
				t.Fatalf("the error does not name %q, or the upstream was called: %s", id, text(res))
			}
			if again := send("hello"); !again.IsError || sentTo(t, f, thread) != 0 || !strings.Contains(text(again), "has not been answered") {
				t.Errorf("called again before an answer: %s", text(again))
			}
			if other := send("other words"); !other.IsError || strings.Contains(text(other), id) {
				t.Errorf("other arguments share the approval: %s", text(other))
			}
			if _, err := f.dep.Inbox().Answer(context.Background(), id, true, "looks fine"); err != nil {
				t.Fatal(err)
			}
			if ran := send("hello"); ran.IsError || sentTo(t, f, thread) != 1 {
				t.Errorf("after approval: %s, %d sent", text(ran), sentTo(t, f, thread))
			}
			if once := send("hello"); !once.IsError || sentTo(t, f, thread) != 1 || !strings.HasPrefix(text(once), agent.CodeApprovalRequired) {
				t.Errorf("an approval ran twice: %s, %d sent", text(once), sentTo(t, f, thread))
			}
		})
	}
}

// What a call resolves and assembles is kept between calls, and a change
// of the catalog or of the conversation's loaded tools reaches the next
// call and the next tools/list: a tool loaded is callable at once, a
// tool its toolkit drops (an MCP server's list changed, a user's
// toolkit reconnected) is refused by the next call, and back once the
// toolkit lists it again.
func TestCatalogChangeReachesNextCall(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	cat := f.dep.Catalog()
	var mail *tools.Tool
	for _, tool := range cat.All() {
		if tool.Name == "MAIL_SEND_EMAIL" {
			mail = tool
		}
	}
	if mail == nil {
		t.Fatal("the demo has no MAIL_SEND_EMAIL")
	}
	toolkit := cat.Provider(mail.Provider)
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(v, func(t *testing.T) {
			cs := f.connect(t, v, nil)
			thread := "catalog-" + v
			// send reports what a call of the tool answered; "" when it ran.
			send := func() string {
				t.Helper()
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "MAIL_SEND_EMAIL", Arguments: map[string]any{
					"to": []any{"a@example.com"}, "subject": "hi", "messageBody": "hello", "_thread": thread}})
				switch {
				case err != nil:
					return err.Error() // not registered: the SDK's "unknown tool"
				case res.IsError:
					return text(res)
				}
				return ""
			}
			refused := func(answer string) bool {
				return strings.Contains(answer, "no tool") || strings.Contains(answer, "unknown tool") || strings.Contains(answer, "is not loaded in this conversation: call load_tool")
			}
			listed := func() bool {
				t.Helper()
				res, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Meta: mcp.Meta{MetaThread: thread}})
				if err != nil {
					t.Fatal(err)
				}
				return slices.ContainsFunc(res.Tools, func(tool *mcp.Tool) bool { return tool.Name == "MAIL_SEND_EMAIL" })
			}
			// Calls before the load: the conversation's list is kept.
			for range 2 {
				if got := send(); !refused(got) {
					t.Fatalf("a pooled tool was called before load_tool: %q", got)
				}
			}
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "load_tool",
				Arguments: map[string]any{"toolName": "MAIL_SEND_EMAIL", "_thread": thread}})
			if err != nil || res.IsError {
				t.Fatalf("load_tool: %v %s", err, text(res))
			}
			if got := send(); got != "" {
				t.Fatalf("the loaded tool, called next: %s", got)
			}
			if !listed() {
				t.Fatal("the loaded tool is not listed")
			}
			// The toolkit drops it.
			rest := slices.DeleteFunc(slices.Clone(toolkit), func(tool *tools.Tool) bool { return tool.ID == mail.ID })
			if err := cat.ReplaceProvider(mail.Provider, rest); err != nil {
				t.Fatal(err)
			}
			if got := send(); !refused(got) {
				t.Errorf("a tool its toolkit dropped was called: %q", got)
			}
			if listed() {
				t.Error("a tool its toolkit dropped is listed")
			}
			// And lists it again.
			if err := cat.ReplaceProvider(mail.Provider, toolkit); err != nil {
				t.Fatal(err)
			}
			if got := send(); got != "" {
				t.Errorf("the tool back in its toolkit: %s", got)
			}
			if !listed() {
				t.Error("the tool back in its toolkit is not listed")
			}
			// The agent's bindings change: its toolkit unbound, then bound again.
			def, _ := f.dep.Agents().Get("demo")
			put := func(d agent.Definition) {
				t.Helper()
				if err := f.dep.Agents().Put(context.Background(), d); err != nil {
					t.Fatal(err)
				}
			}
			unbound := def
			unbound.AgentTools = slices.DeleteFunc(slices.Clone(def.AgentTools), func(b agent.Binding) bool { return b.Toolkit == mail.Provider })
			put(unbound)
			if got := send(); !refused(got) {
				t.Errorf("a tool of a toolkit the agent no longer binds was called: %q", got)
			}
			put(def)
			if got := send(); got != "" {
				t.Errorf("the tool bound again: %s", got)
			}
		})
	}
}

// On 2026-07-28 two clients of one caller number their requests alike,
// so a cancellation naming a JSON-RPC id must never reach the other
// client's call: client A cancels its call (the Go SDK closes the call's
// stream and sends notifications/cancelled for its id), and client B's
// call with the same id runs to its result. A notice naming an id two
// running calls share is ignored too; one naming an id only one call
// has still cancels it.
func TestStatelessCancelStaysWithItsClient(t *testing.T) {
	f := newFixture(t, Options{}, func(c *deploy.Config) { c.SetDemoLatency(100) })
	started := make(chan struct{}, 256)
	progress := &mcp.ClientOptions{ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) {
		select {
		case started <- struct{}{}:
		default:
		}
	}}
	a, b := f.connect(t, "", progress), f.connect(t, "", nil)
	// Two collections: two walks, no page shared.
	call := func(cs *mcp.ClientSession, ctx context.Context, thread, tool string) (*mcp.CallToolResult, error) {
		p := &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"_all_pages": true, "_fields": []any{"id"}, "_thread": thread}}
		p.SetProgressToken("t")
		return cs.CallTool(ctx, p)
	}
	ctx, cancel := context.WithCancel(context.Background())
	aDone := make(chan error, 1)
	go func() {
		_, err := call(a, ctx, "cancel-a", "list_orders")
		aDone <- err
	}()
	<-started // A's walk is under way
	bDone := make(chan error, 1)
	var bRes *mcp.CallToolResult
	go func() {
		var err error
		bRes, err = call(b, context.Background(), "cancel-b", "list_tickets")
		bDone <- err
	}()
	time.Sleep(300 * time.Millisecond) // B's walk is under way too
	cancel()
	if err := <-aDone; err == nil {
		t.Error("A's cancelled call answered")
	}
	if err := <-bDone; err != nil {
		t.Fatalf("B's call ended with A's cancellation: %v", err)
	}
	if m := structured(t, bRes); m["_stoppedBy"] == "cancelled" {
		t.Errorf("B's walk did not finish: %v", m["_note"])
	}
	if v := waitVerdict(t, f, agent.ConversationKey("", "demo", "cancel-a")); !strings.Contains(v.Verdict, "cancelled") {
		t.Errorf("A's verdict = %q", v.Verdict)
	}
}

// A 2025-11-25 client that never answers an elicitation holds no call
// past a bound: the server's drain withdraws it (the call ends as
// approval_required, the request waiting in the inbox) and Close then
// returns; an answer given in the inbox meanwhile releases the call,
// which runs once.
func TestUnansweredElicitation(t *testing.T) {
	f := newFixture(t, Options{}, nil)
	requireWriteApproval(t, f)
	asked := make(chan string, 4)
	cs := f.connect(t, "2025-11-25", &mcp.ClientOptions{ElicitationHandler: func(ctx context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked <- r.Params.Message
		<-ctx.Done() // nobody answers
		return nil, ctx.Err()
	}})
	approvalID := regexp.MustCompile(`apr_[A-Za-z0-9_]+`)
	send := func(thread string) (chan *mcp.CallToolResult, string) {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "CHAT_SEND_MESSAGE",
				Arguments: map[string]any{"conversation_id": "conv_01", "text": "hello", "_thread": thread}})
			if err != nil {
				t.Error(err)
			}
			done <- res
		}()
		return done, approvalID.FindString(<-asked)
	}
	wait := func(done chan *mcp.CallToolResult) *mcp.CallToolResult {
		t.Helper()
		select {
		case res := <-done:
			if res == nil {
				t.FailNow()
			}
			return res
		case <-time.After(30 * time.Second):
			t.Fatal("the call still waits for the elicitation")
		}
		return nil
	}

	done, id := send("unanswered-inbox")
	if _, err := f.dep.Inbox().Answer(context.Background(), id, true, "from the inbox"); err != nil {
		t.Fatal(err)
	}
	if res := wait(done); res.IsError || sentTo(t, f, "unanswered-inbox") != 1 {
		t.Errorf("approved in the inbox: %s, %d sent", text(res), sentTo(t, f, "unanswered-inbox"))
	}

	done, id = send("unanswered-drain")
	f.srv.Drain()
	res := wait(done)
	if !res.IsError || !strings.HasPrefix(text(res), agent.CodeApprovalRequired) || !strings.Contains(text(res), id) {
		t.Errorf("withdrawn at the drain: %s", text(res))
	}
	if a, err := f.dep.Inbox().Get(context.Background(), id); err != nil || a.Status != agent.ApprovalPending {
		t.Errorf("the inbox: %+v %v", a, err)
	}
	closed := make(chan struct{})
	go func() {
		f.srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close still waits")
	}
}

// With the dataset cache off no tool offers _refresh, and the server's
// instructions do not tell the client to use it either; with it on,
// both do.
func TestRefreshOnlyWhereTheCacheServes(t *testing.T) {
	for _, mode := range []string{"on", "off", "shadow"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t, Options{}, func(c *deploy.Config) { c.Cache.Mode = mode })
			cs := f.connect(t, "2025-11-25", nil)
			instr := cs.InitializeResult().Instructions
			var orders *mcp.Tool
			for _, tool := range listAll(t, cs) {
				if tool.Name == "list_orders" {
					orders = tool
				}
			}
			if orders == nil {
				t.Fatal("no list_orders")
			}
			_, offered := orders.InputSchema.(map[string]any)["properties"].(map[string]any)["_refresh"]
			want := mode == "on"
			if offered != want || strings.Contains(instr, "_refresh") != want {
				t.Errorf("cache %s: _refresh offered %v, in the instructions %v; want %v", mode, offered, strings.Contains(instr, "_refresh"), want)
			}
			if !strings.Contains(instr, "_all_pages") || !strings.Contains(instr, "_aggregate") {
				t.Errorf("cache %s: the instructions lost more than _refresh: %q", mode, instr)
			}
		})
	}
}
