package tools

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// sharedSpecs is the directory of vendor OpenAPI documents kept beside
// the repository (../shared/specs from the module root); the test is
// skipped when it is absent.
func sharedSpecs(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("../shared not found: no go.mod above the test's directory")
		}
		dir = parent
	}
	specs := filepath.Join(dir, "..", "shared", "specs")
	if _, err := os.Stat(specs); err != nil {
		t.Skipf("../shared not found: the vendor specs live in ../shared/specs beside the repository (%v)", err)
	}
	return specs
}

// countOperations counts the HTTP-method keys under paths with a plain
// decode, independently of the importer.
func countOperations(t testing.TB, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var paths map[string]map[string]any
	if strings.HasSuffix(path, ".json") {
		var doc struct {
			Paths map[string]map[string]json.RawMessage `json:"paths"`
		}
		err = json.Unmarshal(data, &doc)
		paths = map[string]map[string]any{}
		for p, item := range doc.Paths {
			paths[p] = map[string]any{}
			for k := range item {
				paths[p][k] = nil
			}
		}
	} else {
		var doc struct {
			Paths map[string]map[string]any `yaml:"paths"`
		}
		err = yaml.Unmarshal(data, &doc)
		paths = doc.Paths
	}
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	n := 0
	for _, item := range paths {
		for key := range item {
			switch key {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				n++
			}
		}
	}
	return n
}

// paramCheck is what a known tool's parameter must look like.
type paramCheck struct {
	name, typ string
	in        Location
	required  bool
	wire      string
}

// responseCheck is the type a known tool's response has at a path.
type responseCheck struct{ path, typ string }

type toolCheck struct {
	name, method, path string
	params             []paramCheck
	absent             []string // parameters that must not be offered
	response           []responseCheck
	contentType        string
}

