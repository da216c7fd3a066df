package paginate

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
// holding go.mod); ok is false, with the reason, when it is absent.
func sharedDir(t testing.TB) (dir string, why string) {
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
			return "", "no go.mod above the test's directory"
		}
		dir = parent
	}
	shared := filepath.Join(filepath.Dir(dir), "shared")
	if _, err := os.Stat(filepath.Join(shared, "specs")); err != nil {
		return "", err.Error()
	}
	return shared, ""
}

// mustShared is sharedDir that skips the test when ../shared is absent.
func mustShared(t testing.TB) string {
	t.Helper()
	dir, why := sharedDir(t)
	if dir == "" {
		t.Skipf("../shared not found (%s): the vendor specs live in ../shared/specs beside the repository", why)
	}
	return dir
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

var (
	sharedCacheOnce sync.Once
	sharedCache     *specCache
)

// vendorCache is the one specCache of the test binary, so each vendor
// spec is imported once however many tests read it.
func vendorCache(shared string) *specCache {
	sharedCacheOnce.Do(func() {
		sharedCache = &specCache{dir: filepath.Join(shared, "specs"), m: map[string]*specImport{}}
	})
	return sharedCache
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
		file := filepath.Join(c.dir, name)
		if strings.HasPrefix(name, "testdata/") {
			file = name // an excerpt kept in the repository (testdata/specs)
		}
		si.tools, si.err = tools.ImportOpenAPI(context.Background(), file,
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

// labelFiles are the label sets TestLabels reads: the shared one kept
// beside the repository with the specs (when present), and the vendor
// labels written for this repository (always; they refer to the specs in
// ../shared/specs, so their checks need it too).
func labelFiles(t *testing.T, shared string) [][]label {
	var sets [][]label
	if f := filepath.Join(shared, "specs", "labels.jsonl"); fileExists(f) {
		sets = append(sets, readLabels(t, f))
	} else {
		t.Logf("%s is absent: only testdata/labels-vendor.jsonl is checked", f)
	}
	return append(sets, readLabels(t, filepath.Join("testdata", "labels-vendor.jsonl")),
		readLabels(t, filepath.Join("testdata", "labels-fixtures.jsonl")))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// wireOf names a plan's parameter as the API does: the tool parameter's
// wire name (page_cursor is page[cursor]), with a property one level down
// in the body kept as "<wire>.<property>".
func wireOf(t *tools.Tool, name *string) *string {
	if name == nil {
		return nil
	}
	head, rest, nested := strings.Cut(*name, ".")
	for _, p := range t.Params {
		if p.Name == head {
			w := p.WireName()
			if nested {
				w += "." + rest
			}
			return &w
		}
	}
	return name
}

// agreement counts one document's labels that detection agrees with.
type agreement struct {
	spec                            string
	n, core, strategy, continuation int
}

// TestLabels compares detection with the hand-labelled operations of real
// vendor specs: paginated or not, the four parameter names (as the API
// names them) and the items path must agree on at least 95% of all labels,
// and on every label of the shared set (detection must not lose what it
// had). Strategy and continuation agreement is reported too, per document;
// every miss is logged with the label's notes.
func TestLabels(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("imports 16 vendor specs (tens of megabytes); skipped with -short and -race, run it without")
	}
	shared := mustShared(t)
	sets := labelFiles(t, shared)
	cache := vendorCache(shared)

	var total agreement
	per := map[string]*agreement{}
	var order []string
	var misses []string
	sharedMisses := 0
	for si, labels := range sets {
		inShared := si == 0 && len(sets) == 2
		for _, l := range labels {
			a := per[l.Spec]
			if a == nil {
				a = &agreement{spec: l.Spec}
				per[l.Spec] = a
				order = append(order, l.Spec)
			}
			a.n++
			total.n++
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
				check("sizeParam", l.SizeParam, wireOf(tool, got.SizeParam))
				check("pageParam", l.PageParam, wireOf(tool, got.PageParam))
				check("offsetParam", l.OffsetParam, wireOf(tool, got.OffsetParam))
				check("cursorParam", l.CursorParam, wireOf(tool, got.CursorParam))
				check("items", l.ResponseItems, got.Items)
				if len(diffs) == 0 {
					a.core++
					total.core++
				} else if inShared {
					sharedMisses++
				}
				var extra []string
				if string(got.Strategy) == l.Strategy {
					a.strategy++
					total.strategy++
				} else {
					extra = append(extra, fmt.Sprintf("strategy: want %q, got %q", l.Strategy, got.Strategy))
				}
				if same(l.Continuation, got.Continuation) {
					a.continuation++
					total.continuation++
				} else {
					extra = append(extra, fmt.Sprintf("continuation: want %s, got %s", show(l.Continuation), show(got.Continuation)))
				}
				if len(diffs)+len(extra) > 0 {
					msg := fmt.Sprintf("%s %s %s (%s): %s\n    notes: %s", l.Spec, l.Method, l.Path, l.OperationID,
						strings.Join(append(diffs, extra...), "; "), l.Notes)
					if len(diffs) > 0 {
						misses = append(misses, msg)
					}
					t.Log(msg)
				}
			})
		}
	}
	t.Logf("agreement per document (paginated+params+items | strategy | continuation):\n%s", agreementTable(order, per, total))
	pct := float64(100*total.core) / float64(total.n)
	if pct < 99 {
		t.Errorf("paginated+params+items agreement %.1f%% is under 99%%; misses:\n%s", pct, strings.Join(misses, "\n"))
	}
	if sharedMisses > 0 {
		t.Errorf("%d labels of the shared set no longer agree", sharedMisses)
	}
}

// TestFixtureLabels checks the labels of the vendor excerpts kept in
// testdata/specs (the shapes real APIs hid from detection: a named wrapper
// with its own paging, cursors in a nested object, a next page under
// paging.next, two modes behind a flag, an offset walk whose response also
// carries a cursor) on every field, strategy and continuation included. It
// needs nothing outside the repository.
func TestFixtureLabels(t *testing.T) {
	cache := &specCache{m: map[string]*specImport{}}
	for _, l := range readLabels(t, filepath.Join("testdata", "labels-fixtures.jsonl")) {
		t.Run(l.Method+" "+l.Path, func(t *testing.T) {
			ts, err := cache.get(l.Spec)
			if err != nil {
				t.Fatalf("import %s: %v", l.Spec, err)
			}
			tool := findTool(ts, l.Method, l.Path)
			if tool == nil {
				t.Fatalf("%s %s not imported from %s", l.Method, l.Path, l.Spec)
			}
			got := Inspect([]*tools.Tool{tool})[0].Pagination
			for _, c := range []struct {
				field     string
				want, got *string
			}{
				{"sizeParam", l.SizeParam, wireOf(tool, got.SizeParam)}, {"pageParam", l.PageParam, wireOf(tool, got.PageParam)},
				{"offsetParam", l.OffsetParam, wireOf(tool, got.OffsetParam)}, {"cursorParam", l.CursorParam, wireOf(tool, got.CursorParam)},
				{"items", l.ResponseItems, got.Items}, {"continuation", l.Continuation, got.Continuation},
			} {
				if !same(c.want, c.got) {
					t.Errorf("%s: want %s, got %s (%s)", c.field, show(c.want), show(c.got), l.Notes)
				}
			}
			if string(got.Strategy) != l.Strategy || (got.Strategy != None) != l.Paginated {
				t.Errorf("strategy: want %q, got %q (%s)", l.Strategy, got.Strategy, l.Notes)
			}
		})
	}
}

// agreementTable renders per-document agreement as a Markdown table (the
// one bench/README.md shows).
func agreementTable(order []string, per map[string]*agreement, total agreement) string {
	var b strings.Builder
	b.WriteString("| document | labels | paginated+params+items | strategy | continuation |\n| --- | ---: | ---: | ---: | ---: |\n")
	row := func(a agreement) {
		pc := func(k int) string { return fmt.Sprintf("%d (%.0f%%)", k, float64(100*k)/float64(a.n)) }
		fmt.Fprintf(&b, "| %s | %d | %s | %s | %s |\n", a.spec, a.n, pc(a.core), pc(a.strategy), pc(a.continuation))
	}
	for _, s := range order {
		row(*per[s])
	}
	total.spec = "**all**"
	row(total)
	return b.String()
}

// BenchmarkInspect detects the pagination of every operation of the
// largest vendor spec (Stripe, about 450 operations with deep schemas),
// what `trawl inspect` does after importing it.
func BenchmarkInspect(b *testing.B) {
	shared := mustShared(b)
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

// TestVendorExtensionAgreement: every Datadog operation its vendor marks
// with x-pagination is detected from that extension, with the parameters
// it names (as wire names) and its results path.
func TestVendorExtensionAgreement(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("imports a 4 MB vendor spec; skipped with -short and -race")
	}
	shared := mustShared(t)
	ts, err := vendorCache(shared).get("datadog-v2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	marked := 0
	for _, tool := range ts {
		ext, ok := tool.Extensions["x-pagination"].(map[string]any)
		if !ok {
			continue
		}
		marked++
		p := Detect(tool)
		if p.Provenance != "extension:x-pagination" || !p.Paginated() || p.Confidence != High {
			t.Errorf("%s %s: plan %+v does not come from x-pagination", tool.Method, tool.Path, p)
			continue
		}
		wire := func(name string) string {
			if w := wireOf(tool, &name); w != nil {
				return *w
			}
			return ""
		}
		want := func(key string) string {
			s, _ := ext[key].(string)
			return strings.TrimPrefix(s, "body.")
		}
		for _, c := range []struct{ key, got string }{
			{"limitParam", p.SizeParam}, {"cursorParam", p.CursorParam},
			{"pageOffsetParam", p.OffsetParam}, {"pageParam", p.PageParam},
		} {
			if w := want(c.key); w != "" && wire(c.got) != w {
				t.Errorf("%s %s: %s is %q, the extension says %q", tool.Method, tool.Path, c.key, wire(c.got), w)
			}
		}
		if r := want("resultsPath"); showPath(p.Items) != r {
			t.Errorf("%s %s: items %q, the extension says %q", tool.Method, tool.Path, showPath(p.Items), r)
		}
	}
	if marked != 45 {
		t.Errorf("%d operations carry x-pagination, want the 45 SOURCES.md counts", marked)
	}
}

// TestEveryVendorOperationIsGraded runs detection over every operation of
// every vendor document: each plan carries a confidence and evidence, and
// each parameter a paginated plan names is one the tool has (a body
// property one level down included), so a walk can always send it.
func TestEveryVendorOperationIsGraded(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("imports every vendor spec; skipped with -short and -race")
	}
	shared := mustShared(t)
	entries, err := os.ReadDir(filepath.Join(shared, "specs"))
	if err != nil {
		t.Fatal(err)
	}
	cache := vendorCache(shared)
	counts := map[Confidence]int{}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".json" && ext != ".yaml" && ext != ".yml" {
			continue
		}
		ts, err := cache.get(e.Name())
		if err != nil {
			t.Errorf("%s: %v", e.Name(), err)
			continue
		}
		for _, tool := range ts {
			p := Detect(tool)
			counts[p.Confidence]++
			if p.Confidence == "" || len(p.Evidence) == 0 {
				t.Errorf("%s %s %s: no confidence or evidence: %+v", e.Name(), tool.Method, tool.Path, p)
			}
			if !p.Paginated() {
				continue
			}
			for _, name := range []string{p.SizeParam, p.PageParam, p.OffsetParam, p.CursorParam} {
				if name != "" && !hasParam(tool, name) {
					t.Errorf("%s %s %s: plan names %q, which the tool does not have", e.Name(), tool.Method, tool.Path, name)
				}
			}
			if p.Strategy == Cursor && p.NextToken == "" && p.CursorFromItem == "" && p.Confidence != Low && p.Provenance == "schema" {
				t.Errorf("%s %s %s: a cursor plan with nothing to continue from is not marked low: %+v", e.Name(), tool.Method, tool.Path, p)
			}
		}
	}
	t.Logf("plans by confidence: high %d, medium %d, low %d", counts[High], counts[Medium], counts[Low])
}

