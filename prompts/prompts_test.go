package prompts

import "testing"

func TestLoopingGuidanceEmbedded(t *testing.T) {
	if got := Text("looping"); len(got) < 200 {
		t.Fatalf("looping guidance too short: %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("Text of an unknown name did not panic")
		}
	}()
	Text("no-such-prompt")
}
