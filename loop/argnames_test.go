package loop

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/trawl-dev/trawl/tools"
)

// A misspelt argument ({"stauts": "open"}) is refused before any request,
// with what it most likely meant and the tool's real parameters — looping
// or not, read or write — instead of walking every status and calling it
// the answer.
func TestMisspeltArgumentIsRefused(t *testing.T) {
	up := newUpstream(t, 120)
	e := newTestEngine(t, Options{})
	tool := ordersTool(up.URL)
	for _, c := range []struct {
		name    string
		args    map[string]any
		binding Binding
		want    []string
	}{
		{"looping", map[string]any{"stauts": "open", ArgAllPages: true}, Binding{LoopResponses: true},
			[]string{`argument "stauts" is not a parameter of list_orders (did you mean "status"?)`, "its parameters are: page, per_page, status", "Nothing was sent"}},
		{"plain", map[string]any{"stauts": "open"}, Binding{},
			[]string{`argument "stauts" is not a parameter of list_orders (did you mean "status"?)`}},
		{"a reserved argument misspelt", map[string]any{"_all_page": true}, Binding{LoopResponses: true},
			[]string{`argument "_all_page" is not a parameter of list_orders (did you mean "_all_pages"?)`}},
		{"two", map[string]any{"stauts": "open", "pgae": 2}, Binding{LoopResponses: true},
			[]string{`arguments "pgae", "stauts" are not parameters of list_orders (did you mean "page" for "pgae", "status" for "stauts"?)`}},
		{"nothing like it", map[string]any{"colour": "red"}, Binding{LoopResponses: true},
			[]string{`argument "colour" is not a parameter of list_orders; its parameters are: page, per_page, status`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Args: c.args, Binding: c.binding})
			var te *ToolError
			if !errors.As(err, &te) || te.Code != CodeInvalidArgument {
				t.Fatalf("Call: %v, want %s", err, CodeInvalidArgument)
			}
			for _, w := range c.want {
				if !strings.Contains(te.Message, w) {
					t.Errorf("message %q lacks %q", te.Message, w)
				}
			}
			// Check says the same, without a request either.
			if err := e.Check(Call{Tool: tool, Scope: scope, Args: c.args, Binding: c.binding}); err == nil || err.Error() != te.Error() {
				t.Errorf("Check: %v, want %v", err, te)
			}
		})
	}
	if n := len(up.requests()); n != 0 {
		t.Errorf("%d requests sent for refused calls: %v", n, up.requests())
	}
	// A tool without parameters says so.
	_, err := e.Call(context.Background(), Call{Tool: statsTool(up.URL), Scope: scope, Args: map[string]any{"region": "eu"}})
	if err == nil || !strings.Contains(err.Error(), "get_stats takes no arguments") {
		t.Errorf("get_stats: %v", err)
	}
	// The tool's own names pass, and reserved arguments are never unknown.
	if _, err := e.Call(context.Background(), Call{Tool: tool, Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{"status": "open", ArgAllPages: true, ArgFields: []any{"id"}, ArgRefresh: true,
			ArgFilter: []any{map[string]any{"field": "id", "op": "exists"}}}}); err != nil {
		t.Errorf("declared and reserved arguments: %v", err)
	}
	if _, err := e.Call(context.Background(), Call{Tool: bookingsTool(up.URL), Scope: scope, Binding: Binding{LoopResponses: true},
		Args: map[string]any{ArgForEach: map[string]any{"key": "property_id", "values": []any{"p_1"}}}}); err != nil {
		t.Errorf("a fan-out key: %v", err)
	}
}

