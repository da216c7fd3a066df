package tools

import "testing"

// Every change of the catalog makes a new generation (what the agents'
// resolved bindings are kept by); reads make none.
func TestCatalogGeneration(t *testing.T) {
	c := NewCatalog()
	ts := mailTools()
	last := c.Generation()
	step := func(what string, change func()) {
		t.Helper()
		change()
		if g := c.Generation(); g == last {
			t.Errorf("%s: the generation stayed %d", what, g)
		} else {
			last = g
		}
	}
	step("Add", func() {
		if err := c.Add(ts...); err != nil {
			t.Fatal(err)
		}
	})
	step("ReplaceProvider", func() {
		if err := c.ReplaceProvider("mail", ts[:1]); err != nil {
			t.Fatal(err)
		}
	})
	step("SetWaiting", func() { c.SetWaiting("crm", "its MCP server has not answered yet") })
	step("SetWaiting (answered)", func() { c.SetWaiting("crm", "") })
	step("SetPerUser", func() { c.SetPerUser("crm") })
	c.Get(ts[0].ID)
	c.All()
	c.Provider("mail")
	c.Waiting("crm")
	c.PerUser("crm")
	if g := c.Generation(); g != last {
		t.Errorf("reads changed the generation: %d → %d", last, g)
	}
}
