package agent

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestPatchBindingConcurrent: patches of one agent's bindings made at the
// same time all land (none is lost to another's read-modify-write).
func TestPatchBindingConcurrent(t *testing.T) {
	ctx := context.Background()
	def := Definition{ID: "a", AgentTools: []Binding{{Toolkit: "kit"}}}
	r, err := NewRegistry(ctx, []Definition{def}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	on := true
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := r.PatchBinding(ctx, "a", fmt.Sprintf("kit.t%d", i), func(string) string { return "kit" }, BindingPatch{LoopResponses: &on}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	d, _ := r.Get("a")
	looping := 0
	for _, b := range d.AgentTools {
		if b.ToolID != "" && b.LoopResponses {
			looping++
		}
	}
	if looping != n {
		t.Errorf("%d of %d concurrent patches landed", looping, n)
	}
}
