package web

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// declaredCodes are the error codes the tool packages declare: every
// string constant named Code… in agent, loop and tools.
func declaredCodes(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range []string{"../agent", "../loop", "../tools"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
							continue
						}
						if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							v, _ := strconv.Unquote(lit.Value)
							out[v] = filepath.Base(dir) + "." + name.Name
						}
					}
				}
			}
		}
	}
	return out
}

// One table maps every tool error code to its status: each code a
// package declares is in it, and README's table says the same.
func TestToolErrorTable(t *testing.T) {
	declared := declaredCodes(t)
	if len(declared) < 10 {
		t.Fatalf("found only %d codes: %v", len(declared), declared)
	}
	for code, name := range declared {
		if _, ok := toolErrorStatus[code]; !ok {
			t.Errorf("%s (%q) has no HTTP status in toolErrorStatus", name, code)
		}
	}
	for _, code := range []string{"cross_origin_redirect", "too_many_redirects", "foreign_url", "upstream_error"} {
		if toolStatus(code) != http.StatusBadGateway {
			t.Errorf("%s answers %d, want 502 (the upstream's doing, not the caller's)", code, toolStatus(code))
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "| code | status |")
	if start < 0 {
		t.Fatal(`README has no tool error table ("| code | status |")`)
	}
	row := regexp.MustCompile("^\\| `([a-z_]+)` \\| (\\d{3}) \\|")
	documented := map[string]int{}
	for _, line := range strings.Split(text[start:], "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("README table row %q does not read as | `code` | status | …", line)
			continue
		}
		documented[m[1]], _ = strconv.Atoi(m[2])
	}
	if diff := cmp.Diff(toolErrorStatus, documented); diff != "" {
		t.Errorf("README's table differs from toolErrorStatus (-code +README):\n%s", diff)
	}
}

// An upstream that redirects to another origin is the upstream's fault:
// invoke answers 502 cross_origin_redirect, and nothing reaches the other
// origin.
func TestCrossOriginRedirectIs502(t *testing.T) {
	foreign := newForeign(t)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/away":
			http.Redirect(w, r, foreign.URL+"/steal", http.StatusFound)
		default: // in circles, on its own origin
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	}))
	t.Cleanup(up.Close)
	spec := filepath.Join(t.TempDir(), "redir.json")
	op := func(id, path string) string {
		return fmt.Sprintf(`"%s": {"get": {"operationId": %q, "responses": {"200": {"description": "ok"}}}}`, path, id)
	}
	doc := `{"openapi": "3.0.0", "info": {"title": "r", "version": "1"}, "paths": {` + op("away", "/away") + "," + op("loop", "/loop") + `}}`
	if err := os.WriteFile(spec, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	plain, err := ParseConfig("trawl.yaml", nil, env(nil)) // this provider alone
	if err != nil {
		t.Fatal(err)
	}
	ts := startConfig(t, plain, func(c *Config) {
		c.Providers = []ProviderConfig{{ID: "redir", OpenAPI: spec, BaseURL: up.URL}}
	})
	for tool, code := range map[string]string{"redir.away": "cross_origin_redirect", "redir.loop": "too_many_redirects"} {
		st, b := ts.do(t, "POST", "/v1/tools/"+tool+"/invoke", "", map[string]any{"args": map[string]any{}})
		if st != http.StatusBadGateway || errorCode(t, b) != code {
			t.Errorf("%s: %d %s, want 502 %s", tool, st, b, code)
		}
	}
	foreign.mu.Lock()
	defer foreign.mu.Unlock()
	if len(foreign.hits) > 0 {
		t.Errorf("the foreign origin was reached: %v", foreign.hits)
	}
}
