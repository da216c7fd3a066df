package demo_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"

	"github.com/trawl-dev/trawl/tools/demo"
)

func Example() {
	srv := demo.NewServer(demo.Options{Token: "acme-demo-token"})
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()

	req, _ := http.NewRequest("GET", base+"/orders?per_page=3&status=refunded", nil)
	req.Header.Set("Authorization", "Bearer acme-demo-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	var page struct {
		Data []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"data"`
		Total int `json:"total"`
	}
	json.NewDecoder(resp.Body).Decode(&page)
	for _, o := range page.Data {
		fmt.Println(o.ID, o.Status)
	}
	fmt.Println("refunded orders in all:", page.Total)

	var kits []string
	for name := range demo.Manifests(base) {
		kits = append(kits, name)
	}
	sort.Strings(kits)
	fmt.Println("toolkits:", kits)
	// Output:
	// ord_0032 refunded
	// ord_0034 refunded
	// ord_0048 refunded
	// refunded orders in all: 187
	// toolkits: [calendar chat crm mail]
}

// A test can make an endpoint misbehave and then check what the client did.
func ExampleServer_Requests() {
	srv := demo.NewServer(demo.Options{Faults: demo.Faults{
		RateLimit: map[string]demo.RateLimit{"/customers": {AtRequest: 2, RetryAfter: "1"}},
	}})
	ts := httptest.NewServer(srv)
	defer ts.Close()

	for _, q := range []string{"offset=0&limit=50", "offset=50&limit=50", "offset=50&limit=50"} {
		resp, err := http.Get(ts.URL + "/customers?" + q)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp.Body.Close()
	}
	for _, r := range srv.Requests() {
		fmt.Println(r.Method, r.Path, r.RawQuery, r.Status)
	}
	// Output:
	// GET /customers offset=0&limit=50 200
	// GET /customers offset=50&limit=50 429
	// GET /customers offset=50&limit=50 200
}
