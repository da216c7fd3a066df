package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// lenientDoc builds a small OpenAPI 3 document from paths and components
// written as JSON fragments.
func lenientDoc(paths, components string) string {
	doc := `{"openapi":"3.0.3","info":{"title":"t","version":"1"},"paths":{` + paths + `}`
	if components != "" {
		doc += `,"components":{` + components + `}`
	}
	return doc + `}`
}

const okOp = `"/ok":{"get":{"operationId":"ok","responses":{"200":{"description":"fine","content":{"application/json":{"schema":{"type":"object","properties":{"id":{"type":"string"}}}}}}}}}`

func TestImportLenient(t *testing.T) {
	cases := []struct {
		name     string
		doc      string
		tools    []string // names imported
		repaired []string // a word of each repair's detail, in order
		skipped  []string // operations skipped
		check    func(t *testing.T, ts []*Tool)
	}{
		{
			name: "requestBody refs a response",
			doc: lenientDoc(okOp+`,"/orders":{"post":{"operationId":"createOrder","requestBody":{"$ref":"#/components/requestBodies/Order"},"responses":{"201":{"description":"made"}}}}`,
				`"requestBodies":{"Order":{"$ref":"#/components/responses/OrderBody"}},
				 "responses":{"OrderBody":{"description":"an order","content":{"application/json":{"schema":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}}}}}}}`),
			tools:    []string{"ok", "createOrder"},
			repaired: []string{"requestBody $ref to a response"},
			check: func(t *testing.T, ts []*Tool) {
				tool := toolNamed(t, ts, "createOrder")
				if p, ok := tool.Param("qty"); !ok || p.In != InBody || p.Type() != "integer" {
					t.Errorf("createOrder: qty = %+v, %v; want an integer body parameter", p, ok)
				}
			},
		},
		{
			name: "schema refs a response",
			doc: lenientDoc(`"/things":{"get":{"operationId":"listThings","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/responses/Things"}}}}}}}`,
				`"responses":{"Things":{"description":"x","content":{"application/vnd.acme+json":{"schema":{"type":"object","properties":{"things":{"type":"array","items":{"type":"string"}}}}}}}}`),
			tools:    []string{"listThings"},
			repaired: []string{"schema $ref to a response"},
			check: func(t *testing.T, ts []*Tool) {
				if s := prop(toolNamed(t, ts, "listThings").Response, "things"); s == nil || s.Type != "array" {
					t.Errorf("listThings response things = %+v, want an array", s)
				}
			},
		},
		{
			name:     "dangling schema ref",
			doc:      lenientDoc(okOp+`,"/items":{"get":{"operationId":"listItems","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/components/schemas/Gone"}},"cursor":{"type":"string"}}}}}}}}}`, ""),
			tools:    []string{"listItems", "ok"},
			repaired: []string{"dangling $ref #/components/schemas/Gone"},
			check: func(t *testing.T, ts []*Tool) {
				if s := prop(toolNamed(t, ts, "listItems").Response, "items"); s == nil || s.Type != "array" {
					t.Errorf("items = %+v, want an array of anything", s)
				}
			},
		},
		{
			name:    "dangling parameter ref skips its operation only",
			doc:     lenientDoc(okOp+`,"/bad":{"get":{"operationId":"bad","parameters":[{"$ref":"#/components/parameters/Nope"}],"responses":{"200":{"description":"ok"}}}}`, ""),
			tools:   []string{"ok"},
			skipped: []string{"GET /bad"},
		},
		{
			name: "parameter refs a schema: no unambiguous repair",
			doc: lenientDoc(okOp+`,"/bad":{"get":{"operationId":"bad","parameters":[{"$ref":"#/components/schemas/S"}],"responses":{"200":{"description":"ok"}}}}`,
				`"schemas":{"S":{"type":"string"}}`),
			tools:   []string{"ok"},
			skipped: []string{"GET /bad"},
		},
		{
			name: "unrepairable value skips the operation the loader names",
			doc: lenientDoc(okOp+`,"/bad":{"get":{"operationId":"bad","parameters":[{"name":"x","in":"query","schema":{"type":"string","minLength":"abc"}}],"responses":{"200":{"description":"ok"}}}},
				"/also":{"post":{"operationId":"also","responses":{"200":{"description":"ok"}}}}`, ""),
			tools:   []string{"also", "ok"},
			skipped: []string{"GET /bad"},
		},
		{
			name: "unrepairable component is removed and its users repaired",
			doc: lenientDoc(okOp+`,"/w":{"get":{"operationId":"w","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Broken"}}}}}}}`,
				`"schemas":{"Broken":{"type":"string","maxLength":"many"}}`),
			tools:    []string{"ok", "w"},
			repaired: []string{"component schemas/Broken was removed", "dangling $ref #/components/schemas/Broken"},
		},
		{
			name:    "a path item that is a dangling ref",
			doc:     lenientDoc(okOp+`,"/gone":{"$ref":"#/components/pathItems/Gone"}`, ""),
			tools:   []string{"ok"},
			skipped: []string{"* /gone"},
		},
		{
			name: "several repairs at once, in YAML",
			doc: `openapi: 3.0.3
info: {title: t, version: "1"}
paths:
  /a:
    get:
      operationId: a
      responses:
        200:
          content:
            application/json:
              schema: {$ref: '#/components/schemas/Missing'}
  /b:
    get:
      operationId: b
      responses:
        2xx:
          description: ok
          content:
            application/vnd.api+json:
              schema: {type: array, items: {type: string}}
`,
			tools: []string{"a", "b"},
			repaired: []string{"status codes written as integers", "responses without the required description",
				"dangling $ref #/components/schemas/Missing", "status ranges written in lower case"},
			check: func(t *testing.T, ts []*Tool) {
				if r := toolNamed(t, ts, "b").Response; r == nil || r.Type != "array" {
					t.Errorf("b: response %+v, want the vendor media type's array", r)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ImportOpenAPIDataReport([]byte(tc.doc), ImportOptions{ProviderID: "p"})
			if err != nil {
				t.Fatal(err)
			}
			checkTools(t, "p", r.Tools)
			if got := names(r.Tools); !slices.Equal(got, tc.tools) {
				t.Errorf("tools %v, want %v", got, tc.tools)
			}
			var rep, skip []ImportWarning
			for _, w := range r.Warnings {
				if w.Action == Repaired {
					rep = append(rep, w)
				} else {
					skip = append(skip, w)
				}
			}
			if len(rep) != len(tc.repaired) {
				t.Errorf("repairs %v, want %d: %v", r.Warnings, len(tc.repaired), tc.repaired)
			}
			for i, want := range tc.repaired {
				if i < len(rep) && !strings.Contains(rep[i].Detail, want) {
					t.Errorf("repair %d: %q does not mention %q", i, rep[i].Detail, want)
				}
			}
			var skipped []string
			for _, w := range skip {
				skipped = append(skipped, w.Where)
				if w.Detail == "" {
					t.Errorf("skip of %s gives no reason", w.Where)
				}
			}
			if !slices.Equal(skipped, tc.skipped) {
				t.Errorf("skipped %v, want %v", skipped, tc.skipped)
			}
			if tc.check != nil {
				tc.check(t, r.Tools)
			}
			if s := r.Summary(); !strings.Contains(s, "tool") {
				t.Errorf("summary %q", s)
			}
		})
	}
}

func TestImportLenientStrictDocumentsHaveNoWarnings(t *testing.T) {
	r, err := ImportOpenAPIDataReport([]byte(lenientDoc(okOp, "")), ImportOptions{ProviderID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Warnings) != 0 || len(r.Tools) != 1 {
		t.Errorf("a valid document: %d tools, warnings %v", len(r.Tools), r.Warnings)
	}
	if r.Summary() != "1 tool" {
		t.Errorf("summary %q", r.Summary())
	}
}

func TestImportLenientRefusesWhenNothingIsUsable(t *testing.T) {
	doc := lenientDoc(`"/bad":{"get":{"parameters":[{"$ref":"#/components/parameters/Nope"}],"responses":{"200":{"description":"ok"}}}}`, "")
	_, err := ImportOpenAPIDataReport([]byte(doc), ImportOptions{ProviderID: "p"})
	if err == nil {
		t.Fatal("a document with no usable operation was accepted")
	}
	for _, want := range []string{"no operation is usable", "GET /bad", "Nope"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestImportLenientMissingFileRefIsRepaired(t *testing.T) {
	dir := t.TempDir()
	doc := lenientDoc(okOp+`,"/ext":{"get":{"operationId":"ext","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"missing.yaml#/X"}}}}}}}`, "")
	path := filepath.Join(dir, "api.json")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ImportOpenAPIReport(context.Background(), path, ImportOptions{ProviderID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(r.Tools); !slices.Equal(got, []string{"ext", "ok"}) {
		t.Errorf("tools %v, want [ext ok]", got)
	}
	if r.Count(Repaired) != 1 || !strings.Contains(r.Warnings[0].Detail, "missing.yaml") {
		t.Errorf("warnings %v, want one repair naming missing.yaml", r.Warnings)
	}
}

// FuzzImportLenient: whatever the document, an import either fails or
// gives valid tools, and every skip names an operation.
func FuzzImportLenient(f *testing.F) {
	f.Add([]byte(lenientDoc(okOp, `"schemas":{"S":{"$ref":"#/components/responses/R"}},"responses":{"R":{"$ref":"#/components/schemas/S"}}`)))
	f.Add([]byte(lenientDoc(`"/a":{"get":{"requestBody":{"$ref":"#/components/schemas/Nope"},"responses":{"2xx":{}}}}`, "")))
	f.Add([]byte(lenientDoc(okOp+`,"/b":{"parameters":[{"$ref":"#/x"}],"get":{"responses":{}}}`, "")))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ImportOpenAPIDataReport(data, ImportOptions{ProviderID: "fuzz"})
		if err != nil {
			return
		}
		checkTools(t, "fuzz", r.Tools)
		for _, w := range r.Warnings {
			if w.Action != Repaired && w.Action != Skipped || w.Where == "" || w.Detail == "" {
				t.Errorf("warning %+v", w)
			}
		}
	})
}

// A schema in a file that is missing, or behind a URL (never fetched), is
// repaired like a dangling $ref, and said so.
func TestImportLenientUnreadableRefs(t *testing.T) {
	for file, mention := range map[string]string{"broken-ref.yaml": "./missing.yaml#/Thing", "remote-ref.yaml": "https://schemas.invalid/thing.yaml#/Thing"} {
		r, err := ImportOpenAPIReport(context.Background(), filepath.Join("testdata", "openapi", file), ImportOptions{ProviderID: "p"})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(r.Tools) != 1 || r.Count(Repaired) != 1 || !strings.Contains(r.Warnings[0].Detail, mention) {
			t.Errorf("%s: %d tools, warnings %v; want the operation with one repair naming %s", file, len(r.Tools), r.Warnings, mention)
		}
	}
}

// Many operations whose parameters name files that do not exist: each is
// skipped (a parameter has no repair), without a load per operation.
func TestImportLenientManyMissingFiles(t *testing.T) {
	dir := t.TempDir()
	paths := okOp
	for i := range 60 {
		paths += fmt.Sprintf(`,"/ext%02d":{"get":{"operationId":"ext%02d","parameters":[{"$ref":"missing%d.yaml#/P"}],"responses":{"200":{"description":"ok"}}}}`, i, i, i)
	}
	path := filepath.Join(dir, "api.json")
	if err := os.WriteFile(path, []byte(lenientDoc(paths, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := ImportOpenAPIReport(context.Background(), path, ImportOptions{ProviderID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(r.Tools); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("tools %v, want [ok]", got)
	}
	if r.Count(Skipped) != 60 {
		t.Errorf("%d skipped, want 60: %v", r.Count(Skipped), r.Warnings)
	}
}
