package paginate

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

// Shapes found by attacking the walker as a hostile user would; each is
// a walk against a scripted server through the real tools.Invoker.

func attackWalk(t *testing.T, plan Plan, sizeMax float64, args map[string]any, s script) (*Result, *upstream) {
	t.Helper()
	clock := NewFakeClock(epoch)
	u := newUpstream(t, clock, s)
	res, err := Walk(context.Background(), WalkOptions{
		Caller: tools.NewInvoker(tools.InvokerOptions{Client: u.srv.Client()}), Clock: clock,
		Tool: listTool(u.srv.URL, plan, sizeMax), Args: args, Plan: plan, AllPages: true,
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return res, u
}

// A server that sends more rows than asked is not honouring the page
// size, so a later page shorter than the size asked proves nothing: a
// server with its own, varying page size (rows filtered after paging)
// has more after it. The walk goes on to an empty page.
func TestPageLargerThanAskedVouchesForNoSize(t *testing.T) {
	sizes := []int{8, 3, 8} // then empty
	res, u := attackWalk(t, pagePlan, 5, nil, func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		p, _ := strconv.Atoi(r.URL.Query().Get("page"))
		p = max(p, 1)
		if p > len(sizes) {
			reply(w, 200, page(nil, ""))
			return
		}
		reply(w, 200, page(seq(fmt.Sprintf("p%d-", p), 1, sizes[p-1]), ""))
	})
	if len(res.Items) != 19 || !res.Complete {
		t.Errorf("walk: %d items, %s after %v; want all 19, complete on the empty page", len(res.Items), res.StoppedBy, u.requests())
	}
	if res.StoppedBy != StopCompleteEmptyPage {
		t.Errorf("stopped by %s, want %s", res.StoppedBy, StopCompleteEmptyPage)
	}
}

// A more flag sent as the strings "true" and "false" (as totals sent as
// strings are read) is the server's word, not inconsistent data.
func TestMoreFlagAsString(t *testing.T) {
	plan := Plan{Strategy: PageNumber, SizeParam: "per_page", PageParam: "page", Items: "data", ItemsFound: true,
		MoreFlag: "has_more", Continuation: "has_more", Provenance: "schema"}
	res, u := attackWalk(t, plan, 100, map[string]any{"per_page": 2}, func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		p, _ := strconv.Atoi(r.URL.Query().Get("page"))
		p = max(p, 1)
		reply(w, 200, page(seq(fmt.Sprintf("p%d-", p), 1, 2), fmt.Sprintf(`"has_more":"%v"`, p < 3)))
	})
	// Three pages, and a probe of each full page's boundary after the
	// next one (no total to check the rows against).
	if !res.Complete || res.StoppedBy != StopCompleteHasMoreFalse || len(res.Items) != 6 || len(u.requests()) != 5 || res.Probes != 2 {
		t.Errorf("walk: %d items, %s, %d probes, requests %v; want 6 items, complete_has_more_false after 3 pages and 2 probes", len(res.Items), res.StoppedBy, res.Probes, u.requests())
	}
	// Anything else in the flag is still untrusted.
	res, _ = attackWalk(t, plan, 100, nil, func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 200, page(seq("i", 1, 2), `"has_more":"maybe"`))
	})
	if res.StoppedBy != StopInconsistent {
		t.Errorf(`has_more "maybe": stopped by %s, want %s`, res.StoppedBy, StopInconsistent)
	}
}

// A server that ignores the paging parameter (a name detection guessed
// wrong) and answers every page with the same rows, rows without ids:
// the repeat is seen on the second page, not walked to the page budget
// with every row counted twenty times.
func TestSamePageAgainWithoutIDs(t *testing.T) {
	res, u := attackWalk(t, pagePlan, 3, nil, func(u *upstream, w http.ResponseWriter, r *http.Request, n int) {
		reply(w, 200, `{"data":[{"name":"a"},{"name":"b"},{"name":"c"}]}`)
	})
	if res.StoppedBy != StopInconsistent || len(u.requests()) != 2 || len(res.Items) != 3 {
		t.Errorf("stopped by %s after %d requests with %d items; want inconsistent_pagination after 2, the 3 rows once",
			res.StoppedBy, len(u.requests()), len(res.Items))
	}
}
