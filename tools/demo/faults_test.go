package demo

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// statuses makes n GETs of u and returns their statuses.
func statuses(t *testing.T, u string, n int) []int {
	t.Helper()
	var out []int
	for range n {
		status, _, _ := call(t, "GET", u, nil)
		out = append(out, status)
	}
	return out
}

func TestEndpointFaults(t *testing.T) {
	date := time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	tests := []struct {
		name   string
		faults Faults
		path   string
		want   []int
	}{
		{"rate limit once", Faults{RateLimit: map[string]RateLimit{"/orders": {AtRequest: 2, RetryAfter: "2"}}}, "/orders", []int{200, 429, 200, 200}},
		{"rate limit forever", Faults{RateLimit: map[string]RateLimit{"/orders": {AtRequest: 3, Times: -1}}}, "/orders", []int{200, 200, 429, 429, 429}},
		{"rate limit other endpoint", Faults{RateLimit: map[string]RateLimit{"/customers": {}}}, "/orders", []int{200, 200}},
		{"transient 503 twice", Faults{Transient5xx: map[string]Transient{"/tickets": {AtRequest: 1, Times: 2}}}, "/tickets", []int{503, 503, 200, 200}},
		{"transient 502", Faults{Transient5xx: map[string]Transient{"/events": {AtRequest: 2, Status: 502}}}, "/events", []int{200, 502, 200}},
		{"persistent 500", Faults{Persistent5xx: map[string]Persistent{"/customers": {FromRequest: 3}}}, "/customers", []int{200, 200, 500, 500, 500}},
		{"revoked", Faults{Unauthorized: map[string]Unauthorized{"/stats": {AtRequest: 2}}}, "/stats", []int{200, 401, 200}},
		{"forbidden", Faults{Unauthorized: map[string]Unauthorized{"/stats": {Status: 403, Times: 2}}}, "/stats", []int{403, 403, 200}},
		{"toolkit path", Faults{RateLimit: map[string]RateLimit{"/mail/messages": {AtRequest: 1}}}, "/mail/messages", []int{429, 200}},
		{"route pattern", Faults{Transient5xx: map[string]Transient{"/properties/{property_id}/bookings": {AtRequest: 2}}}, "/properties/p_1/bookings", []int{200, 503, 200}},
		{"first match wins", Faults{
			Unauthorized: map[string]Unauthorized{"/orders": {AtRequest: 1}},
			RateLimit:    map[string]RateLimit{"/orders": {AtRequest: 1, Times: 2}},
		}, "/orders", []int{401, 429, 200}},
		{"http-date", Faults{RateLimit: map[string]RateLimit{"/orders": {RetryAfter: date}}}, "/orders", []int{429, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := serve(t, Options{Faults: tt.faults})
			if diff := cmp.Diff(tt.want, statuses(t, ts.URL+tt.path, len(tt.want))); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
			// Reset rewinds the fault to its first request.
			s.Reset()
			if diff := cmp.Diff(tt.want, statuses(t, ts.URL+tt.path, len(tt.want))); diff != "" {
				t.Errorf("after Reset (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRateLimitHeaders(t *testing.T) {
	date := time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	for _, tt := range []struct {
		rl   RateLimit
		want string
	}{{RateLimit{RetryAfter: "2"}, "2"}, {RateLimit{RetryAfter: date}, date}, {RateLimit{}, "1"}, {RateLimit{NoRetryAfter: true}, ""}} {
		_, ts := serve(t, Options{Faults: Faults{RateLimit: map[string]RateLimit{"/orders": tt.rl}}})
		status, h, body := call(t, "GET", ts.URL+"/orders", nil)
		_, present := h["Retry-After"]
		if status != 429 || h.Get("Retry-After") != tt.want || present != (tt.want != "") || !strings.Contains(string(body), `"rate_limited"`) {
			t.Errorf("%+v: %d Retry-After=%q %s", tt.rl, status, h.Get("Retry-After"), body)
		}
	}
}

func TestExpireCursorAfter(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{ExpireCursorAfter: 2}})
	cursor := ""
	var got []string
	for range 5 {
		u := ts.URL + "/tickets?limit=10"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		status, _, body := call(t, "GET", u, nil)
		var page struct {
			NextCursor string `json:"next_cursor"`
			Error      string `json:"error"`
		}
		json.Unmarshal(body, &page)
		got = append(got, itoa(status)+" "+page.Error)
		if status != 200 {
			break
		}
		cursor = page.NextCursor
	}
	if diff := cmp.Diff([]string{"200 ", "200 ", "200 ", "400 cursor_expired"}, got); diff != "" {
		t.Errorf("walk (-want +got):\n%s", diff)
	}
	// A new walk (a request without cursor) starts a new allowance.
	if status, _, _ := call(t, "GET", ts.URL+"/tickets", nil); status != 200 {
		t.Fatal(status)
	}
	status, _, _ := call(t, "GET", ts.URL+"/tickets?cursor="+url.QueryEscape(cursor), nil)
	if status != 200 {
		t.Errorf("cursor after a restart: %d", status)
	}
}

func TestCursorCycle(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{CursorCycle: true}})
	var cursors []string
	cursor := ""
	for range 4 {
		var page struct {
			NextCursor string `json:"next_cursor"`
		}
		u := ts.URL + "/tickets?limit=20"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		getJSON(t, u, &page)
		cursor = page.NextCursor
		cursors = append(cursors, cursor)
	}
	// Page 1 hands out c2, page 2 c3, page 3 c2 again, page 2 again c3.
	if cursors[0] == cursors[1] || cursors[2] != cursors[0] || cursors[3] != cursors[1] {
		t.Errorf("cursors do not cycle page 3 → page 2: %q", cursors)
	}
}

func TestFirstPageEmptyWithCursor(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{FirstPageEmptyWithCursor: true}})
	var first struct {
		Tickets    []item  `json:"tickets"`
		NextCursor *string `json:"next_cursor"`
	}
	getJSON(t, ts.URL+"/tickets", &first)
	if len(first.Tickets) != 0 || first.NextCursor == nil || *first.NextCursor == "" {
		t.Fatalf("first page: %d tickets, next %v", len(first.Tickets), first.NextCursor)
	}
	all, _ := walkTickets(t, ts.URL, 100)
	if unique, _ := ids(all); len(unique) != TicketCount {
		t.Errorf("walking through the empty first page found %d tickets", len(unique))
	}
}

