package demo

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// serve runs a fresh Server behind httptest for one test.
func serve(t *testing.T, opt Options) (*Server, *httptest.Server) {
	t.Helper()
	s := NewServer(opt)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return s, ts
}

// call makes one request and returns the status, header and body.
func call(t *testing.T, method, u string, body any, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// getJSON GETs u, requires 200 and decodes the body into v.
func getJSON(t *testing.T, u string, v any) http.Header {
	t.Helper()
	status, h, b := call(t, http.MethodGet, u, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: status %d: %s", u, status, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v: %s", u, err, b)
	}
	return h
}

// nextLink returns the rel="next" target of an RFC 8288 Link header.
func nextLink(h http.Header) string {
	for _, part := range strings.Split(h.Get("Link"), ",") {
		target, params, ok := strings.Cut(strings.TrimSpace(part), ";")
		if ok && strings.Contains(params, `rel="next"`) {
			return strings.Trim(strings.TrimSpace(target), "<>")
		}
	}
	return ""
}

type item struct {
	ID string `json:"id"`
}

// ids returns the ids of items and how many of them repeat an earlier id.
func ids(items []item) (unique map[string]bool, dups int) {
	unique = map[string]bool{}
	for _, it := range items {
		if unique[it.ID] {
			dups++
		}
		unique[it.ID] = true
	}
	return unique, dups
}

func withQuery(base string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return base + "?" + v.Encode()
}

// Walks: each follows one endpoint's continuation the way its docs say, and
// reports every item and the number of requests. They stop at maxPages so
// a broken server cannot hang a test.
const maxPages = 400

func walkOrders(t *testing.T, base string, perPage int, extra ...string) (all []item, pages int) {
	t.Helper()
	for page := 1; page <= maxPages; page++ {
		var body struct {
			Data  []item `json:"data"`
			Total int    `json:"total"`
		}
		getJSON(t, withQuery(base+"/orders", append([]string{"page", itoa(page), "per_page", itoa(perPage)}, extra...)...), &body)
		all = append(all, body.Data...)
		if len(body.Data) < perPage || page*perPage >= body.Total {
			return all, page
		}
	}
	t.Fatal("orders walk did not end")
	return nil, 0
}

func walkCustomers(t *testing.T, base string, limit int) (all []item, pages int) {
	t.Helper()
	offset := 0
	for pages = 1; pages <= maxPages; pages++ {
		var body struct {
			Items   []item `json:"items"`
			HasMore bool   `json:"has_more"`
		}
		getJSON(t, withQuery(base+"/customers", "offset", itoa(offset), "limit", itoa(limit)), &body)
		all = append(all, body.Items...)
		offset += len(body.Items)
		if !body.HasMore {
			return all, pages
		}
	}
	t.Fatal("customers walk did not end")
	return nil, 0
}

func walkTickets(t *testing.T, base string, limit int) (all []item, cursors []string) {
	t.Helper()
	cursor := ""
	for range maxPages {
		var body struct {
			Tickets    []item  `json:"tickets"`
			NextCursor *string `json:"next_cursor"`
		}
		q := []string{"limit", itoa(limit)}
		if cursor != "" {
			q = append(q, "cursor", cursor)
		}
		getJSON(t, withQuery(base+"/tickets", q...), &body)
		all = append(all, body.Tickets...)
		if body.NextCursor == nil {
			return all, cursors
		}
		cursor = *body.NextCursor
		cursors = append(cursors, cursor)
	}
	t.Fatal("tickets walk did not end")
	return nil, nil
}

func walkEvents(t *testing.T, first string) (all []item, links []string) {
	t.Helper()
	u := first
	for range maxPages {
		var page []item
		h := getJSON(t, u, &page)
		all = append(all, page...)
		if u = nextLink(h); u == "" {
			return all, links
		}
		links = append(links, u)
	}
	t.Fatal("events walk did not end")
	return nil, nil
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
