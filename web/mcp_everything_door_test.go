package web

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// everythingAgent serves an agent "demo" bound to the pinned
// server-everything (over stdio), with a model answering from script:
// the n-th model request (from 1) gets script(n)'s delta JSON, finished
// with tool_calls when it calls one. bodies holds each request's
// messages.
func everythingAgent(t *testing.T, script func(n int) (delta, finish string)) (ts *testServer, bodies func() [][]map[string]any) {
	t.Helper()
	entry := everythingServer(t)
	var mu sync.Mutex
	var got [][]map[string]any
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []map[string]any `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, body.Messages)
		n := len(got)
		mu.Unlock()
		delta, finish := script(n)
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%q}]}\n\ndata: [DONE]\n\n", delta, finish)
	}))
	t.Cleanup(model.Close)
	dir := t.TempDir()
	yaml := fmt.Sprintf(`admin_key: admin-key-of-the-media-test-0123456789
model: {provider: openai, base_url: %q, api_key: sk-test, name: m}
mcp_servers:
  - {id: everything, command: [node, %q, stdio]}
agents:
  - id: demo
    system: Use the tools.
    max_steps: 3
    agentTools:
      - {toolkit: everything}
`, model.URL+"/v1", entry)
	path := filepath.Join(dir, "trawl.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	ts = startConfig(t, cfg, nil)
	return ts, func() [][]map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// tinyImage is the PNG server-everything's get-tiny-image returns, as it
// sent it.
func tinyImage(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../tools/testdata/mcp-everything/node_modules/@modelcontextprotocol/server-everything/dist/tools/get-tiny-image.js")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(src), `MCP_TINY_IMAGE = "`)
	b64, _, _ := strings.Cut(rest, `"`)
	png, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(png) < 100 {
		t.Fatalf("the tiny image: %v (%d bytes)", err, len(png))
	}
	return png
}

// TestMCPToolImageReachesTheModelAndMCPClients: server-everything's
// get-tiny-image answers text, a PNG and text. In chat the tool result
// names the picture as attached (no base64 in the text), and the next
// model request shows it the PNG whole as an image_url after the tool
// results; the thread keeps it. Over trawl's MCP server the same call
// returns the PNG as an image content block, byte for byte.
func TestMCPToolImageReachesTheModelAndMCPClients(t *testing.T) {
	ts, bodies := everythingAgent(t, func(n int) (string, string) {
		if n == 1 {
			return `{"role":"assistant","tool_calls":[{"index":0,"id":"call_img","type":"function","function":{"name":"get-tiny-image","arguments":"{}"}}]}`, "tool_calls"
		}
		return `{"role":"assistant","content":"It is the MCP logo."}`, "stop"
	})
	png := tinyImage(t)
	b64 := base64.StdEncoding.EncodeToString(png)
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("pic", "u1", "Show me the logo."))
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	var output string
	for _, e := range events {
		if strings.Contains(e.Data, `"tool-output-available"`) {
			output = e.Data
		}
	}
	if !strings.Contains(output, `"attached":true`) || !strings.Contains(output, `"mimeType":"image/png"`) || strings.Contains(output, b64[:40]) {
		t.Fatalf("tool output: want the picture named as attached, without its data: %s", output)
	}
	reqs := bodies()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests, want 2", len(reqs))
	}
	msgs := reqs[1]
	last := msgs[len(msgs)-1]
	prev := msgs[len(msgs)-2]
	if prev["role"] != "tool" || strings.Contains(fmt.Sprint(prev["content"]), b64[:40]) {
		t.Errorf("tool message: %v", prev)
	}
	pics, _ := json.Marshal(last["content"])
	if last["role"] != "user" || !bytes.Contains(pics, []byte(`"url":"data:image/png;base64,`+b64+`"`)) {
		t.Errorf("after the tool results, want a user message with the PNG whole as a data URL: %.400s", pics)
	}
	if _, thread := ts.do(t, "GET", "/v1/agents/demo/chats/pic", "", nil); !bytes.Contains(thread, []byte(`"media":[{"type":"image","mimeType":"image/png"`)) {
		t.Errorf("the thread does not keep the picture: %.600s", thread)
	}

	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		cs := mcpConnect(t, ts, ts.AdminKey(), v)
		res := mcpCall(t, cs, "get-tiny-image", map[string]any{})
		var img *mcp.ImageContent
		for _, c := range res.Content {
			if x, ok := c.(*mcp.ImageContent); ok {
				img = x
			}
		}
		if res.IsError || img == nil || img.MIMEType != "image/png" || !bytes.Equal(img.Data, png) {
			t.Errorf("%s: want the PNG as an image block (%d bytes); got %s", v, len(png), mcpText(res))
		}
		if !strings.Contains(mcpText(res), `"attached":true`) {
			t.Errorf("%s: the text does not name the picture: %s", v, mcpText(res))
		}
	}
}

