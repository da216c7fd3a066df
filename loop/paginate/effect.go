package paginate

import (
	"net/http"
	"strings"

	"github.com/trawl-dev/trawl/tools"
)

// Effect is what calling t may do to the data, resolved in one place for
// every part of trawl that acts on it or shows it — the engine (walks,
// retries, the write gate, the envelope's action line), the activity
// log, the tools API and `trawl inspect`, the model's markers, approvals
// and MCP annotations: override when set (a binding's effect), else the
// effect t's source gave it at import (tools.DeriveEffect), with what
// pagination detection adds — a POST whose effect was derived, not
// declared, and that pages through a response array under p only
// queries, so it reads. Nothing rewrites a tool's Effect: it stays what
// its source said, and this is asked instead.
func Effect(t *tools.Tool, p Plan, override tools.Effect) tools.Effect {
	if override != "" {
		return override
	}
	e := tools.DeriveEffect(t)
	if e == tools.EffectWrite && !t.EffectDeclared && strings.EqualFold(t.Method, http.MethodPost) && p.Paginated() && p.ItemsFound {
		return tools.EffectRead
	}
	return e
}
