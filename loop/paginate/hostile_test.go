package paginate

import (
	"context"
	"encoding/json"
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
	// The proof of a position-based walk (rendered only when set).
	Probes  int
	Shifted bool
}

func verdictOf(r *Result) verdict {
	return verdict{
		Complete: r.Complete, StoppedBy: r.StoppedBy, Items: len(r.Items), Pages: r.Pages,
		Requests: r.Requests, Retries: r.Retries, Duplicates: r.Duplicates,
		LikelyMore: r.LikelyMore, TotalMismatch: r.TotalMismatch, LastCursor: r.LastCursor,
		Probes: r.Probes, Shifted: r.Shifted,
	}
}

// String is the verdict of a golden transcript: the proof fields only
// when set, so walks that need none read as before.
func (v verdict) String() string {
	s := fmt.Sprintf("{Complete:%v StoppedBy:%s Items:%d Pages:%d Requests:%d Retries:%d Duplicates:%d LikelyMore:%v TotalMismatch:%v LastCursor:%s}",
		v.Complete, v.StoppedBy, v.Items, v.Pages, v.Requests, v.Retries, v.Duplicates, v.LikelyMore, v.TotalMismatch, v.LastCursor)
	if v.Probes > 0 || v.Shifted {
		s += fmt.Sprintf(" proof: {Probes:%d Shifted:%v}", v.Probes, v.Shifted)
	}
	return s
}

type walkCase struct {
	name       string
	plan       Plan
	sizeMax    float64 // the size parameter's schema maximum; 0: none
	tool       func(origin string) *tools.Tool
	args       map[string]any
	single     bool // without AllPages
	budget     Budget
	credential string
	script     script

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
		AllPages: !c.single, Budget: c.budget, ThreadID: "t1", Credential: c.credential,
	})
	if res != nil {
		res.LastCursor = strings.ReplaceAll(res.LastCursor, u.srv.URL, "$ORIGIN")
	}
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
		fmt.Fprintf(&transcript, "verdict: %s\n", verdictOf(res))
		fmt.Fprintf(&transcript, "uninspected: %s\n", res.Uninspected)
		if res.Unproven != "" {
			fmt.Fprintf(&transcript, "unproven: %s\n", res.Unproven)
		}
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

// cursorPages answers by the cursor query parameter ("" is the first
// page); an unknown cursor is a 404.
func cursorPages(param string, pages map[string]string) script {
	return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		body, ok := pages[r.URL.Query().Get(param)]
		if !ok {
			reply(w, 404, `{"message":"no such page"}`)
			return
		}
		reply(w, 200, body)
	}
}

// endless serves two items per page and a fresh cursor forever.
func endless(perPage int) script {
	return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 200, page(seq("i", (n-1)*perPage+1, perPage), fmt.Sprintf(`"next_cursor":"c%d"`, n)))
	}
}

// numbered serves a collection of total items by page/offset numbers,
// never more than max per page whatever was asked; withTotal adds
// "total".
func numbered(total, max int, withTotal bool) script {
	all := seq("i", 1, total)
	return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		q := r.URL.Query()
		size, _ := strconv.Atoi(firstOf(q.Get("per_page"), q.Get("limit"), "30"))
		if size > max {
			size = max
		}
		start := 0
		if p := q.Get("page"); p != "" {
			pn, _ := strconv.Atoi(p)
			start = (pn - 1) * size
		}
		if o := q.Get("offset"); o != "" {
			start, _ = strconv.Atoi(o)
		}
		end := min(start+size, len(all))
		start = min(start, end)
		extra := ""
		if withTotal {
			extra = fmt.Sprintf(`"total":%d`, total)
		}
		reply(w, 200, page(all[start:end], extra))
	}
}

func firstOf(s ...string) string {
	for _, x := range s {
		if x != "" {
			return x
		}
	}
	return ""
}