func TestMalformedContinuation(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{MalformedContinuation: true}})
	var page map[string]any
	getJSON(t, ts.URL+"/tickets?limit=100", &page)
	obj, ok := page["next_cursor"].(map[string]any)
	if !ok || obj["position"] != float64(100) || obj["token"] == "" {
		t.Errorf("next_cursor = %#v, want an object", page["next_cursor"])
	}
	var last map[string]any
	tok := obj["token"].(string)
	for range 9 {
		getJSON(t, ts.URL+"/tickets?limit=100&cursor="+url.QueryEscape(tok), &last)
		if next, ok := last["next_cursor"].(map[string]any); ok {
			tok = next["token"].(string)
		}
	}
	if last["next_cursor"] != nil {
		t.Errorf("last page next_cursor = %#v, want null", last["next_cursor"])
	}
}

func TestEmptyPagesWithMore(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{EmptyPagesWithMore: EmptyPages{Count: 2}}})
	for i := range 2 {
		var page customersPage
		getJSON(t, ts.URL+"/customers", &page)
		if len(page.Items) != 0 || !page.HasMore {
			t.Fatalf("request %d: %d items, has_more %v", i+1, len(page.Items), page.HasMore)
		}
	}
	all, _ := walkCustomers(t, ts.URL, 200)
	if len(all) != CustomerCount {
		t.Errorf("after the empty pages the walk found %d customers", len(all))
	}

	_, ts = serve(t, Options{Faults: Faults{EmptyPagesWithMore: EmptyPages{Forever: true}}})
	for i := range 50 {
		var page customersPage
		getJSON(t, withQuery(ts.URL+"/customers", "offset", itoa(i*50)), &page)
		if len(page.Items) != 0 || !page.HasMore {
			t.Fatalf("request %d: %d items, has_more %v", i+1, len(page.Items), page.HasMore)
		}
	}
}

func TestInsertDuringWalk(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{InsertDuringWalk: Insert{AfterRequests: 1, Count: 5}}})
	all, _ := walkCustomers(t, ts.URL, 50)
	unique, dups := ids(all)
	// The five new rows push every row after the first page down by five:
	// the walk sees five rows twice and never sees the new ones.
	if len(all) != CustomerCount+5 || len(unique) != CustomerCount || dups != 5 {
		t.Errorf("got %d rows, %d unique, %d repeated", len(all), len(unique), dups)
	}
	if all[50].ID != all[45].ID {
		t.Errorf("second page should start with the first page's 46th row: %s vs %s", all[50].ID, all[45].ID)
	}
	var fresh customersPage
	getJSON(t, ts.URL+"/customers?limit=5", &fresh)
	var got []string
	for _, c := range fresh.Items {
		got = append(got, c.ID)
	}
	if diff := cmp.Diff([]string{"cus_1342", "cus_1341", "cus_1340", "cus_1339", "cus_1338"}, got); diff != "" {
		t.Errorf("new rows first (-want +got):\n%s", diff)
	}
	var c customer
	getJSON(t, ts.URL+"/customers/cus_1340", &c)
	if c.Name == "" {
		t.Error("inserted customer has no name")
	}
}

