package tools

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func importTestdata(t testing.TB, name string) []*Tool {
	t.Helper()
	ts, err := ImportOpenAPI(context.Background(), filepath.Join("testdata", "openapi", name), ImportOptions{ProviderID: "p"})
	if err != nil {
		t.Fatalf("ImportOpenAPI(%s): %v", name, err)
	}
	checkTools(t, "p", ts)
	return ts
}

// checkTools asserts what every import must give: valid tools with
// unique names and ids made of provider and name.
func checkTools(t testing.TB, provider string, ts []*Tool) {
	t.Helper()
	seen := map[string]bool{}
	for _, tool := range ts {
		if err := tool.Validate(); err != nil {
			t.Errorf("Validate: %v", err)
		}
		if seen[tool.Name] {
			t.Errorf("name %q used twice", tool.Name)
		}
		seen[tool.Name] = true
		if tool.ID != provider+"."+tool.Name || tool.Provider != provider || tool.Kind != KindAPI {
			t.Errorf("tool %q: id %q, provider %q, kind %q", tool.Name, tool.ID, tool.Provider, tool.Kind)
		}
	}
}

func toolNamed(t testing.TB, ts []*Tool, name string) *Tool {
	t.Helper()
	for _, tool := range ts {
		if tool.Name == name {
			return tool
		}
	}
	t.Fatalf("no tool named %q", name)
	return nil
}

func names(ts []*Tool) []string {
	out := make([]string, len(ts))
	for i, tool := range ts {
		out[i] = tool.Name
	}
	return out
}

// prop follows a dotted path of properties ("data.items" steps into an
// array's items with the name "[]").
func prop(s *Schema, path string) *Schema {
	for _, step := range strings.Split(path, ".") {
		if s == nil {
			return nil
		}
		if step == "[]" {
			s = s.Items
			continue
		}
		s = s.Properties[step]
	}
	return s
}