func TestHostile(t *testing.T) {
	cases := []walkCase{
		{
			name: "first_page_empty_with_cursor",
			plan: cursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"":   page(nil, `"next_cursor":"c1"`),
				"c1": page(seq("i", 1, 3), `"next_cursor":null`),
			}),
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 3, Pages: 2, Requests: 2, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "short_page_more_to_come",
			plan: cursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"":   page(seq("i", 1, 2), `"next_cursor":"c1"`),
				"c1": page(seq("i", 3, 3), `"next_cursor":null`),
			}),
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 5, Pages: 2, Requests: 2, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "same_item_on_two_pages",
			plan: cursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"":   page([]string{"i1", "i2", "i3"}, `"next_cursor":"c1"`),
				"c1": page([]string{"i3", "i4"}, `"next_cursor":""`),
			}),
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 4, Pages: 2, Requests: 2, Duplicates: 1, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "cursor_cycle",
			plan: cursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"":  page([]string{"i1"}, `"next_cursor":"A"`),
				"A": page([]string{"i2"}, `"next_cursor":"B"`),
				"B": page([]string{"i3"}, `"next_cursor":"A"`),
			}),
			want:     verdict{StoppedBy: StopRepeatedCursor, Items: 3, Pages: 3, Requests: 3, LikelyMore: true, LastCursor: "A"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=A&limit=100", "GET /items?cursor=B&limit=100"},
		},
		{
			name: "cursor_expires_mid_walk",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if r.URL.Query().Get("cursor") == "" {
					reply(w, 200, page(seq("i", 1, 2), `"next_cursor":"c1"`))
					return
				}
				reply(w, 410, `{"error":{"code":"cursor_expired","message":"The cursor has expired."}}`)
			},
			want:     verdict{StoppedBy: StopCursorExpired, Items: 2, Pages: 1, Requests: 2, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "cursor_rejected_in_ok_false_body",
			plan: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", Items: "channels", ItemsFound: true,
				NextToken: "response_metadata.next_cursor", Continuation: "next_cursor", Provenance: "schema"},
			sizeMax: 1000,
			script: cursorPages("cursor", map[string]string{
				"":             `{"ok":true,"channels":` + items("C1", "C2") + `,"response_metadata":{"next_cursor":"dGVhbTpDMDY="}}`,
				"dGVhbTpDMDY=": `{"ok":false,"error":"invalid_cursor"}`,
			}),
			want:     verdict{StoppedBy: StopCursorExpired, Items: 2, Pages: 1, Requests: 2, LikelyMore: true, LastCursor: "dGVhbTpDMDY="},
			wantReqs: []string{"GET /items?limit=1000", "GET /items?cursor=dGVhbTpDMDY%3D&limit=1000"},
		},
		{
			name: "rate_limited_retry_after_seconds",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch n {
				case 1:
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
				case 2:
					w.Header().Set("Retry-After", "7")
					reply(w, 429, `{"message":"slow down"}`)
				default:
					reply(w, 200, page([]string{"i2"}, `"next_cursor":null`))
				}
			},
			want:       verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 2, Pages: 2, Requests: 3, Retries: 1, LastCursor: "c1"},
			wantReqs:   []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{7 * time.Second},
		},
		{
			name: "rate_limited_retry_after_http_date",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch n {
				case 1:
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
				case 2:
					w.Header().Set("Retry-After", u.clock.Now().Add(30*time.Second).Format(http.TimeFormat))
					reply(w, 429, `{"message":"slow down"}`)
				default:
					reply(w, 200, page([]string{"i2"}, `"next_cursor":null`))
				}
			},
			want:       verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 2, Pages: 2, Requests: 3, Retries: 1, LastCursor: "c1"},
			wantReqs:   []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{30 * time.Second},
		},
		{
			name: "rate_limited_wait_too_long",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
					return
				}
				w.Header().Set("Retry-After", "120")
				reply(w, 429, `{"message":"quota exceeded"}`)
			},
			want:     verdict{StoppedBy: StopRateLimited, Items: 1, Pages: 1, Requests: 2, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "transient_5xx",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch n {
				case 1:
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
				case 2:
					reply(w, 503, `<html>upstream unavailable</html>`)
				default:
					reply(w, 200, page([]string{"i2"}, `"next_cursor":null`))
				}
			},
			want:       verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 2, Pages: 2, Requests: 3, Retries: 1, LastCursor: "c1"},
			wantReqs:   []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{500 * time.Millisecond},
		},
		{
			name: "persistent_5xx",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
					return
				}
				reply(w, 500, `{"message":"internal error"}`)
			},
			want: verdict{StoppedBy: StopHTTPError, Items: 1, Pages: 1, Requests: 4, Retries: 2, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100",
				"GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{500 * time.Millisecond, time.Second},
		},
		{
			name: "transport_error_retried",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch n {
				case 1:
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
				case 2:
					cutConnection(w)
				default:
					reply(w, 200, page([]string{"i2"}, `"next_cursor":null`))
				}
			},
			want:       verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 2, Pages: 2, Requests: 3, Retries: 1, LastCursor: "c1"},
			wantReqs:   []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{500 * time.Millisecond},
		},
		{
			name: "unauthorized_mid_walk",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
					return
				}
				reply(w, 401, `{"message":"token revoked"}`)
			},
			want:     verdict{StoppedBy: StopHTTPError, Items: 1, Pages: 1, Requests: 2, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "has_more_empty_page_then_items",
			plan: moreCursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"":   page(nil, `"has_more":true,"next_cursor":"c1"`),
				"c1": page(seq("i", 1, 2), `"has_more":false,"next_cursor":null`),
			}),
			want:     verdict{Complete: true, StoppedBy: StopCompleteHasMoreFalse, Items: 2, Pages: 2, Requests: 2, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			name: "has_more_empty_pages_forever",
			// At most three consecutive empty pages that still say more,
			// well within the page budget.
			plan: moreCursorPlan, sizeMax: 100, budget: Budget{Pages: 20},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 200, page(nil, fmt.Sprintf(`"has_more":true,"next_cursor":"c%d"`, n)))
			},
			want: verdict{StoppedBy: StopInconsistent, Pages: 3, Requests: 3, LikelyMore: true, LastCursor: "c2"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100",
				"GET /items?cursor=c2&limit=100"},
		},
		{
			name: "has_more_rows_then_empty_pages",
			plan: moreCursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				var ids []string
				if n == 1 {
					ids = seq("i", 1, 2)
				}
				reply(w, 200, page(ids, fmt.Sprintf(`"has_more":true,"next_cursor":"c%d"`, n)))
			},
			want: verdict{StoppedBy: StopInconsistent, Items: 2, Pages: 4, Requests: 4, LikelyMore: true, LastCursor: "c3"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100",
				"GET /items?cursor=c2&limit=100", "GET /items?cursor=c3&limit=100"},
		},
		{
			// The server ignores the page parameter and serves page one
			// again with has_more: the walk stops at the first page that
			// holds nothing new, not at the page budget.
			name: "server_ignores_page_parameter",
			plan: Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", Items: "data", ItemsFound: true,
				MoreFlag: "has_more", Provenance: "schema"},
			sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 200, page(seq("i", 1, 3), `"has_more":true`))
			},
			// Three rows for 100 asked, and more said: the walk goes on at
			// the size served, where the same rows come back.
			want:     verdict{StoppedBy: StopInconsistent, Items: 3, Pages: 2, Requests: 2, Duplicates: 3, LikelyMore: true},
			wantReqs: []string{"GET /items?per_page=100", "GET /items?page=2&per_page=3"},
		},
		{
			name: "has_more_true_without_token",
			plan: moreCursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"": page(seq("i", 1, 2), `"has_more":true,"next_cursor":null`),
			}),
			want:     verdict{StoppedBy: StopInconsistent, Items: 2, Pages: 1, Requests: 1, LikelyMore: true},
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			// One request at a time: the script changes the list by the
			// order requests arrive in, and the transcript has one order
			// (ahead_test.go walks offsets fetching ahead).
			name: "offset_inserts_during_walk",
			plan: offsetPlan, sizeMax: 3, budget: Budget{Concurrency: 1},
			script: func() script {
				list := seq("i", 1, 7)
				return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
					if n == 2 { // two items arrive at the head after the first page
						list = append([]string{"new2", "new1"}, list...)
					}
					off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
					end := min(off+3, len(list))
					reply(w, 200, page(list[off:end], fmt.Sprintf(`"total":%d`, len(list))))
				}
			}(),
			// The second page overlaps the first by a row: it begins on i1,
			// not on i3, so rows shifted (and came back again); the walk
			// goes on, and a closing probe confirms the end.
			want: verdict{Complete: true, StoppedBy: StopCompleteTotalReached, Items: 7, Pages: 4, Requests: 5,
				Duplicates: 3, TotalMismatch: true, Probes: 1, Shifted: true},
			wantReqs: []string{"GET /items?limit=3", "GET /items?limit=3&offset=2", "GET /items?limit=3&offset=4",
				"GET /items?limit=3&offset=6", "GET /items?limit=3&offset=8"},
		},
		{
			name: "foreign_next_url",
			plan: nextURLPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"": page(seq("i", 1, 2), `"next":"https://collector.example.net/items?cursor=c1"`),
			}),
			want:     verdict{StoppedBy: StopForeignNextURL, Items: 2, Pages: 1, Requests: 1, LikelyMore: true, LastCursor: "https://collector.example.net/items?cursor=c1"},
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "foreign_next_url_other_port",
			plan: nextURLPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"": page(seq("i", 1, 2), `"next":"http://127.0.0.1:1/items?cursor=c1"`),
			}),
			want:     verdict{StoppedBy: StopForeignNextURL, Items: 2, Pages: 1, Requests: 1, LikelyMore: true, LastCursor: "http://127.0.0.1:1/items?cursor=c1"},
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "malformed_continuation",
			plan: cursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"": page(seq("i", 1, 2), `"next_cursor":{"after":"c1"}`),
			}),
			want:     verdict{StoppedBy: StopInconsistent, Items: 2, Pages: 1, Requests: 1, LikelyMore: true},
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "malformed_more_flag",
			plan: moreCursorPlan, sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"": page(seq("i", 1, 2), `"has_more":"yes","next_cursor":"c1"`),
			}),
			want:     verdict{StoppedBy: StopInconsistent, Items: 2, Pages: 1, Requests: 1, LikelyMore: true},
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "total_disagrees",
			plan: func() Plan { p := cursorPlan; p.Total = "total_count"; return p }(), sizeMax: 100,
			script: cursorPages("cursor", map[string]string{
				"":   page(seq("i", 1, 2), `"next_cursor":"c1","total_count":5`),
				"c1": page(seq("i", 3, 2), `"next_cursor":null,"total_count":5`),
			}),
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 4, Pages: 2, Requests: 2, TotalMismatch: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
			check: func(t *testing.T, u *upstream, res *Result) {
				if res.Total == nil || *res.Total != 5 {
					t.Errorf("Total = %v, want 5", res.Total)
				}
			},
		},
		{
			name: "server_caps_page_size",
			// No schema maximum: the walker asks 100, the server serves
			// 10, so the walk goes on at 10 (the first page is that
			// size's page 1); the short third page then ends it. No total:
			// each full page's boundary is probed after the next.
			plan:   pagePlan,
			script: numbered(25, 10, false),
			want:   verdict{Complete: true, StoppedBy: StopCompleteShortPage, Items: 25, Pages: 3, Requests: 5, Probes: 2},
			wantReqs: []string{"GET /items?per_page=100", "GET /items?page=2&per_page=10", "GET /items?page=1&per_page=10",
				"GET /items?page=3&per_page=10", "GET /items?page=2&per_page=10"},
		},
		{
			// The model chose per_page 20; the server silently serves 7,
			// with no total and no continuation: the walk goes on at 7,
			// probing each full page's boundary after the next.
			name: "callers_page_size_silently_capped",
			plan: pagePlan, sizeMax: 100,
			args:   map[string]any{"per_page": float64(20)},
			script: numbered(95, 7, false),
			want:   verdict{Complete: true, StoppedBy: StopCompleteShortPage, Items: 95, Pages: 14, Requests: 27, Probes: 13},
			wantReqs: func() []string {
				reqs := []string{"GET /items?per_page=20"}
				for p := 2; p <= 14; p++ {
					reqs = append(reqs, fmt.Sprintf("GET /items?page=%d&per_page=7", p), fmt.Sprintf("GET /items?page=%d&per_page=7", p-1))
				}
				return reqs
			}(),
		},
		{
			// trawl chose the schema's maximum, a page came back full at
			// it, then a short page: that one ends the walk.
			name: "own_page_size_confirmed_then_short",
			plan: pagePlan, sizeMax: 10,
			script: numbered(25, 10, false),
			want:   verdict{Complete: true, StoppedBy: StopCompleteShortPage, Items: 25, Pages: 3, Requests: 5, Probes: 2},
			wantReqs: []string{"GET /items?per_page=10", "GET /items?page=2&per_page=10", "GET /items?page=1&per_page=10",
				"GET /items?page=3&per_page=10", "GET /items?page=2&per_page=10"},
		},
		{
			// One request at a time, so that the transcript has one order.
			name: "server_caps_page_size_with_total",
			plan: offsetPlan, sizeMax: 100, budget: Budget{Concurrency: 1}, // the schema allows 100, the server serves 10
			script: numbered(25, 10, true),
			// Overlapping pages (each starts on the last row of the one
			// before) and a closing probe on the last row.
			want: verdict{Complete: true, StoppedBy: StopCompleteTotalReached, Items: 25, Pages: 3, Requests: 4, Probes: 1},
			wantReqs: []string{"GET /items?limit=100", "GET /items?limit=100&offset=9",
				"GET /items?limit=100&offset=18", "GET /items?limit=100&offset=24"},
		},
		{
			name:     "server_cap_equals_collection",
			plan:     pagePlan,
			script:   numbered(10, 10, false),
			want:     verdict{Complete: true, StoppedBy: StopCompleteEmptyPage, Items: 10, Pages: 2, Requests: 3, Probes: 1},
			wantReqs: []string{"GET /items?per_page=100", "GET /items?page=2&per_page=10", "GET /items?page=1&per_page=10"},
		},
		{
			name: "5xx_with_retry_after",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch n {
				case 1:
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
				case 2:
					w.Header().Set("Retry-After", "2")
					reply(w, 503, `{"message":"deploying"}`)
				default:
					reply(w, 200, page([]string{"i2"}, `"next_cursor":null`))
				}
			},
			want:       verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 2, Pages: 2, Requests: 3, Retries: 1, LastCursor: "c1"},
			wantReqs:   []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{2 * time.Second},
		},
		{
			// 429 without Retry-After backs off; after three waits the
			// walk stops rather than hammer the endpoint.
			name: "rate_limited_without_retry_after",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					reply(w, 200, page([]string{"i1"}, `"next_cursor":"c1"`))
					return
				}
				reply(w, 429, `{"message":"too many requests"}`)
			},
			want: verdict{StoppedBy: StopRateLimited, Items: 1, Pages: 1, Requests: 5, Retries: 3, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100",
				"GET /items?cursor=c1&limit=100", "GET /items?cursor=c1&limit=100"},
			wantSleeps: []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second},
		},
		{
			// Stripe-like: has_more with an empty page leaves no last id.
			name: "has_more_empty_page_without_last_item",
			plan: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "starting_after", Items: "data", ItemsFound: true,
				MoreFlag: "has_more", CursorFromItem: "id", Continuation: "has_more", Provenance: "schema"},
			sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 200, `{"object":"list","data":[],"has_more":true}`)
			},
			want:     verdict{StoppedBy: StopInconsistent, Pages: 1, Requests: 1, LikelyMore: true},
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name:    "malformed_link_header_mid_walk",
			plan:    Plan{Strategy: LinkHeader, SizeParam: "per_page", Items: "", ItemsFound: true, Continuation: "Link header", Provenance: "schema"},
			sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					w.Header().Set("Link", `</items?page=2&per_page=100>; rel="next"`)
				} else {
					w.Header().Set("Link", `</items?page=3&per_page=100; rel="next"`)
				}
				reply(w, 200, items(seq("i", 2*n-1, 2)...))
			},
			want:     verdict{StoppedBy: StopInconsistent, Items: 4, Pages: 2, Requests: 2, LikelyMore: true, LastCursor: "$ORIGIN/items?page=2&per_page=100"},
			wantReqs: []string{"GET /items?per_page=100", "GET /items?page=2&per_page=100"},
		},
		{
			// Jira-like: startAt offsets, isLast (an inverted more flag)
			// wins over the short pages the server serves.
			name: "inverted_flag_through_short_pages",
			plan: Plan{Strategy: Offset, SizeParam: "maxResults", OffsetParam: "startAt", Items: "values", ItemsFound: true,
				MoreFlag: "isLast", MoreInverted: true, Continuation: "isLast", Provenance: "schema"},
			sizeMax: 50,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				at, _ := strconv.Atoi(firstOf(r.URL.Query().Get("startAt"), "0"))
				size := 20 // the server serves fewer than asked
				last := at+size >= 45
				ids := seq("p", at+1, min(size, 45-at))
				reply(w, 200, fmt.Sprintf(`{"startAt":%d,"maxResults":%d,"values":%s,"isLast":%t}`, at, size, items(ids...), last))
			},
			want: verdict{Complete: true, StoppedBy: StopCompleteHasMoreFalse, Items: 45, Pages: 3, Requests: 3},
			wantReqs: []string{"GET /items?maxResults=50", "GET /items?maxResults=50&startAt=19",
				"GET /items?maxResults=50&startAt=38"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// One case per strategy, each shaped like the vendor API it stands for.
func TestWalkStrategies(t *testing.T) {
	cases := []walkCase{
		{
			name: "strategy_page",
			plan: pagePlan, sizeMax: 100,
			script: numbered(240, 100, false),
			want:   verdict{Complete: true, StoppedBy: StopCompleteShortPage, Items: 240, Pages: 3, Requests: 5, Probes: 2},
			wantReqs: []string{"GET /items?per_page=100", "GET /items?page=2&per_page=100", "GET /items?page=1&per_page=100",
				"GET /items?page=3&per_page=100", "GET /items?page=2&per_page=100"},
		},
		{
			// One request at a time, so that the transcript has one order
			// (ahead_test.go walks it fetching ahead).
			name: "strategy_offset",
			plan: offsetPlan, sizeMax: 50, budget: Budget{Concurrency: 1},
			script: numbered(120, 50, true),
			want:   verdict{Complete: true, StoppedBy: StopCompleteTotalReached, Items: 120, Pages: 3, Requests: 4, Probes: 1},
			wantReqs: []string{"GET /items?limit=50", "GET /items?limit=50&offset=49",
				"GET /items?limit=50&offset=98", "GET /items?limit=50&offset=119"},
		},
		{
			// Slack: {"ok":true,"members":[…],"response_metadata":{"next_cursor":""}}
			name: "strategy_cursor_token",
			plan: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "cursor", Items: "members", ItemsFound: true,
				NextToken: "response_metadata.next_cursor", Continuation: "next_cursor", Provenance: "schema"},
			sizeMax: 200,
			script: cursorPages("cursor", map[string]string{
				"":             `{"ok":true,"members":` + items(seq("U", 1, 3)...) + `,"response_metadata":{"next_cursor":"dXNlcjpVMDQ="}}`,
				"dXNlcjpVMDQ=": `{"ok":true,"members":` + items(seq("U", 4, 3)...) + `,"response_metadata":{"next_cursor":"dXNlcjpVMDc="}}`,
				"dXNlcjpVMDc=": `{"ok":true,"members":` + items(seq("U", 7, 1)...) + `,"response_metadata":{"next_cursor":""}}`,
			}),
			want: verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 7, Pages: 3, Requests: 3, LastCursor: "dXNlcjpVMDc="},
			wantReqs: []string{"GET /items?limit=200", "GET /items?cursor=dXNlcjpVMDQ%3D&limit=200",
				"GET /items?cursor=dXNlcjpVMDc%3D&limit=200"},
		},
		{
			// Stripe: starting_after takes the last item's id while has_more.
			name: "strategy_cursor_last_item",
			plan: Plan{Strategy: Cursor, SizeParam: "limit", CursorParam: "starting_after", Items: "data", ItemsFound: true,
				MoreFlag: "has_more", CursorFromItem: "id", Continuation: "has_more", Provenance: "schema"},
			sizeMax: 100,
			script: func() script {
				all := seq("cus_", 1, 250)
				return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
					start := 0
					if after := r.URL.Query().Get("starting_after"); after != "" {
						for i, id := range all {
							if id == after {
								start = i + 1
							}
						}
					}
					end := min(start+100, len(all))
					reply(w, 200, fmt.Sprintf(`{"object":"list","url":"/v1/customers","data":%s,"has_more":%t}`,
						items(all[start:end]...), end < len(all)))
				}
			}(),
			want: verdict{Complete: true, StoppedBy: StopCompleteHasMoreFalse, Items: 250, Pages: 3, Requests: 3, LastCursor: "cus_200"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?limit=100&starting_after=cus_100",
				"GET /items?limit=100&starting_after=cus_200"},
		},
		{
			// Twilio: a relative next_page_uri under a versioned base URL.
			name: "strategy_next_url",
			plan: Plan{Strategy: NextURL, SizeParam: "PageSize", Items: "messages", ItemsFound: true,
				NextURLField: "next_page_uri", Continuation: "next_page_uri", Provenance: "schema"},
			tool: func(origin string) *tools.Tool {
				return &tools.Tool{ID: "twilio.list_messages", Provider: "twilio", Name: "list_messages", Kind: tools.KindAPI,
					Method: http.MethodGet, Path: "/Accounts/{AccountSid}/Messages.json", Origin: origin + "/2010-04-01",
					Params: []tools.Param{
						{Name: "AccountSid", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}},
						{Name: "PageSize", In: tools.InQuery, Schema: intSchema(50)},
					}}
			},
			args: map[string]any{"AccountSid": "AC123"},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				pg, _ := strconv.Atoi(firstOf(r.URL.Query().Get("Page"), "0"))
				ids := seq("SM", pg*50+1, 50)
				next := fmt.Sprintf(`"/2010-04-01/Accounts/AC123/Messages.json?Page=%d&PageSize=50&PageToken=PASM%d"`, pg+1, (pg+1)*50)
				if pg == 2 {
					ids, next = ids[:20], "null"
				}
				reply(w, 200, fmt.Sprintf(`{"messages":%s,"page":%d,"page_size":50,"next_page_uri":%s}`, items(ids...), pg, next))
			},
			want: verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 120, Pages: 3, Requests: 3,
				LastCursor: "$ORIGIN/2010-04-01/Accounts/AC123/Messages.json?Page=2&PageSize=50&PageToken=PASM100"},
			wantReqs: []string{
				"GET /2010-04-01/Accounts/AC123/Messages.json?PageSize=50",
				"GET /2010-04-01/Accounts/AC123/Messages.json?Page=1&PageSize=50&PageToken=PASM50",
				"GET /2010-04-01/Accounts/AC123/Messages.json?Page=2&PageSize=50&PageToken=PASM100",
			},
		},
		{
			// A next link relative to the request's own path resolves
			// against the URL the invoker sent: path parameter filled in
			// and escaped, the origin's base path kept.
			name: "strategy_next_url_path_relative",
			plan: Plan{Strategy: NextURL, SizeParam: "PageSize", Items: "messages", ItemsFound: true,
				NextURLField: "next_page_uri", Continuation: "next_page_uri", Provenance: "schema"},
			tool: func(origin string) *tools.Tool {
				return &tools.Tool{ID: "twilio.list_messages", Provider: "twilio", Name: "list_messages", Kind: tools.KindAPI,
					Method: http.MethodGet, Path: "/Accounts/{AccountSid}/Messages.json", Origin: origin + "/2010-04-01",
					Params: []tools.Param{
						{Name: "AccountSid", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}},
						{Name: "PageSize", In: tools.InQuery, Schema: intSchema(50)},
					}}
			},
			args: map[string]any{"AccountSid": "AC 123"},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				pg, _ := strconv.Atoi(firstOf(r.URL.Query().Get("Page"), "0"))
				ids := seq("SM", pg*50+1, 50)
				next := fmt.Sprintf(`"Messages.json?Page=%d&PageSize=50"`, pg+1)
				if pg == 1 {
					ids, next = ids[:10], "null"
				}
				reply(w, 200, fmt.Sprintf(`{"messages":%s,"next_page_uri":%s}`, items(ids...), next))
			},
			want: verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 60, Pages: 2, Requests: 2,
				LastCursor: "$ORIGIN/2010-04-01/Accounts/AC%20123/Messages.json?Page=1&PageSize=50"},
			wantReqs: []string{
				"GET /2010-04-01/Accounts/AC%20123/Messages.json?PageSize=50",
				"GET /2010-04-01/Accounts/AC%20123/Messages.json?Page=1&PageSize=50",
			},
		},
		{
			// GitHub: a bare array, page numbers in the schema, and a Link
			// header (absolute, then relative) that the first response
			// turns into the plan.
			name: "strategy_link_header",
			plan: Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", Items: "", ItemsFound: true, Provenance: "schema"},
			tool: func(origin string) *tools.Tool {
				return &tools.Tool{ID: "github.list_issues", Provider: "github", Name: "list_issues", Kind: tools.KindAPI,
					Method: http.MethodGet, Path: "/repos/{owner}/{repo}/issues", Origin: origin,
					Params: []tools.Param{
						{Name: "owner", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}},
						{Name: "repo", In: tools.InPath, Required: true, Schema: &tools.Schema{Type: "string"}},
						{Name: "per_page", In: tools.InQuery, Schema: intSchema(100)},
						{Name: "page", In: tools.InQuery, Schema: &tools.Schema{Type: "integer"}},
					}}
			},
			args: map[string]any{"owner": "octo", "repo": "hello"},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				switch r.URL.Query().Get("page") {
				case "":
					w.Header().Set("Link", `<`+u.srv.URL+`/repositories/42/issues?per_page=100&page=2>; rel="next", <`+
						u.srv.URL+`/repositories/42/issues?per_page=100&page=3>; rel="last"`)
					reply(w, 200, items(seq("I", 1, 100)...))
				case "2":
					w.Header().Set("Link", `<?per_page=100&page=3>; rel="next last", <?per_page=100&page=1>; rel="prev first"`)
					reply(w, 200, items(seq("I", 101, 100)...))
				default:
					w.Header().Set("Link", `<`+u.srv.URL+`/repositories/42/issues?per_page=100&page=2>; rel="prev", <`+
						u.srv.URL+`/repositories/42/issues?per_page=100&page=1>; rel="first"`)
					reply(w, 200, items(seq("I", 201, 50)...))
				}
			},
			want: verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 250, Pages: 3, Requests: 3,
				LastCursor: "$ORIGIN/repositories/42/issues?per_page=100&page=3"},
			wantReqs: []string{"GET /repos/octo/hello/issues?per_page=100",
				"GET /repositories/42/issues?per_page=100&page=2", "GET /repositories/42/issues?per_page=100&page=3"},
			check: func(t *testing.T, u *upstream, res *Result) {
				if res.Plan.Strategy != LinkHeader {
					t.Errorf("Plan.Strategy = %q after the first response, want %q", res.Plan.Strategy, LinkHeader)
				}
			},
		},
		{
			name: "strategy_none",
			plan: Plan{Strategy: None, Items: "data", ItemsFound: true, Provenance: "schema"},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 200, page(seq("i", 1, 4), `"object":"list"`))
			},
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 4, Pages: 1, Requests: 1},
			wantReqs: []string{"GET /items"},
		},
		{
			name: "single_page_likely_more",
			plan: cursorPlan, sizeMax: 100, single: true,
			script:   endless(2),
			want:     verdict{StoppedBy: StopFirstPage, Items: 2, Pages: 1, Requests: 1, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items"},
		},
		{
			name: "single_page_complete",
			plan: cursorPlan, sizeMax: 100, single: true,
			script: cursorPages("cursor", map[string]string{
				"": page(seq("i", 1, 2), `"next_cursor":null`),
			}),
			want:     verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 2, Pages: 1, Requests: 1},
			wantReqs: []string{"GET /items"},
		},
		{
			name: "single_page_short_with_size",
			plan: pagePlan, single: true,
			args:   map[string]any{"per_page": float64(10)},
			script: numbered(4, 100, false),
			// A short first page of a size the caller chose proves no end
			// (the server may cap it silently): first page only, and more
			// rows may exist.
			want:     verdict{StoppedBy: StopFirstPage, Items: 4, Pages: 1, Requests: 1, LikelyMore: true},
			wantReqs: []string{"GET /items?per_page=10"},
		},
		{
			name: "resume_from_callers_offset",
			plan: offsetPlan, sizeMax: 50,
			args:     map[string]any{"offset": float64(100)},
			script:   numbered(120, 50, true),
			want:     verdict{Complete: true, StoppedBy: StopCompleteTotalReached, Items: 20, Pages: 1, Requests: 1},
			wantReqs: []string{"GET /items?limit=50&offset=100"},
		},
		{
			// A search operation sent as POST with its paging in the body:
			// safe to retry, and the cursor goes one level down.
			name: "post_search_cursor_in_body",
			plan: Plan{Strategy: Cursor, SizeParam: "page.size", CursorParam: "page.after", Items: "results", ItemsFound: true,
				NextToken: "paging.next.after", Continuation: "after", Provenance: "schema"},
			tool: func(origin string) *tools.Tool {
				max := float64(100)
				return &tools.Tool{ID: "crm.search", Provider: "crm", Name: "search_contacts", Kind: tools.KindAPI,
					Method: http.MethodPost, Path: "/contacts/search", Origin: origin,
					Params: []tools.Param{
						{Name: "query", In: tools.InBody, Schema: &tools.Schema{Type: "string"}},
						{Name: "page", In: tools.InBody, Schema: &tools.Schema{Type: "object", Properties: map[string]*tools.Schema{
							"size":  {Type: "integer", Maximum: &max},
							"after": {Type: "string"},
						}}},
					}}
			},
			args: map[string]any{"query": "acme", "page": map[string]any{"size": float64(2)}},
			script: func() script {
				return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
					var body struct {
						Query string `json:"query"`
						Page  struct {
							Size  int    `json:"size"`
							After string `json:"after"`
						} `json:"page"`
					}
					if err := decodeJSON(r, &body); err != nil || body.Query != "acme" || body.Page.Size != 2 {
						reply(w, 400, `{"message":"bad body"}`)
						return
					}
					switch body.Page.After {
					case "":
						reply(w, 200, `{"results":`+items("p1", "p2")+`,"paging":{"next":{"after":"2"}}}`)
					case "2":
						if n == 2 {
							reply(w, 502, `bad gateway`)
							return
						}
						reply(w, 200, `{"results":`+items("p3")+`}`)
					}
				}
			}(),
			want:       verdict{Complete: true, StoppedBy: StopCompleteNoNext, Items: 3, Pages: 2, Requests: 3, Retries: 1, LastCursor: "2"},
			wantReqs:   []string{"POST /contacts/search", "POST /contacts/search", "POST /contacts/search"},
			wantSleeps: []time.Duration{500 * time.Millisecond},
		},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