func TestImportVendorSpecs(t *testing.T) {
	dir := sharedSpecs(t)
	specs := []struct {
		file, origin string
		tools        []toolCheck
	}{
		{"stripe-2023.yaml", "https://api.stripe.com", []toolCheck{
			{name: "GetCustomers", method: "GET", path: "/v1/customers",
				params: []paramCheck{
					{name: "limit", typ: "integer", in: InQuery},
					{name: "starting_after", typ: "string", in: InQuery},
					{name: "ending_before", typ: "string", in: InQuery},
				},
				absent:   []string{"body"},
				response: []responseCheck{{"data", "array"}, {"has_more", "boolean"}, {"url", "string"}, {"data.[].id", "string"}}},
			{name: "GetCustomersSearch", method: "GET", path: "/v1/customers/search",
				params:   []paramCheck{{name: "page", typ: "string", in: InQuery}, {name: "query", typ: "string", in: InQuery, required: true}},
				response: []responseCheck{{"data", "array"}, {"next_page", "string"}, {"has_more", "boolean"}}},
			{name: "GetCustomersCustomer", method: "GET", path: "/v1/customers/{customer}",
				params: []paramCheck{{name: "customer", typ: "string", in: InPath, required: true}}},
			{name: "PostCustomers", method: "POST", path: "/v1/customers", contentType: "application/x-www-form-urlencoded",
				params: []paramCheck{{name: "email", typ: "string", in: InBody}, {name: "metadata", in: InBody}}},
		}},
		{"github-ghes-2.18.yaml", "https://github.com", []toolCheck{
			{name: "issues_list-for-repo", method: "GET", path: "/repos/{owner}/{repo}/issues",
				params: []paramCheck{
					{name: "owner", typ: "string", in: InPath, required: true},
					{name: "repo", typ: "string", in: InPath, required: true},
					{name: "per_page", typ: "integer", in: InQuery},
					{name: "page", typ: "integer", in: InQuery},
				},
				absent:   []string{"accept"},
				response: []responseCheck{{"", "array"}, {"[].number", "integer"}}},
			{name: "search_repos", method: "GET", path: "/search/repositories",
				params:   []paramCheck{{name: "q", typ: "string", in: InQuery, required: true}},
				response: []responseCheck{{"items", "array"}, {"total_count", "integer"}, {"incomplete_results", "boolean"}}},
			{name: "issues_create", method: "POST", path: "/repos/{owner}/{repo}/issues", contentType: "application/json",
				params: []paramCheck{
					{name: "title", in: InBody, required: true},
					{name: "body", typ: "string", in: InBody, wire: "body"},
				}},
		}},
		{"twilio-api-v2010.json", "https://api.twilio.com", []toolCheck{
			{name: "ListMessage", method: "GET", path: "/2010-04-01/Accounts/{AccountSid}/Messages.json",
				params: []paramCheck{
					{name: "AccountSid", typ: "string", in: InPath, required: true},
					{name: "PageSize", typ: "integer", in: InQuery},
					{name: "Page", typ: "integer", in: InQuery},
					{name: "PageToken", typ: "string", in: InQuery},
					{name: "DateSent_lt", typ: "string", in: InQuery, wire: "DateSent<"},
				},
				response: []responseCheck{{"messages", "array"}, {"next_page_uri", "string"}, {"page_size", "integer"}}},
			{name: "CreateMessage", method: "POST", path: "/2010-04-01/Accounts/{AccountSid}/Messages.json", contentType: "application/x-www-form-urlencoded",
				params: []paramCheck{{name: "To", typ: "string", in: InBody, required: true}, {name: "Body", typ: "string", in: InBody}}},
		}},
		{"asana.yaml", "https://app.asana.com/api/1.0", []toolCheck{
			{name: "getTasks", method: "GET", path: "/tasks",
				params:   []paramCheck{{name: "limit", typ: "integer", in: InQuery}, {name: "offset", typ: "string", in: InQuery}},
				response: []responseCheck{{"data", "array"}, {"next_page", "object"}, {"next_page.offset", "string"}}},
			{name: "getEvents", method: "GET", path: "/events",
				params:   []paramCheck{{name: "sync", typ: "string", in: InQuery}, {name: "resource", typ: "string", in: InQuery, required: true}},
				response: []responseCheck{{"data", "array"}, {"has_more", "boolean"}}},
			{name: "createTask", method: "POST", path: "/tasks", contentType: "application/json",
				params: []paramCheck{{name: "data", typ: "object", in: InBody}}},
		}},
		{"slack-web-v2.json", "https://slack.com/api", []toolCheck{
			{name: "conversations_list", method: "GET", path: "/conversations.list",
				params:   []paramCheck{{name: "cursor", typ: "string", in: InQuery}, {name: "limit", typ: "integer", in: InQuery}},
				absent:   []string{"token"},
				response: []responseCheck{{"channels", "array"}, {"channels.[].id", "string"}, {"response_metadata.next_cursor", "string"}}},
			{name: "conversations_history", method: "GET", path: "/conversations.history",
				params:   []paramCheck{{name: "channel", typ: "string", in: InQuery}, {name: "cursor", typ: "string", in: InQuery}},
				response: []responseCheck{{"messages", "array"}, {"has_more", "boolean"}}},
			{name: "chat_postMessage", method: "POST", path: "/chat.postMessage", contentType: "application/json",
				params: []paramCheck{{name: "channel", typ: "string", in: InBody, required: true}, {name: "text", typ: "string", in: InBody}},
				absent: []string{"token"}},
		}},
		{"pokeapi.yml", "https://pokeapi.co", []toolCheck{
			{name: "pokemon_list", method: "GET", path: "/api/v2/pokemon/",
				params:   []paramCheck{{name: "limit", typ: "integer", in: InQuery}, {name: "offset", typ: "integer", in: InQuery}},
				response: []responseCheck{{"results", "array"}, {"next", "string"}, {"count", "integer"}}},
			{name: "pokemon_read", method: "GET", path: "/api/v2/pokemon/{id}/",
				params: []paramCheck{{name: "id", typ: "integer", in: InPath, required: true}}},
		}},
	}
	for _, spec := range specs {
		t.Run(spec.file, func(t *testing.T) {
			path := filepath.Join(dir, spec.file)
			ts, err := ImportOpenAPI(context.Background(), path, ImportOptions{ProviderID: "vendor"})
			if err != nil {
				t.Fatal(err)
			}
			checkTools(t, "vendor", ts)
			if want := countOperations(t, path); len(ts) != want {
				t.Errorf("%d tools, want %d (one per operation)", len(ts), want)
			}
			for _, tc := range spec.tools {
				checkVendorTool(t, toolNamed(t, ts, tc.name), tc, spec.origin)
			}
		})
	}
}