func keys(s *Schema) []string {
	if s == nil {
		return nil
	}
	out := make([]string, 0, len(s.Properties))
	for k := range s.Properties {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func ptr[T any](v T) *T { return &v }

var str = &Schema{Type: "string"}

func TestImportOpenAPIShapes(t *testing.T) {
	ts := importTestdata(t, "shapes.yaml")

	wantNames := []string{
		"list_items", "post_items", "updateItem", "updateItem_6042fa", "updateItem_ceb2ac",
		"getTheSentencesOfAParagraphOfASectionOfAReportWithAVeryLo_2661dd",
		"getTheSentencesOfAParagraphOfASectionOfAReportWithAVeryLo_76f9a2",
	}
	if diff := cmp.Diff(wantNames, names(ts)); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}

	t.Run("list", func(t *testing.T) {
		list := toolNamed(t, ts, "list_items")
		want := []Param{
			{Name: "limit", In: InQuery, Description: "Operation-level limit.", Schema: &Schema{Type: "integer", Maximum: ptr(50.0)}},
			{Name: "X-Tenant", In: InHeader, Schema: str},
			{Name: "filter_status", Wire: "filter[status]", In: InQuery, Schema: str},
			{Name: "created_lt", Wire: "created<", In: InQuery, Schema: &Schema{Type: "string", Format: "date"}},
			{Name: "internal", Wire: "_internal", In: InQuery, Schema: &Schema{Type: "boolean"}},
		}
		if diff := cmp.Diff(want, list.Params); diff != "" {
			t.Errorf("params (-want +got):\n%s", diff)
		}
		if got, want := list.Description, `List items. Returns items, newest first. Use "limit" to page.`; got != want {
			t.Errorf("description %q, want %q", got, want)
		}
		if list.Method != "GET" || list.Path != "/items" || list.Origin != "https://shapes.example/api" || list.OperationID != "list items!" {
			t.Errorf("shape %s %s at %s (%s)", list.Method, list.Path, list.Origin, list.OperationID)
		}
		wantExt := map[string]any{"x-speakeasy-pagination": map[string]any{
			"type":    "cursor",
			"inputs":  []any{map[string]any{"name": "cursor", "in": "parameters", "type": "cursor"}},
			"outputs": map[string]any{"nextCursor": "$.next"},
		}}
		if diff := cmp.Diff(wantExt, list.Extensions); diff != "" {
			t.Errorf("extensions (-want +got):\n%s", diff)
		}

		r := list.Response
		if diff := cmp.Diff([]string{"data", "loop", "mixed", "next", "pet", "tree"}, keys(r)); diff != "" {
			t.Errorf("response keys (writeOnly secret left out) (-want +got):\n%s", diff)
		}
		item := prop(r, "data.[]")
		if diff := cmp.Diff(&Schema{Type: "object", Required: []string{"id"}, Properties: map[string]*Schema{
			"id": str, "meows": {Type: "boolean"}, "barks": {Type: "integer"},
		}}, item); diff != "" {
			t.Errorf("oneOf of objects is merged, required by all stays (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(&Schema{Type: "object", Required: []string{"name", "meows", "id"}, Properties: map[string]*Schema{
			"id": str, "meows": {Type: "boolean"}, "name": str,
		}}, prop(r, "pet")); diff != "" {
			t.Errorf("allOf with own properties and required (-want +got):\n%s", diff)
		}
		if got := prop(r, "mixed"); got == nil || got.Type != "string" || got.Properties != nil {
			t.Errorf("anyOf string|object takes the first alternative, got %+v", got)
		}
		if got := prop(r, "next"); got == nil || !got.Nullable {
			t.Errorf("next not nullable: %+v", got)
		}
		if got := keys(prop(r, "loop")); !slices.Equal(got, []string{"name"}) {
			t.Errorf("self-referencing allOf: keys %v", got)
		}
		depth := 0
		for s := prop(r, "tree"); s != nil; s = prop(s, "children.[]") {
			depth += 2
		}
		if depth < maxSchemaDepth-2 || depth > maxSchemaDepth+1 {
			t.Errorf("recursive schema cut at depth %d, want about %d", depth, maxSchemaDepth)
		}
	})

	t.Run("body", func(t *testing.T) {
		post := toolNamed(t, ts, "post_items")
		want := []Param{
			{Name: "limit", In: InQuery, Description: "Path-level limit.", Schema: str},
			{Name: "X-Tenant", In: InHeader, Schema: str},
			{Name: "body", Wire: "body", In: InBody, Description: "Free text.", Schema: &Schema{Type: "string", Description: "Free text."}},
			{Name: "name", In: InBody, Required: true, Schema: str},
		}
		if diff := cmp.Diff(want, post.Params); diff != "" {
			t.Errorf("JSON body flattened, readOnly id left out (-want +got):\n%s", diff)
		}
		if post.ContentType != "application/json" || post.Response != nil || post.Description != "Create an item" {
			t.Errorf("content type %q, response %+v, description %q", post.ContentType, post.Response, post.Description)
		}

		put := toolNamed(t, ts, "updateItem")
		want = []Param{
			{Name: "item_id", In: InPath, Required: true, Schema: str},
			{Name: "body", In: InBody, Required: true, Schema: &Schema{Type: "object", Properties: map[string]*Schema{"item_id": str, "note": str}}},
		}
		if diff := cmp.Diff(want, put.Params); diff != "" {
			t.Errorf("colliding property gives a whole body (-want +got):\n%s", diff)
		}
		if put.Origin != "https://write.shapes.example" {
			t.Errorf("operation servers: origin %q", put.Origin)
		}
		if diff := cmp.Diff(&Schema{Type: "object", Properties: map[string]*Schema{"ok": {Type: "boolean"}}}, put.Response); diff != "" {
			t.Errorf("2XX vendor JSON response (-want +got):\n%s", diff)
		}

		raw := toolNamed(t, ts, "updateItem_ceb2ac")
		want = []Param{
			{Name: "item_id", In: InPath, Required: true, Schema: str},
			{Name: "body_query", Wire: "body", In: InQuery, Schema: str},
			{Name: "body", In: InBody, Schema: str},
		}
		if diff := cmp.Diff(want, raw.Params); diff != "" {
			t.Errorf("text body (-want +got):\n%s", diff)
		}
		if raw.ContentType != "text/plain" {
			t.Errorf("content type %q", raw.ContentType)
		}
	})
}

