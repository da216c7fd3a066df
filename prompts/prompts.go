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
// surrounding white space trimmed and its paragraphs and list items each
// on one line (unwrap). It panics on an unknown name: every name is a
// constant in the caller, and a test asserts each one exists.
func Text(name string) string {
	b, err := files.ReadFile(name + ".md")
	if err != nil {
		panic(fmt.Sprintf("prompts: no prompt %q", name))
	}
	return unwrap(strings.TrimSpace(string(b)))
}

// unwrap joins the lines a Markdown text is wrapped at for review into
// the paragraph or list item they continue, with one space: in Markdown a
// soft line break is a space, so the text says the same, and a model is
// sent no newline and indentation a line (about a token each, at every
// step that carries the text). Blank lines, headings, the line a list
// item starts on ("- ", "* ", "1. ", indented or not) and fenced code
// blocks stay as they are.
func unwrap(text string) string {
	lines := strings.Split(text, "\n")
	out := make([]string, 0, len(lines))
	fenced, joinable := false, false // joinable: the last line out takes a continuation
	for _, l := range lines {
		body := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(body, "```"):
			fenced = !fenced
			joinable = false
		case fenced:
		case body == "":
			l, joinable = "", false
		case joinable && !listItem(body) && !strings.HasPrefix(body, "#"):
			out[len(out)-1] += " " + body
			continue
		default:
			joinable = !strings.HasPrefix(body, "#")
		}
		out = append(out, strings.TrimRight(l, " \t"))
	}
	return strings.Join(out, "\n")
}

// listItem reports whether a line (trimmed) starts a Markdown list item.
func listItem(line string) bool {
	if strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "* ") {
		return true
	}
	i := 0
	for i < len(line) && line[i] >= '0' && line[i] <= '9' {
		i++
	}
	return i > 0 && strings.HasPrefix(line[i:], ". ")
}