func hasParam(t *tools.Tool, name string) bool {
	head, rest, nested := strings.Cut(name, ".")
	for _, p := range t.Params {
		if p.Name != head {
			continue
		}
		s := p.Schema
		if !nested {
			return true
		}
		for _, k := range strings.Split(rest, ".") {
			if s == nil {
				return false
			}
			s = s.Properties[k]
		}
		return s != nil
	}
	return false
}

// The excerpts' shapes walked against loopback servers that answer as the
// vendors document: every row, and never an end the server did not give
// (an offset walk over Box's default mode, whose answers carry no
// next_marker, goes on; a wrapped page is read inside its wrapper).
func TestFixtureShapesWalk(t *testing.T) {
	cache := &specCache{m: map[string]*specImport{}}
	tool := func(spec, method, path string) *tools.Tool {
		t.Helper()
		ts, err := cache.get(spec)
		if err != nil {
			t.Fatal(err)
		}
		tl := findTool(ts, method, path)
		if tl == nil {
			t.Fatalf("%s %s not in %s", method, path, spec)
		}
		return tl
	}
	const n = 45
	ids := seq("r", 1, n)
	for _, c := range []struct {
		name  string
		tool  *tools.Tool
		args  map[string]any
		serve func(w http.ResponseWriter, r *http.Request, origin string)
	}{
		{"box offset mode without next_marker", tool("testdata/specs/box-platform.excerpt.json", "GET", "/folders/{folder_id}/items"),
			map[string]any{"folder_id": "0"},
			func(w http.ResponseWriter, r *http.Request, _ string) {
				q := r.URL.Query()
				if q.Get("usemarker") != "" || q.Get("marker") != "" {
					reply(w, 400, `{"message":"marker mode was not asked for"}`)
					return
				}
				off, _ := strconv.Atoi(firstOf(q.Get("offset"), "0"))
				limit := min(10, atoiOr(q.Get("limit"), 10)) // Box caps what it serves
				end := min(off+limit, n)
				reply(w, 200, fmt.Sprintf(`{"total_count":%d,"limit":%d,"offset":%d,"entries":%s}`, n, limit, off, items(ids[min(off, end):end]...)))
			}},
		{"box offset mode with a null next_marker", tool("testdata/specs/box-platform.excerpt.json", "GET", "/users"), nil,
			func(w http.ResponseWriter, r *http.Request, _ string) {
				q := r.URL.Query()
				off, _ := strconv.Atoi(firstOf(q.Get("offset"), "0"))
				limit := min(10, atoiOr(q.Get("limit"), 10))
				end := min(off+limit, n)
				// The answer names the other mode's cursor, empty: no end.
				reply(w, 200, fmt.Sprintf(`{"total_count":%d,"limit":%d,"offset":%d,"next_marker":null,"entries":%s}`, n, limit, off, items(ids[min(off, end):end]...)))
			}},
		{"spotify albums wrapper", tool("testdata/specs/spotify-web-api.excerpt.yml", "GET", "/browse/new-releases"), nil,
			func(w http.ResponseWriter, r *http.Request, origin string) {
				q := r.URL.Query()
				off, _ := strconv.Atoi(firstOf(q.Get("offset"), "0"))
				limit := atoiOr(q.Get("limit"), 20)
				end := min(off+limit, n)
				next := "null"
				if end < n {
					next = strconv.Quote(fmt.Sprintf("%s/browse/new-releases?offset=%d&limit=%d", origin, end, limit))
				}
				reply(w, 200, fmt.Sprintf(`{"albums":{"href":"x","items":%s,"limit":%d,"next":%s,"offset":%d,"previous":null,"total":%d}}`,
					items(ids[min(off, end):end]...), limit, next, off, n))
			}},
		{"spotify cursors object", tool("testdata/specs/spotify-web-api.excerpt.yml", "GET", "/me/following"), map[string]any{"type": "artist"},
			func(w http.ResponseWriter, r *http.Request, _ string) {
				q := r.URL.Query()
				at := 0
				if a := q.Get("after"); a != "" {
					at = slices.Index(ids, a) + 1
				}
				end := min(at+atoiOr(q.Get("limit"), 20), n)
				after := "null"
				if end < n {
					after = strconv.Quote(ids[end-1])
				}
				reply(w, 200, fmt.Sprintf(`{"artists":{"items":%s,"next":null,"cursors":{"after":%s},"total":%d}}`, items(ids[at:end]...), after, n))
			}},
		{"hubspot paging.next", tool("testdata/specs/hubspot-crm-contacts.excerpt.yml", "GET", "/crm/v3/objects/contacts"), nil,
			func(w http.ResponseWriter, r *http.Request, _ string) {
				q := r.URL.Query()
				at, _ := strconv.Atoi(firstOf(q.Get("after"), "0"))
				end := min(at+atoiOr(q.Get("limit"), 10), n)
				paging := ""
				if end < n {
					paging = fmt.Sprintf(`,"paging":{"next":{"after":"%d","link":"?after=%d"}}`, end, end)
				}
				reply(w, 200, fmt.Sprintf(`{"results":%s%s}`, items(ids[at:end]...), paging))
			}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var origin string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { c.serve(w, r, origin) }))
			defer srv.Close()
			origin = srv.URL
			tl := *c.tool
			tl.Origin = srv.URL
			res, err := Walk(context.Background(), WalkOptions{Caller: tools.NewInvoker(tools.InvokerOptions{Client: srv.Client()}),
				Clock: NewFakeClock(epoch), Tool: &tl, Plan: Detect(&tl), Args: c.args, AllPages: true})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Complete || len(res.Items) != n || res.Shifted || res.Unproven != "" {
				t.Errorf("%d of %d rows, %s (shifted %v, unproven %q) after %d requests", len(res.Items), n, res.StoppedBy, res.Shifted, res.Unproven, res.Requests)
			}
		})
	}
}

func atoiOr(s string, def int) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	return def
}