func TestImportOpenAPIMultiFile(t *testing.T) {
	ts := importTestdata(t, "multifile/api.yaml")
	if diff := cmp.Diff([]string{"listOrders", "createOrder", "getOrder"}, names(ts)); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	list := ts[0]
	want := []Param{
		{Name: "limit", In: InQuery, Description: "How many orders per page.", Schema: &Schema{Type: "integer", Default: 20.0, Minimum: ptr(1.0), Maximum: ptr(100.0)}},
		{Name: "cursor", In: InQuery, Description: "Where the previous page ended.", Schema: str},
	}
	if diff := cmp.Diff(want, list.Params); diff != "" {
		t.Errorf("parameters from ./parameters.yaml (-want +got):\n%s", diff)
	}
	if list.Origin != "https://api.shop.example/v2" || list.Description != "List orders. Newest first." {
		t.Errorf("origin %q, description %q", list.Origin, list.Description)
	}
	money := &Schema{Type: "object", Required: []string{"amount", "currency"}, Properties: map[string]*Schema{
		"amount":   {Type: "integer", Description: "Minor units (cents)."},
		"currency": {Type: "string", Enum: []any{"EUR", "USD"}},
	}}
	if diff := cmp.Diff(money, prop(list.Response, "data.[].lines.[].price")); diff != "" {
		t.Errorf("schemas/order.yaml -> #/Line -> ./money.yaml (-want +got):\n%s", diff)
	}
	if got := keys(prop(list.Response, "data.[]")); !slices.Equal(got, []string{"id", "lines", "replaces", "total"}) {
		t.Errorf("order keys %v", got)
	}

	create := ts[1]
	var got []string
	for _, p := range create.Params {
		got = append(got, fmt.Sprintf("%s %s required=%v", p.Name, p.In, p.Required))
	}
	if diff := cmp.Diff([]string{"lines body required=true", "replaces body required=false", "total body required=true"}, got); diff != "" {
		t.Errorf("create params, readOnly id left out (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(money, create.Params[2].Schema); diff != "" {
		t.Errorf("total (-want +got):\n%s", diff)
	}

	get := ts[2]
	if diff := cmp.Diff([]Param{{Name: "order_id", In: InPath, Required: true, Schema: str}}, get.Params); diff != "" {
		t.Errorf("path-level parameter (-want +got):\n%s", diff)
	}

	data, err := os.ReadFile(filepath.Join("testdata", "openapi", "multifile", "api.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// Held in memory, the document has no files beside it: its refs to
	// them are dangling, and the report names them.
	r, err := ImportOpenAPIDataReport(data, ImportOptions{ProviderID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(r.Warnings), "parameters.yaml") {
		t.Errorf("ImportOpenAPIData with a file $ref: warnings %v, want one naming the reference", r.Warnings)
	}
}

func TestImportOpenAPISwagger2(t *testing.T) {
	ts := importTestdata(t, "swagger2.yaml")
	if diff := cmp.Diff([]string{"listWidgets", "createWidget", "uploadPhoto", "replaceTags"}, names(ts)); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	for _, tool := range ts {
		if tool.Origin != "https://api.legacy.example/v1" {
			t.Errorf("%s: origin %q, want https from schemes, host and basePath", tool.Name, tool.Origin)
		}
	}
	list := ts[0]
	want := []Param{
		{Name: "top", Wire: "$top", In: InQuery, Description: "Page size.", Schema: &Schema{Type: "integer"}},
		{Name: "skip", Wire: "$skip", In: InQuery, Schema: &Schema{Type: "integer"}},
		{Name: "X-Request-Id", In: InHeader, Schema: str},
	}
	if diff := cmp.Diff(want, list.Params); diff != "" {
		t.Errorf("list params, apiKey header left out (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]any{"x-ms-pageable": map[string]any{"nextLinkName": "nextLink", "itemName": "value"}}, list.Extensions); diff != "" {
		t.Errorf("extensions (-want +got):\n%s", diff)
	}
	if got := prop(list.Response, "value.[].name"); got == nil || got.Type != "string" {
		t.Errorf("response value[].name: %+v", got)
	}

	create := ts[1]
	want = []Param{
		{Name: "color", In: InBody, Schema: &Schema{Type: "string", Nullable: true}},
		{Name: "name", In: InBody, Required: true, Schema: str},
	}
	if diff := cmp.Diff(want, create.Params); diff != "" {
		t.Errorf("in: body parameter flattened (-want +got):\n%s", diff)
	}
	if create.ContentType != "application/json" {
		t.Errorf("content type %q", create.ContentType)
	}

	upload := ts[2]
	want = []Param{
		{Name: "id", In: InPath, Required: true, Schema: str},
		{Name: "caption", In: InBody, Required: true, Schema: str},
		{Name: "file", In: InBody, Schema: &Schema{Type: "string", Format: "binary"}},
	}
	if diff := cmp.Diff(want, upload.Params); diff != "" {
		t.Errorf("formData (-want +got):\n%s", diff)
	}
	if upload.ContentType != "multipart/form-data" || upload.Response != nil {
		t.Errorf("content type %q, response %+v", upload.ContentType, upload.Response)
	}

	tags := ts[3]
	want = []Param{
		{Name: "id", In: InPath, Required: true, Schema: str},
		{Name: "body", In: InBody, Schema: &Schema{Type: "array", Items: str}},
	}
	if diff := cmp.Diff(want, tags.Params); diff != "" {
		t.Errorf("array body (-want +got):\n%s", diff)
	}
}

// TestImportOpenAPIAlternatives covers Slack's list-valued "items",
// which kin-openapi rejects and the importer rewrites.
func TestImportOpenAPIAlternatives(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "openapi", "swagger2-alternatives.json"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := ImportOpenAPIData(data, ImportOptions{ProviderID: "chat"})
	if err != nil {
		t.Fatal(err)
	}
	checkTools(t, "chat", ts)
	if len(ts) != 1 {
		t.Fatalf("%d tools", len(ts))
	}
	list := ts[0]
	want := []Param{
		{Name: "cursor", In: InQuery, Schema: str},
		{Name: "limit", In: InQuery, Schema: &Schema{Type: "integer"}},
	}
	if diff := cmp.Diff(want, list.Params); diff != "" {
		t.Errorf("params, token left out (-want +got):\n%s", diff)
	}
	r := list.Response
	if diff := cmp.Diff(&Schema{Type: "object", Required: []string{"id"}, Properties: map[string]*Schema{
		"id": str, "name": str, "user": str,
	}}, prop(r, "channels.[]")); diff != "" {
		t.Errorf("alternatives merged (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&Schema{Type: "object", Nullable: true, Properties: map[string]*Schema{"text": str}}, prop(r, "latest")); diff != "" {
		t.Errorf("item or null (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&Schema{Type: "array", Items: str}, prop(r, "ids")); diff != "" {
		t.Errorf("array of alternatives (-want +got):\n%s", diff)
	}
	if got := prop(r, "response_metadata.next_cursor"); got == nil || got.Type != "string" {
		t.Errorf("next_cursor %+v", got)
	}
}

func TestImportOpenAPI31(t *testing.T) {
	ts := importTestdata(t, "openapi31.yaml")
	if diff := cmp.Diff([]string{"listNotes", "createNote", "deleteNote"}, names(ts)); diff != "" {
		t.Fatalf("names, webhooks are no tools (-want +got):\n%s", diff)
	}
	list := ts[0]
	want := []Param{
		{Name: "limit", In: InQuery, Schema: &Schema{Type: "integer", Nullable: true, Minimum: ptr(1.0), Maximum: ptr(100.0)}},
		{Name: "after", In: InQuery, Schema: str},
	}
	if diff := cmp.Diff(want, list.Params); diff != "" {
		t.Errorf("type list [integer, null] (-want +got):\n%s", diff)
	}
	if list.Origin != "https://eu.notes.example/v1" {
		t.Errorf("origin %q", list.Origin)
	}
	r := list.Response
	if diff := cmp.Diff(&Schema{Type: "string", Enum: []any{"list"}}, prop(r, "object")); diff != "" {
		t.Errorf("const (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&Schema{Type: "string", Nullable: true}, prop(r, "next_cursor")); diff != "" {
		t.Errorf("nullable via type list (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&Schema{Type: "boolean", Nullable: true, Default: false}, prop(r, "items.[].archived")); diff != "" {
		t.Errorf("archived (-want +got):\n%s", diff)
	}
	if got := prop(r, "items.[].parent"); got == nil || got.Description != "The note this one continues." || got.Type != "object" {
		t.Errorf("$ref with a sibling description: %+v", got)
	}
	create := ts[1]
	want = []Param{
		{Name: "tags", In: InBody, Schema: &Schema{Type: "array", Items: str}},
		{Name: "title", In: InBody, Required: true, Schema: str},
	}
	if diff := cmp.Diff(want, create.Params); diff != "" {
		t.Errorf("create (-want +got):\n%s", diff)
	}
}

func TestImportOpenAPIErrors(t *testing.T) {
	opt := ImportOptions{ProviderID: "p"}
	data := []struct {
		name, doc string
		opt       ImportOptions
		is        error
		contains  string
	}{
		{"no provider", `{"openapi":"3.0.0","info":{"title":"x","version":"1"},"paths":{}}`, ImportOptions{}, nil, "provider id"},
		{"bad provider", `{"openapi":"3.0.0","info":{"title":"x","version":"1"},"paths":{}}`, ImportOptions{ProviderID: "a.b"}, nil, "provider id"},
		{"empty", "  \n", opt, ErrNotOpenAPI, "empty"},
		{"no version", "title: x\npaths: {}\n", opt, ErrNotOpenAPI, "openapi or swagger"},
		{"swagger 1.2", `{"swagger":"1.2","paths":{}}`, opt, ErrNotOpenAPI, `"1.2"`},
		{"openapi 4", "openapi: 4.0.0\n", opt, ErrNotOpenAPI, `"4.0.0"`},
		{"broken JSON", `{"openapi": "3.0.0",`, opt, nil, "parsing JSON"},
		{"broken YAML", "openapi: 3.0.0\ninfo: [\n", opt, nil, "loading document"},
	}
	for _, tc := range data {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportOpenAPIData([]byte(tc.doc), tc.opt)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.contains) {
				t.Errorf("error %q does not mention %q", err, tc.contains)
			}
		})
	}

	files := []struct {
		name, file string
		mentions   []string
	}{
		{"missing file", "nope.yaml", []string{"nope.yaml"}},
	}
	for _, tc := range files {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportOpenAPI(context.Background(), filepath.Join("testdata", "openapi", tc.file), opt)
			if err == nil {
				t.Fatal("no error")
			}
			for _, m := range tc.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
		})
	}

	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := ImportOpenAPI(ctx, filepath.Join("testdata", "openapi", "shapes.yaml"), opt)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want context.Canceled", err)
		}
	})
}

func TestNormalizeDocument(t *testing.T) {
	tests := []struct {
		name, in string
		swagger  bool
		want     string // "" when nothing is rewritten
	}{
		{"YAML swagger value", "swagger: '2.0'\ndefinitions:\n  m:\n    items: [{type: string}, {type: 'null'}]\n", true,
			`{"definitions":{"m":{"allOf":[{"type":"string"},{"type":"null"}],"x-trawl-any-of":true}},"swagger":"2.0"}`},
		{"YAML array items", "openapi: 3.0.0\nx:\n  type: array\n  items: [{type: string}]\nresponses:\n  200: {description: ok}\n", false,
			`{"openapi":"3.0.0","responses":{"200":{"description":"ok"}},"x":{"items":{"anyOf":[{"type":"string"}]},"type":"array"}}`},
		{"JSON beside anyOf", `{"s":{"anyOf":[{"type":"integer"}],"items":[{"type":"string"}]},"n":12345678901234567890}`, false,
			`{"n":12345678901234567890,"s":{"allOf":[{"anyOf":[{"type":"string"}]}],"anyOf":[{"type":"integer"}]}}`},
		{"examples untouched", `{"example":{"items":[1]},"enum":[{"items":[2]}]}`, false, ""},
		{"nothing to do", `{"items":{"type":"string"}}`, false, ""},
		{"not a document", `{"items":`, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, ok := normalizeDocument([]byte(tc.in), tc.swagger)
			if ok != (tc.want != "") || string(out) != tc.want {
				t.Errorf("normalizeDocument = %s, %v; want %s", out, ok, tc.want)
			}
		})
	}
}

