package discovery

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// labelledQuery is one entry of testdata/queries.json: a request as a
// user or a model would put it, and the tools that serve it. When more
// than one tool is listed, any of them is a right answer.
type labelledQuery struct {
	Query string   `json:"query"`
	Tools []string `json:"tools"`
}

// rankingMetrics are the search quality over a labelled set. Recall@k is
// the share of queries with a right tool among the first k results; MRR
// is the mean of 1/rank of the first right tool (0 when none is in the
// first MaxSearchLimit).
type rankingMetrics struct {
	Queries          int
	Recall1, Recall5 float64
	MRR              float64
	Misses           []string // queries with no right tool in the first 5
}

func evaluate(t *testing.T, ix *Index, qs []labelledQuery) rankingMetrics {
	t.Helper()
	m := rankingMetrics{Queries: len(qs)}
	for _, q := range qs {
		hits, err := ix.Search(q.Query, "", MaxSearchLimit)
		if err != nil {
			t.Fatalf("Search(%q): %v", q.Query, err)
		}
		rank := 0
		for i, h := range hits {
			if slices.Contains(q.Tools, h.Tool.Name) {
				rank = i + 1
				break
			}
		}
		if rank == 1 {
			m.Recall1++
		}
		if rank >= 1 && rank <= 5 {
			m.Recall5++
		} else {
			m.Misses = append(m.Misses, fmt.Sprintf("%q want %v, got %v", q.Query, q.Tools, hitNames(hits[:min(5, len(hits))])))
		}
		if rank > 0 {
			m.MRR += 1 / float64(rank)
		}
	}
	n := float64(len(qs))
	m.Recall1 /= n
	m.Recall5 /= n
	m.MRR /= n
	return m
}

func loadQueries(t *testing.T) []labelledQuery {
	t.Helper()
	data, err := os.ReadFile("testdata/queries.json")
	if err != nil {
		t.Fatal(err)
	}
	var qs []labelledQuery
	if err := json.Unmarshal(data, &qs); err != nil {
		t.Fatalf("testdata/queries.json: %v", err)
	}
	return qs
}

// TestRanking measures search_tools over all four demo toolkits with the
// labelled queries of testdata/queries.json, and fails under a recall@5
// of 0.90.
func TestRanking(t *testing.T) {
	qs := loadQueries(t)
	if len(qs) < 60 {
		t.Fatalf("testdata/queries.json holds %d queries; want at least 60", len(qs))
	}
	ix, err := NewIndex(allDemoTools(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	for _, q := range qs {
		if strings.TrimSpace(q.Query) == "" || len(q.Tools) == 0 {
			t.Fatalf("labelled query %+v: query and tools are required", q)
		}
		for _, name := range q.Tools {
			if _, ok := ix.Tool(name); !ok {
				t.Fatalf("labelled query %q names %s, which no demo toolkit has", q.Query, name)
			}
		}
	}

	ix.synonyms = false
	plain := evaluate(t, ix, qs)
	ix.synonyms = true
	m := evaluate(t, ix, qs)
	t.Logf("%d queries, BM25 alone:      recall@1 %.3f  recall@5 %.3f  MRR %.3f", plain.Queries, plain.Recall1, plain.Recall5, plain.MRR)
	t.Logf("%d queries, with thesaurus:  recall@1 %.3f  recall@5 %.3f  MRR %.3f", m.Queries, m.Recall1, m.Recall5, m.MRR)
	for _, miss := range m.Misses {
		t.Logf("miss: %s", miss)
	}
	if m.Recall5 < 0.90 {
		t.Errorf("recall@5 = %.3f, want at least 0.90", m.Recall5)
	}
}
