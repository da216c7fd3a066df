package demo

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOrdersWalk(t *testing.T) {
	_, ts := serve(t, Options{})
	for _, perPage := range []int{100, 25, 37} {
		all, pages := walkOrders(t, ts.URL, perPage)
		unique, dups := ids(all)
		if len(all) != OrderCount || len(unique) != OrderCount || dups != 0 {
			t.Errorf("per_page=%d: got %d orders (%d unique, %d repeated), want %d", perPage, len(all), len(unique), dups, OrderCount)
		}
		if want := (OrderCount + perPage - 1) / perPage; pages != want {
			t.Errorf("per_page=%d: %d pages, want %d", perPage, pages, want)
		}
		if all[0].ID != "ord_0001" || all[len(all)-1].ID != "ord_2400" {
			t.Errorf("per_page=%d: first %s last %s, want ord_0001…ord_2400", perPage, all[0].ID, all[len(all)-1].ID)
		}
	}
	// Past the end: an empty page that still reports the total.
	var past struct {
		Data  []item `json:"data"`
		Total int    `json:"total"`
	}
	getJSON(t, ts.URL+"/orders?page=25&per_page=100", &past)
	if len(past.Data) != 0 || past.Total != OrderCount {
		t.Errorf("page past the end: %d items, total %d", len(past.Data), past.Total)
	}
}

func TestOrdersFilters(t *testing.T) {
	_, ts := serve(t, Options{})
	var stats stats
	getJSON(t, ts.URL+"/stats", &stats)
	sum := 0
	for _, status := range []string{"open", "paid", "refunded", "cancelled"} {
		all, _ := walkOrders(t, ts.URL, 100, "status", status)
		if len(all) != stats.Orders.ByStatus[status] {
			t.Errorf("status=%s: walked %d, stats say %d", status, len(all), stats.Orders.ByStatus[status])
		}
		sum += len(all)
	}
	if sum != OrderCount {
		t.Errorf("statuses add up to %d, want %d", sum, OrderCount)
	}
	var one order
	getJSON(t, ts.URL+"/orders/ord_0412", &one)
	mine, _ := walkOrders(t, ts.URL, 100, "customer_id", one.Customer.ID)
	if len(mine) == 0 {
		t.Fatalf("customer %s has no orders", one.Customer.ID)
	}
	var cust customer
	getJSON(t, ts.URL+"/customers/"+one.Customer.ID, &cust)
	if cust.OrdersCount != len(mine) {
		t.Errorf("customer %s: orders_count %d, walked %d", cust.ID, cust.OrdersCount, len(mine))
	}
}

