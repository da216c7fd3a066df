package claims

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpusCase is one labelled final answer of testdata/answers.jsonl.
type corpusCase struct {
	ID     string       `json:"id"`
	Lang   string       `json:"lang"`
	Answer string       `json:"answer"`
	Calls  []corpusCall `json:"calls"`
	Label  string       `json:"label"` // supported | unsupported
}

// corpusCall is a call by its verdict; output renders it as the tool
// result the runner would hold, so the corpus goes through ReadCall.
type corpusCall struct {
	ID        string `json:"id"`
	Tool      string `json:"tool"`
	Verdict   string `json:"verdict"`
	Records   *int   `json:"records"`
	Aggregate *struct {
		Completion string   `json:"completion"`
		Values     []string `json:"values"`
	} `json:"aggregate"`
}

// output is the call's result as the engine writes it (DESIGN.md §5):
// the boundary statement and _pagingComplete beside the rows, the
// _aggregate for an aggregate, plain rows for a call that did not loop.
func (c corpusCall) output() (out []byte, errText string) {
	if c.Verdict == string(Failed) {
		return nil, "upstream returned 502"
	}
	m := map[string]any{}
	switch c.Verdict {
	case string(Unverified):
		m["items"] = []map[string]int{{"id": 1}, {"id": 2}}
	case string(SingleResponse):
		m["name"] = "one object"
		m["_boundary"] = map[string]any{"completion": "single_response", "stopReason": "single_response", "records": nil}
	default:
		completion, stop := c.Verdict, "end_of_data"
		switch c.Verdict {
		case string(FirstPageOnly):
			completion, stop = "partial", "first_page_only"
		case "partial":
			stop = "max_pages"
		}
		m["_boundary"] = map[string]any{"completion": completion, "stopReason": stop, "records": c.Records, "pages": 2}
		m["_pagingComplete"] = completion == "complete"
		m["items"] = []map[string]int{{"id": 1}}
	}
	if a := c.Aggregate; a != nil {
		groups := []map[string]any{}
		for i, v := range a.Values {
			groups = append(groups, map[string]any{"status": fmt.Sprint("s", i), "value": v})
		}
		m["_aggregate"] = map[string]any{"completion": a.Completion, "groupBy": []string{"status"}, "groups": groups}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b, ""
}

func readCorpus(t *testing.T) []corpusCase {
	t.Helper()
	f, err := os.Open("testdata/answers.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []corpusCase
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		var c corpusCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("answers.jsonl line %d: %v", n, err)
		}
		if c.Label != "supported" && c.Label != "unsupported" {
			t.Fatalf("answers.jsonl line %d: label %q", n, c.Label)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestCorpus measures the check on the labelled corpus: precision and
// recall of unsupported answers, per language and overall. A flagged
// answer counts as found only if the finding names one of its calls
// whose verdict does not support a count.
func TestCorpus(t *testing.T) {
	cases := readCorpus(t)
	if len(cases) < 200 {
		t.Fatalf("the corpus holds %d answers; at least 200 are needed", len(cases))
	}
	type score struct{ tp, fp, fn, tn int }
	by := map[string]*score{"en": {}, "fr": {}, "all": {}}
	for _, c := range cases {
		var calls []Call
		weak := map[string]bool{}
		for _, cc := range c.Calls {
			out, errText := cc.output()
			call := ReadCall(cc.ID, cc.Tool, out, errText)
			calls = append(calls, call)
			if !call.Verdict.Supports() || !call.numbersVerdict().Supports() {
				weak[cc.ID] = true
			}
		}
		got := Check(c.Answer, calls)
		flagged := len(got) > 0
		for _, f := range got {
			if !weak[f.CallID] || f.Kind != KindUnsupported || f.Reason == "" {
				t.Errorf("%s: finding names %s (%s), not a call without a complete verdict: %+v", c.ID, f.CallID, f.Verdict, f)
				flagged = false
			}
		}
		for _, k := range []string{c.Lang, "all"} {
			s := by[k]
			switch {
			case flagged && c.Label == "unsupported":
				s.tp++
			case flagged:
				s.fp++
			case c.Label == "unsupported":
				s.fn++
			default:
				s.tn++
			}
		}
		switch {
		case flagged && c.Label == "supported":
			t.Logf("false positive %s: %q → %q", c.ID, c.Answer, got[0].Claim)
		case !flagged && c.Label == "unsupported":
			t.Logf("false negative %s: %q", c.ID, c.Answer)
		}
	}
	for _, k := range []string{"en", "fr", "all"} {
		s := by[k]
		p := float64(s.tp) / float64(max(1, s.tp+s.fp))
		r := float64(s.tp) / float64(max(1, s.tp+s.fn))
		fmt.Printf("claim check %-3s: %d answers, precision %.3f, recall %.3f (tp %d, fp %d, fn %d, tn %d)\n",
			k, s.tp+s.fp+s.fn+s.tn, p, r, s.tp, s.fp, s.fn, s.tn)
		if k == "all" && (p < 0.95 || r < 0.9) {
			t.Errorf("precision %.3f (want ≥ 0.95), recall %.3f (want ≥ 0.9)", p, r)
		}
	}
}

func TestCheck(t *testing.T) {
	partial := Call{ID: "call_1", Tool: "acme.list_orders", Verdict: Partial, Records: 20}
	complete := Call{ID: "call_2", Tool: "acme.list_customers", Verdict: Complete, Records: 12}
	tests := []struct {
		name   string
		answer string
		calls  []Call
		want   []Finding
	}{
		{"all over partial", "All 120 items were fetched; the list is complete.", []Call{partial}, []Finding{{
			Kind: KindUnsupported, Claim: "All 120 items", Sentence: "All 120 items were fetched; the list is complete.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		{"hedged", "I found at least 20 orders.", []Call{partial}, nil},
		{"complete calls are never read", "All 12 customers, every one of them.", []Call{complete}, nil},
		{"the claim names the complete call", "You have 12 customers.", []Call{partial, complete}, nil},
		{"the claim names the partial call", "You have 12 customers and 20 orders.", []Call{complete, partial}, []Finding{{
			Kind: KindUnsupported, Claim: "20 orders", Sentence: "You have 12 customers and 20 orders.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		{"french", "Vous avez exactement 20 commandes.", []Call{partial}, []Finding{{
			Kind: KindUnsupported, Claim: "exactement 20 commandes", Sentence: "Vous avez exactement 20 commandes.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		{"dates, prices and ids", "Order 12345 was placed on 3 March 2024 for $30.", []Call{partial}, nil},
		// "more than 100" here is the question's filter, not a hedge on the count.
		{"a filter's bound is no hedge", "There are 45 orders costing more than 500 in total.", []Call{partial}, []Finding{{
			Kind: KindUnsupported, Claim: "in total", Sentence: "There are 45 orders costing more than 500 in total.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		// A hedge word negated asserts completeness: no hedge.
		{"no gaps is no hedge", "There are no gaps: all 364 orders are listed.", []Call{partial}, []Finding{{
			Kind: KindUnsupported, Claim: "There are no gaps", Sentence: "There are no gaps: all 364 orders are listed.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		{"not a partial list is no hedge", "This is not a partial list: all 364 orders are here.", []Call{partial}, []Finding{{
			Kind: KindUnsupported, Claim: "all 364 orders", Sentence: "This is not a partial list: all 364 orders are here.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		{"no missing rows is no hedge", "I fetched every page with no missing rows, so all 364 orders are here.", []Call{partial}, []Finding{{
			Kind: KindUnsupported, Claim: "every page", Sentence: "I fetched every page with no missing rows, so all 364 orders are here.",
			CallID: "call_1", Tool: "acme.list_orders", Verdict: Partial,
		}}},
		{"a filter's bound beside a hedge", "So far I found 12 orders worth more than 100.", []Call{partial}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.answer, tt.calls)
			for i := range got {
				if !strings.Contains(got[i].Reason, got[i].Tool) {
					t.Errorf("reason %q does not name the call", got[i].Reason)
				}
				got[i].Reason = ""
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadCall(t *testing.T) {
	tests := []struct {
		name, output, errText string
		want                  Call
	}{
		{"partial walk", `{"_pagingComplete":false,"_boundary":{"completion":"partial","stopReason":"max_pages","records":20},"data":[]}`, "",
			Call{ID: "c", Tool: "t", Verdict: Partial, Records: 20}},
		{"first page only", `{"_pagingComplete":false,"_boundary":{"completion":"partial","stopReason":"first_page_only","records":30},"data":[]}`, "",
			Call{ID: "c", Tool: "t", Verdict: FirstPageOnly, Records: 30}},
		{"before the boundary statement", `{"_pagingComplete":true,"data":[]}`, "", Call{ID: "c", Tool: "t", Verdict: Complete, Records: -1}},
		{"failed", ``, "boom", Call{ID: "c", Tool: "t", Verdict: Failed, Records: -1}},
		{"a list without looping", `{"data":[{"id":1}]}`, "", Call{ID: "c", Tool: "t", Verdict: Unverified, Records: -1}},
		{"an object without looping", `{"id":1,"name":"x"}`, "", Call{ID: "c", Tool: "t", Verdict: SingleResponse, Records: -1}},
		{"text", `"hello"`, "", Call{ID: "c", Tool: "t", Verdict: SingleResponse, Records: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, ReadCall("c", "t", []byte(tt.output), tt.errText)); diff != "" {
				t.Errorf("ReadCall (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAggregateCompletion: an aggregate's numbers carry the aggregate's
// completion, whatever the call's own.
func TestAggregateCompletion(t *testing.T) {
	out := `{"_aggregate":{"completion":"partial","groupBy":["status"],"groups":[{"status":"paid","sum":"131895.20"}]}}`
	c := ReadCall("q", "query_tool_result", []byte(out), "")
	got := Check("Revenue came to 131,895.20 for paid orders.", []Call{c})
	if len(got) != 1 || got[0].Verdict != Partial || got[0].CallID != "q" {
		t.Fatalf("Check = %+v, want one finding on q, partial", got)
	}
	if got := Check("Revenue came to at least 131,895.20.", []Call{c}); got != nil {
		t.Errorf("a hedged aggregate number was flagged: %+v", got)
	}
}

// FuzzCheck: any text, however odd its runes, is read without a panic and
// every finding quotes words of the answer.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"All 120 items.", "Il y a 2 000 commandes ; toutes.", "İİ all 3 ÉÉ", "total: 1.234,5 €", "\u00a0all\u202f20 rows"} {
		f.Add(s)
	}
	calls := []Call{{ID: "c", Tool: "acme.list_orders", Verdict: Partial, Records: -1}}
	f.Fuzz(func(t *testing.T, s string) {
		for _, got := range Check(s, calls) {
			if got.Claim == "" || !strings.Contains(unmark.Replace(strings.ToValidUTF8(s, "\uFFFD")), got.Claim) {
				t.Errorf("claim %q is not words of %q", got.Claim, s)
			}
		}
	})
}
