package paginate

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// How position-based walks prove themselves (proofMode), one case each,
// one request at a time: the scripts count requests (ahead_test.go and
// the property test walk the same proofs fetching ahead).

// offsetRows serves rows by offset and limit, at most capAt a page.
func offsetRows(rows []string, capAt int) script {
	return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		q := r.URL.Query()
		off, _ := strconv.Atoi(firstOf(q.Get("offset"), "0"))
		size, _ := strconv.Atoi(firstOf(q.Get("limit"), "100"))
		end := min(off+min(size, capAt), len(rows))
		reply(w, 200, page(rows[min(off, end):end], ""))
	}
}

func proofWalk(t *testing.T, plan Plan, tool *tools.Tool, s script, args map[string]any) (*Result, *upstream) {
	t.Helper()
	u := newUpstream(t, NewFakeClock(epoch), s)
	if tool == nil {
		tool = listTool(u.srv.URL, plan, 100)
	}
	tool.Origin = u.srv.URL
	res, err := Walk(context.Background(), WalkOptions{Caller: tools.NewInvoker(tools.InvokerOptions{Client: u.srv.Client()}),
		Clock: NewFakeClock(epoch), Tool: tool, Plan: Detect(tool), Args: args, AllPages: true, Budget: Budget{Concurrency: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return res, u
}

// A page of one row cannot overlap the next: without a total to stand in
// for the overlap, the walk says it could not prove it saw every row.
func TestOffsetPagesOfOneRowAreUnproven(t *testing.T) {
	res, u := proofWalk(t, offsetPlan, nil, offsetRows(seq("i", 1, 4), 1), map[string]any{"limit": 1})
	if !res.Complete || len(res.Items) != 4 || res.Unproven == "" || !strings.Contains(res.Unproven, "too few for the next page to overlap") {
		t.Errorf("complete %v, %d rows, unproven %q, requests %v", res.Complete, len(res.Items), res.Unproven, u.requests())
	}
}

// An offset walk whose API documents a snapshot is trusted: no overlap,
// no probe, as before.
func TestSnapshotOffsetWalkIsTrusted(t *testing.T) {
	u := newUpstream(t, NewFakeClock(epoch), offsetRows(seq("i", 1, 25), 10))
	tool := listTool(u.srv.URL, offsetPlan, 10)
	tool.Description = "Lists items. All pages of one listing are read from a point-in-time snapshot of the collection."
	p := Detect(tool)
	if !p.Snapshot || !strings.Contains(strings.Join(p.Evidence, " "), "snapshot") {
		t.Fatalf("plan %+v: the description's snapshot was not read", p)
	}
	res, err := Walk(context.Background(), WalkOptions{Caller: tools.NewInvoker(tools.InvokerOptions{Client: u.srv.Client()}),
		Clock: NewFakeClock(epoch), Tool: tool, Plan: p, AllPages: true, Budget: Budget{Concurrency: 1}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"GET /items?limit=10", "GET /items?limit=10&offset=10", "GET /items?limit=10&offset=20"}
	if got := u.requests(); !res.Complete || len(res.Items) != 25 || res.Probes != 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("complete %v, %d rows, %d probes, requests %v; want %v", res.Complete, len(res.Items), res.Probes, got, want)
	}
	// x-trawl-snapshot: false says the opposite, whatever the prose says.
	tool.Extensions = map[string]any{"x-trawl-snapshot": false}
	if Detect(tool).Snapshot {
		t.Error("x-trawl-snapshot: false was not heeded")
	}
	// A stable sort order is no snapshot.
	tool.Extensions = nil
	tool.Description = "Lists items, sorted by creation time, oldest first; the order is stable."
	if Detect(tool).Snapshot {
		t.Error("a stable order was taken for a snapshot")
	}
}

// The closing probe of an offset walk (the short third page is of a size
// trawl chose, the schema's maximum, and saw honoured) finds rows appended
// after the last page: the probe is then one more page (short again, of
// the vouched size), and a second closing probe confirms the new end.
func TestClosingProbeFindsRowsAfterTheEnd(t *testing.T) {
	rows := seq("i", 1, 25)
	res, u := proofWalk(t, offsetPlan, listTool("", offsetPlan, 10), func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		if n == 4 { // the closing probe: two rows arrived at the tail
			rows = append(rows, "i26", "i27")
		}
		offsetRows(rows, 10)(u, w, r, n)
	}, nil)
	want := "GET /items?limit=10&offset=24" // the probe, on the last row
	if reqs := u.requests(); !res.Complete || len(res.Items) != 27 || res.Shifted || res.Unproven != "" || res.Pages != 4 || res.Probes != 1 || len(reqs) != 5 || reqs[3] != want {
		t.Errorf("complete %v (%s), %d rows, shifted %v, unproven %q, %d pages, %d probes, requests %v",
			res.Complete, res.StoppedBy, len(res.Items), res.Shifted, res.Unproven, res.Pages, res.Probes, u.requests())
	}
}

// A closing probe that fails leaves the end the walk counted standing,
// unproven.
func TestClosingProbeFailureIsUnproven(t *testing.T) {
	rows := seq("i", 1, 25)
	res, _ := proofWalk(t, offsetPlan, listTool("", offsetPlan, 10), func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		if n >= 4 {
			reply(w, 500, `{"message":"down"}`)
			return
		}
		offsetRows(rows, 10)(u, w, r, n)
	}, nil)
	if !res.Complete || len(res.Items) != 25 || !strings.Contains(res.Unproven, "closing probe") || !strings.Contains(res.Unproven, "status 500") {
		t.Errorf("complete %v, %d rows, unproven %q", res.Complete, len(res.Items), res.Unproven)
	}
}

// A page-number walk whose total is missing from a later page has no
// check left: unproven.
func TestPageWalkTotalMissingFromAPageIsUnproven(t *testing.T) {
	plan := pagePlan
	plan.Total = "total"
	res, _ := proofWalk(t, plan, nil, func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		p, _ := strconv.Atoi(firstOf(r.URL.Query().Get("page"), "1"))
		extra := `"total":25`
		if p > 1 {
			extra = ""
		}
		start := min((p-1)*10, 25)
		reply(w, 200, page(seq("i", start+1, min(10, 25-start)), extra))
	}, map[string]any{"per_page": 10})
	if !res.Complete || len(res.Items) != 25 || !strings.Contains(res.Unproven, "total") {
		t.Errorf("complete %v (%s), %d rows, unproven %q", res.Complete, res.StoppedBy, len(res.Items), res.Unproven)
	}
}

