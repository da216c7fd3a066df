package agent

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/trawl-dev/trawl/stream"
)

func TestTokenizerForFamilies(t *testing.T) {
	for _, tc := range []struct {
		model string
		enc   tokenizer.Encoding // "" when unknown
	}{
		{"gpt-4o-mini", tokenizer.O200kBase},
		{"GPT-4o", tokenizer.O200kBase},
		{"openai/gpt-4.1-mini", tokenizer.O200kBase},
		{"gpt-5", tokenizer.O200kBase},
		{"o3-mini", tokenizer.O200kBase},
		{"gpt-4", tokenizer.Cl100kBase},
		{"gpt-4-turbo", tokenizer.Cl100kBase},
		{"gpt-3.5-turbo", tokenizer.Cl100kBase},
		{"llama3.1:8b", ""},
		{"claude-3-5-sonnet", ""},
		{"gpt-40", ""},
		{"o1x", ""},
	} {
		t.Run(tc.model, func(t *testing.T) {
			got, ok := encodingFor(tc.model)
			if ok != (tc.enc != "") || got != tc.enc {
				t.Errorf("encodingFor(%q) = %q, %v; want %q", tc.model, got, ok, tc.enc)
			}
			if _, ok := TokenizerFor(tc.model); ok != (tc.enc != "") {
				t.Errorf("TokenizerFor(%q) ok = %v", tc.model, ok)
			}
		})
	}
}

// The embedded encodings are OpenAI's: the ids of a known text match the
// ones tiktoken gives (cl100k_base "hello world" = 15339 1917, o200k_base
// = 24912 2375), and counts agree with them.
func TestTokenizerIsTheRealEncoding(t *testing.T) {
	for _, tc := range []struct {
		enc  tokenizer.Encoding
		text string
		ids  []uint
	}{
		{tokenizer.Cl100kBase, "hello world", []uint{15339, 1917}},
		{tokenizer.O200kBase, "hello world", []uint{24912, 2375}},
	} {
		codec, err := tokenizer.Get(tc.enc)
		if err != nil {
			t.Fatal(err)
		}
		ids, toks, err := codec.Encode(tc.text)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.ids, ids); diff != "" {
			t.Errorf("%s %q ids (-want +got):\n%s", tc.enc, tc.text, diff)
		}
		// The ranks trawl counts with are the codec's.
		c := bpeCounter(tc.enc)
		for i, tok := range toks {
			if r := c.e.enc.ranks.rank(tok); r == noRank || uint(r) != ids[i] {
				t.Errorf("%s: the rank of %q is %d, the codec's id %d", tc.enc, tok, r, ids[i])
			}
		}
		if got := c.CountTokens(tc.text); got != len(tc.ids) {
			t.Errorf("%s count = %d, want %d", tc.enc, got, len(tc.ids))
		}
	}
	// JSON rows cost far fewer tokens than the 3-characters rule says.
	tc, _ := TokenizerFor("gpt-4o-mini")
	row := `{"id":"ord_0001","total":129.5,"currency":"EUR","customer":{"name":"Ada Lovelace"}}`
	if n := tc.CountTokens(row); n < 15 || n >= len(row)/2 {
		t.Errorf("a JSON row of %d chars counted %d tokens", len(row), n)
	}
}

func TestMessageAndRequestTokens(t *testing.T) {
	tc, _ := TokenizerFor("gpt-4o")
	req := ModelRequest{
		Messages: []Message{
			{Role: RoleSystem, Content: "You help."},
			{Role: RoleAssistant, ToolCalls: []ToolCall{{ID: "call_1", Name: "list_orders", Arguments: `{"status":"open"}`}}},
			{Role: RoleTool, ToolCallID: "call_1", Content: `{"items":[]}`},
		},
		Tools: []ToolSpec{{Name: "list_orders", Description: "List orders", Parameters: []byte(`{"type":"object"}`)}},
	}
	var want int
	for _, s := range []string{"system", "You help.", "assistant", "call_1", "list_orders", `{"status":"open"}`, "tool", "call_1", `{"items":[]}`, "list_orders", "List orders", `{"type":"object"}`} {
		want += tc.CountTokens(s)
	}
	want += 3 /* reply */ + 3*3 /* messages */ + 3 /* the tool call */ + 3 /* the tool */
	if got := RequestTokens(tc, &req); got != want {
		t.Errorf("RequestTokens = %d, want %d", got, want)
	}
}