// echoUpstream answers every request with what it received: method, path,
// query and body.
func echoUpstream(t *testing.T) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, strings.TrimSpace(r.Method+" "+r.URL.RequestURI()+" "+string(body)))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// A body whose schema admits more properties (additionalProperties) takes
// an argument it does not declare: it goes in the body as given, and the
// envelope lists it under _unknownArgs. A query-only tool that admits
// more (a manifest GET) sends it in the query.
func TestOpenSchemaPassesUnknownArguments(t *testing.T) {
	srv, seen := echoUpstream(t)
	e := newTestEngine(t, Options{})
	create := &tools.Tool{ID: "crm.create_contact", Provider: "crm", Name: "create_contact", Method: "POST", Path: "/contacts",
		Origin: srv.URL, Effect: tools.EffectWrite, OpenArgs: tools.InBody,
		Params: []tools.Param{{Name: "email", In: tools.InBody, Required: true, Schema: &tools.Schema{Type: "string"}}}}
	search := &tools.Tool{ID: "crm.search", Provider: "crm", Name: "search", Method: "GET", Path: "/search",
		Origin: srv.URL, OpenArgs: tools.InQuery,
		Params: []tools.Param{{Name: "q", In: tools.InQuery, Schema: &tools.Schema{Type: "string"}}}}
	for _, c := range []struct {
		tool    *tools.Tool
		args    map[string]any
		binding Binding
		sent    string
		unknown []string
	}{
		{create, map[string]any{"email": "a@example.com", "custom_field_7": "gold"}, Binding{LoopResponses: true},
			`POST /contacts {"custom_field_7":"gold","email":"a@example.com"}`, []string{"custom_field_7"}},
		{create, map[string]any{"email": "a@example.com", "tier": 2}, Binding{},
			`POST /contacts {"email":"a@example.com","tier":2}`, []string{"tier"}},
		{search, map[string]any{"q": "acme", "region": "eu"}, Binding{LoopResponses: true},
			`GET /search?q=acme&region=eu`, []string{"region"}},
	} {
		out, err := e.Call(context.Background(), Call{Tool: c.tool, Scope: scope, Args: c.args, Binding: c.binding})
		if err != nil {
			t.Fatalf("%s: %v", c.tool.Name, err)
		}
		got := seen()
		if len(got) == 0 || got[len(got)-1] != c.sent {
			t.Errorf("%s: sent %q, want %q", c.tool.Name, got, c.sent)
		}
		var view struct {
			Unknown []string `json:"_unknownArgs"`
		}
		if err := json.Unmarshal(out.View, &view); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(c.unknown, view.Unknown); diff != "" {
			t.Errorf("%s: _unknownArgs (-want +got):\n%s\nview %s", c.tool.Name, diff, out.View)
		}
	}
	// Declared names only: no _unknownArgs.
	out, err := e.Call(context.Background(), Call{Tool: create, Scope: scope, Args: map[string]any{"email": "b@example.com"}, Binding: Binding{LoopResponses: true}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out.View), "_unknownArgs") {
		t.Errorf("view %s lists unknown arguments", out.View)
	}
}

// bulk: true without loop_responses refuses _for_each for what is missing
// (looping), not for bulk; and the refusal comes from Check, before any
// approval could be asked.
func TestBulkWithoutLoopingBlamesLooping(t *testing.T) {
	srv, n := countingUpstream(t)
	e := newTestEngine(t, Options{})
	c := Call{Tool: trashTool(srv.URL), Scope: scope, Binding: Binding{Bulk: true},
		Args: map[string]any{ArgForEach: map[string]any{"key": "id", "values": []any{"a", "b"}}}}
	err := e.Check(c)
	var te *ToolError
	if !errors.As(err, &te) || te.Code != CodeWriteArgument || !strings.Contains(te.Message, "loop_responses off") ||
		strings.Contains(te.Message, "unless the agent's binding sets bulk") {
		t.Fatalf("Check: %v; want not_for_writes naming loop_responses as the cause", err)
	}
	if _, err := e.Call(context.Background(), c); err == nil || err.Error() != te.Error() {
		t.Errorf("Call: %v, want the same refusal", err)
	}
	c.Binding = Binding{LoopResponses: true}
	if err := e.Check(c); err == nil || !strings.Contains(err.Error(), "unless the agent's binding sets bulk: true") {
		t.Errorf("without bulk: %v", err)
	}
	if n.Load() != 0 {
		t.Errorf("%d requests sent", n.Load())
	}
}
