// Package prompts holds the texts trawl puts in front of a model: the
// looping guidance (a separate system message for agents that hold looping
// tools), the descriptions of the meta-tools (queryToolResult,
// fetchToolResult, search_tools, load_tool, …) and of the reserved
// arguments. They are Markdown files embedded at build time so that a
// wording change is a reviewed text change, not a code change.
package prompts

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed *.md
var files embed.FS

// Text returns the embedded prompt named name (without ".md"), with
// surrounding white space trimmed. It panics on an unknown name: every
// name is a constant in the caller, and a test asserts each one exists.
func Text(name string) string {
	b, err := files.ReadFile(name + ".md")
	if err != nil {
		panic(fmt.Sprintf("prompts: no prompt %q", name))
	}
	return strings.TrimSpace(string(b))
}
