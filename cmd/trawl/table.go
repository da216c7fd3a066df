package main

import (
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/term"
)

// termWidth is the width of w when it is a terminal, else 0 (no limit:
// a pipe or a file gets every character).
func termWidth(w io.Writer) int {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return 0
	}
	cols, _, err := term.GetSize(int(f.Fd()))
	if err != nil || cols <= 0 {
		return 80
	}
	return cols
}

// table is rows of cells printed in columns two spaces apart. Within a
// width, the widest columns give way first: their cells are cut with
// "…" (never below the column's header, while that fits), so every line
// fits; the full text is a --wide or --json away.
type table struct {
	header []string
	rows   [][]string
}

// write prints t; width <= 0 prints every cell whole.
func (t *table) write(w io.Writer, width int) error {
	n := len(t.header)
	widths := make([]int, n)
	for _, r := range append([][]string{t.header}, t.rows...) {
		for i := 0; i < n && i < len(r); i++ {
			widths[i] = max(widths[i], utf8.RuneCountInString(r[i]))
		}
	}
	if width > 0 {
		fitColumns(widths, t.header, width-2*(n-1))
	}
	var b strings.Builder
	for _, r := range append([][]string{t.header}, t.rows...) {
		b.Reset()
		for i := 0; i < n; i++ {
			c := ""
			if i < len(r) {
				c = r[i]
			}
			c = cut(c, widths[i])
			b.WriteString(c)
			if i < n-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+2))
			}
		}
		if _, err := io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// fitColumns narrows widths until they add up to at most room: one
// character at a time off the widest column, first down to its header's
// width (and at least 4), then, if that is not enough, down to 1.
func fitColumns(widths []int, header []string, room int) {
	total := 0
	for _, w := range widths {
		total += w
	}
	for _, floor := range []func(i int) int{
		func(i int) int { return min(widths[i], max(4, utf8.RuneCountInString(header[i]))) },
		func(int) int { return 1 },
	} {
		floors := make([]int, len(widths))
		for i := range widths {
			floors[i] = floor(i)
		}
		for total > room {
			widest := -1
			for i, w := range widths {
				if w > floors[i] && (widest < 0 || w > widths[widest]) {
					widest = i
				}
			}
			if widest < 0 {
				break
			}
			widths[widest]--
			total--
		}
	}
}

// cut shortens s to n runes, ending in "…" when it was longer.
func cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	return string([]rune(s)[:n-1]) + "…"
}

// wrap breaks s into lines of at most width runes at spaces (a word
// longer than a line is cut where it must be), every line after the
// first indented by indent; width <= 0 leaves s whole.
func wrap(s string, width int, indent string) []string {
	if width <= 0 || utf8.RuneCountInString(s) <= width {
		return []string{s}
	}
	if utf8.RuneCountInString(indent) >= width/2 {
		indent = ""
	}
	var lines []string
	cur, pre := "", ""
	flush := func() {
		lines = append(lines, pre+cur)
		cur, pre = "", indent
	}
	for _, word := range strings.Fields(s) {
		for {
			room := width - utf8.RuneCountInString(pre)
			if cur == "" {
				r := []rune(word)
				if len(r) <= room {
					cur = word
					break
				}
				cur, word = string(r[:room]), string(r[room:])
				flush()
				continue
			}
			if utf8.RuneCountInString(cur)+1+utf8.RuneCountInString(word) <= room {
				cur += " " + word
				break
			}
			flush()
		}
	}
	if cur != "" {
		lines = append(lines, pre+cur)
	}
	return lines
}