func checkVendorTool(t *testing.T, tool *Tool, tc toolCheck, origin string) {
	t.Helper()
	if tool.Method != tc.method || tool.Path != tc.path || tool.Origin != origin {
		t.Errorf("%s: %s %s at %s, want %s %s at %s", tc.name, tool.Method, tool.Path, tool.Origin, tc.method, tc.path, origin)
	}
	if tool.ContentType != tc.contentType {
		t.Errorf("%s: content type %q, want %q", tc.name, tool.ContentType, tc.contentType)
	}
	for _, want := range tc.params {
		p, ok := tool.Param(want.name)
		switch {
		case !ok:
			t.Errorf("%s: no parameter %q", tc.name, want.name)
		case p.In != want.in || p.Required != want.required || p.Wire != want.wire || (want.typ != "" && p.Type() != want.typ):
			t.Errorf("%s: parameter %s is %s %s required=%v wire=%q, want %s %s required=%v wire=%q",
				tc.name, want.name, p.In, p.Type(), p.Required, p.Wire, want.in, want.typ, want.required, want.wire)
		}
	}
	for _, name := range tc.absent {
		if slices.ContainsFunc(tool.Params, func(p Param) bool { return p.Name == name || p.WireName() == name }) {
			t.Errorf("%s: parameter %q is offered", tc.name, name)
		}
	}
	for _, want := range tc.response {
		s := tool.Response
		if want.path != "" {
			s = prop(s, want.path)
		}
		if s == nil || s.Type != want.typ {
			t.Errorf("%s: response %q is %+v, want type %s", tc.name, want.path, s, want.typ)
		}
	}
}

// BenchmarkImportOpenAPIStripe imports the largest vendor document.
func BenchmarkImportOpenAPIStripe(b *testing.B) {
	path := filepath.Join(sharedSpecs(b), "stripe-2023.yaml")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ImportOpenAPI(context.Background(), path, ImportOptions{ProviderID: "stripe"}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestImportEveryVendorSpec imports every document under ../shared/specs:
// each must import, one tool per operation, with the repairs and skips
// listed here (Square's document has one dangling $ref, used in five
// places). A document not listed fails the test until it is.
func TestImportEveryVendorSpec(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("imports every vendor spec (tens of megabytes); skipped with -short and -race")
	}
	dir := sharedSpecs(t)
	want := map[string]struct{ tools, repaired, skipped int }{
		"adyen-management.json": {134, 0, 0},
		"asana.yaml":            {247, 0, 0},
		"datadog-v2.yaml":       {985, 0, 0},
		"discord.json":          {242, 0, 0},
		"github-ghes-2.18.yaml": {499, 0, 0},
		"intercom.yaml":         {231, 0, 0},
		"okta-management.yaml":  {732, 0, 0},
		"openai.yaml":           {288, 0, 0},
		"plaid.yaml":            {329, 0, 0},
		"pokeapi.yml":           {96, 0, 0},
		"sentry.json":           {223, 0, 0},
		"slack-web-v2.json":     {174, 0, 0},
		"square.json":           {316, 1, 0},
		"stripe-2023.yaml":      {446, 0, 0},
		"twilio-api-v2010.json": {197, 0, 0},
		"xero-accounting.yaml":  {235, 0, 0},
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if e.IsDir() || (ext != ".json" && ext != ".yaml" && ext != ".yml") {
			continue
		}
		t.Run(e.Name(), func(t *testing.T) {
			path := filepath.Join(dir, e.Name())
			r, err := ImportOpenAPIReport(context.Background(), path, ImportOptions{ProviderID: "vendor"})
			if err != nil {
				t.Fatal(err)
			}
			checkTools(t, "vendor", r.Tools)
			w, ok := want[e.Name()]
			if !ok {
				t.Fatalf("%s: %s; add its expected counts to this test", e.Name(), r.Summary())
			}
			ops := countOperations(t, path)
			if len(r.Tools) != w.tools || len(r.Tools)+r.Count(Skipped) != ops {
				t.Errorf("%d tools and %d skipped of %d operations, want %d tools", len(r.Tools), r.Count(Skipped), ops, w.tools)
			}
			if r.Count(Repaired) != w.repaired || r.Count(Skipped) != w.skipped {
				t.Errorf("%d repaired, %d skipped, want %d and %d: %v", r.Count(Repaired), r.Count(Skipped), w.repaired, w.skipped, r.Warnings)
			}
			t.Logf("%s: %s", e.Name(), r.Summary())
		})
	}
}

// BenchmarkImportOpenAPISquare imports Square's document, which the
// strict loader refuses (one dangling $ref): the lenient path's cost is
// the strict attempt, a plain decode of the tree, the repair walk and a
// second load.
func BenchmarkImportOpenAPISquare(b *testing.B) {
	path := filepath.Join(sharedSpecs(b), "square.json")
	b.ReportAllocs()
	for b.Loop() {
		r, err := ImportOpenAPIReport(context.Background(), path, ImportOptions{ProviderID: "square"})
		if err != nil || r.Count(Repaired) != 1 {
			b.Fatal(err, r)
		}
	}
}
