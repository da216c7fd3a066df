package web

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// A provider whose document needs repairs and skips still starts: the
// start-up log summarises what was done and GET /v1/tools lists it.
func TestImportWarningsReported(t *testing.T) {
	spec := filepath.Join(t.TempDir(), "broken.json")
	doc := `{"openapi":"3.0.3","info":{"title":"b","version":"1"},"paths":{
	  "/things":{"get":{"operationId":"listThings","responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Gone"}}}}}}},
	  "/bad":{"get":{"operationId":"bad","parameters":[{"$ref":"#/components/parameters/Nope"}],"responses":{"200":{"description":"ok"}}}}}}`
	if err := os.WriteFile(spec, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	plain, err := ParseConfig("trawl.yaml", nil, env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ts := startConfig(t, plain, func(c *Config) {
		c.Providers = []ProviderConfig{{ID: "broken", OpenAPI: spec, BaseURL: "http://127.0.0.1:1"}}
	})
	logs := ts.logs.String()
	for _, want := range []string{"provider imported leniently", "provider=broken", "repaired=1", "skipped=1"} {
		if !strings.Contains(logs, want) {
			t.Errorf("start-up log lacks %q:\n%s", want, logs)
		}
	}
	st, b := ts.do(t, "GET", "/v1/tools", "", nil)
	if st != 200 {
		t.Fatalf("tools: %d %s", st, b)
	}
	var body struct {
		Tools          []ToolView                       `json:"tools"`
		ImportWarnings map[string][]tools.ImportWarning `json:"importWarnings"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	ws := body.ImportWarnings["broken"]
	if len(ws) != 2 || ws[0].Action != tools.Repaired || ws[1].Action != tools.Skipped || ws[1].Where != "GET /bad" {
		t.Errorf("importWarnings[broken] = %+v", ws)
	}
	found := false
	for _, tv := range body.Tools {
		found = found || tv.ID == "broken.listThings"
	}
	if !found {
		t.Error("the repaired operation is not served")
	}
}
