package web

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/trawl-dev/trawl/agent"
)

// scripted is a model that plays one function per step and records the
// tool names each step offered.
type scripted struct {
	mu    sync.Mutex
	steps []func(req agent.ModelRequest) []agent.ModelEvent
	seen  [][]string
	reqs  []agent.ModelRequest
}

func (m *scripted) Stream(ctx context.Context, req agent.ModelRequest) iter.Seq2[agent.ModelEvent, error] {
	return func(yield func(agent.ModelEvent, error) bool) {
		m.mu.Lock()
		i := len(m.seen)
		var names []string
		for _, t := range req.Tools {
			names = append(names, t.Name)
		}
		m.seen = append(m.seen, names)
		m.reqs = append(m.reqs, req)
		m.mu.Unlock()
		evs := []agent.ModelEvent{{Kind: agent.EventTextDelta, Text: "done"}, {Kind: agent.EventFinish, FinishReason: "stop"}}
		if i < len(m.steps) {
			evs = m.steps[i](req)
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
	}
}

func toolCall(id, name, args string) []agent.ModelEvent {
	return []agent.ModelEvent{{Kind: agent.EventToolCallStart, ToolCallID: id, ToolName: name},
		{Kind: agent.EventToolCallDelta, ArgsDelta: args}, {Kind: agent.EventFinish, FinishReason: "tool_calls"}}
}

func lastToolOutput(req agent.ModelRequest) string {
	return req.Messages[len(req.Messages)-1].Content
}

func startWithModel(t *testing.T, m agent.Model, mutate func(*Config)) *testServer {
	t.Helper()
	cfg := DemoConfig()
	cfg.DataDir = t.TempDir()
	if mutate != nil {
		mutate(cfg)
	}
	srv, err := New(context.Background(), cfg, Options{Stdout: io.Discard, Model: m})
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{Server: srv, URL: newHTTPServer(t, srv)}
}

func has(list []string, name string) bool {
	for _, n := range list {
		if n == name {
			return true
		}
	}
	return false
}

// TestDiscoveryFindsAndLoadsAMailTool: the demo agent sees Chat and
// Calendar directly and Mail only through search; it finds a Mail tool
// with search_tools, loads it, and calls it from the next step on.
func TestDiscoveryFindsAndLoadsAMailTool(t *testing.T) {
	m := &scripted{steps: []func(agent.ModelRequest) []agent.ModelEvent{
		func(agent.ModelRequest) []agent.ModelEvent {
			return toolCall("c1", "search_tools", `{"query":"send an email to a customer"}`)
		},
		func(req agent.ModelRequest) []agent.ModelEvent {
			var res struct {
				Results []struct{ Name string } `json:"results"`
			}
			json.Unmarshal([]byte(lastToolOutput(req)), &res)
			name := "none"
			for _, r := range res.Results {
				if r.Name == "MAIL_SEND_EMAIL" {
					name = r.Name
				}
			}
			return toolCall("c2", "load_tool", `{"toolName":"`+name+`"}`)
		},
		func(agent.ModelRequest) []agent.ModelEvent {
			return toolCall("c3", "MAIL_SEND_EMAIL", `{"to":["dana@example.com"],"subject":"Your invoice","messageBody":"Hello Dana"}`)
		},
	}}
	ts := startWithModel(t, m, nil)
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("d1", "u1", "email Dana about her invoice"))
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	first := m.seen[0]
	for _, want := range []string{"CHAT_SEND_MESSAGE", "search_tools", "load_tool", "list_connections", "connect_toolkit", "list_orders"} {
		if !has(first, want) {
			t.Errorf("step 1 lacks %s: %v", want, first)
		}
	}
	for _, pooled := range []string{"MAIL_SEND_EMAIL", "MAIL_LIST_MESSAGES"} {
		if has(first, pooled) {
			t.Errorf("step 1 offers pooled %s directly", pooled)
		}
	}
	if has(m.seen[1], "MAIL_SEND_EMAIL") || !has(m.seen[2], "MAIL_SEND_EMAIL") {
		t.Errorf("the loaded tool should join from the step after load_tool: %v / %v", m.seen[1], m.seen[2])
	}
	var errs []string
	for _, e := range events {
		if strings.Contains(e.Data, "tool-output-error") || strings.Contains(e.Data, "tool-input-error") {
			errs = append(errs, e.Data)
		}
	}
	if len(errs) > 0 || !strings.Contains(lastToolOutput(m.reqs[3]), "id") {
		t.Errorf("errors %v; send result %s", errs, lastToolOutput(m.reqs[3]))
	}
	// The loaded tool is kept with the thread.
	th, err := ts.threads.GetThread(context.Background(), agent.ThreadKey("", "demo", "d1"))
	if err != nil || !has(th.Loaded, "mail.MAIL_SEND_EMAIL") {
		t.Errorf("thread loaded = %v (%v)", th.Loaded, err)
	}
	// The same search without a model.
	st, b := ts.do(t, "POST", "/v1/agents/demo/search_tools", "", map[string]any{"query": "send an email", "limit": 3})
	if st != 200 || !strings.Contains(string(b), "MAIL_SEND_EMAIL") {
		t.Errorf("search endpoint: %d %s", st, b)
	}
	if st, _ := ts.do(t, "POST", "/v1/agents/demo/search_tools", "", map[string]any{"limit": 3}); st != 400 {
		t.Errorf("search without a query: %d", st)
	}
}

