package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	openai "github.com/sashabaranov/go-openai"
	"github.com/trawl-dev/trawl/tools"
)

// OpenAIEmbedderOptions configures an OpenAIEmbedder.
type OpenAIEmbedderOptions struct {
	// Model is the embeddings model (text-embedding-3-small,
	// nomic-embed-text…); required.
	Model string
	// BaseURL and APIKey are as in OpenAIOptions: any OpenAI-compatible
	// server (OpenAI, Azure, Ollama, vLLM, llama.cpp). Zero BaseURL:
	// https://api.openai.com/v1. The key never appears in an error.
	BaseURL string
	APIKey  string
	// Scrub masks secrets in the text of every error: a deployment passes
	// its scrubber, which holds APIKey among every other secret. Nil: a
	// scrubber of APIKey alone.
	Scrub *tools.Scrubber
	// HTTPClient sends the requests. Nil: a new http.Client.
	HTTPClient *http.Client
}

// OpenAIEmbedder embeds texts through an OpenAI-compatible embeddings
// endpoint (go-openai's CreateEmbeddings). It implements
// discovery.Embedder and is safe for concurrent use.
type OpenAIEmbedder struct {
	client *openai.Client
	model  string
	scrub  *tools.Scrubber
}

// NewOpenAIEmbedder checks opt and returns the embedder.
func NewOpenAIEmbedder(opt OpenAIEmbedderOptions) (*OpenAIEmbedder, error) {
	if strings.TrimSpace(opt.Model) == "" {
		return nil, errors.New("embeddings: a model is required")
	}
	cfg, _, err := oaiConfig(opt.BaseURL, opt.APIKey)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	hc := opt.HTTPClient
	if hc == nil {
		hc = &http.Client{}
	}
	cfg.HTTPClient = hc
	scrub := opt.Scrub
	if scrub == nil {
		scrub = tools.NewScrubber(opt.APIKey)
	}
	return &OpenAIEmbedder{client: openai.NewClientWithConfig(cfg), model: opt.Model, scrub: scrub}, nil
}

// Embed returns one vector per text, in order.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	res, err := e.client.CreateEmbeddings(ctx, openai.EmbeddingRequestStrings{Input: texts, Model: openai.EmbeddingModel(e.model)})
	if err != nil {
		return nil, fmt.Errorf("embeddings (%s): %s", e.model, e.scrub.String(err.Error()))
	}
	out := make([][]float32, len(texts))
	for _, d := range res.Data {
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil {
			return nil, fmt.Errorf("embeddings (%s): the answer's index %d does not match the %d texts sent", e.model, d.Index, len(texts))
		}
		out[d.Index] = d.Embedding
	}
	for i, v := range out {
		if v == nil {
			return nil, fmt.Errorf("embeddings (%s): no vector for text %d of %d", e.model, i, len(texts))
		}
	}
	return out, nil
}