func TestTrimText(t *testing.T) {
	long := strings.Repeat("word ", 30)
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short.", 10, "short."},
		{"First sentence here. Second sentence is longer.", 30, "First sentence here."},
		{long, 22, "word word word word…"},
		{"überlange Wörter überall", 12, "überlange…"},
		{"abcdefghijklmnop", 8, "abcdefg…"},
	}
	for _, tc := range tests {
		got := trimText(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("trimText(%q, %d) = %q, want %q", tc.in, tc.max, got, tc.want)
		}
		if n := len([]rune(got)); n > tc.max {
			t.Errorf("trimText(%q, %d) has %d characters", tc.in, tc.max, n)
		}
	}
}

func TestDescribeOperation(t *testing.T) {
	tests := []struct{ summary, description, want string }{
		{"", "", ""},
		{"List orders", "", "List orders"},
		{"", "<p>Returns a list.</p>", "Returns a list."},
		{"List orders", "List orders, newest first.", "List orders, newest first."},
		{"List orders", "Newest\n\nfirst &amp; paged.", "List orders. Newest first & paged."},
		{"List orders:", "newest first.", "List orders: newest first."},
		{"Rate a <thing>", "", "Rate a <thing>"},
	}
	for _, tc := range tests {
		if got := describeOperation(tc.summary, tc.description); got != tc.want {
			t.Errorf("describeOperation(%q, %q) = %q, want %q", tc.summary, tc.description, got, tc.want)
		}
	}
	if got := describeOperation("", strings.Repeat("Lorem ipsum dolor sit amet. ", 100)); len(got) > maxToolDescription || !strings.HasSuffix(got, "amet.") {
		t.Errorf("long description: %d bytes, ends %q", len(got), got[len(got)-10:])
	}
}