// totalPages serves 150 rows by page and per_page, every page reporting
// total (the truth or not).
func totalPages(rows []string, total int) script {
	return func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		q := r.URL.Query()
		p, _ := strconv.Atoi(firstOf(q.Get("page"), "1"))
		size, _ := strconv.Atoi(firstOf(q.Get("per_page"), "10"))
		start := min((p-1)*size, len(rows))
		end := min(start+size, len(rows))
		reply(w, 200, page(rows[start:end], fmt.Sprintf(`"total":%d`, total)))
	}
}

// A page-number walk whose total was reached on a full page reads the
// page after it: empty when the total is true (one request more), and
// holding the rows a total below the truth by whole pages hid, which no
// other response shows — the walk then reads on to the real end and its
// total does not match its rows (unstable in the verdict).
func TestPageWalkProbesAFullLastPage(t *testing.T) {
	plan := pagePlan
	plan.Total = "total"
	rows := seq("i", 1, 150)
	for _, tc := range []struct {
		name     string
		total    int
		requests int
		mismatch bool
	}{
		{"true total", 150, 16, false},
		{"a whole page short", 140, 16, true},
		{"three pages short", 120, 16, true},
		{"one page, half the truth", 10, 16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rows
			if tc.name == "one page, half the truth" {
				r = rows[:20]
				tc.requests = 3
			}
			res, u := proofWalk(t, plan, nil, totalPages(r, tc.total), map[string]any{"per_page": 10})
			if !res.Complete || len(res.Items) != len(r) || res.TotalMismatch != tc.mismatch || res.Probes != 1 || len(u.requests()) != tc.requests {
				t.Errorf("complete %v (%s), %d rows of %d, mismatch %v, %d probes, requests %v",
					res.Complete, res.StoppedBy, len(res.Items), len(r), res.TotalMismatch, res.Probes, u.requests())
			}
		})
	}
	// A total reached on a short page needs no probe: that page was read.
	res, u := proofWalk(t, plan, nil, totalPages(rows[:145], 145), map[string]any{"per_page": 10})
	if !res.Complete || len(res.Items) != 145 || res.TotalMismatch || res.Probes != 0 || len(u.requests()) != 15 {
		t.Errorf("short last page: complete %v, %d rows, mismatch %v, %d probes, %d requests", res.Complete, len(res.Items), res.TotalMismatch, res.Probes, len(u.requests()))
	}
}

// An offset walk whose one full page reached a total below the truth:
// its closing probe finds the rows after it.
func TestOffsetWalkProbesOneFullPage(t *testing.T) {
	plan := offsetPlan
	plan.Total = "total"
	rows := seq("i", 1, 20)
	res, u := proofWalk(t, plan, listTool("", plan, 10), func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		q := r.URL.Query()
		off, _ := strconv.Atoi(firstOf(q.Get("offset"), "0"))
		end := min(off+10, len(rows))
		reply(w, 200, page(rows[min(off, end):end], `"total":10`))
	}, nil)
	if len(res.Items) != 20 || !res.TotalMismatch || res.Probes < 1 {
		t.Errorf("complete %v (%s), %d rows, mismatch %v, %d probes, requests %v", res.Complete, res.StoppedBy, len(res.Items), res.TotalMismatch, res.Probes, u.requests())
	}
}
