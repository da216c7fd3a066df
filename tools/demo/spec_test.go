package demo

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/go-cmp/cmp"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(Spec())
	if err != nil {
		t.Fatalf("spec does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("spec is not valid OpenAPI 3: %v", err)
	}
	return doc
}

func TestSpecOperations(t *testing.T) {
	doc := loadSpec(t)
	var got []string
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			got = append(got, op.OperationID)
			if len(op.Description) < 40 {
				t.Errorf("%s %s: description too thin: %q", method, path, op.Description)
			}
			for _, p := range op.Parameters {
				s := p.Value.Schema.Value
				name := p.Value.Name
				switch {
				case slices.Contains([]string{"page", "per_page", "offset", "limit"}, name) && !s.Type.Is("integer"):
					t.Errorf("%s: %s is %v, want integer", op.OperationID, name, s.Type)
				case name == "cursor" && !s.Type.Is("string"):
					t.Errorf("%s: cursor is %v, want string", op.OperationID, s.Type)
				}
			}
		}
	}
	slices.Sort(got)
	want := []string{"get_customer", "get_order", "get_stats", "list_customers", "list_events", "list_orders",
		"list_properties", "list_property_bookings", "list_tickets"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operationIds (-want +got):\n%s", diff)
	}
}

// TestSpecMatchesServer calls every operation of the spec and validates the
// server's answers — successes and errors — against the spec's schemas.
func TestSpecMatchesServer(t *testing.T) {
	doc := loadSpec(t)
	_, ts := serve(t, Options{Token: "tok"})
	doc.Servers = openapi3.Servers{{URL: ts.URL}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	ids := strings.NewReplacer("{order_id}", "ord_0007", "{customer_id}", "cus_0042", "{property_id}", "p_2")
	unknown := strings.NewReplacer("{order_id}", "ord_9999", "{customer_id}", "cus_9999", "{property_id}", "p_99")
	type probe struct {
		path, query string
		status      int
	}
	var probes []probe
	for path, item := range doc.Paths.Map() {
		concrete := ids.Replace(path)
		probes = append(probes, probe{concrete, "", 200})
		if item.Get.Responses.Status(404) != nil {
			probes = append(probes, probe{unknown.Replace(path), "", 404})
		}
		if item.Get.Responses.Status(400) != nil {
			probes = append(probes, probe{concrete, "limit=x&per_page=x", 400})
		}
	}
	probes = append(probes, probe{"/tickets", "status=open&limit=5", 200}, probe{"/events", "page=3&per_page=100", 200},
		probe{"/orders", "status=paid&per_page=3", 200}, probe{"/tickets", "cursor=AAAA", 400})
	for _, p := range probes {
		for _, auth := range []bool{true, false} {
			u := ts.URL + p.path
			if p.query != "" {
				u += "?" + p.query
			}
			req, _ := http.NewRequest("GET", u, nil)
			want := p.status
			if auth {
				req.Header.Set("Authorization", "Bearer tok")
			} else {
				want = 401
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET %s: status %d, want %d: %s", u, resp.StatusCode, want, body)
				continue
			}
			route, params, err := router.FindRoute(req)
			if err != nil {
				t.Fatalf("GET %s: no route in the spec: %v", u, err)
			}
			in := &openapi3filter.ResponseValidationInput{
				RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
					Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}},
				Status: resp.StatusCode, Header: resp.Header, Body: io.NopCloser(bytes.NewReader(body)),
				Options: &openapi3filter.Options{IncludeResponseStatus: true},
			}
			if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
				t.Errorf("GET %s (%d): response does not match the spec: %v", u, resp.StatusCode, err)
			}
		}
	}
}
