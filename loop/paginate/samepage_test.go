package paginate

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