// TestConnectToolkit: a toolkit without an organization credential must
// be connected by the user; the error names connect_toolkit, whose link
// opens the page where the user stores a credential.
func TestConnectToolkit(t *testing.T) {
	m := &scripted{steps: []func(agent.ModelRequest) []agent.ModelEvent{
		func(agent.ModelRequest) []agent.ModelEvent { return toolCall("c1", "list_connections", `{}`) },
		func(agent.ModelRequest) []agent.ModelEvent {
			return toolCall("c2", "CHAT_LIST_CONVERSATIONS", `{}`)
		},
		func(agent.ModelRequest) []agent.ModelEvent {
			return toolCall("c3", "connect_toolkit", `{"toolkit":"chat"}`)
		},
	}}
	ts := startWithModel(t, m, func(c *Config) { c.ConnectDemoToolkits() })
	_, sb := ts.do(t, "POST", "/v1/sessions", "", map[string]any{"user_id": "ann"})
	var sess struct{ Token string }
	json.Unmarshal(sb, &sess)
	resp := ts.post(t, "/v1/agents/demo/chat", sess.Token, chatBody("k1", "u1", "what chats do I have?"))
	readSSE(t, resp.Body)
	resp.Body.Close()
	conns := lastToolOutput(m.reqs[1])
	if !strings.Contains(conns, `"toolkit":"chat"`) || strings.Contains(conns, `"connected":true`) ||
		!strings.Contains(conns, `"toolkit":"mail","name":"Mail"`) || !strings.Contains(conns, "find with search_tools") {
		t.Errorf("list_connections: %s", conns)
	}
	if out := lastToolOutput(m.reqs[2]); !strings.Contains(out, "connect_toolkit") {
		t.Errorf("unconnected call: %s", out)
	}
	link := regexp.MustCompile(`http://[^"]+/connect/chat\?code=[0-9a-f]+`).FindString(lastToolOutput(m.reqs[3]))
	if link == "" {
		t.Fatalf("connect_toolkit gave no link: %s", lastToolOutput(m.reqs[3]))
	}
	u, _ := url.Parse(link)
	browser, csrf, body := openConnect(t, ts.URL+u.Path+"?"+u.RawQuery)
	if !strings.Contains(body, "<form") || !strings.Contains(body, "for account <code>ann</code>") {
		t.Fatalf("connect page: %s", body)
	}
	st, body := submitConnect(t, browser, ts.URL+u.Path, ts.URL, csrf, ts.cfg.DemoToken())
	if st != 200 || !strings.Contains(body, "is connected") {
		t.Fatalf("connect submit: %d %s", st, body)
	}
	// A spent attempt does not work twice.
	if st, _ := submitConnect(t, browser, ts.URL+u.Path, ts.URL, csrf, "x"); st != 403 {
		t.Errorf("reused attempt: %d", st)
	}
	// Now the user's calls carry the stored credential.
	m2 := &scripted{steps: []func(agent.ModelRequest) []agent.ModelEvent{
		func(agent.ModelRequest) []agent.ModelEvent { return toolCall("c1", "CHAT_LIST_CONVERSATIONS", `{}`) },
	}}
	ts.runner = agent.NewRunner(agent.RunnerOptions{Model: m2, Engine: ts.engine, Retrieval: ts.results, Catalog: ts.catalog})
	resp = ts.post(t, "/v1/agents/demo/chat", sess.Token, chatBody("k2", "u1", "what chats do I have?"))
	readSSE(t, resp.Body)
	resp.Body.Close()
	if out := lastToolOutput(m2.reqs[1]); strings.Contains(out, "error") {
		t.Errorf("connected call: %s", out)
	}
}
