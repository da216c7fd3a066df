package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/trawl-dev/trawl/discovery"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// fakeEmbeddingsServer is an OpenAI-compatible /embeddings endpoint on
// loopback: each text's vector counts its letters a–z, and the answer
// lists the vectors in reverse order (with their indexes), as a server
// may. status, when not 200, fails every request.
func fakeEmbeddingsServer(t *testing.T, status *atomic.Int32, requests *atomic.Int32) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.URL.Path != "/v1/embeddings" || r.Method != http.MethodPost {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer sk-test-0123456789abcdef" {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		if s := status.Load(); s != 0 && s != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(s))
			// The key raw, and inside the whole header base64-encoded.
			w.Write([]byte(`{"error":{"message":"overloaded, key sk-test-0123456789abcdef, header ` + embedHeaderB64 + `"}}`))
			return
		}
		var req struct {
			Input []string `json:"input"`
			Model string   `json:"model"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Model != "embed-test" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		type datum struct {
			Object    string    `json:"object"`
			Embedding []float32 `json:"embedding"`
			Index     int       `json:"index"`
		}
		var data []datum
		for i := len(req.Input) - 1; i >= 0; i-- {
			v := make([]float32, 26)
			for _, c := range strings.ToLower(req.Input[i]) {
				if c >= 'a' && c <= 'z' {
					v[c-'a']++
				}
			}
			data = append(data, datum{"embedding", v, i})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model})
	}))
	t.Cleanup(srv.Close)
	return srv
}

// embedHeaderB64 is the Authorization header the fake receives, base64-encoded.
var embedHeaderB64 = base64.StdEncoding.EncodeToString([]byte("Bearer sk-test-0123456789abcdef"))

func TestOpenAIEmbedder(t *testing.T) {
	var status, requests atomic.Int32
	srv := fakeEmbeddingsServer(t, &status, &requests)
	e, err := NewOpenAIEmbedder(OpenAIEmbedderOptions{Model: "embed-test", BaseURL: srv.URL + "/v1", APIKey: "sk-test-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Embed(t.Context(), []string{"ab", "zzz"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0][0] != 1 || got[0][1] != 1 || got[1][25] != 3 {
		t.Errorf("vectors not in input order: %v", got)
	}
	status.Store(http.StatusServiceUnavailable)
	_, err = e.Embed(t.Context(), []string{"x"})
	if err == nil || strings.Contains(err.Error(), "sk-test-0123456789abcdef") || !strings.Contains(err.Error(), "embed-test") ||
		strings.Contains(err.Error(), embedHeaderB64[12:]) || strings.Count(err.Error(), tools.Mask) != 2 {
		t.Errorf("error %v: want one naming the model, without the key in any form", err)
	}
	for _, bad := range []OpenAIEmbedderOptions{{}, {Model: "m", BaseURL: "ftp://x"}} {
		if _, err := NewOpenAIEmbedder(bad); err == nil {
			t.Errorf("NewOpenAIEmbedder(%+v): no error", bad)
		}
	}
}

// search_tools over a semantic index whose embeddings endpoint fails
// answers from BM25, and logs; it never returns an error to the model.
func TestSearchToolEmbeddingsDown(t *testing.T) {
	var status, requests atomic.Int32
	srv := fakeEmbeddingsServer(t, &status, &requests)
	e, err := NewOpenAIEmbedder(OpenAIEmbedderOptions{Model: "embed-test", BaseURL: srv.URL + "/v1", APIKey: "sk-test-0123456789abcdef"})
	if err != nil {
		t.Fatal(err)
	}
	var pool []*tools.Tool
	for _, data := range demo.Manifests("http://127.0.0.1:1") {
		m, err := tools.ParseManifest(data)
		if err != nil {
			t.Fatal(err)
		}
		ts, err := m.Tools()
		if err != nil {
			t.Fatal(err)
		}
		pool = append(pool, ts...)
	}
	var logs bytes.Buffer
	sem := &discovery.Semantic{Embedder: e, Model: "embed-test", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ix, err := discovery.NewIndexWith(pool, discovery.IndexOptions{Semantic: sem})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.SemanticReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if requests.Load() == 0 {
		t.Fatal("the tools were not embedded")
	}
	args := json.RawMessage(`{"query":"set an out-of-office reply"}`)
	up, err := ix.SearchTool(t.Context(), args, nil)
	if err != nil {
		t.Fatal(err)
	}
	status.Store(http.StatusInternalServerError)
	down, err := ix.SearchTool(t.Context(), args, nil)
	if err != nil {
		t.Fatalf("search_tools with the endpoint down: %v", err)
	}
	if !bytes.Contains(down, []byte("MAIL_UPDATE_VACATION_SETTINGS")) || bytes.Contains(down, []byte("close in meaning")) {
		t.Errorf("answer with the endpoint down %s: want BM25's", down)
	}
	if bytes.Equal(up, down) {
		t.Error("the answer with the endpoint up is BM25's: semantic ranking did not take part")
	}
	if !strings.Contains(logs.String(), "embedding the query failed") {
		t.Errorf("log %q: want the failure", logs.String())
	}
}
