package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/trawl-dev/trawl"

// modulePackages maps each package folder of the module ("web/deploy")
// to the imports of its non-test files (test-only folders such as
// bench/scaleout map to none).
func modulePackages(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	pkgs := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "node_modules" || d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		if _, ok := pkgs[rel]; !ok {
			pkgs[rel] = nil
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if !slices.Contains(pkgs[rel], p) {
				pkgs[rel] = append(pkgs[rel], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// TestPackageTable checks that README's package table lists exactly the
// module's packages.
func TestPackageTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Packages\n")
	if !ok {
		t.Fatal("README.md has no Packages section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9/]+)` \\|").FindAllStringSubmatch(section, -1) {
		listed[m[1]] = true
	}
	for p := range modulePackages(t) {
		if !listed[p] {
			t.Errorf("package %s is not in README's package table", p)
		}
		delete(listed, p)
	}
	for p := range listed {
		t.Errorf("README's package table lists %s, which is no package", p)
	}
}

// layer ranks the module's trees: a package imports only its own tree's
// packages and those of lower layers (DESIGN §1: arrows point down).
var layer = map[string]int{
	"tools": 0, "stream": 0, "prompts": 0,
	"loop": 1, "discovery": 1,
	"agent": 2,
	"web":   3,
	"cmd":   4, "bench": 4,
}

// TestNoPackageImportsUp checks the import rules README's package table
// states.
func TestNoPackageImportsUp(t *testing.T) {
	for pkg, imports := range modulePackages(t) {
		tree, _, _ := strings.Cut(pkg, "/")
		rank, ok := layer[tree]
		if !ok {
			t.Errorf("package %s is in a tree (%s) with no layer", pkg, tree)
			continue
		}
		for _, im := range imports {
			if pkg == "web/deploy" && strings.HasPrefix(im, "github.com/labstack/echo") {
				t.Errorf("web/deploy imports %s: the deployment's composition knows nothing of HTTP routing", im)
			}
			dep, ok := strings.CutPrefix(im, modulePath+"/")
			if !ok {
				continue
			}
			if dep == "web" && pkg != "cmd/trawl" {
				t.Errorf("%s imports web: only cmd/trawl serves the HTTP server", pkg)
			}
			depTree, _, _ := strings.Cut(dep, "/")
			if depTree != tree && layer[depTree] >= rank {
				t.Errorf("%s imports %s: up (or across) from layer %d to %d", pkg, dep, rank, layer[depTree])
			}
		}
	}
}
