package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// TestChatWithOpenAICompatibleModel runs a demo turn against a fake
// OpenAI-compatible server (model.base_url): the real go-openai client
// streams a tool call split over deltas, trawl runs it, and the second
// request carries the tool result.
func TestChatWithOpenAICompatibleModel(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]any
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		bodies = append(bodies, body)
		n := len(bodies)
		mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer sk-test" {
			http.Error(w, "bad request", 400)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta string, finish string) {
			fin := "null"
			if finish != "" {
				fin = fmt.Sprintf("%q", finish)
			}
			fmt.Fprintf(w, "data: {\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":%s}]}\n\n", delta, fin)
		}
		if n == 1 {
			chunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"list_orders","arguments":""}}]}`, "")
			for _, part := range []string{`{"status":`, `"open","_all_pages"`, `:true,"_fields":["id"]}`} {
				b, _ := json.Marshal(part)
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(b)+`}}]}`, "")
			}
			chunk(`{}`, "tool_calls")
		} else {
			chunk(`{"role":"assistant","content":"There are 364 "}`, "")
			chunk(`{"content":"open orders."}`, "")
			chunk(`{}`, "stop")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer fake.Close()
	ts := startDemo(t, func(c *Config) {
		c.Model = ModelConfig{Provider: "openai", BaseURL: fake.URL + "/v1", APIKey: "sk-test", Name: "gpt-test"}
	})
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("o1", "u1", "How many open orders?"))
	events := readSSE(t, resp.Body)
	resp.Body.Close()
	all := strings.Join(chunkTypes(events), " ")
	if !strings.Contains(all, "tool-output-available") || !strings.HasSuffix(all, "finish [DONE]") {
		t.Fatalf("stream: %s", all)
	}
	if len(bodies) != 2 {
		t.Fatalf("model requests = %d", len(bodies))
	}
	if bodies[0]["model"] != "gpt-test" || bodies[0]["stream"] != true {
		t.Errorf("first request: %v", bodies[0])
	}
	msgs := bodies[1]["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "tool" || !strings.Contains(last["content"].(string), `"_pagingComplete":true`) {
		t.Errorf("tool message sent back: %v", last)
	}
	var sys int
	for _, m := range msgs {
		if m.(map[string]any)["role"] == "system" {
			sys++
		}
	}
	if sys != 3 {
		t.Errorf("%d system messages; want the agent's, the looping guidance and the guidance for agents that write", sys)
	}
	_, b := ts.do(t, "GET", "/v1/agents/demo/chats/o1", "", nil)
	if !strings.Contains(string(b), "There are 364 open orders.") {
		t.Errorf("thread: %.300s", b)
	}
}