// countingTokens counts the texts it is asked to tokenize.
type countingTokens struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingTokens) CountTokens(text string) int {
	c.mu.Lock()
	c.calls[text]++
	c.mu.Unlock()
	return len(strings.Fields(text))
}

func TestTokenMemoCountsEachTextOnce(t *testing.T) {
	inner := &countingTokens{calls: map[string]int{}}
	m := NewTokenMemo(inner, 2)
	long := func(w string) string { return strings.Repeat(w+" ", 40) }
	a, b, c := long("a"), long("b"), long("c")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := m.CountTokens(a); got != 40 {
				t.Errorf("count = %d", got)
			}
		})
	}
	wg.Wait()
	m.CountTokens(a)
	if n := inner.calls[a]; n < 1 || n > 8 {
		t.Errorf("a tokenized %d times", n)
	}
	before := inner.calls[a]
	m.CountTokens(a)
	if inner.calls[a] != before {
		t.Errorf("a kept text was tokenized again")
	}
	m.CountTokens(b)
	m.CountTokens(c) // over max: starts afresh
	m.CountTokens(a)
	if inner.calls[a] != before+1 {
		t.Errorf("after the memo filled, a tokenized %d times, want %d", inner.calls[a], before+1)
	}
	m.CountTokens("short")
	m.CountTokens("short")
	if inner.calls["short"] != 2 {
		t.Errorf("short texts are counted each time, got %d", inner.calls["short"])
	}
}

// A model family trawl has the tokenizer of: what a step sends is counted
// by it, and fitted to the budget by that count, not by the 3-characters
// rule — over text that costs a token every 1.3 characters, the rule
// alone sends more than twice the budget. A model trawl does not know
// keeps the estimate.
func TestContextBudgetCountsWithTheTokenizer(t *testing.T) {
	tc, _ := TokenizerFor("gpt-4o-mini")
	dense := strings.Repeat("a7$ ", 300) // 1,200 characters, about 900 tokens
	var older []UIMessage
	for i := range 12 {
		older = append(older,
			UIMessage{ID: fmt.Sprintf("u%d", i), Role: RoleUser, Parts: []Part{{Type: "text", Text: fmt.Sprintf("question %d: %s", i, dense)}}},
			UIMessage{ID: fmt.Sprintf("a%d", i), Role: RoleAssistant, Parts: []Part{{Type: "text", Text: fmt.Sprintf("answer %d: %s", i, dense)}}})
	}
	const budgetTokens = 6000
	for _, c := range []struct {
		model   string
		counted bool
	}{{"gpt-4o-mini", true}, {"local-model", false}} {
		t.Run(c.model, func(t *testing.T) {
			m := &scriptModel{}
			r, _ := newTestRunner(t, m, nil)
			def := Definition{ID: "a", Model: c.model, Context: &ContextConfig{MaxTokens: budgetTokens}}
			rec := &recorder{}
			tr := turn(def, rec)
			tr.Thread.Msgs = append(slices.Clone(older), tr.Thread.Msgs...)
			if err := r.Run(context.Background(), tr); err != nil {
				t.Fatal(err)
			}
			sent := RequestTokens(tc, &m.reqs[0])
			var report stream.ContextReport
			rec.mu.Lock()
			for _, ch := range rec.chunks {
				if d, ok := ch.(stream.Data); ok && d.Name == "context" {
					report = d.Data.(stream.ContextReport)
					break
				}
			}
			rec.mu.Unlock()
			t.Logf("sent %d tokens by the tokenizer's count; reported %d (counted %v), %d turns dropped", sent, report.Tokens, report.Counted, report.DroppedTurns)
			if c.counted {
				if sent > budgetTokens || report.Tokens != sent || !report.Counted || report.DroppedTurns == 0 {
					t.Errorf("sent %d tokens by the tokenizer (budget %d); the report says %d (counted %v), %d turns dropped",
						sent, budgetTokens, report.Tokens, report.Counted, report.DroppedTurns)
				}
				return
			}
			// The estimate alone: the same thread goes over the budget by
			// the tokenizer's count — what counting prevents.
			if sent <= 2*budgetTokens || report.Counted {
				t.Errorf("without a tokenizer, sent %d tokens by the tokenizer's count (budget %d), counted %v", sent, budgetTokens, report.Counted)
			}
		})
	}
}
