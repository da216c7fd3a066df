// Package demo is Acme, the sample upstream that trawl serves on a
// loopback port of its own when started without config, and the fixture
// that tests of the invoker, the pagination walker and the agent use.
//
// One Server answers two things:
//
//   - the Acme REST API at its root, described by the OpenAPI document
//     Spec returns. Each list endpoint paginates a different way, as real
//     vendors do: GET /orders by page number ({"data":[…],"total":2400}),
//     GET /customers by offset ({"items":[…],"has_more":true}), GET /tickets
//     by opaque cursor ({"tickets":[…],"next_cursor":"…"|null}), GET /events
//     as a bare array continued only by an RFC 8288 Link header, and
//     GET /properties/{property_id}/bookings by page number again, with a
//     different number of bookings per property. GET /properties and
//     GET /stats are not paginated.
//   - the backends of four connected-app toolkits under /mail (Gmail-like,
//     70 tools), /chat, /crm and /calendar, whose manifests Manifests
//     returns. Their state is per Server and mutations change it.
//
// The data is generated from fixed seeds: every Server, in every process,
// answers the same request with the same bytes. Faults in Options make
// chosen endpoints misbehave (rate limits, 5xx, revoked credentials,
// expiring or cycling cursors, rows shifting under an offset walk, foreign
// next links…), and Requests records what the server received, so a test
// can assert the exact sequence of upstream calls.
//
// Run it on a listener of its own:
//
//	srv := demo.NewServer(demo.Options{Token: "acme-demo-token"})
//	base, err := srv.Start("127.0.0.1:0")
//	if err != nil {
//		return err
//	}
//	defer srv.Close()
//	spec := demo.Spec()              // the "acme" provider, with base_url = base
//	toolkits := demo.Manifests(base) // "mail", "chat", "crm", "calendar"
//
// or, in a test, behind httptest:
//
//	srv := demo.NewServer(demo.Options{Faults: demo.Faults{CursorCycle: true}})
//	ts := httptest.NewServer(srv)
//	defer ts.Close()
//
// The package imports no trawl package, so any package's tests may use it.
package demo
