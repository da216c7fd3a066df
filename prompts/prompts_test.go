package prompts

import (
	"slices"
	"strings"
	"testing"
)

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

// TestUnwrap: the lines a prompt is wrapped at join the paragraph or list
// item they continue; list items, nested ones, blank lines, headings and
// fenced code stay where they are.
func TestUnwrap(t *testing.T) {
	in := "# Title\nOne paragraph\nwrapped.\n\n- an item\n  continued\n  - nested\n    continued\n1. numbered\n   on\n* star\n\n```\ncode\n  kept\n```\nafter\nthe fence"
	want := "# Title\nOne paragraph wrapped.\n\n- an item continued\n  - nested continued\n1. numbered on\n* star\n\n```\ncode\n  kept\n```\nafter the fence"
	if got := unwrap(in); got != want {
		t.Errorf("unwrap:\n%s\nwant:\n%s", got, want)
	}
}

// TestPromptsUnwrapLosesNothing: every embedded prompt, as sent, holds
// the words of its file in order, and the same paragraphs and list items.
func TestPromptsUnwrapLosesNothing(t *testing.T) {
	entries, err := files.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(e.Name(), ".md")
		raw, err := files.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		got := Text(name)
		if !slices.Equal(strings.Fields(got), strings.Fields(string(raw))) {
			t.Errorf("%s: the words differ after unwrapping:\n%s", name, got)
		}
		// A line is sent for each blank line, list item and paragraph
		// (a line after a blank one).
		lines, prev := 0, ""
		for l := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
			if b := strings.TrimSpace(l); lines == 0 || b == "" || prev == "" || listItem(b) {
				lines++
			}
			prev = strings.TrimSpace(l)
		}
		if n := strings.Count(got, "\n") + 1; n != lines {
			t.Errorf("%s: %d lines sent for %d paragraphs, blank lines and items:\n%s", name, n, lines, got)
		}
	}
}

// TestMCPInstructionsFit: some MCP clients keep only the first 2,048
// characters of a server's instructions.
func TestMCPInstructionsFit(t *testing.T) {
	if n := len(Text("mcp_instructions")); n > 2048 {
		t.Errorf("the MCP instructions are %d characters; a client may keep only 2,048", n)
	}
}
