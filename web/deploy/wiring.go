package deploy

import (
	"cmp"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/discovery"
)

// searchOptions are search_tools' index options: semantic ranking when
// discovery.embeddings names a model, its tool vectors cached in the
// store. The endpoint defaults to the model's, and so does the key when
// the endpoint is the model's.
func (s *Deployment) searchOptions() (discovery.IndexOptions, error) {
	e := s.cfg.Discovery.Embeddings
	if e.Model == "" {
		return discovery.IndexOptions{}, nil
	}
	base, key := cmp.Or(e.BaseURL, s.cfg.Model.BaseURL), e.APIKey
	if key == "" && base == s.cfg.Model.BaseURL {
		key = s.cfg.Model.APIKey
	}
	emb, err := agent.NewOpenAIEmbedder(agent.OpenAIEmbedderOptions{Model: e.Model, BaseURL: base, APIKey: key, Scrub: s.invoker.Scrubber()})
	if err != nil {
		return discovery.IndexOptions{}, s.cfg.errAt("discovery.embeddings", err.Error())
	}
	return discovery.IndexOptions{Semantic: &discovery.Semantic{Embedder: emb, Model: e.Model, Cache: s.stores.vectors, Logger: s.log}}, nil
}
