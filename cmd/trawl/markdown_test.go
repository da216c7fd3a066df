package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// TestMarkdownForTerminal renders the demo's answer as it streams, in
// pieces of every size: the result is the same, bold is bold, the table
// is aligned and fits the width.
func TestMarkdownForTerminal(t *testing.T) {
	text := "You have **278 open orders worth more than 100** (I checked every page):\n\n" +
		"| currency | orders | total |\n|---|---|---|\n| EUR | 170 | €131,895.20 |\n| USD | 89 | $76,385.26 |\n\n" +
		"## Notes\n- amounts in each order's own `currency`\n- list_orders ran *once*\n2026 was a year."
	want := "You have " + sgrBold + "278 open orders worth more than 100" + sgrBoldOff + " (I checked every page):\n\n" +
		sgrBold + "currency  orders  total" + sgrBoldOff + "\n" + sgrDim + strings.Repeat("─", 23) + sgrStyleOff + "\n" +
		"EUR       170     €131,895.20\nUSD       89      $76,385.26\n\n" +
		sgrBold + "Notes" + sgrStyleOff + "\n• amounts in each order's own " + sgrCode + "currency" + sgrCodeOff + "\n" +
		"• list_orders ran *once*\n2026 was a year."
	for _, n := range []int{1, 3, 12, len(text)} {
		m := &mdTerm{width: func() int { return 80 }}
		var got strings.Builder
		r := []rune(text)
		for i := 0; i < len(r); i += n {
			got.WriteString(m.write(string(r[i:min(i+n, len(r))])))
		}
		got.WriteString(m.flush())
		if diff := cmp.Diff(want, got.String()); diff != "" {
			t.Errorf("pieces of %d (-want +got):\n%s", n, diff)
		}
	}
	// A table wider than the terminal is cut to fit.
	m := &mdTerm{width: func() int { return 30 }}
	out := m.write("| name | note |\n|---|---|\n| a | "+strings.Repeat("long words ", 10)+"|\n") + m.flush()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		plain := strings.NewReplacer(sgrBold, "", sgrBoldOff, "", sgrDim, "", sgrStyleOff, "").Replace(l)
		if utf8.RuneCountInString(plain) > 30 {
			t.Errorf("table line of %d runes at width 30: %q", utf8.RuneCountInString(plain), plain)
		}
	}

	// Prose wraps at word boundaries, **bold** across the break too.
	m = &mdTerm{width: func() int { return 24 }}
	in := "A line with **several words in bold** and a list:\n- an item that is long enough to wrap\n"
	var got strings.Builder
	for _, r := range in {
		got.WriteString(m.write(string(r)))
	}
	got.WriteString(m.flush())
	shown := unstyled(got.String())
	wantShown := "A line with several\nwords in bold and a\nlist:\n• an item that is long\n  enough to wrap\n"
	if diff := cmp.Diff(wantShown, shown); diff != "" {
		t.Errorf("wrapped (-want +got):\n%s", diff)
	}
}

// unstyled is s without its styles.
func unstyled(s string) string {
	return strings.NewReplacer(sgrBold, "", sgrBoldOff, "", sgrDim, "", sgrStyleOff, "", sgrCode, "", sgrCodeOff, "").Replace(s)
}