// TestMCPToolResourcesAreKept: server-everything's resource links and
// embedded resource reach the client's model — a link's URI, name and
// type, an embedded text resource's text — and a result too long for the
// budget is stored under _resultId like any large output, where
// fetchToolResult reads every link.
func TestMCPToolResourcesAreKept(t *testing.T) {
	ts, _ := everythingAgent(t, func(int) (string, string) { return `{"content":"-"}`, "stop" })
	cs := mcpConnect(t, ts, ts.AdminKey(), "2026-07-28")
	res := mcpCall(t, cs, "get-resource-reference", map[string]any{"resourceType": "Text", "resourceId": 2})
	if text := mcpText(res); res.IsError || !strings.Contains(text, `"type":"resource"`) || !strings.Contains(text, `"text":"Resource 2: This is a plaintext resource created at`) {
		t.Errorf("embedded resource: %s", text)
	}
	res = mcpCall(t, cs, "get-resource-links", map[string]any{"count": 10, "_max_chars": 1000})
	var env struct {
		ResultID string `json:"_resultId"`
	}
	if err := json.Unmarshal([]byte(mcpText(res)), &env); err != nil || env.ResultID == "" || res.IsError {
		t.Fatalf("ten links in 1,000 characters: want them stored under _resultId: %s", mcpText(res))
	}
	var fetched struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal([]byte(mcpText(mcpCall(t, cs, "fetchToolResult", map[string]any{"resultId": env.ResultID, "offset": 0, "length": 20000}))), &fetched)
	full := fetched.Text
	for _, want := range []string{`"type":"resource_link"`, `"name":"Text Resource 10"`, `"uri":"demo://resource/dynamic/blob/9"`} {
		if !strings.Contains(full, want) {
			t.Errorf("fetchToolResult: no %s in %.800s", want, full)
		}
	}
}

// TestMCPUpstreamResourcesAndPrompts: trawl's MCP server passes the
// resources and prompts of server-everything (the agent's toolkit) on to
// a Go SDK client at both revisions — the static documents listed and
// read, the dynamic templates listed and one read through them, the
// prompts listed and rendered with their arguments; an unknown URI and
// a missing argument get the upstream's own error; without a token,
// 401.
func TestMCPUpstreamResourcesAndPrompts(t *testing.T) {
	ts, _ := everythingAgent(t, func(int) (string, string) { return `{"content":"-"}`, "stop" })
	ctx := t.Context()
	for _, v := range []string{"2026-07-28", "2025-11-25"} {
		cs := mcpConnect(t, ts, ts.AdminKey(), v)
		if caps := cs.InitializeResult().Capabilities; v == "2025-11-25" && (caps.Resources == nil || caps.Prompts == nil) {
			t.Errorf("%s: capabilities %+v: want resources and prompts", v, caps)
		}
		var docs []string
		for r, err := range cs.Resources(ctx, nil) {
			if err != nil {
				t.Fatalf("%s: resources/list: %v", v, err)
			}
			docs = append(docs, r.URI)
		}
		if len(docs) == 0 || !strings.HasPrefix(docs[0], "demo://resource/static/document/") {
			t.Fatalf("%s: resources: %v", v, docs)
		}
		read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: docs[0]})
		if err != nil || len(read.Contents) != 1 || read.Contents[0].URI != docs[0] || read.Contents[0].Text == "" {
			t.Errorf("%s: resources/read %s: %v %+v", v, docs[0], err, read)
		}
		var templates []string
		for tpl, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				t.Fatalf("%s: resources/templates/list: %v", v, err)
			}
			templates = append(templates, tpl.URITemplate)
		}
		if !slices.Contains(templates, "demo://resource/dynamic/text/{resourceId}") {
			t.Errorf("%s: templates: %v", v, templates)
		}
		read, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/dynamic/text/7"})
		if err != nil || len(read.Contents) != 1 || !strings.HasPrefix(read.Contents[0].Text, "Resource 7: This is a plaintext resource") {
			t.Errorf("%s: a templated resource: %v %+v", v, err, read)
		}
		if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "demo://resource/nowhere"}); err == nil {
			t.Errorf("%s: an unknown resource was read", v)
		}
		var prompts []string
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				t.Fatalf("%s: prompts/list: %v", v, err)
			}
			prompts = append(prompts, p.Name)
		}
		if !slices.Contains(prompts, "simple-prompt") || !slices.Contains(prompts, "args-prompt") {
			t.Fatalf("%s: prompts: %v", v, prompts)
		}
		got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt", Arguments: map[string]string{"city": "Lyon"}})
		if err != nil || len(got.Messages) == 0 {
			t.Fatalf("%s: prompts/get: %v %+v", v, err, got)
		}
		if tc, ok := got.Messages[0].Content.(*mcp.TextContent); !ok || tc.Text != "What's weather in Lyon?" {
			t.Errorf("%s: the prompt: %+v", v, got.Messages[0].Content)
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "args-prompt"}); err == nil {
			t.Errorf("%s: args-prompt without its required city was rendered", v)
		}
		if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "no-such-prompt"}); err == nil || !strings.Contains(err.Error(), "no prompt") {
			t.Errorf("%s: an unknown prompt: %v", v, err)
		}
	}
	req, _ := http.NewRequest("POST", ts.URL+"/v1/agents/demo/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"resources/list","params":{}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("resources/list without a token: %d, want 401", resp.StatusCode)
	}
}

