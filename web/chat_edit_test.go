package web

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// TestChatRewritesRefused: regenerate and edit requests that name no
// message of the chat, or the wrong kind, are refused with what is wrong
// (the AI SDK's client would refuse the same on its side), and the
// thread is left as it was.
func TestChatRewritesRefused(t *testing.T) {
	ts := startDemo(t, nil)
	resp := ts.post(t, "/v1/agents/demo/chat", "", chatBody("e1", "u1", "How many open orders worth more than 100?"))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	before := msgIDs(ts.thread(t, "e1"))
	if !strings.HasPrefix(before, "user:u1 assistant:") {
		t.Fatalf("thread after a turn: %s", before)
	}
	answer := strings.TrimPrefix(before, "user:u1 assistant:")
	tests := []struct {
		name string
		body map[string]any
		want string
	}{
		{"regenerate an unknown message", map[string]any{"id": "e1", "trigger": "regenerate-message", "messageId": "nope"},
			`message "nope" is not in the chat`},
		{"edit an unknown message", withMessageID(chatBody("e1", "nope", "x"), "nope"),
			`message "nope" is not in the chat, so it cannot be replaced`},
		{"edit an answer", withMessageID(chatBody("e1", answer, "x"), answer),
			"only a user message can be edited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, b := ts.do(t, "POST", "/v1/agents/demo/chat", "", tt.body)
			var e errorBody
			json.Unmarshal(b, &e)
			if st != 400 || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("%d %s; want 400 saying %q", st, b, tt.want)
			}
			if got := msgIDs(ts.thread(t, "e1")); got != before {
				t.Errorf("the thread changed: %s, was %s", got, before)
			}
		})
	}
}

func withMessageID(body map[string]any, id string) map[string]any {
	body["messageId"] = id
	return body
}