func decodeJSON(r *http.Request, v any) error {
	return json.NewDecoder(r.Body).Decode(v)
}

// One case per budget kind.
func TestWalkBudgets(t *testing.T) {
	cases := []walkCase{
		{
			name: "budget_pages",
			plan: cursorPlan, sizeMax: 100, budget: Budget{Pages: 3},
			script:   endless(2),
			want:     verdict{StoppedBy: StopBudgetPages, Items: 6, Pages: 3, Requests: 3, LikelyMore: true, LastCursor: "c3"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c2&limit=100"},
		},
		{
			// Retries count: two attempts at page 3 spend the budget.
			name: "budget_requests",
			plan: cursorPlan, sizeMax: 100, budget: Budget{Requests: 4},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n <= 2 {
					endless(2)(u, w, r, n)
					return
				}
				reply(w, 503, `{"message":"try later"}`)
			},
			want: verdict{StoppedBy: StopBudgetRequests, Items: 4, Pages: 2, Requests: 4, Retries: 1, LikelyMore: true, LastCursor: "c2"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100",
				"GET /items?cursor=c2&limit=100", "GET /items?cursor=c2&limit=100"},
			wantSleeps: []time.Duration{500 * time.Millisecond},
		},
		{
			// The page that reaches the budget is kept whole.
			name: "budget_items",
			plan: cursorPlan, sizeMax: 100, budget: Budget{Items: 250},
			script:   endless(100),
			want:     verdict{StoppedBy: StopBudgetItems, Items: 300, Pages: 3, Requests: 3, LikelyMore: true, LastCursor: "c3"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c2&limit=100"},
		},
		{
			name: "budget_bytes",
			plan: cursorPlan, sizeMax: 100, budget: Budget{Bytes: 2 * int64(len(page(seq("i", 1, 10), `"next_cursor":"c1"`)))},
			script:   endless(10),
			want:     verdict{StoppedBy: StopBudgetBytes, Items: 20, Pages: 2, Requests: 2, LikelyMore: true, LastCursor: "c2"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
		{
			// Each upstream call takes 25s of the 60s budget.
			name: "budget_time",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				u.clock.Advance(25 * time.Second)
				endless(2)(u, w, r, n)
			},
			want:     verdict{StoppedBy: StopBudgetTime, Items: 6, Pages: 3, Requests: 3, LikelyMore: true, LastCursor: "c3"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100", "GET /items?cursor=c2&limit=100"},
		},
		{
			// A 503 asking for a wait beyond the deadline is not waited.
			name: "budget_time_retry_after_on_5xx",
			plan: cursorPlan, sizeMax: 100, budget: Budget{Time: 10 * time.Second},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				if n == 1 {
					endless(2)(u, w, r, n)
					return
				}
				w.Header().Set("Retry-After", "30")
				reply(w, 503, `{"message":"maintenance"}`)
			},
			want:     verdict{StoppedBy: StopHTTPError, Items: 2, Pages: 1, Requests: 2, LikelyMore: true, LastCursor: "c1"},
			wantReqs: []string{"GET /items?limit=100", "GET /items?cursor=c1&limit=100"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}

// The first page failing fails the call with a clear, safe message.
func TestWalkFirstPageFails(t *testing.T) {
	cases := []walkCase{
		{
			name: "first_page_404",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 404, `{"message":"Not Found","documentation_url":"https://docs.example/rest"}`)
			},
			want:     verdict{StoppedBy: StopHTTPError},
			wantErr:  true,
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "first_page_401_echoes_the_credential",
			plan: cursorPlan, sizeMax: 100, credential: "sk_live_51Habc",
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 401, `{"error":"key sk_live_51Habc was revoked; sent `+r.Header.Get("Authorization")+`"}`)
			},
			want:     verdict{StoppedBy: StopHTTPError},
			wantErr:  true,
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "first_page_transport_failure",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				cutConnection(w)
			},
			want:       verdict{StoppedBy: StopHTTPError},
			wantErr:    true,
			wantReqs:   []string{"GET /items?limit=100", "GET /items?limit=100", "GET /items?limit=100"},
			wantSleeps: []time.Duration{500 * time.Millisecond, time.Second},
		},
		{
			name: "first_page_rate_limited",
			plan: cursorPlan, sizeMax: 100,
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Retry-After", "3600")
				reply(w, 429, `{"message":"API rate limit exceeded"}`)
			},
			want:     verdict{StoppedBy: StopRateLimited},
			wantErr:  true,
			wantReqs: []string{"GET /items?limit=100"},
		},
		{
			name: "first_page_callers_cursor_rejected",
			plan: cursorPlan, sizeMax: 100,
			args: map[string]any{"cursor": "stale"},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 400, `{"message":"Invalid cursor"}`)
			},
			want:     verdict{StoppedBy: StopCursorExpired},
			wantErr:  true,
			wantReqs: []string{"GET /items?cursor=stale&limit=100"},
		},
		{
			// Creating is not safe to repeat: a 503 is not retried.
			name: "first_page_post_not_retried",
			plan: Plan{Strategy: None, Provenance: "none"},
			tool: func(origin string) *tools.Tool {
				return &tools.Tool{ID: "acme.create_order", Provider: "acme", Name: "create_order", Kind: tools.KindAPI,
					Method: http.MethodPost, Path: "/orders", Origin: origin,
					Params: []tools.Param{{Name: "sku", In: tools.InBody, Schema: &tools.Schema{Type: "string"}}}}
			},
			args: map[string]any{"sku": "A1"},
			script: func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
				reply(w, 503, `{"message":"unavailable"}`)
			},
			want:     verdict{StoppedBy: StopHTTPError},
			wantErr:  true,
			wantReqs: []string{"POST /orders"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, c.run)
	}
}
