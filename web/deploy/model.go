package deploy

import (
	"fmt"
	"os"

	"github.com/trawl-dev/trawl/agent"
	"github.com/trawl-dev/trawl/tools/demo"
)

// newModel builds the deployment's model: OpenAI-compatible when a key or
// base URL is configured, the replay model when asked for (or, in the
// demo, when no key is set: the bundled conversation). Nil means no model
// is configured; chat then answers 503.
func (s *Deployment) newModel() (agent.Model, error) {
	m := s.cfg.Model
	switch m.Provider {
	case "openai":
		return agent.NewOpenAI(agent.OpenAIOptions{BaseURL: m.BaseURL, APIKey: m.APIKey, Model: m.Name, Scrub: s.invoker.Scrubber(),
			NoPictures: m.Pictures != nil && !*m.Pictures}), nil
	case "replay":
		var data []byte
		if m.Transcript != "" {
			var err error
			if data, err = os.ReadFile(m.Transcript); err != nil {
				return nil, s.cfg.errAt("model.transcript", err.Error())
			}
		} else if s.cfg.demo {
			data = demo.ReplayScript()
		} else {
			return nil, s.cfg.errAt("model", "the replay model needs model.transcript")
		}
		t, err := agent.ParseTranscript(data)
		if err != nil {
			return nil, s.cfg.errAt("model.transcript", err.Error())
		}
		return agent.NewReplay(t, agent.ReplayOptions{}), nil
	case "":
		if s.cfg.demo {
			t, err := agent.ParseTranscript(demo.ReplayScript())
			if err != nil {
				return nil, fmt.Errorf("the demo's replay script: %w", err)
			}
			return agent.NewReplay(t, agent.ReplayOptions{}), nil
		}
		return nil, nil
	}
	return nil, s.cfg.errAt("model.provider", "unknown provider "+m.Provider)
}
