package paginate

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/loop/query"
	"github.com/trawl-dev/trawl/tools"
)

// A walk with a Pass keeps what it made of each page it read, and that
// work gives, through query.RunPages, what query.Run gives over the
// walk's rows — here with rows repeated across pages (dropped as
// duplicates, so the rows asked are a subset of the pages'), for a cursor
// walk and a page-number one, and with pages fetched ahead (read on the
// goroutines that fetched them).
func TestWalkPass(t *testing.T) {
	fields, err := query.CompileFields([]string{"id", "tags"})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := query.CompileFilter([]query.Clause{{Field: "id", Op: "neq", Value: "i3"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, plan := range []Plan{cursorPlan, pagePlan} {
		calls := 0
		caller := fakeCaller{call: func(ctx context.Context, req tools.Request) (*tools.Response, error) {
			calls++
			n := calls
			if p, ok := req.Args["page"].(int); ok {
				n = p
			}
			if n > 4 {
				return jsonResponse(page(nil, "")), nil
			}
			// Each page repeats the last row of the one before.
			return jsonResponse(page(seq("i", 3*n-3, 4), fmt.Sprintf(`"next_cursor":"c%d"`, n))), nil
		}}
		res, err := Walk(context.Background(), WalkOptions{Caller: caller, Tool: listTool("https://api.example", plan, 100),
			Plan: plan, AllPages: true, Pass: query.NewPass(fields, filter)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Duplicates == 0 || len(res.Worked) != res.Pages || res.Pages < 4 {
			t.Fatalf("%s: %d pages, %d worked, %d duplicates", plan.Strategy, res.Pages, len(res.Worked), res.Duplicates)
		}
		sameAsRun(t, string(plan.Strategy), res, fields, filter)
	}
	f := newFlights(4)
	srv, _ := rowsServer(t, seq("r", 1, 200), 10, true, f)
	res, err := Walk(context.Background(), WalkOptions{Caller: tools.NewInvoker(tools.InvokerOptions{Client: srv.Client()}),
		Tool: listTool(srv.URL, offsetPlan, 10), Plan: offsetPlan, AllPages: true, Budget: Budget{Pages: 40, Concurrency: 4},
		Meter: NewMeter(time.Now()), Pass: query.NewPass(fields, filter)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || len(res.Items) != 200 || len(res.Worked) < res.Pages || f.peak() < 4 {
		t.Fatalf("ahead: complete %v, %d rows, %d pages, %d worked, %d in flight at most", res.Complete, len(res.Items), res.Pages, len(res.Worked), f.peak())
	}
	sameAsRun(t, "ahead", res, fields, filter)
}

func sameAsRun(t *testing.T, what string, res *Result, fields *query.Fields, filter *query.Filter) {
	t.Helper()
	got, gst, gerr := query.RunPages(res.Items, fields, filter, res.Worked)
	want, wst, werr := query.Run(res.Items, fields, filter)
	if gerr != nil || werr != nil || fmt.Sprint(gst) != fmt.Sprint(wst) || len(got) != len(want) || len(got) == 0 {
		t.Fatalf("%s: RunPages %d rows %+v %v, Run %d rows %+v %v", what, len(got), gst, gerr, len(want), wst, werr)
	}
	for i := range got {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("%s: row %d %s, Run %s", what, i, got[i], want[i])
		}
	}
}
