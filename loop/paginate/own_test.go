package paginate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trawl-dev/trawl/tools"
)

// memoryCursorPages answers a cursor walk from memory: page k (cursor "ck", the
// first without one) holds rows[k], and names the next cursor while one
// is left.
func memoryCursorPages(rows []string) CallerFunc {
	return func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		k := 0
		if c, ok := argString(req.Args, "cursor"); ok {
			fmt.Sscanf(c, "c%d", &k)
		}
		next := "null"
		if k+1 < len(rows) {
			next = fmt.Sprintf(`"c%d"`, k+1)
		}
		body := fmt.Sprintf(`{"data":[%s],"next_cursor":%s}`, rows[k], next)
		return &tools.Response{Status: 200, Body: []byte(body)}, nil
	}
}

// The walk keeps the slice its last page was read into as that page's
// rows and reads the next page into the other one (samePage): a page
// equal to the one two before it is not taken for a repeat, and a page
// equal to the one right before it still is, however many pages the two
// buffers have alternated over.
func TestSamePageAlternatingBuffers(t *testing.T) {
	abc, def := `{"n":"a"},{"n":"b"},{"n":"c"}`, `{"n":"d"},{"n":"e"},{"n":"f"}`
	res, err := Walk(context.Background(), WalkOptions{Caller: memoryCursorPages([]string{abc, def, abc, def, abc, abc, def}),
		Tool: listTool("http://upstream.test", cursorPlan, 3), Plan: cursorPlan, AllPages: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.StoppedBy != StopInconsistent || res.Pages != 6 || len(res.Items) != 15 ||
		!strings.Contains(res.Cause, "page 6 held the same rows as page 5") {
		t.Errorf("stopped by %s after %d pages with %d items (%s); want inconsistent_pagination at page 6, 15 rows",
			res.StoppedBy, res.Pages, len(res.Items), res.Cause)
	}
	// The rows kept are the pages' own, in order, none overwritten by a
	// later page read into a reused buffer.
	want := strings.Repeat("abcdef", 2) + "abc"
	var got strings.Builder
	for _, it := range res.Items {
		got.WriteByte(it[len(it)-3])
	}
	if got.String() != want {
		t.Errorf("rows %s, want %s", got.String(), want)
	}
}

// On the system clock the requests a walk sends itself share one
// context for the walk (sendOwn): each still ends at the walk's deadline,
// is cancelled once its Call returns, and carries the rate-limit
// observers — a wait it reports reaches the progress line, and its grant
// is accepted.
func TestOwnRequestContext(t *testing.T) {
	start := time.Now()
	meter := NewMeter(start)
	var mu sync.Mutex
	var ctxs []context.Context
	var deadlines []time.Time
	var grantErrs []error
	rows := []string{`{"id":1}`, `{"id":2}`, `{"id":3}`}
	answer := memoryCursorPages(rows)
	caller := CallerFunc(func(ctx context.Context, req tools.Request) (*tools.Response, error) {
		dl, _ := ctx.Deadline()
		gerr := tools.LimitGranted(ctx)
		if req.Page == 2 {
			end := tools.LimitWaitStarted(ctx, tools.LimitWait{Provider: "acme", Cause: "rate", Wait: time.Second})
			end()
		}
		if ctx.Err() != nil {
			t.Errorf("page %d: its context ended before the request was sent: %v", req.Page, ctx.Err())
		}
		mu.Lock()
		if n := len(ctxs); n > 0 && ctxs[n-1].Err() == nil {
			t.Errorf("page %d: the context of the request before it was not cancelled once that request returned", req.Page)
		}
		ctxs, deadlines, grantErrs = append(ctxs, ctx), append(deadlines, dl), append(grantErrs, gerr)
		mu.Unlock()
		return answer(ctx, req)
	})
	var waits int
	res, err := Walk(context.Background(), WalkOptions{Caller: caller, Meter: meter, Budget: Budget{Time: 42 * time.Second},
		Tool: listTool("http://upstream.test", cursorPlan, 3), Plan: cursorPlan, AllPages: true,
		Progress: func(p Progress) {
			if p.Waiting != nil {
				waits++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || len(res.Items) != 3 || len(ctxs) != 3 {
		t.Fatalf("walk: complete %v, %d items, %d calls; want a complete walk of 3 pages", res.Complete, len(res.Items), len(ctxs))
	}
	for i, ctx := range ctxs {
		if !deadlines[i].Equal(start.Add(42 * time.Second)) {
			t.Errorf("request %d: deadline %v, want the walk's, %v", i+1, deadlines[i], start.Add(42*time.Second))
		}
		if ctx.Err() == nil {
			t.Errorf("request %d: its context was not cancelled once the walk ended", i+1)
		}
		if grantErrs[i] != nil {
			t.Errorf("request %d: LimitGranted = %v", i+1, grantErrs[i])
		}
	}
	if ctxs[0] == ctxs[1] {
		t.Error("two requests shared one cancellable context")
	}
	if waits == 0 {
		t.Error("the rate-limit wait page 2 reported did not reach the progress line")
	}
}
