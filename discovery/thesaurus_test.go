package discovery

import (
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/google/go-cmp/cmp"
)

func TestExpand(t *testing.T) {
	tokens := func(words ...string) analysis.TokenStream {
		var ts analysis.TokenStream
		for _, w := range words {
			ts = append(ts, &analysis.Token{Term: []byte(w)})
		}
		return ts
	}
	tests := []struct {
		in   []string
		want []string
	}{
		{[]string{"cancel", "meeting"}, []string{"delete", "event"}},
		{[]string{"meetings"}, []string{"event"}},                 // plural looked up as the key
		{[]string{"email", "message"}, []string{"mail"}},          // words the query has are not added
		{[]string{"folder", "folders", "tag"}, []string{"label"}}, // each word once
		{[]string{"bus"}, nil},                                    // "bu" is not a key; short words keep their s
		{[]string{"invoice"}, nil},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, expand(tokens(tc.in...))); diff != "" {
			t.Errorf("expand(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
	for k, v := range thesaurus {
		if k == "" || v == "" {
			t.Errorf("thesaurus entry %q: %q", k, v)
		}
	}
}
