package loop

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	"github.com/trawl-dev/trawl/loop/paginate"
	"github.com/trawl-dev/trawl/tools"
)

// An effect is resolved in one place (paginate.Effect) and nothing
// rewrites a tool's own: a POST export that pages through a response
// array reads for the engine, for the schema the model sees and on every
// request the engine sends (what the activity log records), while the
// tool still says what its source said; a binding's override wins
// everywhere alike.
func TestEffectResolvedOnce(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		w.Header().Set("Content-Type", "application/json")
		if page <= 1 {
			fmt.Fprint(w, `{"records":[{"id":1},{"id":2}],"has_more":true}`)
			return
		}
		fmt.Fprint(w, `{"records":[{"id":3}],"has_more":false}`)
	}))
	defer up.Close()
	export := &tools.Tool{ID: "acme.export_records", Provider: "acme", Name: "export_records", Method: "POST", Path: "/records/export",
		Origin: up.URL, Params: []tools.Param{{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}}},
		Response: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
			"records": {Type: "array", Items: &tools.Schema{Type: "object"}}, "has_more": {Type: "boolean"}}}}
	export.Effect = tools.DeriveEffect(export) // as an import sets it
	var mu sync.Mutex
	var sent []tools.Effect
	inv := tools.NewInvoker(tools.InvokerOptions{})
	e := newTestEngine(t, Options{Caller: paginate.CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		mu.Lock()
		sent = append(sent, req.EffectOf())
		mu.Unlock()
		return inv.Call(ctx, req)
	})})
	for _, tt := range []struct {
		binding Binding
		want    tools.Effect
	}{
		{Binding{LoopResponses: true}, tools.EffectRead},
		{Binding{LoopResponses: true, Effect: tools.EffectWrite}, tools.EffectWrite},
	} {
		sent = nil
		if got := e.Effect(export, tt.binding); got != tt.want {
			t.Errorf("binding %+v: Engine.Effect = %s, want %s", tt.binding, got, tt.want)
		}
		if got := paginate.Effect(export, e.Plan(export), tt.binding.Effect); got != tt.want {
			t.Errorf("binding %+v: paginate.Effect = %s, want %s", tt.binding, got, tt.want)
		}
		_, allPages := e.Schema(export, tt.binding)["properties"].(map[string]any)["_all_pages"]
		if allPages != (tt.want == tools.EffectRead) {
			t.Errorf("binding %+v: the schema offers _all_pages: %v", tt.binding, allPages)
		}
		args := map[string]any{}
		if tt.want == tools.EffectRead {
			args["_all_pages"] = true
		}
		if _, err := e.Call(context.Background(), Call{Tool: export, Scope: scope, Binding: tt.binding, Args: args}); err != nil {
			t.Fatal(err)
		}
		if len(sent) == 0 {
			t.Fatal("no request sent")
		}
		for i, got := range sent {
			if got != tt.want {
				t.Errorf("binding %+v: request %d carries effect %s, want %s", tt.binding, i+1, got, tt.want)
			}
		}
	}
	if export.Effect != tools.EffectWrite {
		t.Errorf("the tool's own effect was rewritten to %s", export.Effect)
	}
}