func TestNames(t *testing.T) {
	params := map[string]string{
		"limit": "limit", "page[size]": "page_size", "ids[]": "ids", "DateSent<": "DateSent_lt",
		"DateSent>=": "DateSent_gte", "$top": "top", "_fields": "fields", "X-Request-Id": "X-Request-Id",
		"a.b": "a.b", "名前": "param", strings.Repeat("x", 70): strings.Repeat("x", 57) + "_" + shortHash(strings.Repeat("x", 70)),
	}
	for in, want := range params {
		if got := paramName(in); got != want {
			t.Errorf("paramName(%q) = %q, want %q", in, got, want)
		}
	}
	bases := []struct{ method, path, id, want string }{
		{"GET", "/repos/{owner}/{repo}/issues", "", "get_repos_owner_repo_issues"},
		{"GET", "/", "", "get_root"},
		{"POST", "/a", "issues/list-for-repo", "issues_list-for-repo"},
		{"POST", "/a", "!!!", "post_a"},
		{"GET", "/api/v2/pokemon-species/{id}/", "", "get_api_v2_pokemon-species_id"},
	}
	for _, tc := range bases {
		if got, _ := baseName(tc.method, tc.path, tc.id); got != tc.want {
			t.Errorf("baseName(%s %s %q) = %q, want %q", tc.method, tc.path, tc.id, got, tc.want)
		}
	}
}

