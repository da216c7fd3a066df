package tools

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEditDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "abc", 3}, {"kitten", "sitting", 3},
		{"mail_send_emial", "mail_send_email", 2}, {"café", "cafe", 1},
	}
	for _, tc := range tests {
		if got := EditDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestSimilar(t *testing.T) {
	params := []string{"customer_id", "page", "per_page", "status"}
	tests := []struct {
		name string
		want []string
	}{
		{"stauts", []string{"status"}},
		{"Status", []string{"status"}},
		{"perpage", []string{"per_page"}},
		{"customerId", []string{"customer_id"}},
		{"pgae", []string{"page"}},
		{"zzzzzzzzzz", nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, Similar(tc.name, params)); diff != "" {
			t.Errorf("Similar(%q) (-want +got):\n%s", tc.name, diff)
		}
	}
}
