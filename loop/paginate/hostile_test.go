package paginate

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/trawl-dev/trawl/tools"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/walk")

// The hostile suite: each case runs a walk against its own scripted
// httptest server through the real tools.Invoker, and asserts the
// verdict, the counts and the exact sequence of upstream requests. The
// words the walk produces (Uninspected, error messages) are kept in a
// golden transcript per case, testdata/walk/<case>.golden (-update
// rewrites them).

// epoch is the fake clock's start.
var epoch = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// upstream is one scripted server and what it was asked.
type upstream struct {
	t     *testing.T
	srv   *httptest.Server
	clock *FakeClock

	mu   sync.Mutex
	reqs []string
	n    int
}

// script answers the n-th request (1-based).
type script func(u *upstream, w http.ResponseWriter, r *http.Request, n int)

func newUpstream(t *testing.T, clock *FakeClock, s script) *upstream {
	u := &upstream{t: t, clock: clock}
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.n++
		n := u.n
		u.reqs = append(u.reqs, r.Method+" "+r.URL.RequestURI())
		u.mu.Unlock()
		s(u, w, r, n)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) requests() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.reqs...)
}

// reply writes a JSON body with a status.
func reply(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

// cutConnection sends a response head and half a body, then drops the
// connection: a transport failure the HTTP client cannot retry by itself.
func cutConnection(w http.ResponseWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"data\":[")
	buf.Flush()
	conn.Close()
}

// items renders items with the given ids.
func items(ids ...string) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":%q,"name":"item %s","tags":["a","b"]}`, id, id)
	}
	b.WriteByte(']')
	return b.String()
}

// seq returns ids prefix+from … prefix+(from+n-1).
func seq(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(from+i)
	}
	return out
}

// page renders {"data": [items], extra…}.
func page(ids []string, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return `{"data":` + items(ids...) + extra + `}`
}

func intSchema(max float64) *tools.Schema {
	s := &tools.Schema{Type: "integer"}
	if max > 0 {
		s.Maximum = &max
	}
	return s
}

// listTool is GET <origin>/items with the plan's parameters in the query.
func listTool(origin string, p Plan, sizeMax float64) *tools.Tool {
	t := &tools.Tool{ID: "acme.list_items", Provider: "acme", Name: "list_items", Kind: tools.KindAPI,
		Method: http.MethodGet, Path: "/items", Origin: origin}
	if p.SizeParam != "" {
		t.Params = append(t.Params, tools.Param{Name: p.SizeParam, In: tools.InQuery, Schema: intSchema(sizeMax)})
	}
	if p.PageParam != "" {
		t.Params = append(t.Params, tools.Param{Name: p.PageParam, In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}})
	}
	if p.OffsetParam != "" {
		t.Params = append(t.Params, tools.Param{Name: p.OffsetParam, In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}})
	}
	if p.CursorParam != "" {
		t.Params = append(t.Params, tools.Param{Name: p.CursorParam, In: tools.InQuery, Schema: &tools.Schema{Type: "string"}})
	}
	return t
}

var (
	cursorPlan = Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", Items: "data", ItemsFound: true,
		NextToken: "next_cursor", Continuation: "next_cursor", Provenance: "schema"}
	moreCursorPlan = Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", Items: "data", ItemsFound: true,
		NextToken: "next_cursor", MoreFlag: "has_more", Continuation: "has_more", Provenance: "schema"}
	pagePlan = Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", Items: "data", ItemsFound: true,
		Provenance: "schema"}
	offsetPlan = Plan{Strategy: Offset, SizeParam: "limit", OffsetParam: "offset", Items: "data", ItemsFound: true,
		Total: "total", Continuation: "total", Provenance: "schema"}
	nextURLPlan = Plan{Strategy: NextURL, SizeParam: "limit", Items: "data", ItemsFound: true,
		NextURLField: "next", Continuation: "next", Provenance: "schema"}
)