// TestAssignNamesStable checks that a colliding operation's suffix does
// not depend on which other operations the document holds.
func TestAssignNamesStable(t *testing.T) {
	mk := func(method, path, id string) *operation {
		o := &operation{method: method, path: path}
		o.name, o.exact = baseName(method, path, id)
		return o
	}
	a := []*operation{mk("GET", "/a", "list"), mk("GET", "/b", "list"), mk("GET", "/c", "list")}
	b := []*operation{mk("GET", "/0", "list"), mk("GET", "/b", "list"), mk("GET", "/c", "list")}
	assignNames(a)
	assignNames(b)
	if a[0].name != "list" || b[0].name != "list" {
		t.Errorf("the first keeps the name: %q, %q", a[0].name, b[0].name)
	}
	if a[2].name != b[2].name || a[1].name != b[1].name || a[1].name == a[2].name {
		t.Errorf("suffixes moved: %q %q vs %q %q", a[1].name, a[2].name, b[1].name, b[2].name)
	}
	c := []*operation{mk("GET", "/x", "List Things"), mk("GET", "/y", "List_Things")}
	assignNames(c)
	if c[1].name != "List_Things" || c[0].name == "List_Things" {
		t.Errorf("the exact operationId keeps the name: %q, %q", c[0].name, c[1].name)
	}
}