func TestOrderShape(t *testing.T) {
	_, ts := serve(t, Options{})
	var o order
	getJSON(t, ts.URL+"/orders/ord_0001", &o)
	if o.ID != "ord_0001" || o.Customer.ID == "" || o.Customer.Email == "" || len(o.LineItems) == 0 || o.Currency == "" {
		t.Fatalf("order is missing fields: %+v", o)
	}
	var sum float64
	for _, li := range o.LineItems {
		sum += li.Amount
	}
	if round2(sum) != o.Total {
		t.Errorf("total %v is not the sum of line items %v", o.Total, round2(sum))
	}
	if !regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$`).MatchString(o.CreatedAt) {
		t.Errorf("created_at %q is not ISO 8601", o.CreatedAt)
	}
}

func TestCustomersWalk(t *testing.T) {
	_, ts := serve(t, Options{})
	for _, limit := range []int{200, 50, 13} {
		all, pages := walkCustomers(t, ts.URL, limit)
		unique, dups := ids(all)
		if len(all) != CustomerCount || len(unique) != CustomerCount || dups != 0 {
			t.Errorf("limit=%d: got %d customers (%d unique, %d repeated)", limit, len(all), len(unique), dups)
		}
		if want := (CustomerCount + limit - 1) / limit; pages != want {
			t.Errorf("limit=%d: %d pages, want %d", limit, pages, want)
		}
		if all[0].ID != "cus_1337" {
			t.Errorf("newest customer first: got %s", all[0].ID)
		}
	}
}

func TestTicketsWalk(t *testing.T) {
	_, ts := serve(t, Options{})
	for _, limit := range []int{100, 50, 33} {
		all, cursors := walkTickets(t, ts.URL, limit)
		unique, dups := ids(all)
		if len(all) != TicketCount || len(unique) != TicketCount || dups != 0 {
			t.Errorf("limit=%d: got %d tickets (%d unique, %d repeated)", limit, len(all), len(unique), dups)
		}
		for _, c := range cursors {
			if regexp.MustCompile(`^\d+$`).MatchString(c) || len(c) < 16 {
				t.Errorf("cursor %q looks guessable", c)
			}
		}
	}
	status, _, body := call(t, "GET", ts.URL+"/tickets?cursor=NTA", nil)
	if status != http.StatusBadRequest || !strings.Contains(string(body), "invalid_cursor") {
		t.Errorf("forged cursor: %d %s", status, body)
	}
}

func TestEventsWalk(t *testing.T) {
	_, ts := serve(t, Options{})
	for _, perPage := range []int{100, 30, 64} {
		all, links := walkEvents(t, withQuery(ts.URL+"/events", "per_page", itoa(perPage)))
		unique, dups := ids(all)
		if len(all) != EventCount || len(unique) != EventCount || dups != 0 {
			t.Errorf("per_page=%d: got %d events (%d unique, %d repeated)", perPage, len(all), len(unique), dups)
		}
		for _, l := range links {
			if !strings.HasPrefix(l, ts.URL+"/events?") {
				t.Errorf("next link %q is not absolute on the request's origin", l)
			}
		}
	}
	// The Link header carries every relation, prev first as GitHub writes it.
	_, h, _ := call(t, "GET", ts.URL+"/events?page=2&per_page=100&type=order", nil)
	link := h.Get("Link")
	for _, rel := range []string{"prev", "next", "last", "first"} {
		if !strings.Contains(link, `rel="`+rel+`"`) {
			t.Errorf("Link lacks rel=%q: %s", rel, link)
		}
	}
	if !strings.HasPrefix(link, "<"+ts.URL) || !strings.Contains(nextLink(h), "type=order") {
		t.Errorf("Link does not keep the origin and filters: %s", link)
	}
}

func TestPropertiesAndBookings(t *testing.T) {
	_, ts := serve(t, Options{})
	var props propertiesList
	getJSON(t, ts.URL+"/properties", &props)
	if len(props.Properties) != PropertyCount {
		t.Fatalf("%d properties, want %d", len(props.Properties), PropertyCount)
	}
	var none, big int
	for _, p := range props.Properties {
		want := BookingCount(p.ID)
		var all []item
		for page := 1; ; page++ {
			var body struct {
				Data  []item `json:"data"`
				Total int    `json:"total"`
			}
			getJSON(t, withQuery(ts.URL+"/properties/"+p.ID+"/bookings", "page", itoa(page), "per_page", "100"), &body)
			if body.Total != want {
				t.Fatalf("%s: total %d, want %d", p.ID, body.Total, want)
			}
			all = append(all, body.Data...)
			if len(body.Data) < 100 {
				break
			}
		}
		if unique, dups := ids(all); len(all) != want || len(unique) != want || dups != 0 {
			t.Errorf("%s: walked %d bookings (%d repeated), want %d", p.ID, len(all), dups, want)
		}
		switch {
		case want == 0:
			none++
		case want > 100:
			big++
		}
	}
	if none == 0 || big == 0 {
		t.Errorf("want properties with no bookings and with more than 100: got %d and %d", none, big)
	}
	status, _, body := call(t, "GET", ts.URL+"/properties/p_99/bookings", nil)
	if status != http.StatusNotFound || !strings.Contains(string(body), `"not_found"`) {
		t.Errorf("unknown property: %d %s", status, body)
	}
}

func TestStats(t *testing.T) {
	_, ts := serve(t, Options{})
	var st stats
	getJSON(t, ts.URL+"/stats", &st)
	total := 0
	for _, p := range acmeData().properties {
		total += BookingCount(p.ID)
	}
	got := []int{st.Orders.Total, st.Customers.Total, st.Tickets.Total, st.Events, st.Properties.Total, st.Bookings.Total}
	want := []int{OrderCount, CustomerCount, TicketCount, EventCount, PropertyCount, total}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats counts (-want +got):\n%s", diff)
	}
}

func TestBadParameters(t *testing.T) {
	_, ts := serve(t, Options{})
	for _, u := range []string{"/orders?page=0", "/orders?per_page=abc", "/orders?status=lost", "/customers?offset=-1",
		"/customers?limit=0", "/tickets?limit=x", "/events?page=-2", "/properties?type=castle", "/properties/p_1/bookings?status=maybe"} {
		status, h, body := call(t, "GET", ts.URL+u, nil)
		var e apiError
		if status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Error != "invalid_parameter" || e.Message == "" ||
			h.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %s", u, status, body)
		}
	}
	// Sizes above the maximum are clamped, as documented.
	var page struct {
		Data []item `json:"data"`
	}
	getJSON(t, ts.URL+"/orders?per_page=1000", &page)
	if len(page.Data) != 100 {
		t.Errorf("per_page=1000 gave %d orders, want 100", len(page.Data))
	}
}

func TestNotRouted(t *testing.T) {
	_, ts := serve(t, Options{})
	status, _, body := call(t, "GET", ts.URL+"/nope", nil)
	if status != http.StatusNotFound || !strings.Contains(string(body), `"not_found"`) {
		t.Errorf("unknown path: %d %s", status, body)
	}
	status, h, body := call(t, "POST", ts.URL+"/orders", map[string]any{})
	if status != http.StatusMethodNotAllowed || !strings.Contains(h.Get("Allow"), "GET") || !strings.Contains(string(body), "method_not_allowed") {
		t.Errorf("POST /orders: %d allow=%q %s", status, h.Get("Allow"), body)
	}
}

func TestAuth(t *testing.T) {
	_, ts := serve(t, Options{Token: "s3cret", APIKey: "key-1"})
	for _, path := range []string{"/orders", "/mail/messages", "/chat/conversations", "/crm/contacts", "/calendar/calendars", "/nope"} {
		status, h, body := call(t, "GET", ts.URL+path, nil)
		if status != http.StatusUnauthorized || !strings.Contains(string(body), `"unauthorized"`) || h.Get("WWW-Authenticate") == "" {
			t.Errorf("%s without credentials: %d %s", path, status, body)
		}
		if status, _, _ := call(t, "GET", ts.URL+path, nil, "Authorization", "Bearer wrong"); status != http.StatusUnauthorized {
			t.Errorf("%s with a wrong token: %d", path, status)
		}
	}
	if status, _, body := call(t, "GET", ts.URL+"/orders", nil, "Authorization", "Bearer s3cret"); status != http.StatusOK {
		t.Errorf("bearer token: %d %s", status, body)
	}
	if status, _, body := call(t, "GET", ts.URL+"/mail/profile", nil, "X-Api-Key", "key-1"); status != http.StatusOK {
		t.Errorf("API key: %d %s", status, body)
	}
}

func TestRequestsRecorded(t *testing.T) {
	s, ts := serve(t, Options{Token: "tok"})
	call(t, "GET", ts.URL+"/orders?page=2&per_page=5", nil, "Authorization", "Bearer tok", "X-Trace", "abc")
	call(t, "POST", ts.URL+"/chat/conversations/conv_01/messages", map[string]string{"text": "hi"}, "Authorization", "Bearer tok", "X-Api-Key", "nope")
	call(t, "GET", ts.URL+"/stats", nil)
	got := s.Requests()
	type row struct {
		Method, Path, RawQuery, Body string
		Status                       int
	}
	var rows []row
	for _, r := range got {
		rows = append(rows, row{r.Method, r.Path, r.RawQuery, r.Body, r.Status})
		for _, k := range secretHeaders {
			if r.Header.Get(k) != "" {
				t.Errorf("%s %s: recorded header %s", r.Method, r.Path, k)
			}
		}
	}
	want := []row{
		{"GET", "/orders", "page=2&per_page=5", "", 200},
		{"POST", "/chat/conversations/conv_01/messages", "", `{"text":"hi"}`, 200},
		{"GET", "/stats", "", "", 401},
	}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if got[0].Header.Get("X-Trace") != "abc" {
		t.Errorf("other headers are kept: %v", got[0].Header)
	}
	if n := s.Count("/conversations/{conversation_id}/messages"); n != 0 {
		t.Errorf("patterns are counted under the server's path: %d", n)
	}
	if n := s.Count("/chat/conversations/{conversation_id}/messages"); n != 1 {
		t.Errorf("route pattern count %d, want 1", n)
	}
	s.Reset()
	if len(s.Requests()) != 0 || s.Count("/orders") != 0 {
		t.Errorf("Reset kept %d requests", len(s.Requests()))
	}
}

func TestDeterministic(t *testing.T) {
	_, a := serve(t, Options{})
	_, b := serve(t, Options{})
	for _, u := range []string{"/orders", "/customers", "/tickets", "/tickets?limit=10&status=open", "/events", "/properties",
		"/properties/p_2/bookings", "/stats", "/orders/ord_1999", "/mail/messages?maxResults=20", "/mail/threads", "/chat/conversations",
		"/crm/deals", "/calendar/calendars/primary/events?maxResults=20"} {
		sa, ha, ba := call(t, "GET", a.URL+u, nil)
		sb, hb, bb := call(t, "GET", b.URL+u, nil)
		la := strings.ReplaceAll(ha.Get("Link"), a.URL, "")
		lb := strings.ReplaceAll(hb.Get("Link"), b.URL, "")
		if sa != 200 || sa != sb || !bytes.Equal(ba, bb) || la != lb {
			t.Errorf("%s differs between two servers (%d/%d)", u, sa, sb)
		}
	}
	// A cursor from one server works on another.
	var first struct {
		NextCursor string `json:"next_cursor"`
	}
	getJSON(t, a.URL+"/tickets", &first)
	var second struct {
		Tickets []item `json:"tickets"`
	}
	getJSON(t, b.URL+"/tickets?cursor="+url.QueryEscape(first.NextCursor), &second)
	if len(second.Tickets) == 0 || second.Tickets[0].ID != "tkt_0051" {
		t.Errorf("cursor across servers: %+v", second.Tickets)
	}
}

func TestStartShutdown(t *testing.T) {
	s := NewServer(Options{})
	if err := s.Close(); err != nil {
		t.Errorf("Close before Start: %v", err)
	}
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Errorf("base URL %q", base)
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("a second Start should fail")
	}
	var st stats
	getJSON(t, base+"/stats", &st)
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/stats"); err == nil {
		t.Error("server still answers after Shutdown")
	}
	if _, err := NewServer(Options{}).Start("256.0.0.1:0"); err == nil {
		t.Error("a bad address should fail")
	}
}
