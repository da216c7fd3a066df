package workflow

import (
	"testing"

	"github.com/trawl-dev/trawl/loop"
	"github.com/trawl-dev/trawl/tools"
	"github.com/trawl-dev/trawl/tools/demo"
)

// fixture is the demo upstream (Acme) on a loopback port, its tools in a
// catalog and an invoker to call them.
type fixture struct {
	srv  *demo.Server
	base string
	cat  *tools.Catalog
	inv  *tools.Invoker
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, demo.Options{}) }

func newFixtureWith(t testing.TB, opt demo.Options) *fixture {
	t.Helper()
	srv := demo.NewServer(opt)
	base, err := srv.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &fixture{srv: srv, base: base, cat: acmeCatalog(t, base), inv: tools.NewInvoker(tools.InvokerOptions{})}
}

// acmeCatalog imports the demo spec as provider "acme" with base as its
// origin.
func acmeCatalog(t testing.TB, base string) *tools.Catalog {
	t.Helper()
	ts, err := tools.ImportOpenAPIData(demo.Spec(), tools.ImportOptions{ProviderID: "acme", BaseURL: base})
	if err != nil {
		t.Fatal(err)
	}
	cat := tools.NewCatalog()
	if err := cat.Add(ts...); err != nil {
		t.Fatal(err)
	}
	return cat
}

// engine returns an engine calling the fixture's upstream.
func (f *fixture) engine(opt loop.Options) *loop.Engine {
	opt.Caller = f.inv
	return loop.New(opt)
}