func TestForeignNextURL(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{ForeignNextURL: true}})
	_, h, _ := call(t, "GET", ts.URL+"/events?page=2", nil)
	next := nextLink(h)
	if !strings.HasPrefix(next, ForeignOrigin+"/events?") || !strings.Contains(next, "page=3") {
		t.Errorf("next = %q, want it on %s", next, ForeignOrigin)
	}
	for _, part := range strings.Split(h.Get("Link"), ",") {
		if !strings.Contains(part, `rel="next"`) && !strings.Contains(part, "<"+ts.URL) {
			t.Errorf("non-next link left the origin: %s", part)
		}
	}
}

func TestWrongTotal(t *testing.T) {
	for _, delta := range []int{-400, 100} {
		_, ts := serve(t, Options{Faults: Faults{WrongTotal: delta}})
		var page ordersPage
		getJSON(t, ts.URL+"/orders", &page)
		if page.Total != OrderCount+delta {
			t.Errorf("WrongTotal %d: total %d", delta, page.Total)
		}
		// The data itself is unchanged.
		getJSON(t, ts.URL+"/orders?page=24&per_page=100", &page)
		if len(page.Data) != 100 || page.Data[99].ID != "ord_2400" {
			t.Errorf("WrongTotal %d changed the data", delta)
		}
	}
}

func TestCapPageSize(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{CapPageSize: 20}})
	for _, tt := range []struct {
		path, key string
	}{
		{"/orders?per_page=100", "data"}, {"/customers?limit=200", "items"}, {"/tickets?limit=100", "tickets"},
		{"/properties/p_2/bookings?per_page=100", "data"}, {"/events?per_page=100", ""},
	} {
		var n int
		if tt.key == "" {
			var arr []item
			getJSON(t, ts.URL+tt.path, &arr)
			n = len(arr)
		} else {
			var obj map[string]json.RawMessage
			getJSON(t, ts.URL+tt.path, &obj)
			var arr []item
			json.Unmarshal(obj[tt.key], &arr)
			n = len(arr)
		}
		if n != 20 {
			t.Errorf("%s: %d items, want the cap of 20", tt.path, n)
		}
	}
	// The continuation still says there is more, and walking by what was
	// received still reaches everything.
	all, _ := walkCustomers(t, ts.URL, 200)
	if len(all) != CustomerCount {
		t.Errorf("capped walk found %d customers", len(all))
	}
}

func TestDuplicateItem(t *testing.T) {
	_, ts := serve(t, Options{Faults: Faults{DuplicateItem: true}})
	check := func(name string, all []item, size int) {
		t.Helper()
		unique, dups := ids(all)
		if dups != 1 || all[size].ID != all[size-1].ID {
			t.Errorf("%s: %d repeated ids; page 2 starts with %s, page 1 ends with %s", name, dups, all[size].ID, all[size-1].ID)
		}
		if len(unique) != len(all)-1 {
			t.Errorf("%s: %d unique of %d", name, len(unique), len(all))
		}
	}
	orders, _ := walkOrders(t, ts.URL, 100)
	check("orders", orders, 100)
	customers, _ := walkCustomers(t, ts.URL, 50)
	check("customers", customers, 50)
	tickets, _ := walkTickets(t, ts.URL, 50)
	check("tickets", tickets, 50)
	events, _ := walkEvents(t, ts.URL+"/events?per_page=30")
	check("events", events, 30)
}

func TestFaultsIsolatedPerServer(t *testing.T) {
	_, faulty := serve(t, Options{Faults: Faults{Persistent5xx: map[string]Persistent{"/orders": {}}}})
	_, clean := serve(t, Options{})
	if got := statuses(t, faulty.URL+"/orders", 1); got[0] != 500 {
		t.Errorf("faulty server: %v", got)
	}
	if got := statuses(t, clean.URL+"/orders", 1); got[0] != 200 {
		t.Errorf("clean server: %v", got)
	}
}
