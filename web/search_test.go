package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// embeddingsServer is an OpenAI-compatible /v1/embeddings endpoint on
// loopback (a vector of letter counts per text); it answers 500 while
// down is set, and counts the texts it embedded.
func embeddingsServer(t *testing.T, down *atomic.Bool, texts *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusInternalServerError)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		if r.URL.Path != "/v1/embeddings" || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		texts.Add(int64(len(req.Input)))
		var data []map[string]any
		for i, in := range req.Input {
			v := make([]float32, 26)
			for _, c := range strings.ToLower(in) {
				if c >= 'a' && c <= 'z' {
					v[c-'a']++
				}
			}
			data = append(data, map[string]any{"object": "embedding", "index": i, "embedding": v})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// POST /v1/agents/{id}/search_tools returns each result's why line; with
// discovery.embeddings configured, the tools are embedded once (cached
// in the store across restarts) and a failing endpoint still leaves a
// BM25 answer.
func TestSearchToolsEmbeddings(t *testing.T) {
	var down atomic.Bool
	var texts atomic.Int64
	emb := embeddingsServer(t, &down, &texts)
	dir := t.TempDir()
	start := func() *testServer {
		return startDemo(t, func(c *Config) {
			c.DataDir = dir
			c.Discovery.Embeddings = EmbeddingsConfig{Model: "embed-test", BaseURL: emb.URL + "/v1"}
		})
	}
	ts := start()
	def, _ := ts.agents.Get("demo")
	ix, err := ts.runner.SearchIndex(def, nil)
	if err != nil || ix == nil {
		t.Fatalf("search index: %v, %v", ix, err)
	}
	if err := ix.SemanticReady(t.Context()); err != nil {
		t.Fatalf("embedding the tools: %v", err)
	}
	embedded := texts.Load()
	if embedded == 0 {
		t.Fatal("no tool was embedded")
	}
	search := func(ts *testServer) []map[string]any {
		t.Helper()
		st, b := ts.do(t, "POST", "/v1/agents/demo/search_tools", "", map[string]any{"query": "send an email", "limit": 3})
		var res struct{ Results []map[string]any }
		if st != 200 || json.Unmarshal(b, &res) != nil || len(res.Results) == 0 {
			t.Fatalf("search_tools: %d %s", st, b)
		}
		return res.Results
	}
	for _, r := range search(ts) {
		if why, _ := r["why"].(string); why == "" {
			t.Errorf("result %v has no why line", r)
		}
	}
	down.Store(true)
	if res := search(ts); res[0]["name"] != "MAIL_SEND_EMAIL" {
		t.Errorf("with the endpoint down, first result %v, want BM25's MAIL_SEND_EMAIL", res[0])
	}
	if !strings.Contains(ts.logs.String(), "searching with BM25 alone") {
		t.Errorf("no log line for the failing endpoint in %q", ts.logs.String())
	}
	ts.Close()

	// A restart embeds nothing new: the vectors are in the store.
	down.Store(false)
	before := texts.Load()
	ts = start()
	def, _ = ts.agents.Get("demo")
	ix, _ = ts.runner.SearchIndex(def, nil)
	if err := ix.SemanticReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := texts.Load() - before; got != 0 {
		t.Errorf("the restart embedded %d tool texts, want 0 (cached)", got)
	}
}

func TestEmbeddingsConfig(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(readme), "```yaml\ndiscovery:\n  embeddings:")
	if i < 0 {
		t.Fatal("README has no discovery.embeddings example")
	}
	example := string(readme[i+len("```yaml\n"):])
	example = example[:strings.Index(example, "```")]
	for _, tc := range []struct{ yaml, wantErr string }{
		{example, ""},
		{"discovery:\n  embeddings:\n    base_url: http://127.0.0.1:11434/v1\n", "discovery.embeddings: model is required"},
		{"discovery:\n  embeddings: {model: nomic-embed-text, base_url: http://127.0.0.1:11434/v1}\n", ""},
	} {
		_, err := ParseConfig("trawl.yaml", []byte(tc.yaml), func(string) (string, bool) { return "", false })
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("ParseConfig(%q) = %v, want %q", tc.yaml, err, tc.wantErr)
		}
	}
}