// verdict is what every case asserts about the Result.
type verdict struct {
	Complete      bool
	StoppedBy     string
	Items         int
	Pages         int
	Requests      int
	Retries       int
	Duplicates    int
	LikelyMore    bool
	TotalMismatch bool
	LastCursor    string
}

func verdictOf(r *Result) verdict {
	return verdict{
		Complete: r.Complete, StoppedBy: r.StoppedBy, Items: len(r.Items), Pages: r.Pages,
		Requests: r.Requests, Retries: r.Retries, Duplicates: r.Duplicates,
		LikelyMore: r.LikelyMore, TotalMismatch: r.TotalMismatch, LastCursor: r.LastCursor,
	}
}

type walkCase struct {
	name    string
	plan    Plan
	sizeMax float64 // the size parameter's schema maximum; 0: none
	tool    func(origin string) *tools.Tool
	args    map[string]any
	single  bool // without AllPages
	budget  Budget
	script  script

	want       verdict
	wantReqs   []string
	wantSleeps []time.Duration
	wantErr    bool // the first page fails: Walk returns a *PageError
	check      func(t *testing.T, u *upstream, res *Result)
}

// run walks one case and checks it against its wants and its golden
// transcript.
func (c walkCase) run(t *testing.T) {
	t.Helper()
	clock := NewFakeClock(epoch)
	u := newUpstream(t, clock, c.script)
	tool := listTool(u.srv.URL, c.plan, c.sizeMax)
	if c.tool != nil {
		tool = c.tool(u.srv.URL)
	}
	inv := tools.NewInvoker(tools.InvokerOptions{Client: u.srv.Client()})
	res, err := Walk(context.Background(), WalkOptions{
		Caller: inv, Clock: clock, Tool: tool, Args: c.args, Plan: c.plan,
		AllPages: !c.single, Budget: c.budget, ThreadID: "t1",
	})
	var transcript strings.Builder
	transcript.WriteString("requests:\n")
	for _, r := range u.requests() {
		transcript.WriteString("  " + strings.ReplaceAll(r, u.srv.URL, "$ORIGIN") + "\n")
	}
	if c.wantErr {
		if err == nil {
			t.Fatalf("Walk succeeded (%+v), want a first-page error", verdictOf(res))
		}
		pe, ok := err.(*PageError)
		if !ok {
			t.Fatalf("Walk error %T %v, want *PageError", err, err)
		}
		if pe.StoppedBy != c.want.StoppedBy {
			t.Errorf("PageError.StoppedBy = %q, want %q", pe.StoppedBy, c.want.StoppedBy)
		}
		fmt.Fprintf(&transcript, "error: %s\n", err)
	} else {
		if err != nil {
			t.Fatalf("Walk: %v", err)
		}
		if diff := cmp.Diff(c.want, verdictOf(res)); diff != "" {
			t.Errorf("verdict (-want +got):\n%s", diff)
		}
		fmt.Fprintf(&transcript, "verdict: %+v\n", verdictOf(res))
		fmt.Fprintf(&transcript, "uninspected: %s\n", res.Uninspected)
	}
	if diff := cmp.Diff(c.wantReqs, u.requests()); diff != "" {
		t.Errorf("upstream requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(c.wantSleeps, clock.Sleeps()); diff != "" {
		t.Errorf("sleeps (-want +got):\n%s", diff)
	}
	fmt.Fprintf(&transcript, "sleeps: %v\n", clock.Sleeps())
	if c.check != nil {
		c.check(t, u, res)
	}
	golden(t, c.name, transcript.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "walk", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden transcript: %v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("transcript %s (-want +got):\n%s", path, diff)
	}
}

func TestHostile(t *testing.T) {
	cases := []walkCase{
		{
			name: "first_page_empty_with_cursor",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch r.URL.Query().Get("cursor") {
				case "":
					reply(w, 200, page(nil, `"next_cursor":"c1"`))
				case "c1":
					reply(w, 200, page(seq("i", 1, 3), `"next_cursor":null`))
				}
			},
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 3, Pages: 2, Requests: 2, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}
