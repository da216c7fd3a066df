package paginate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// label is one hand-labelled operation of a vendor spec
// (../shared/specs/labels.jsonl next to the repository).
type label struct {
	Spec          string  `json:"spec"`
	Method        string  `json:"method"`
	Path          string  `json:"path"`
	OperationID   string  `json:"operationId"`
	Paginated     bool    `json:"paginated"`
	Strategy      string  `json:"strategy"`
	SizeParam     *string `json:"sizeParam"`
	PageParam     *string `json:"pageParam"`
	OffsetParam   *string `json:"offsetParam"`
	CursorParam   *string `json:"cursorParam"`
	ResponseItems *string `json:"responseItems"`
	Continuation  *string `json:"continuation"`
	Notes         string  `json:"notes"`
}

// sharedDir finds ../shared beside the repository root (the directory
// holding go.mod), or skips the test.
func sharedDir(t testing.TB) string {
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
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if _, err := os.Stat(filepath.Join(shared, "specs", "labels.jsonl")); err != nil {
		t.Skipf("../shared not found: %v", err)
	}
	return shared
}

func readLabels(t testing.TB, file string) []label {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []label
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l label
		if err := json.Unmarshal(line, &l); err != nil {
			t.Fatalf("%s:%d: %v", file, n, err)
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// specCache imports each vendor spec once for all the subtests.
type specCache struct {
	dir string
	mu  sync.Mutex
	m   map[string]*specImport
}

type specImport struct {
	once  sync.Once
	tools []*tools.Tool
	err   error
}

func (c *specCache) get(name string) ([]*tools.Tool, error) {
	c.mu.Lock()
	si, ok := c.m[name]
	if !ok {
		si = &specImport{}
		c.m[name] = si
	}
	c.mu.Unlock()
	si.once.Do(func() {
		provider := strings.Map(func(r rune) rune {
			if tools.ValidName(string(r)) {
				return r
			}
			return '_'
		}, strings.TrimSuffix(name, filepath.Ext(name)))
		si.tools, si.err = tools.ImportOpenAPI(context.Background(), filepath.Join(c.dir, name),
			tools.ImportOptions{ProviderID: provider, BaseURL: "https://api.example.com"})
	})
	return si.tools, si.err
}

func findTool(ts []*tools.Tool, method, path string) *tools.Tool {
	for _, t := range ts {
		if strings.EqualFold(t.Method, method) && t.Path == path {
			return t
		}
	}
	return nil
}

func show(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

func same(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

// TestLabels compares detection with the labelled operations of real
// vendor specs: paginated or not, the four parameter names and the items
// path must agree on at least 95% of them; strategy and continuation
// agreement is reported too. Every miss is printed with the label's notes.
func TestLabels(t *testing.T) {
	if testing.Short() {
		t.Skip("imports several megabytes of vendor specs")
	}
	shared := sharedDir(t)
	labels := readLabels(t, filepath.Join(shared, "specs", "labels.jsonl"))
	cache := &specCache{dir: filepath.Join(shared, "specs"), m: map[string]*specImport{}}

	var core, strategy, continuation int
	var misses []string
	for _, l := range labels {
		t.Run(l.Spec+" "+l.Method+" "+l.Path, func(t *testing.T) {
			ts, err := cache.get(l.Spec)
			if err != nil {
				t.Fatalf("import: %v", err)
			}
			tool := findTool(ts, l.Method, l.Path)
			if tool == nil {
				misses = append(misses, fmt.Sprintf("%s %s %s: operation not imported", l.Spec, l.Method, l.Path))
				t.Errorf("operation not imported")
				return
			}
			got := Inspect([]*tools.Tool{tool})[0].Pagination
			var diffs []string
			check := func(field string, want, got *string) {
				if !same(want, got) {
					diffs = append(diffs, fmt.Sprintf("%s: want %s, got %s", field, show(want), show(got)))
				}
			}
			if paginated := got.Strategy != None; paginated != l.Paginated {
				diffs = append(diffs, fmt.Sprintf("paginated: want %v, got %v", l.Paginated, paginated))
			}
			check("sizeParam", l.SizeParam, got.SizeParam)
			check("pageParam", l.PageParam, got.PageParam)
			check("offsetParam", l.OffsetParam, got.OffsetParam)
			check("cursorParam", l.CursorParam, got.CursorParam)
			check("items", l.ResponseItems, got.Items)
			if len(diffs) == 0 {
				core++
			}
			var extra []string
			if string(got.Strategy) == l.Strategy {
				strategy++
			} else {
				extra = append(extra, fmt.Sprintf("strategy: want %q, got %q", l.Strategy, got.Strategy))
			}
			if same(l.Continuation, got.Continuation) {
				continuation++
			} else {
				extra = append(extra, fmt.Sprintf("continuation: want %s, got %s", show(l.Continuation), show(got.Continuation)))
			}
			if len(diffs)+len(extra) > 0 {
				msg := fmt.Sprintf("%s %s %s (%s): %s\n    notes: %s", l.Spec, l.Method, l.Path, l.OperationID,
					strings.Join(append(diffs, extra...), "; "), l.Notes)
				misses = append(misses, msg)
				t.Log(msg)
			}
		})
	}
	n := len(labels)
	pct := func(k int) float64 { return 100 * float64(k) / float64(n) }
	t.Logf("agreement over %d labelled operations: paginated+params+items %d (%.1f%%), strategy %d (%.1f%%), continuation %d (%.1f%%)",
		n, core, pct(core), strategy, pct(strategy), continuation, pct(continuation))
	if pct(core) < 95 {
		t.Errorf("paginated+params+items agreement %.1f%% is under 95%%; misses:\n%s", pct(core), strings.Join(misses, "\n"))
	}
}

// BenchmarkInspect detects the pagination of every operation of the
// largest vendor spec (Stripe, about 450 operations with deep schemas),
// what `trawl inspect` does after importing it.
func BenchmarkInspect(b *testing.B) {
	shared := sharedDir(b)
	ts, err := tools.ImportOpenAPI(context.Background(), filepath.Join(shared, "specs", "stripe-2023.yaml"),
		tools.ImportOptions{ProviderID: "stripe", BaseURL: "https://api.example.com"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if ins := Inspect(ts); len(ins) != len(ts) {
			b.Fatalf("%d inspections for %d tools", len(ins), len(ts))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(ts)), "ns/op-detected")
}