func FuzzImportOpenAPIData(f *testing.F) {
	for _, name := range []string{"shapes.yaml", "swagger2.yaml", "swagger2-alternatives.json", "openapi31.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", "openapi", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"openapi":"3.0.0","paths":{"/a/{b}":{"get":{"operationId":"a b","parameters":[{"name":"b","in":"path"}],"responses":{}}}}}`))
	f.Add([]byte(`{"swagger":"2.0","paths":{"/x":{"post":{"parameters":[{"name":"x","in":"body","schema":{"items":[{},{"type":"null"}]}}]}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts, err := ImportOpenAPIData(data, ImportOptions{ProviderID: "fuzz"})
		if err != nil {
			return
		}
		checkTools(t, "fuzz", ts)
	})
}

func ExampleImportOpenAPIData() {
	doc := []byte(`
openapi: 3.0.3
info: {title: Acme, version: "1"}
servers: [{url: "https://api.acme.example"}]
paths:
  /orders/{order_id}/notes:
    post:
      operationId: addNote
      summary: Add a note to an order
      parameters:
        - {name: order_id, in: path, required: true, schema: {type: string}}
      requestBody:
        content:
          application/json:
            schema:
              type: object
              required: [text]
              properties:
                text: {type: string}
      responses:
        "201": {description: Added.}
`)
	ts, err := ImportOpenAPIData(doc, ImportOptions{ProviderID: "acme"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range ts {
		fmt.Println(t.ID, t.Method, t.Origin+t.Path)
		for _, p := range t.Params {
			fmt.Printf("  %s in %s, %s, required=%v\n", p.Name, p.In, p.Type(), p.Required)
		}
	}
	// Output:
	// acme.addNote POST https://api.acme.example/orders/{order_id}/notes
	//   order_id in path, string, required=true
	//   text in body, string, required=true
}
