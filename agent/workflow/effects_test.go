package workflow

import (
	"context"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
)

// A step that changes data refuses input from a partial step unless it
// sets allow_partial; a single response is acceptable input.
func TestWriteStepRefusesPartialInput(t *testing.T) {
	f := newFixture(t)
	if err := f.cat.Add(&tools.Tool{ID: "acme.tag_order", Provider: "acme", Name: "tag_order", Method: "POST",
		Path: "/orders/{order_id}/tag", Origin: f.base, Effect: tools.EffectWrite,
		Params: []tools.Param{{Name: "order_id", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}},
			{Name: "note", In: tools.InBody, Schema: &tools.Schema{Type: "string"}}}}); err != nil {
		t.Fatal(err)
	}
	r := NewRunner(RunnerOptions{Engine: f.engine(loop.Options{}), Catalog: f.cat, Now: fixedClock})
	def := func(source, allow string) string {
		return `{"id": "w", "steps": [
		  {"id": "src", "type": "tool", "tool": "` + source + `", "loop": {"fields": ["id"]}},
		  {"id": "tag", "type": "tool", "tool": "acme.tag_order"` + allow + `,
		   "input": {"order_id": "o_1", "note": {"ref": "$.steps.src._loop.completion"}}}]}`
	}
	for _, c := range []struct {
		name, source, allow string
		refused             bool
	}{
		{"partial", "acme.list_orders", "", true},
		{"partial allowed", "acme.list_orders", `, "allow_partial": true`, false},
		{"single response", "acme.list_properties", "", false},
	} {
		f.srv.Reset()
		res, err := r.Run(context.Background(), mustParse(t, def(c.source, c.allow)), RunInput{Org: "o", RunID: "r", Emit: (&recorder{}).emit})
		if err != nil {
			t.Fatal(err)
		}
		refused := res.Failed == "tag" && strings.Contains(res.Error, "allow_partial") && strings.Contains(res.Error, "step src is partial")
		if refused != c.refused {
			t.Errorf("%s: failed %q: %s", c.name, res.Failed, res.Error)
		}
		if sent := f.srv.Count("/orders/o_1/tag"); c.refused != (sent == 0) {
			t.Errorf("%s: the write was sent %d times", c.name, sent)
		}
	}
}
