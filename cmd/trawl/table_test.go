package main

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestWrap(t *testing.T) {
	tests := []struct {
		s      string
		width  int
		indent string
		want   []string
	}{
		{"short", 80, "  ", []string{"short"}},
		{"a b c", 0, "", []string{"a b c"}},
		{"✓ list_orders: complete · 364 records · 4 pages · 4 requests · stopped by complete_no_next", 40, "    ",
			[]string{"✓ list_orders: complete · 364 records ·", "    4 pages · 4 requests · stopped by", "    complete_no_next"}},
		{"averyveryverylongword and more", 10, "  ", []string{"averyveryv", "  erylongw", "  ord and", "  more"}},
	}
	for _, tt := range tests {
		got := wrap(tt.s, tt.width, tt.indent)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("wrap(%q, %d) (-want +got):\n%s", tt.s, tt.width, diff)
		}
		for _, l := range got {
			if tt.width > 0 && utf8.RuneCountInString(l) > tt.width {
				t.Errorf("line %q is wider than %d", l, tt.width)
			}
		}
	}
}

func TestTableFits(t *testing.T) {
	tb := &table{header: []string{"TOOL", "KIND", "PATH", "NOTE"}}
	tb.rows = append(tb.rows, []string{"acme.list_orders", "api", "/orders/{order_id}/lines", strings.Repeat("a long note ", 8)})
	tb.rows = append(tb.rows, []string{"mail.MAIL_LIST_MESSAGES", "app", "/messages", "-"})
	for _, width := range []int{40, 80, 120} {
		var b strings.Builder
		if err := tb.write(&b, width); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if n := utf8.RuneCountInString(line); n > width {
				t.Errorf("width %d: line of %d: %q", width, n, line)
			}
		}
		if !strings.Contains(b.String(), "…") {
			t.Errorf("width %d: nothing was cut:\n%s", width, b.String())
		}
	}
	var b strings.Builder
	tb.write(&b, 0)
	if strings.Contains(b.String(), "…") || !strings.Contains(b.String(), "mail.MAIL_LIST_MESSAGES") {
		t.Errorf("without a width the table is cut:\n%s", b.String())
	}
}