// TestStudioShowsUpstreamProgress: server-everything's long-running
// operation reports its steps through notifications/progress; relayed as
// data-tool-loop-progress, the Studio's card shows them ("upstream 2 of
// 3") while the call runs, its bar filling by that fraction.
func TestStudioShowsUpstreamProgress(t *testing.T) {
	ts, _ := everythingAgent(t, func(n int) (string, string) {
		if n == 1 {
			return `{"role":"assistant","tool_calls":[{"index":0,"id":"call_long","type":"function","function":{"name":"trigger-long-running-operation","arguments":"{\"duration\":4,\"steps\":4}"}}]}`, "tool_calls"
		}
		return `{"role":"assistant","content":"It finished."}`, "stop"
	})
	br := startBrowser(t, 2*time.Minute)
	defer br.finish()
	line := `.tool-call[data-tool-call-id="call_long"] [data-tool-loop-progress]`
	br.run("ask for the long operation",
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("key-input")),
		chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitNotVisible(chromedp.ID("key-dialog")),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SetValue(chromedp.ID("chat-input"), "Run the long operation."),
		chromedp.Click(chromedp.ID("chat-send")),
		jsTrue(`(() => { const e = document.querySelector('`+line+`'); return !!e && !e.hidden && /upstream [1-3] of 4/.test(e.textContent); })()`))
	if got := br.text(line); !strings.Contains(got, " of 4") {
		t.Errorf("the progress line says %q", got)
	}
	if !br.eval(`(() => { const b = document.querySelector('` + line + ` progress'); return b.hasAttribute('value') && b.value > 0 && b.value < 1; })()`) {
		t.Error("the bar does not show the upstream's fraction")
	}
	br.run("the answer", jsTrue(`document.querySelector('#chat-log').textContent.includes('It finished.')`))
}

// TestStudioShowsToolPictures: the PNG server-everything's
// get-tiny-image returns is drawn in the call's card (a data-tool-media
// chunk after the output), decoded at its 20×20 pixels, live and again
// when the chat is reopened from the thread.
func TestStudioShowsToolPictures(t *testing.T) {
	ts, _ := everythingAgent(t, func(n int) (string, string) {
		if n == 1 {
			return `{"role":"assistant","tool_calls":[{"index":0,"id":"call_img","type":"function","function":{"name":"get-tiny-image","arguments":"{}"}}]}`, "tool_calls"
		}
		return `{"role":"assistant","content":"The MCP logo."}`, "stop"
	})
	br := startBrowser(t, 2*time.Minute)
	defer br.finish()
	drawn := `(() => { const i = document.querySelector('.tool-call[data-tool-call-id="call_img"] img.tc-media'); return !!i && i.complete && i.naturalWidth === 20 && i.naturalHeight === 20; })()`
	br.run("ask for the picture",
		chromedp.Navigate(ts.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("key-input")),
		chromedp.SetValue(chromedp.ID("key-input"), ts.AdminKey()),
		chromedp.Click(chromedp.ID("key-submit")),
		chromedp.WaitNotVisible(chromedp.ID("key-dialog")),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SetValue(chromedp.ID("chat-input"), "Show me the logo."),
		chromedp.Click(chromedp.ID("chat-send")),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('The MCP logo.')`),
		jsTrue(drawn))
	br.run("reopen the chat", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("chat-input")),
		jsTrue(`document.querySelector('#chat-log').textContent.includes('The MCP logo.')`), jsTrue(drawn))
}
